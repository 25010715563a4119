package io.refshare.channel;

import io.refshare.shm.ShmDirectory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Processes killed (SIGKILL) while holding a cell: the queue must neither wedge nor lose
 * or duplicate a published message.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShmQueueCrashTest {
    private static final int MARKER_PRODUCER = 9;

    @TempDir
    Path temp;
    private ShmTestDirectory shm;
    private ShmDirectory dir;
    private ExecutorService threads;

    @BeforeEach
    void setUp() throws Exception {
        shm = new ShmTestDirectory();
        dir = shm.directory();
        threads = Executors.newCachedThreadPool();
    }

    @AfterEach
    void tearDown() throws Exception {
        threads.shutdownNow();
        assertTrue(threads.awaitTermination(10, SECONDS), "test threads still running");
        try {
            assertEquals(0, shm.fileCount(), "queue files left behind");
        } finally {
            shm.close();
        }
    }

    private ChildJvm child(String log, String mode, String name, String... more) throws IOException {
        List<String> args = new ArrayList<>(List.of(mode, shm.path().toString(), name));
        args.addAll(List.of(more));
        return ChildJvm.start(QueueChild.class, temp.resolve(log), args.toArray(String[]::new));
    }

    /** Complete lines the child wrote so far (a line cut by the kill is not one). */
    private static List<String> lines(ChildJvm child) throws IOException {
        String text = Files.readString(child.output(), StandardCharsets.UTF_8);
        List<String> lines = new ArrayList<>(List.of(text.split("\n", -1)));
        lines.removeLast(); // empty after the last newline, or a torn line
        return lines;
    }

    private static void awaitLine(ChildJvm child, String prefix) throws Exception {
        while (lines(child).stream().noneMatch(l -> l.startsWith(prefix))) {
            assertTrue(child.process().isAlive(), () -> "child exited early: " + ShmQueueMultiProcessTest.log(child));
            Thread.sleep(5);
        }
    }

    private static void awaitLineCount(ChildJvm child, int count) throws Exception {
        while (lines(child).size() < count) {
            assertTrue(child.process().isAlive(), () -> "child exited early: " + ShmQueueMultiProcessTest.log(child));
            Thread.sleep(5);
        }
    }

    @Test
    void aMessageClaimedByAConsumerThatDiedIsDeliveredToAnotherExactlyOnce() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); ChildJvm c = child("claim-read.log", "claim-read", q.name())) {
            assertTrue(q.offer(TestMessages.encode(1, 0)));
            assertTrue(q.offer(TestMessages.encode(1, 1)));
            awaitLine(c, "CLAIMED 0");
            assertEquals(2, q.stats().participants().size());
            c.kill();

            assertEquals(1, TestMessages.sequence(q.poll(30, SECONDS)), "the next message is not held up");
            assertEquals(0, TestMessages.sequence(q.poll(30, SECONDS)), "the dead consumer's message comes back");
            assertNull(q.poll());
            QueueStats stats = q.stats();
            assertEquals(2, stats.taken());
            assertEquals(1, stats.participants().size(), "the dead consumer's entry was reclaimed");
        }
    }

    @Test
    void aPositionClaimedByAProducerThatDiedIsSkipped() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); ChildJvm c = child("claim-write.log", "claim-write", q.name())) {
            assertTrue(q.offer(TestMessages.encode(1, 0)));
            awaitLine(c, "CLAIMED 1");
            assertTrue(q.offer(TestMessages.encode(1, 2)));
            c.kill();

            assertEquals(0, TestMessages.sequence(q.poll(30, SECONDS)));
            assertEquals(2, TestMessages.sequence(q.poll(30, SECONDS)), "the consumer moves past the dead claim");
            assertNull(q.poll());
            for (int i = 3; i < 7; i++) {
                assertTrue(q.offer(TestMessages.encode(1, i)), "all four cells are usable again");
            }
            assertEquals(4, q.drain(m -> { }));
            QueueStats stats = q.stats();
            assertEquals(6, stats.offered());
            assertEquals(1, stats.participants().size());
        }
    }

    @Test
    void aProducerBlockedByADeadConsumersCellRepublishesItInPlace() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 2, 64); ChildJvm c = child("claim-read.log", "claim-read", q.name())) {
            assertTrue(q.offer(TestMessages.encode(1, 0)));
            assertTrue(q.offer(TestMessages.encode(1, 1)));
            awaitLine(c, "CLAIMED 0");
            c.kill();
            assertEquals(1, TestMessages.sequence(q.poll()));

            assertTrue(q.offer(TestMessages.encode(1, 2), 30, SECONDS), "room is made from the dead claim");
            assertEquals(0, TestMessages.sequence(q.poll()), "republished at the position the tail was at");
            assertEquals(2, TestMessages.sequence(q.poll()));
            assertNull(q.poll());
            assertEquals(1, q.stats().participants().size());
        }
    }

    @Test
    void aConsumerKilledAsleepLeavesNoSleeperBehind() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); QueueFileView view = new QueueFileView(dir, q.name());
                ChildJvm c = child("sleeper.log", "consume", q.name(), temp.resolve("sleeper.bin").toString())) {
            view.awaitSleepingConsumer();
            c.kill();
            assertEquals(1, view.consumersSleeping(), "the dead sleeper is still counted");
            q.recover();
            assertEquals(0, view.consumersSleeping());
            assertEquals(1, q.stats().participants().size());
        }
    }

    @Test
    void aConsumerKilledMidStreamLosesAtMostTheMessageItsPollHadReturned() throws Exception {
        int total = 20_000;
        try (ShmQueue q = ShmQueue.create(dir, 8, 64);
                ChildJvm c = child("consumer.log", "consume", q.name(), temp.resolve("c.bin").toString(), "record")) {
            Future<?> producer = threads.submit(() -> {
                for (long s = 0; s < total; s++) {
                    assertTrue(q.offer(TestMessages.encode(1, s), 30, SECONDS));
                }
                return null;
            });
            awaitLineCount(c, 2_000);
            c.kill();

            Set<Long> mine = new HashSet<>();
            while (!producer.isDone()) {
                byte[] m = q.poll(100, TimeUnit.MILLISECONDS);
                if (m != null) {
                    assertTrue(mine.add(TestMessages.sequence(m)), "taken twice by this process");
                }
            }
            producer.get();
            q.markClosed();
            while (true) {
                byte[] m;
                try {
                    m = q.poll(30, SECONDS);
                } catch (QueueClosedException drained) {
                    break; // "closed and empty" includes: no message held by a dead consumer
                }
                assertTrue(mine.add(TestMessages.sequence(m)), "taken twice by this process");
            }
            Set<Long> theirs = new HashSet<>();
            for (String line : lines(c)) {
                assertTrue(theirs.add(Long.parseLong(line)), "taken twice by the child: " + line);
            }
            Set<Long> overlap = new HashSet<>(mine);
            overlap.retainAll(theirs);
            assertEquals(Set.of(), overlap, "messages delivered to both processes");
            int missing = total - mine.size() - theirs.size();
            assertTrue(missing == 0 || missing == 1, missing + " messages lost");
            assertEquals(1, q.stats().participants().size());
        }
    }

    @Test
    void aProducerKilledMidStreamNeitherWedgesTheQueueNorTearsAMessage() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 8, 64);
                ChildJvm c = child("producer.log", "produce", q.name(), "1", "100000000", "record")) {
            List<Long> received = new ArrayList<>();
            boolean killed = false;
            while (true) {
                byte[] m = q.poll(100, TimeUnit.MILLISECONDS);
                if (m != null && TestMessages.producer(m) == MARKER_PRODUCER) {
                    break;
                }
                if (m != null) {
                    received.add(TestMessages.sequence(m));
                }
                if (!killed && (received.size() & 255) == 0 && lines(c).size() >= 2_000) {
                    c.kill();
                    killed = true;
                    assertTrue(q.offer(TestMessages.encode(MARKER_PRODUCER, 0), 30, SECONDS));
                }
            }
            for (int i = 0; i < received.size(); i++) {
                assertEquals(i, received.get(i), "the dead producer's messages arrive whole and in order");
            }
            int recorded = lines(c).size();
            assertTrue(received.size() == recorded || received.size() == recorded + 1,
                    received.size() + " received, " + recorded + " offers returned before the kill");
            assertNull(q.poll());
            assertEquals(1, q.stats().participants().size());
        }
    }
}
