package io.refshare.channel;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.TempShm;
import io.refshare.testing.TestThreads;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;

/** Many threads on two handles of one queue: every message is taken exactly once, in order per producer. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShmQueueConcurrencyTest {
    @RegisterExtension
    @Order(1)
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();
    @RegisterExtension
    @Order(2) // stopped before the directory is checked: JUnit runs afterEach in reverse order
    final TestThreads threads = new TestThreads();

    @Test
    void fourProducersAndFourConsumersOnASmallQueue() throws Exception {
        exchange(16, 4, 4, 20_000);
    }

    @Test
    void aSingleCellQueueHandsOverThroughTheFutexPath() throws Exception {
        exchange(1, 2, 2, 5_000);
    }

    private void exchange(int capacity, int producers, int consumers, int perProducer) throws Exception {
        try (ShmQueue a = ShmQueue.create(dir, capacity, 64); ShmQueue b = ShmQueue.open(dir, a.name())) {
            AtomicIntegerArray seen = new AtomicIntegerArray(producers * perProducer);
            List<Future<?>> producing = new ArrayList<>();
            for (int p = 0; p < producers; p++) {
                int producer = p;
                ShmQueue handle = p % 2 == 0 ? a : b;
                producing.add(threads.submit(() -> {
                    for (long seq = 0; seq < perProducer; seq++) {
                        assertTrue(handle.offer(TestMessages.encode(producer, seq), 30, SECONDS));
                    }
                    return null;
                }));
            }
            List<Future<Integer>> consuming = new ArrayList<>();
            for (int c = 0; c < consumers; c++) {
                ShmQueue handle = c % 2 == 0 ? b : a;
                consuming.add(threads.submit(() -> {
                    long[] last = new long[producers];
                    java.util.Arrays.fill(last, -1);
                    int count = 0;
                    while (true) {
                        byte[] m;
                        try {
                            m = handle.poll(30, SECONDS);
                        } catch (QueueClosedException closed) {
                            return count;
                        }
                        assertNotNull(m, "no message for 30 s while producers were not done");
                        int producer = TestMessages.producer(m);
                        long seq = TestMessages.sequence(m);
                        assertTrue(seq > last[producer], "producer " + producer + ": " + seq + " after " + last[producer]);
                        last[producer] = seq;
                        seen.incrementAndGet(producer * perProducer + (int) seq);
                        count++;
                    }
                }));
            }
            for (Future<?> f : producing) {
                f.get();
            }
            a.markClosed();
            int total = 0;
            for (Future<Integer> f : consuming) {
                total += f.get();
            }
            assertEquals(producers * perProducer, total);
            for (int i = 0; i < seen.length(); i++) {
                assertEquals(1, seen.get(i), "message " + i + " taken " + seen.get(i) + " times");
            }
            QueueStats stats = a.stats();
            assertEquals(total, stats.offered());
            assertEquals(total, stats.taken());
            assertEquals(0, stats.size());
        }
    }
}
