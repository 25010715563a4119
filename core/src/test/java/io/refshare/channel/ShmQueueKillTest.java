package io.refshare.channel;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import io.refshare.testing.TestThreads;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Processes killed (SIGKILL) at random moments of a busy stream, several times over: a
 * kill may land anywhere in an offer or a poll, and whatever it interrupted must leave
 * every message delivered at most once, none torn, and the queue serving. The seed of a
 * failing run is in the message. {@link ShmQueueCrashTest} places kills deterministically.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShmQueueKillTest {
    @RegisterExtension
    @Order(1)
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();
    @RegisterExtension
    @Order(2) // stopped before the directory is checked: JUnit runs afterEach in reverse order
    final TestThreads threads = new TestThreads();

    @Test
    void consumersKilledAtAnyMomentNeitherDuplicateNorLoseMoreThanTheMessageTheirPollReturned() throws Exception {
        int total = 40_000;
        int kills = 3;
        long seed = System.nanoTime();
        Random random = new Random(seed);
        ShmFile marks = dir.create(ShmKind.SEGMENT, QueueChild.MARKS + total);
        try (ShmQueue q = ShmQueue.create(dir, 64, 64)) {
            Future<?> producer = threads.submit(() -> {
                for (long s = 0; s < total; s++) {
                    assertTrue(q.offer(TestMessages.encode(1, s), 30, SECONDS));
                }
                return null;
            });
            for (int k = 0; k < kills; k++) {
                try (ChildJvm c = QueueChild.start(shm.path(), "consume-mark", q.name(), marks.name())) {
                    awaitMarks(c, marks, (k + 1L) * total / (kills + 2));
                    spinMicros(random.nextInt(500));
                    c.kill();
                }
            }
            int[] takenHere = new int[total];
            while (!producer.isDone()) {
                byte[] m = q.poll(100, TimeUnit.MILLISECONDS);
                if (m != null) {
                    takenHere[(int) TestMessages.sequence(m)]++;
                }
            }
            producer.get();
            q.markClosed();
            while (true) {
                try {
                    takenHere[(int) TestMessages.sequence(q.poll(30, SECONDS))]++;
                } catch (QueueClosedException drained) {
                    break; // "closed and empty" includes: no message held by a dead consumer
                }
            }
            int lost = 0;
            for (int s = 0; s < total; s++) {
                int times = takenHere[s] + marks.segment().get(ValueLayout.JAVA_BYTE, QueueChild.MARKS + s);
                assertTrue(times <= 1, "message " + s + " delivered " + times + " times (seed " + seed + ")");
                lost += 1 - times;
            }
            assertTrue(lost <= kills, lost + " messages lost to " + kills + " kills (seed " + seed + ")");
            q.recover();
            assertEquals(1, q.stats().participants().size(), "dead consumers' entries were reclaimed");
        } finally {
            marks.unlink();
            marks.close();
        }
    }

    @Test
    void producersKilledAtAnyMomentNeitherWedgeTheQueueNorTearOrReorderMessages() throws Exception {
        int kills = 3;
        int maxPerProducer = 4_000_000;
        long seed = System.nanoTime();
        Random random = new Random(seed);
        try (ShmQueue q = ShmQueue.create(dir, 64, 64)) {
            List<List<Long>> received = new ArrayList<>();
            for (int k = 0; k < kills; k++) {
                received.add(new ArrayList<>());
            }
            Future<?> consumer = threads.submit(() -> {
                while (true) {
                    byte[] m;
                    try {
                        m = q.poll(30, SECONDS);
                    } catch (QueueClosedException drained) {
                        return null;
                    }
                    assertNotNull(m, "no message for 30 s: the queue is wedged (seed " + seed + ")");
                    received.get(TestMessages.producer(m)).add(TestMessages.sequence(m));
                }
            });
            List<ShmFile> marks = new ArrayList<>();
            try {
                for (int k = 0; k < kills; k++) {
                    ShmFile mark = dir.create(ShmKind.SEGMENT, QueueChild.MARKS + maxPerProducer);
                    marks.add(mark);
                    try (ChildJvm c = QueueChild.start(shm.path(), "produce-mark", q.name(), mark.name(),
                            Integer.toString(k), Integer.toString(maxPerProducer))) {
                        awaitMarks(c, mark, 5_000);
                        spinMicros(random.nextInt(500));
                        c.kill();
                    }
                }
                q.markClosed();
                consumer.get();
                for (int k = 0; k < kills; k++) {
                    List<Long> got = received.get(k);
                    for (int i = 0; i < got.size(); i++) {
                        assertEquals(i, got.get(i), "producer " + k + ": whole messages, in order (seed " + seed + ")");
                    }
                    long returned = marks.get(k).segment().get(ValueLayout.JAVA_LONG, QueueChild.MARK_COUNT_OFFSET);
                    assertTrue(got.size() == returned || got.size() == returned + 1, "producer " + k + ": "
                            + got.size() + " received, " + returned + " offers returned (seed " + seed + ")");
                }
            } finally {
                for (ShmFile mark : marks) {
                    mark.unlink();
                    mark.close();
                }
            }
            q.recover();
            assertEquals(1, q.stats().participants().size(), "dead producers' entries were reclaimed");
        }
    }

    private static void awaitMarks(ChildJvm child, ShmFile marks, long count) throws Exception {
        while ((long) QueueChild.MARK_COUNT.getVolatile(marks.segment(), QueueChild.MARK_COUNT_OFFSET) < count) {
            assertTrue(ProcessHandle.of(child.pid()).map(ProcessHandle::isAlive).orElse(false),
                    "the child exited early (its stderr is in the test output)");
            Thread.sleep(1);
        }
    }

    /** A random moment inside the child's loop: busy-waits, since a sleep would round up to milliseconds. */
    private static void spinMicros(int micros) {
        long until = System.nanoTime() + micros * 1_000L;
        while (System.nanoTime() - until < 0) {
            Thread.onSpinWait();
        }
    }
}
