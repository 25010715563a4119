package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

import static org.junit.jupiter.api.Assertions.*;

/** Several threads putting and taking on one queue handle each, in two contexts of one JVM. */
class ShareQueueThreadsTest {

    @Test
    void threadsPutAndTakeConcurrentlyEachMessageOnce() throws Exception {
        int threads = 3;
        int perThread = 5_000;
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            ShareQueue out = producer.createQueue(32);
            ShareQueue in = consumer.openQueue(out.name());
            Seen seen = new Seen();
            List<Thread> workers = new ArrayList<>();
            for (int p = 0; p < threads; p++) {
                long base = (long) p << 32;
                workers.add(Thread.ofPlatform().start(() -> {
                    for (int i = 0; i < perThread; i++) {
                        long id = base | i;
                        try (Tensor t = producer.allocateBytes(256)) {
                            t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
                            Patterns.fill(t.data().asSlice(8), id);
                            out.put(t);
                        } catch (InterruptedException e) {
                            throw new AssertionError(e);
                        }
                    }
                }));
            }
            List<Thread> takers = new ArrayList<>();
            for (int c = 0; c < threads; c++) {
                takers.add(Thread.ofPlatform().start(() -> {
                    try {
                        while (true) {
                            try (Tensor t = in.take()) {
                                seen.check(t);
                            }
                        }
                    } catch (QueueClosedException end) {
                        // end of stream
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }));
            }
            endAndCheck(workers, takers, out, in, producer, () -> (long) threads * perThread, seen);
        }
    }

    /** As above with batches: each thread's putAll works in its own reused arrays and messages. */
    @Test
    void threadsPutBatchesConcurrentlyEachMessageOnce() throws Exception {
        int threads = 3;
        int batchesPerThread = 300;
        int[] sizes = {1, 7, 32, 3};
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config())) {
            ShareQueue out = producer.createQueue(32);
            ShareQueue in = consumer.openQueue(out.name());
            Seen seen = new Seen();
            AtomicLong sent = new AtomicLong();
            List<Thread> workers = new ArrayList<>();
            for (int p = 0; p < threads; p++) {
                long base = (long) p << 32;
                workers.add(Thread.ofPlatform().start(() -> {
                    long next = 0;
                    for (int b = 0; b < batchesPerThread; b++) {
                        List<Tensor> batch = new ArrayList<>();
                        for (int i = 0; i < sizes[b % sizes.length]; i++) {
                            long id = base | next++;
                            Tensor t = producer.allocateBytes(128);
                            t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
                            Patterns.fill(t.data().asSlice(8), id);
                            batch.add(t);
                        }
                        try {
                            out.putAll(batch);
                        } catch (InterruptedException e) {
                            throw new AssertionError(e);
                        } finally {
                            batch.forEach(Tensor::close);
                        }
                        sent.addAndGet(batch.size());
                    }
                }));
            }
            List<Thread> takers = new ArrayList<>();
            for (int c = 0; c < 2; c++) {
                takers.add(Thread.ofPlatform().start(() -> {
                    List<Tensor> got = new ArrayList<>();
                    try {
                        while (true) {
                            got.add(in.take());
                            in.drainTo(got, 15);
                            for (Tensor t : got) {
                                seen.check(t);
                                t.close();
                            }
                            got.clear();
                        }
                    } catch (QueueClosedException end) {
                        // end of stream
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }));
            }
            endAndCheck(workers, takers, out, in, producer, sent::get, seen);
        }
    }

    /** What the takers saw: each message's id, once, and whether its bytes were intact. */
    private static final class Seen {
        final ConcurrentHashMap<Long, Boolean> ids = new ConcurrentHashMap<>();
        final AtomicLong bad = new AtomicLong();

        void check(Tensor t) {
            long id = t.data().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            if (Patterns.firstMismatch(t.data().asSlice(8), id) >= 0 || ids.put(id, Boolean.TRUE) != null) {
                bad.incrementAndGet();
            }
        }
    }

    /**
     * Ends the stream once the putters are done, waits for the takers, and checks what they saw
     * against what was {@code sent} (read once the putters are done) and that every block came back.
     */
    private static void endAndCheck(List<Thread> putters, List<Thread> takers, ShareQueue out, ShareQueue in,
                                    Refshare producer, LongSupplier sent, Seen seen) throws InterruptedException {
        for (Thread w : putters) {
            w.join();
        }
        out.endOfStream();
        for (Thread t : takers) {
            assertTrue(t.join(Duration.ofSeconds(60)), "taker finished");
        }
        assertEquals(0, seen.bad.get(), "no message corrupt or delivered twice");
        assertEquals(sent.getAsLong(), seen.ids.size(), "every message delivered");
        in.close();
        out.close();
        assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)));
        assertEquals(0, producer.stats().allocator().blocksInUse());
    }

    @Test
    void aTimedOutOfferCountsNothing() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue queue = rs.createQueue(1)) {
            try (Tensor a = rs.allocateBytes(64); Tensor b = rs.allocateBytes(64)) {
                assertTrue(queue.offer(a, 1, TimeUnit.SECONDS));
                assertFalse(queue.offer(b, 10, TimeUnit.MILLISECONDS), "full: backpressure");
            }
            assertEquals(1, Internals.sharing(rs).liveCounts(), "only the queued message is counted");
            assertEquals(1, rs.stats().limboBlocks());
        }
        // closing the creator's handle with no consumer returned the queued message's count
    }

    @Test
    void closingALoneQueueReturnsWhatItHeld() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            ShareQueue queue = rs.createQueue(8);
            for (int i = 0; i < 5; i++) {
                try (Tensor t = rs.allocateBytes(4096)) {
                    queue.put(t);
                }
            }
            assertEquals(5, rs.stats().limboBlocks());
            queue.close();
            queue.close();
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(5)), "undelivered messages' counts came back");
            assertEquals(0, Internals.sharing(rs).liveCounts());
            assertThrows(QueueClosedException.class, () -> queue.poll(1, TimeUnit.MILLISECONDS));
        }
    }
}
