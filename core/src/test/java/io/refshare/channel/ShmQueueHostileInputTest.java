package io.refshare.channel;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.extension.RegisterExtension;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static io.refshare.channel.ShmQueueLayout.*;
import static org.junit.jupiter.api.Assertions.*;

/** Bytes in a queue file are written by other processes: none of them may crash or wedge a reader. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShmQueueHostileInputTest {
    @RegisterExtension
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();

    private void assertOpenRefused(Consumer<MemorySegment> corruption, String expected) {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            corruption.accept(view.segment());
            InvalidDataException e = assertThrows(InvalidDataException.class, () -> ShmQueue.open(dir, q.name()));
            assertTrue(e.getMessage().contains(expected), e.getMessage());
            assertTrue(e.getMessage().contains(q.name()), "names the file: " + e.getMessage());
        }
    }

    @Test
    void aWrongMagicIsRefused() {
        assertOpenRefused(m -> m.set(LE_LONG, MAGIC_OFFSET, 0x1122334455667788L), "is not a refshare queue");
    }

    @Test
    void anotherLayoutVersionIsRefused() {
        assertOpenRefused(m -> m.set(LE_INT, VERSION_OFFSET, 99), "layout version 99");
    }

    @Test
    void impossibleSizesAreRefused() {
        assertOpenRefused(m -> m.set(LE_INT, CAPACITY_OFFSET, 0), "corrupt queue header");
        assertOpenRefused(m -> m.set(LE_INT, CAPACITY_OFFSET, -7), "corrupt queue header");
        assertOpenRefused(m -> m.set(LE_INT, MAX_MESSAGE_OFFSET, 1 << 30), "corrupt queue header");
        assertOpenRefused(m -> m.set(LE_INT, CELL_LENGTH_OFFSET, 8), "corrupt queue header");
        assertOpenRefused(m -> m.set(LE_INT, PARTICIPANT_CAPACITY_OFFSET, 0), "corrupt queue header");
        assertOpenRefused(m -> m.set(LE_INT, HEADER_LENGTH_OFFSET, 64), "corrupt queue header");
        assertOpenRefused(m -> m.set(LE_LONG, OWNER_PID_OFFSET, -1L), "impossible owner");
    }

    @Test
    void aHeaderDescribingMoreThanTheFileHoldsIsRefused() {
        assertOpenRefused(m -> m.set(LE_INT, CAPACITY_OFFSET, 4096), "is truncated");
    }

    @Test
    void aFileTooShortForAHeaderIsRefused() {
        ShmFile tiny = dir.create(ShmKind.QUEUE, 100);
        try {
            InvalidDataException e = assertThrows(InvalidDataException.class, () -> ShmQueue.open(dir, tiny.name()));
            assertTrue(e.getMessage().contains("truncated"), e.getMessage());
        } finally {
            tiny.unlink();
            tiny.close();
        }
    }

    @Test
    void aTruncatedQueueFileIsRefused() {
        Geometry big = Geometry.of(1024, 512, 4);
        ShmFile file = dir.create(ShmKind.QUEUE, big.cellsOffset() + 10 * (long) big.cellLength());
        try {
            MemorySegment m = file.segment();
            m.set(LE_INT, VERSION_OFFSET, VERSION);
            m.set(LE_INT, HEADER_LENGTH_OFFSET, HEADER_LENGTH);
            m.set(LE_LONG, OWNER_PID_OFFSET, ProcessHandle.current().pid());
            m.set(LE_INT, CAPACITY_OFFSET, big.capacity());
            m.set(LE_INT, MAX_MESSAGE_OFFSET, big.maxMessageBytes());
            m.set(LE_INT, CELL_LENGTH_OFFSET, big.cellLength());
            m.set(LE_INT, PARTICIPANT_CAPACITY_OFFSET, big.participantCapacity());
            m.set(LE_LONG, MAGIC_OFFSET, MAGIC);
            InvalidDataException e = assertThrows(InvalidDataException.class, () -> ShmQueue.open(dir, file.name()));
            assertTrue(e.getMessage().contains("is truncated"), e.getMessage());
            assertTrue(e.getMessage().contains(Long.toString(big.fileLength())), e.getMessage());
        } finally {
            file.unlink();
            file.close();
        }
    }

    @Test
    void namesFromOutsideMustBeQueueNamesInTheDirectory() {
        assertThrows(InvalidDataException.class, () -> ShmQueue.open(dir, "../../etc/passwd"));
        assertThrows(InvalidDataException.class, () -> ShmQueue.open(dir, dir.newName(ShmKind.COUNTERS)));
    }

    @Test
    void aCellWithAnImpossibleLengthIsSkippedAndTheQueueKeepsServing() {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64); QueueFileView view = new QueueFileView(dir, q.name())) {
            Geometry g = Geometry.of(4, 64, DEFAULT_PARTICIPANTS);
            for (int i = 0; i < 4; i++) {
                assertTrue(q.offer(TestMessages.encode(3, i)));
            }
            view.segment().set(LE_INT, g.cellOffset(0) + CELL_LENGTH_FIELD, 1 << 30);
            view.segment().set(LE_INT, g.cellOffset(2) + CELL_LENGTH_FIELD, -5);

            InvalidDataException e = assertThrows(InvalidDataException.class, q::poll);
            assertTrue(e.getMessage().contains("claims 1073741824 bytes"), e.getMessage());
            assertEquals(1, TestMessages.sequence(q.poll()));
            e = assertThrows(InvalidDataException.class, q::poll);
            assertTrue(e.getMessage().contains("claims -5 bytes"), e.getMessage());
            assertEquals(3, TestMessages.sequence(q.poll()));
            assertNull(q.poll());

            for (int i = 4; i < 8; i++) {
                assertTrue(q.offer(TestMessages.encode(3, i)), "the skipped cells are free again");
            }
            view.segment().set(LE_INT, g.cellOffset(1) + CELL_LENGTH_FIELD, 65);
            List<byte[]> drained = new ArrayList<>();
            assertEquals(3, q.drain(drained::add), "drain skips the bad cell and hands over the rest");
            assertEquals(List.of(4L, 6L, 7L), drained.stream().map(TestMessages::sequence).toList());
            assertEquals(3, q.stats().rejected());
        }
    }

    @Test
    void aClaimantIndexOutsideTheTableIsIgnoredByRecovery() {
        try (ShmQueue q = ShmQueue.create(dir, 2, 32, 4); QueueFileView view = new QueueFileView(dir, q.name())) {
            Geometry g = Geometry.of(2, 32, 4);
            view.segment().set(LE_LONG, g.cellOffset(0) + CELL_WORD, writing(0, 60_000));
            q.recover();
            assertNull(q.poll(), "the garbage claim blocks position 0; nothing is delivered from it");
            assertEquals(1, q.stats().participants().size());
        }
    }

    @Test
    void cellsOverwrittenFarAheadOfTheHintsAreRefusedNotWalked() {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            Geometry g = Geometry.of(4, 32, DEFAULT_PARTICIPANTS);
            for (int c = 0; c < 4; c++) {
                view.segment().set(LE_LONG, g.cellOffset(c) + CELL_WORD, full(c + 4L * 1_000_000_000));
            }
            InvalidDataException e = assertThrows(InvalidDataException.class, q::poll);
            assertTrue(e.getMessage().contains("corrupt"), e.getMessage());
            assertThrows(InvalidDataException.class, () -> q.offer(new byte[1]));
            assertNotNull(q.stats());
        }
    }

    @Test
    void garbageInTheParticipantTableAndHeaderLeavesStatsAnswering() {
        try (ShmQueue q = ShmQueue.create(dir, 2, 32, 4); QueueFileView view = new QueueFileView(dir, q.name())) {
            Geometry g = Geometry.of(2, 32, 4);
            view.segment().set(LE_LONG, g.participantOffset(2) + PARTICIPANT_IDENTITY, 1L << 30); // pid 0
            view.segment().set(LE_LONG, OWNER_PID_OFFSET, -9L);
            q.recover();
            QueueStats stats = q.stats();
            assertEquals(1, stats.participants().size());
            assertEquals(q.owner(), stats.owner(), "the owner as checked when the file was opened");
            assertTrue(q.offer(new byte[] {1}));
            assertArrayEquals(new byte[] {1}, q.poll());
        }
    }
}
