package io.refshare.channel;

import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Processes killed (SIGKILL) while holding a cell: the queue must neither wedge nor lose
 * or duplicate a published message.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShmQueueCrashTest {
    @RegisterExtension
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();

    @Test
    void aMessageClaimedByAConsumerThatDiedIsDeliveredToAnotherExactlyOnce() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); ChildJvm c = QueueChild.start(shm.path(), "claim-read", q.name())) {
            assertTrue(q.offer(TestMessages.encode(1, 0)));
            assertTrue(q.offer(TestMessages.encode(1, 1)));
            assertEquals("0", c.expect("CLAIMED"));
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
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); ChildJvm c = QueueChild.start(shm.path(), "claim-write", q.name())) {
            assertTrue(q.offer(TestMessages.encode(1, 0)));
            assertEquals("1", c.expect("CLAIMED"));
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
        try (ShmQueue q = ShmQueue.create(dir, 2, 64); ChildJvm c = QueueChild.start(shm.path(), "claim-read", q.name())) {
            assertTrue(q.offer(TestMessages.encode(1, 0)));
            assertTrue(q.offer(TestMessages.encode(1, 1)));
            assertEquals("0", c.expect("CLAIMED"));
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
                ChildJvm c = QueueChild.start(shm.path(), "consume", q.name(), "/dev/null")) {
            view.awaitSleepingConsumer();
            c.kill();
            assertEquals(1, view.consumersSleeping(), "the dead sleeper is still counted");
            q.recover();
            assertEquals(0, view.consumersSleeping());
            assertEquals(1, q.stats().participants().size());
        }
    }

    @Test
    void aConsumerKilledSpinningLeavesNoSpinnerBehind() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); QueueFileView view = new QueueFileView(dir, q.name());
                ChildJvm c = QueueChild.start(shm.path(), "spin", q.name())) {
            while (view.consumersSpinning() == 0) {
                Thread.sleep(1);
            }
            c.kill();
            assertEquals(1, view.consumersSpinning(), "the dead spinner is still counted");
            q.recover();
            assertEquals(0, view.consumersSpinning(), "else producers would skip waking sleepers for it");
            assertEquals(1, q.stats().participants().size());
        }
    }

    @Test
    void aParticipantWithoutEvidenceOfDeathIsNeverJudgedDeadAndOneWhoseLifeLockIsFreeIs() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 2, 64, 4); QueueFileView view = new QueueFileView(dir, q.name())) {
            // a participant whose pid names no process here (another PID namespace, say) and
            // that has no life file: nothing proves it dead, holding position 0 as a producer
            long pid = ProcessIdentity.unpack(-1L).pid();
            while (Files.exists(Path.of("/proc", Long.toString(pid)))) {
                pid--;
            }
            ProcessIdentity stranger = new ProcessIdentity(pid, 12345);
            Geometry g = Geometry.of(2, 64, 4);
            MemorySegment m = view.segment();
            int entry = 3;
            m.set(ShmQueueLayout.LE_LONG, g.participantOffset(entry) + ShmQueueLayout.PARTICIPANT_IDENTITY,
                    stranger.packed());
            m.set(ShmQueueLayout.LE_LONG, g.participantOffset(entry) + ShmQueueLayout.PARTICIPANT_PID_NAMESPACE,
                    Liveness.ownPidNamespace());
            m.set(ShmQueueLayout.LE_LONG, g.cellOffset(0) + ShmQueueLayout.CELL_WORD, ShmQueueLayout.writing(0, entry));
            m.set(ShmQueueLayout.LE_LONG, ShmQueueLayout.TAIL_OFFSET, 1L);

            q.recover();
            assertEquals(2, q.stats().participants().size(), "no life file, no /proc entry: unknown, so alive");
            assertNull(q.poll(), "its claim on position 0 stands");

            // its life file, held by nobody: the kernel's evidence that it is dead
            Path life = shm.path().resolve(io.refshare.shm.LifeFile.name(dir, stranger));
            Files.write(life, new byte[32]);
            try {
                Thread.sleep(Liveness.ALIVE_CACHE_NANOS / 1_000_000 + 20); // past the cached "alive"
                q.recover();
                assertEquals(1, q.stats().participants().size(), "its life lock is free: dead, entry reclaimed");
                assertTrue(q.offer(TestMessages.encode(1, 1)));
                assertEquals(1, TestMessages.sequence(q.poll()), "position 0 was skipped");
            } finally {
                Files.deleteIfExists(life);
            }
        }
    }
}
