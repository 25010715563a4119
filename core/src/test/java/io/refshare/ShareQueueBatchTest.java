package io.refshare;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.tensor.DType;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.*;

/** {@link ShareQueue#putAll} and {@link ShareQueue#drainTo}: per-tensor reference semantics in batches. */
class ShareQueueBatchTest {
    private static final int TENSORS = 1_000;

    @Test
    void batchesThroughASmallQueueArriveOnceInOrderAndEveryReferenceComesBack() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             ShareQueue q = producer.createQueue(8)) {
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Integer> seen = new ArrayList<>();
            Thread consumerThread = Thread.ofPlatform().start(() -> {
                try (Refshare consumer = Refshare.open(shm.config()); ShareQueue in = consumer.openQueue(q.name())) {
                    List<Tensor> batch = new ArrayList<>();
                    while (true) {
                        try {
                            batch.add(in.take());
                        } catch (QueueClosedException end) {
                            break;
                        }
                        in.drainTo(batch, 31);
                        assertTrue(batch.size() <= 32);
                        for (Tensor t : batch) {
                            seen.add(t.data().get(ValueLayout.JAVA_INT, 0));
                            t.close();
                        }
                        batch.clear();
                    }
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            for (int start = 0; start < TENSORS; start += 32) {
                List<Tensor> batch = new ArrayList<>();
                for (int i = start; i < Math.min(TENSORS, start + 32); i++) {
                    Tensor t = producer.allocate(DType.INT32, 256);
                    t.data().set(ValueLayout.JAVA_INT, 0, i);
                    batch.add(t);
                }
                q.putAll(batch);
                batch.forEach(Tensor::close);
            }
            q.endOfStream();
            consumerThread.join(Duration.ofSeconds(60));
            assertNull(failure.get(), () -> "consumer failed: " + failure.get());
            assertEquals(TENSORS, seen.size(), "each tensor exactly once");
            for (int i = 0; i < TENSORS; i++) {
                assertEquals(i, seen.get(i), "in order");
            }
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference came back");
        }
    }

    /**
     * A batch may name one tensor again and again (its references are held and recorded once
     * per run): each message still counts one reference and gives it back on its own close.
     */
    @Test
    void aBatchRepeatingTensorsCountsOneReferencePerMessage() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config());
             ShareQueue out = producer.createQueue(16); ShareQueue in = consumer.openQueue(out.name())) {
            Tensor a = producer.allocate(DType.INT32, 16);
            Tensor b = producer.allocate(DType.INT32, 16);
            a.data().set(ValueLayout.JAVA_INT, 0, 1);
            b.data().set(ValueLayout.JAVA_INT, 0, 2);
            out.putAll(List.of(a, a, b, a, a, a, b));
            assertEquals(7, producer.liveCounts(), "one reference per message");
            assertEquals(7, producer.stats().shared(), "seven messages shared");
            a.close();
            b.close();
            assertEquals(2, producer.stats().limboBlocks(), "both blocks wait for their messages' references");
            List<Tensor> received = new ArrayList<>();
            assertEquals(7, in.drainTo(received, 16));
            assertEquals(List.of(1, 1, 2, 1, 1, 1, 2),
                    received.stream().map(t -> t.data().get(ValueLayout.JAVA_INT, 0)).toList());
            for (int i = 0; i < received.size(); i++) {
                received.get(i).close();
                assertEquals(6 - i, producer.liveCounts(), "each close gives back its own reference");
                producer.collect();
                int blocksInUse = i < 5 ? 2 : i < 6 ? 1 : 0; // a's last message is the sixth, b's the seventh
                assertTrue(producer.stats().limboBlocks() >= blocksInUse,
                        "a block stays while a message of it is open (after close " + i + ")");
            }
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)), "both blocks came back");
        }
    }

    /**
     * One thread's batches reuse their arrays and messages (PutMessage.HostBatch): batches that
     * grow and shrink, and one refused half-way, still send exactly their own tensors.
     */
    @Test
    void batchesOfChangingSizesFromOneThreadSendExactlyTheirOwnTensors() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config());
             ShareQueue out = producer.createQueue(2048); ShareQueue in = consumer.openQueue(out.name())) {
            int next = 0;
            for (int size : new int[] {1, 40, 3, 17, 70, 2, 0, 1100, 5}) { // 1,100: longer than a thread keeps
                List<Tensor> batch = new ArrayList<>();
                for (int i = 0; i < size; i++) {
                    Tensor t = producer.allocate(DType.INT32, 4);
                    t.data().set(ValueLayout.JAVA_INT, 0, next + i);
                    batch.add(t);
                }
                if (size == 17) {
                    Tensor closed = producer.allocate(DType.INT32, 4);
                    closed.close();
                    List<Tensor> refused = new ArrayList<>(batch);
                    refused.add(8, closed);
                    assertThrows(IllegalStateException.class, () -> out.putAll(refused));
                    assertEquals(0, out.size(), "a refused batch queues nothing");
                    assertEquals(0, producer.liveCounts(), "a refused batch counts nothing");
                }
                out.putAll(batch);
                batch.forEach(Tensor::close);
                List<Tensor> received = new ArrayList<>();
                assertEquals(size, in.drainTo(received, 2048), "the batch of " + size + " and nothing else");
                for (int i = 0; i < size; i++) {
                    assertEquals(next + i, received.get(i).data().get(ValueLayout.JAVA_INT, 0), "batch of " + size + ", message " + i);
                    received.get(i).close();
                }
                next += size;
            }
            assertEquals(0, producer.liveCounts());
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference came back");
        }
    }

    @Test
    void aPutAllOnAnEndedStreamCountsNothing() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue q = rs.createQueue(4)) {
            q.endOfStream();
            List<Tensor> batch = List.of(rs.allocate(DType.UINT8, 8), rs.allocate(DType.UINT8, 8));
            assertThrows(QueueClosedException.class, () -> q.putAll(batch));
            batch.forEach(Tensor::close);
            assertEquals(0, rs.liveCounts(), "the references of a refused batch were returned");
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(5)));
        }
    }

    @Test
    void aPutAllWithAClosedTensorQueuesAndCountsNothing() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue q = rs.createQueue(4)) {
            Tensor open = rs.allocate(DType.UINT8, 8);
            Tensor closed = rs.allocate(DType.UINT8, 8);
            closed.close();
            assertThrows(IllegalStateException.class, () -> q.putAll(List.of(open, closed)));
            open.close();
            assertEquals(0, q.size(), "nothing queued");
            assertEquals(0, rs.liveCounts(), "nothing counted");
        }
    }

    @Test
    void drainToTakesWhatIsThereAndNoMore() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue q = rs.createQueue(16)) {
            List<Tensor> into = new ArrayList<>();
            assertEquals(0, q.drainTo(into, 10), "empty");
            try (Tensor t = rs.allocate(DType.UINT8, 8)) {
                q.putAll(List.of(t, t, t, t, t));
            }
            assertEquals(0, q.drainTo(into, 0));
            assertEquals(3, q.drainTo(into, 3));
            assertEquals(2, q.drainTo(into, 10));
            assertEquals(5, into.size());
            into.forEach(Tensor::close);
            assertThrows(IllegalArgumentException.class, () -> q.drainTo(into, -1));
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(5)));
        }
    }
}
