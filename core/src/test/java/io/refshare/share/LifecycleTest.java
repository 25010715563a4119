package io.refshare.share;

import io.refshare.Internals;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.OutOfSharedMemoryException;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The lifecycle contract of tensors and blocks. Producer and consumers are separate
 * {@link Refshare} instances (separate receive caches) in this JVM unless a test needs a
 * process to die.
 */
class LifecycleTest {

    @Test
    void closeTwiceAndFromAnotherThreadReleasesExactlyOnce() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            Tensor t = producer.allocate(DType.INT32, 256);
            Tensor received = consumer.receive(producer.share(t));
            t.close();
            t.close();
            assertThrows(IllegalStateException.class, t::data, "a closed tensor refuses access");
            assertEquals(1, producer.stats().limboBlocks());
            Thread[] closers = new Thread[4];
            for (int i = 0; i < closers.length; i++) {
                closers[i] = new Thread(received::close);
                closers[i].start();
            }
            for (Thread c : closers) {
                c.join();
            }
            producer.collect(); // the background collector may be freeing it right now
            Eventually.await(() -> producer.stats().collected() == 1, "four racing closes released the block once");
            assertEquals(1, producer.stats().collected());
            assertEquals(0, producer.stats().allocator().blocksInUse());
            assertEquals(1, consumer.stats().mappedSegments(), "an idle segment stays mapped for the next message");
            producer.trim(); // the producer gives its free segments back: the consumer's idle mapping goes
            Eventually.await(() -> consumer.stats().mappedSegments() == 0, "idle mapping of a removed segment dropped");
        }
    }

    @Test
    void aMessageIsReceivedOnce() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config()); Refshare other = Refshare.open(shm.config())) {
            try (Tensor t = producer.allocateBytes(100)) {
                byte[] message = producer.share(t);
                try (Tensor first = consumer.receive(message)) {
                    RefshareException again = assertThrows(RefshareException.class, () -> other.receive(message));
                    assertTrue(again.getMessage().contains("already received"), again.getMessage());
                    assertThrows(RefshareException.class, () -> consumer.receive(message));
                    assertFalse(producer.cancel(message), "a received message cannot be returned as undelivered");
                }
                assertThrows(RefshareException.class, () -> consumer.receive(message), "nor after it was closed");
            }
            assertEquals(0, producer.stats().limboBlocks());
        }
    }

    @Test
    void theSameBlockReceivedTwiceSharesOneMapping() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config()); Tensor t = producer.allocateBytes(4096)) {
            Patterns.fill(t.data(), 5);
            Tensor a = consumer.receive(producer.share(t));
            Tensor b = consumer.receive(producer.share(t));
            assertEquals(1, consumer.stats().mappedSegments());
            assertEquals(a.data().address(), b.data().address(), "one mapping, one address");
            a.close();
            assertEquals(-1, Patterns.firstMismatch(b.data(), 5), "closing one leaves the other valid");
            b.close();
            assertEquals(1, consumer.stats().mappedSegments(), "kept while idle, still one mapping");
        }
    }

    @Test
    void viewsShareStorageAndAreSharedAsOneBlock() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            Tensor matrix = producer.allocate(DType.FLOAT32, 8, 16);
            for (int i = 0; i < 128; i++) {
                matrix.data().setAtIndex(ValueLayout.JAVA_FLOAT, i, i);
            }
            Tensor rows = matrix.slice(0, 2, 4);
            Tensor column = matrix.select(1, 3);
            matrix.close();
            assertEquals(1, producer.stats().allocator().blocksInUse(), "views keep the storage");
            try (Tensor r = consumer.receive(producer.share(rows)); Tensor flat = r.reshape(32)) {
                assertArrayEquals(new long[]{2, 16}, r.shape());
                assertEquals(33f, flat.data().get(ValueLayout.JAVA_FLOAT, flat.offsetOf(1)));
                assertEquals(32f, r.data().get(ValueLayout.JAVA_FLOAT, r.offsetOf(0, 0)));
                assertEquals(63f, r.data().get(ValueLayout.JAVA_FLOAT, r.offsetOf(1, 15)));
            }
            try (Tensor c = consumer.receive(producer.share(column))) {
                assertEquals(7 * 16 + 3f, c.data().get(ValueLayout.JAVA_FLOAT, c.offsetOf(7)));
                assertThrows(IllegalStateException.class, () -> c.reshape(2, 4), "a strided view cannot be reshaped");
            }
            rows.close();
            column.close();
            producer.collect();
            assertEquals(0, producer.stats().allocator().blocksInUse());
            assertEquals(0, producer.stats().limboBlocks());
        }
    }

    @Test
    void anUndeliveredMessageIsReturned() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config())) {
            byte[] message;
            try (Tensor t = producer.allocateBytes(1 << 20)) {
                message = producer.share(t);
            }
            assertEquals(1, producer.stats().limboBlocks(), "in flight: counted");
            assertTrue(producer.cancel(message));
            assertFalse(producer.cancel(message), "returned once");
            producer.collect(); // the background collector may be freeing it right now
            Eventually.await(() -> producer.stats().collected() == 1, "collected once");
            assertEquals(1, producer.stats().collected());
            assertEquals(0, producer.stats().allocator().blocksInUse());
        }
    }

    @Test
    void forwardingKeepsTheOriginalAliveUntilTheLastProcessIsDone() {
        try (TempShm shm = new TempShm(); Refshare a = Refshare.open(shm.config());
             Refshare b = Refshare.open(shm.config()); Refshare c = Refshare.open(shm.config())) {
            byte[] toB;
            try (Tensor t = a.allocateBytes(10_000)) {
                Patterns.fill(t.data(), 77);
                toB = a.share(t);
            }
            byte[] toC;
            try (Tensor atB = b.receive(toB)) {
                toC = b.share(atB);
            }
            assertEquals(1, a.stats().limboBlocks(), "b forwarded and let go, but c has not received yet");
            assertEquals(1, b.stats().limboBlocks(), "b's forwarded copy waits in b's limbo");
            try (Tensor atC = c.receive(toC)) {
                a.collect();
                b.collect();
                assertEquals(1, a.stats().limboBlocks());
                assertEquals(-1, Patterns.firstMismatch(atC.data(), 77));
            }
            b.collect(); // the background collector may be freeing it right now
            Eventually.await(() -> b.stats().collected() == 1, "c is done: b releases its reference");
            assertEquals(1, b.stats().collected());
            a.collect(); // the background collector may be freeing it right now
            Eventually.await(() -> a.stats().collected() == 1, "and then a frees the memory");
            assertEquals(1, a.stats().collected());
            assertEquals(0, a.stats().allocator().blocksInUse());
        }
    }

    @Test
    void theCapGivesAClearErrorAfterCollectingTheLimbo() {
        try (TempShm shm = new TempShm();
             Refshare producer = Refshare.open(shm.config().withCapacityBytes(8 << 20));
             Refshare consumer = Refshare.open(shm.config())) {
            Tensor held;
            try (Tensor t = producer.allocateBytes(6 << 20)) {
                held = consumer.receive(producer.share(t));
            }
            OutOfSharedMemoryException e = assertThrows(OutOfSharedMemoryException.class,
                    () -> producer.allocateBytes(6 << 20));
            assertTrue(e.getMessage().contains(Long.toString(8 << 20)) || e.getMessage().contains("8 MiB"),
                    "names the cap: " + e.getMessage());
            held.close();
            try (Tensor again = producer.allocateBytes(6 << 20)) {
                assertEquals(6 << 20, again.data().byteSize(), "the miss collected the limbo");
            }
        }
    }

    @Test
    void anAllocationAtTheCapWaitsForTheBlockTheCollectorIsFreeing() {
        // the release wakes the background collector, which takes the block out of the limbo and
        // frees it while the allocation below runs its miss path: the miss must wait for it
        try (TempShm shm = new TempShm();
             Refshare producer = Refshare.open(shm.config().withCapacityBytes(8 << 20));
             Refshare consumer = Refshare.open(shm.config())) {
            for (int round = 0; round < 400; round++) {
                Tensor held;
                try (Tensor t = producer.allocateBytes(6 << 20)) {
                    held = consumer.receive(producer.share(t));
                }
                held.close();
                long until = System.nanoTime() + (round % 100) * 5_000; // sweeps the collector's wake-up
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
                try (Tensor again = producer.allocateBytes(6 << 20)) {
                    assertEquals(6 << 20, again.data().byteSize(), "round " + round);
                }
            }
        }
    }

    @Test
    void hostileDescriptorsAreRejectedBeforeAnythingIsOpened() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config()); Tensor t = producer.allocateBytes(4096)) {
            Descriptor good = Internals.shareDescriptor(producer, t);
            assertThrows(InvalidDataException.class, () -> consumer.receive(new byte[]{1, 2, 3}));
            // a name of ours that does not exist
            RefshareException gone = assertThrows(RefshareException.class, () -> Internals.receive(consumer, with(good,
                    "refshare-seg-00000000000000000000000000000000", good.segmentSize(), good.senderPid())));
            assertTrue(gone.getMessage().contains("no longer exists"), gone.getMessage());
            // a segment size that does not match the file
            assertThrows(InvalidDataException.class, () -> Internals.receive(consumer, with(good, good.segmentName(),
                    good.segmentSize() * 2, good.senderPid())));
            // a sender lying about who it is
            assertThrows(InvalidDataException.class, () -> Internals.receive(consumer, with(good, good.segmentName(),
                    good.segmentSize(), good.senderPid() + 1)));
            // the rejected attempts took nothing: the genuine message still works once
            try (Tensor ok = Internals.receive(consumer, good)) {
                assertEquals(4096, ok.data().byteSize());
            }
        }
    }

    private static Descriptor with(Descriptor d, String segment, long segmentSize, long pid) {
        return new Descriptor(d.backend(), segment, segmentSize, d.offset(), d.length(), d.counterFileName(), d.slot(),
                d.eventHandle(), d.tensor(), pid, d.senderStartTicks());
    }

    @Test
    void consumersKeepValidMemoryAfterTheProducerIsKilled() throws Exception {
        try (TempShm shm = new TempShm(); Refshare consumer = Refshare.open(shm.config())) {
            ChildJvm producer = ChildJvm.start(ShareChildMain.class, "ProducerMain", shm.path().toString(), "3000000", "9");
            Tensor t;
            try {
                t = consumer.receive(HexFormat.of().parseHex(producer.read()));
            } finally {
                producer.kill();
            }
            assertEquals(-1, Patterns.firstMismatch(t.data(), 9), "valid after the producer's death");
            t.close();
            t.close();
            // the dead producer's files stay until a janitor removes them; remove them here
            for (String f : shm.files()) {
                Files.delete(shm.path().resolve(f));
            }
        }
    }

    @Test
    void closingTheContextGivesBackWhatItStillHolds() {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config())) {
            Refshare consumer = Refshare.open(shm.config());
            try (Tensor t = producer.allocateBytes(512)) {
                consumer.receive(producer.share(t)); // never closed by the user
            }
            consumer.close();
            consumer.close();
            producer.collect(); // the background collector may be freeing it right now
            Eventually.await(() -> producer.stats().collected() == 1, "the consumer's close released its token");
            assertEquals(1, producer.stats().collected());
            assertThrows(IllegalStateException.class, () -> consumer.allocateBytes(1));
        }
    }

    /**
     * The limbo's collections look at blocks outside its lock while the producer keeps dropping
     * blocks into it: four producing threads, a consumer releasing behind them, and two threads
     * collecting all the time beside the background collector. Every block must be freed exactly
     * once (a second free of a block throws in the allocator) and none may stay counted.
     */
    @Test
    void dropsAndCollectionsRacingFreeEveryBlockOnce() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            int threads = 4;
            int perThread = 3_000;
            BlockingQueue<Tensor> received = new LinkedBlockingQueue<>();
            AtomicBoolean producing = new AtomicBoolean(true);
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            List<Thread> workers = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                workers.add(Thread.ofPlatform().start(() -> {
                    try {
                        for (int n = 0; n < perThread; n++) {
                            try (Tensor t = producer.allocateBytes(64)) {
                                received.add(consumer.receive(producer.share(t)));
                            } // dropped while the consumer holds it: into the limbo
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            Thread releaser = Thread.ofPlatform().start(() -> {
                try {
                    for (int n = 0; n < threads * perThread; n++) {
                        received.take().close();
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            List<Thread> collectors = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                collectors.add(Thread.ofPlatform().start(() -> {
                    try {
                        while (producing.get()) {
                            producer.collect();
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread w : workers) {
                w.join();
            }
            releaser.join();
            producing.set(false);
            for (Thread c : collectors) {
                c.join();
            }
            assertEquals(List.of(), List.copyOf(failures));
            Eventually.await(() -> {
                producer.collect();
                return producer.stats().limboBlocks() == 0;
            }, "every block came back and none was lost from the limbo's count");
            assertEquals(0, producer.stats().allocator().blocksInUse());
            assertTrue(producer.stats().collected() <= (long) threads * perThread, "no block collected twice");
        }
    }
}
