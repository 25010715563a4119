package io.refshare;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.tensor.DType;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.lang.reflect.Method;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * What a user meets at the surface: each test is a surprise a new user once ran into, pinned
 * down as the documented behaviour (Refshare's, Tensor's and ShareQueue's javadoc).
 */
class ApiContractTest {

    @Test
    void nothingSharesAReferenceUnderAHarmlessName() {
        for (Method m : Refshare.class.getMethods()) {
            assertNotEquals("describe", m.getName(), "a public describe() counted a reference like share()");
        }
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            Tensor t = rs.allocate(DType.FLOAT32, 16);
            var d = rs.shareDescriptor(t);
            t.close();
            assertEquals(1, rs.stats().limboBlocks(), "shareDescriptor counts a reference, as its name says");
            assertTrue(rs.cancel(io.refshare.wire.DescriptorCodec.encode(d)));
            rs.collect();
            assertEquals(0, rs.stats().limboBlocks());
        }
    }

    @Test
    void aReceivedTensorAfterItsRefshareClosedIsClosedAndQuiet() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config())) {
            Tensor sent = producer.allocate(DType.INT32, 64);
            Refshare consumer = Refshare.open(shm.config());
            Tensor received = consumer.receive(producer.share(sent));
            Tensor view = received.narrow(0, 8, 8);
            consumer.close();
            assertTrue(received.isClosed() && view.isClosed());
            IllegalStateException e = assertThrows(IllegalStateException.class, received::data);
            assertTrue(e.getMessage().contains("Refshare this tensor belongs to is closed"), e.getMessage());
            received.close();
            view.close();
            received.close();
            sent.close();
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)), "the consumer's close gave the reference back");
        }
    }

    @Test
    void aClosedRefshareCreatesAndOpensNothing() throws Exception {
        try (TempShm shm = new TempShm()) {
            String queue;
            String holder;
            try (Refshare other = Refshare.open(shm.config()); ShareQueue q = other.createQueue(4);
                 SharedHolder h = other.createHolder()) {
                queue = q.name();
                holder = h.name();
                Refshare rs = Refshare.open(shm.config());
                rs.close();
                assertTrue(rs.isClosed());
                List<Runnable> calls = List.of(() -> rs.createQueue(4), () -> rs.openQueue(queue),
                        () -> rs.createHolder(), () -> rs.openHolder(holder), () -> rs.createQueue(4),
                        () -> rs.createHolder(), () -> rs.allocate(DType.UINT8, 4));
                for (Runnable call : calls) {
                    assertThrows(IllegalStateException.class, call::run);
                }
                try (Stream<java.nio.file.Path> files = Files.list(shm.path())) {
                    assertEquals(2, files.filter(p -> !p.getFileName().toString().contains("-life-")
                            && !p.getFileName().toString().contains("-proc-")).count(), "only the two open files");
                }
            }
        }
    }

    @Test
    void theCreatorsCloseWaitsForALateConsumerInsteadOfDroppingMessages() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            ShareQueue q = producer.createQueue(8);
            for (int i = 0; i < 3; i++) {
                try (Tensor t = producer.allocate(DType.INT64, 1)) {
                    t.data().set(ValueLayout.JAVA_LONG, 0, i);
                    q.put(t);
                }
            }
            List<Long> got = new ArrayList<>();
            Thread late = Thread.ofPlatform().start(() -> {
                try {
                    Thread.sleep(300); // attaches only after the producer began to close
                    try (ShareQueue c = consumer.openQueue(q.name())) {
                        while (true) {
                            try (Tensor t = c.take()) {
                                got.add(t.data().get(ValueLayout.JAVA_LONG, 0));
                            }
                        }
                    }
                } catch (QueueClosedException endOfStream) {
                    // drained
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            q.close(Duration.ofSeconds(10));
            late.join(10_000);
            assertEquals(List.of(0L, 1L, 2L), got);
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)));
        }
    }

    @Test
    void aCloseWithoutLingerReturnsWhatNoConsumerTook() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config())) {
            ShareQueue q = producer.createQueue(8);
            try (Tensor t = producer.allocate(DType.UINT8, 100)) {
                q.put(t);
                q.put(t);
            }
            long start = System.nanoTime();
            q.close(Duration.ZERO);
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5));
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)), "both references returned (and logged)");
        }
    }

    @Test
    void receivedBytesAreReadOnlyUnlessAskedForAndLittleEndian() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config());
             Tensor t = producer.allocate(DType.INT32, 4)) {
            t.data().set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0, 0x01020304);
            assertEquals(ByteOrder.LITTLE_ENDIAN, t.asByteBuffer().order());
            assertEquals(0x01020304, t.asByteBuffer().getInt(0));
            try (Tensor r = consumer.receive(producer.share(t))) {
                assertTrue(r.data().isReadOnly());
                assertThrows(IllegalArgumentException.class, () -> r.data().set(ValueLayout.JAVA_BYTE, 0, (byte) 9));
                assertThrows(java.nio.ReadOnlyBufferException.class, () -> r.asByteBuffer().put(0, (byte) 9));
                assertEquals(0x01020304, r.asByteBuffer().getInt(0));
                r.writableData().set(ValueLayout.JAVA_BYTE, 0, (byte) 9);
                assertEquals(9, t.data().get(ValueLayout.JAVA_BYTE, 0), "writableData writes the producer's memory");
            }
        }
    }

    @Test
    void halfPrecisionAccessorsRoundAsTorchDoes() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             Tensor h = rs.allocate(DType.FLOAT16, 2, 2); Tensor b = rs.allocate(DType.BFLOAT16, 4);
             Tensor f = rs.allocate(DType.FLOAT64, 1); Tensor i = rs.allocate(DType.INT32, 1)) {
            h.setFloat(1.5f, 1, 0);
            assertEquals(1.5f, h.getFloat(1, 0));
            assertEquals((short) 0x3E00, h.data().get(ValueLayout.JAVA_SHORT_UNALIGNED, 2 * 2), "IEEE half of 1.5");
            h.setFloat(65520f, 0, 1); // beyond the largest half: infinity
            assertEquals(Float.POSITIVE_INFINITY, h.getFloat(0, 1));
            b.setFloat(1.0f, 0);
            assertEquals((short) 0x3F80, b.data().get(ValueLayout.JAVA_SHORT_UNALIGNED, 0));
            b.setFloat(Float.intBitsToFloat(0x3F808000), 1); // a tie: rounds to the even 0x3F80
            assertEquals((short) 0x3F80, b.data().get(ValueLayout.JAVA_SHORT_UNALIGNED, 2));
            b.setFloat(Float.intBitsToFloat(0x3F818000), 2); // a tie: rounds to the even 0x3F82
            assertEquals((short) 0x3F82, b.data().get(ValueLayout.JAVA_SHORT_UNALIGNED, 4));
            b.setFloat(Float.NaN, 3);
            assertTrue(Float.isNaN(b.getFloat(3)));
            f.setFloat(0.25f, 0);
            assertEquals(0.25f, f.getFloat(0));
            assertThrows(UnsupportedOperationException.class, () -> i.getFloat(0));
            assertThrows(IndexOutOfBoundsException.class, () -> h.getFloat(2, 0));
        }
    }

    @Test
    void narrowAndToStringSpeakTorch() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             Tensor t = rs.allocate(DType.FLOAT32, 4, 6)) {
            try (Tensor n = t.narrow(1, 2, 3)) {
                assertArrayEquals(new long[]{4, 3}, n.shape());
                assertEquals(2 * 4, n.offsetOf(0, 0) + n.layout().byteOffset());
                assertEquals("Tensor[float32 [4, 3], strides [6, 1], offset 2, host]", n.toString());
            }
            assertEquals("Tensor[float32 [4, 6], host]", t.toString());
            assertThrows(IllegalArgumentException.class, () -> t.narrow(1, 4, 3));
        }
    }

    @Test
    void aTakeAfterTheRefshareClosedLeavesTheMessageForAnotherConsumer() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             ShareQueue q = producer.createQueue(4); Tensor t = producer.allocate(DType.UINT8, 16)) {
            q.put(t);
            Refshare closed = Refshare.open(shm.config());
            ShareQueue stale = closed.openQueue(q.name());
            closed.close();
            assertThrows(IllegalStateException.class, stale::take);
            assertThrows(IllegalStateException.class, () -> stale.poll(0, TimeUnit.SECONDS));
            stale.close();
            try (Refshare consumer = Refshare.open(shm.config()); ShareQueue live = consumer.openQueue(q.name());
                 Tensor got = live.poll(5, TimeUnit.SECONDS)) {
                assertNotNull(got, "the message stayed in the queue");
                assertEquals(16, got.data().byteSize());
            }
        }
    }

    @Test
    void anOfferWaitingOnAFullQueueWhenItsRefshareClosesTimesOutCleanly() throws Exception {
        try (TempShm shm = new TempShm()) {
            Refshare rs = Refshare.open(shm.config());
            ShareQueue q = rs.createQueue(1);
            Tensor t = rs.allocate(DType.UINT8, 64);
            q.put(t); // full
            CompletableFuture<Object> offer = CompletableFuture.supplyAsync(() -> {
                try {
                    return q.offer(t, 1, TimeUnit.SECONDS);
                } catch (Throwable e) {
                    return e;
                }
            });
            Thread.sleep(300); // the offer waits for room
            rs.close();
            // its message's token went with the close: the cancel at its time-out has nothing to
            // give back (it threw NullPointerException, looking for the closed counter files)
            assertEquals(Boolean.FALSE, offer.get(10, TimeUnit.SECONDS));
            q.close(Duration.ZERO);
        }
    }

    @Test
    void aFailedPutDoesNotMakeAConsumerHandleAProducer() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue q = rs.createQueue(4)) {
            ShareQueue consumer = rs.openQueue(q.name());
            Tensor closedTensor = rs.allocate(DType.UINT8, 8);
            closedTensor.close();
            assertThrows(IllegalStateException.class, () -> consumer.put(closedTensor));
            long start = System.nanoTime();
            consumer.close();
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(2), "a consumer's close does not linger");
            try (Tensor t = rs.allocate(DType.UINT8, 8)) {
                assertTrue(q.offer(t, 0, TimeUnit.SECONDS), "and does not end the stream");
            }
            q.take().close();
        }
    }

    @Test
    void closeWithNullLingerRefusesBeforeDetaching() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue q = rs.createQueue(4)) {
            assertThrows(NullPointerException.class, () -> q.close(null));
            try (Tensor t = rs.allocate(DType.UINT8, 8)) {
                q.put(t); // the handle is still attached
            }
            q.close(Duration.ZERO);
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(5)));
        }
    }

    @Test
    void aViewOutsideTheMemoryIsAnIllegalArgument() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             Tensor t = rs.allocate(DType.FLOAT32, 4)) {
            assertThrows(IllegalArgumentException.class,
                    () -> t.view(io.refshare.tensor.TensorLayout.contiguous(DType.FLOAT32, 5)));
            try (Tensor same = t.view(t.layout())) {
                assertEquals(t.data().byteSize(), same.data().byteSize());
            }
        }
    }

    @Test
    void aConfigWithoutDirectoryOrPrefixIsRefusedWhereItIsMade() {
        RefshareConfig c = RefshareConfig.defaults();
        assertThrows(NullPointerException.class, () -> c.withDirectory(null));
        assertThrows(NullPointerException.class, () -> c.withPrefix(null));
    }
}
