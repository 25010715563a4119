package io.refshare.holder;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.holder.SharedHolderLayout.Geometry;
import io.refshare.shm.ProcessIdentity;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The shared protocol on plain native memory: counts, retirement, rows, dead readers, corrupt files. */
class HolderFileTest {
    private static final ProcessIdentity ME = ProcessIdentity.current();
    /** A process that is not running (pid 1 never has this start time). */
    private static final ProcessIdentity GHOST = new ProcessIdentity(1, 123_456_789L);

    private final Arena arena = Arena.ofAuto();
    private final List<Long> retired = new ArrayList<>();
    private MemorySegment mem;
    private final HolderFile.Retirement record = (slot, sequence, descriptor) -> retired.add(sequence);

    private HolderFile file(int slots, int readers, int drainAt) {
        Geometry g = new Geometry(slots, readers);
        mem = arena.allocate(g.fileLength(), 64);
        SharedHolderLayout.format(mem, g, ME);
        assertEquals(g, SharedHolderLayout.readGeometry(mem, "test memory"));
        return new HolderFile(mem, g, drainAt);
    }

    private static long publish(HolderFile f, String text, HolderFile.Retirement r) {
        long word = f.claimSlot();
        assertTrue(word >= 0, "a free slot");
        long seq = f.fill(word, ME.packed(), text.getBytes(StandardCharsets.US_ASCII));
        f.unpin(f.swap(word), r);
        return seq;
    }

    @Test
    void versionsRetireOnceWhenTheirLastReaderReleases() {
        HolderFile f = file(4, 2, HolderWord.DEFAULT_DRAIN_AT);
        int row = f.registerReader(ME.packed());
        assertEquals(row, f.registerReader(ME.packed()), "one row per process");
        assertEquals(1, publish(f, "one", record));
        long w = f.acquire(row);
        int slot = HolderWord.slot(w);
        assertEquals("one", new String(f.descriptor(slot, HolderWord.generation(w)), StandardCharsets.US_ASCII));
        assertEquals(1, f.held(row, slot));
        assertEquals(2, publish(f, "two", record));
        assertEquals(List.of(), retired, "version 1 is still held");
        f.release(row, slot, record);
        assertEquals(List.of(1L), retired);
        assertEquals(0, f.held(row, slot));
        assertThrows(InvalidDataException.class, () -> f.release(row, slot, record), "not held any more");
        f.unpin(f.swap(HolderWord.EMPTY), record);
        assertEquals(List.of(1L, 2L), retired);
        assertEquals(2, f.published());
        assertEquals(2, f.retired());
        assertEquals(0, f.slotsInUse());
    }

    @Test
    void everyAcquireDrainingStillRetiresExactlyAtTheLastRelease() {
        HolderFile f = file(2, 1, 1);
        int row = f.registerReader(ME.packed());
        publish(f, "v", record);
        List<Long> words = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            words.add(f.acquire(row));
        }
        assertEquals(0, HolderWord.count(f.word()), "each acquire moved its count to the version");
        publish(f, "w", record);
        for (long w : words) {
            assertEquals(List.of(), retired);
            f.release(row, HolderWord.slot(w), record);
        }
        assertEquals(List.of(1L), retired);
    }

    @Test
    void deadReadersReferencesAreGivenBackExactlyOnce() {
        HolderFile f = file(4, 3, HolderWord.DEFAULT_DRAIN_AT);
        long ghost = GHOST.packed();
        int ghostRow = f.registerReader(ghost);
        int myRow = f.registerReader(ME.packed());
        publish(f, "one", record);
        long w = f.acquire(ghostRow);
        f.acquire(ghostRow);
        long mine = f.acquire(myRow);
        publish(f, "two", record);
        assertEquals(List.of(), retired);
        long me = ME.packed();
        assertEquals(2, f.reclaimDead(me, ProcessIdentity::isAlive, record), "the ghost's two references");
        assertEquals(List.of(), retired, "still held by this process");
        assertEquals(0, f.reclaimDead(me, ProcessIdentity::isAlive, record), "nothing is reclaimed twice");
        assertEquals(List.of(ME), f.readers(), "the ghost's row is free again");
        f.release(myRow, HolderWord.slot(mine), record);
        assertEquals(List.of(1L), retired);
        assertEquals(2, f.reclaimed());
        assertEquals(0, f.held(ghostRow, HolderWord.slot(w)));
    }

    @Test
    void aReclaimerThatDiedIsTakenOverByTheNext() {
        HolderFile f = file(2, 2, HolderWord.DEFAULT_DRAIN_AT);
        int ghostRow = f.registerReader(GHOST.packed());
        publish(f, "one", record);
        f.acquire(ghostRow);
        f.acquire(ghostRow);
        publish(f, "two", record);
        // a reclaimer marked the ghost's row, moved nothing yet, and died
        ProcessIdentity deadReclaimer = new ProcessIdentity(1, 987_654_321L);
        long rowAt = f.geometry().rowOffset(ghostRow) + SharedHolderLayout.ROW_IDENTITY;
        mem.set(SharedHolderLayout.LE_LONG, rowAt,
                deadReclaimer.packed() | SharedHolderLayout.RECLAIM_MARK);
        long me = ME.packed();
        assertEquals(0, f.reclaimDead(me, p -> p.equals(deadReclaimer) || p.equals(ME), record),
                "a row marked by a live reclaimer is left to it");
        assertEquals(List.of(), retired);
        assertEquals(2, f.reclaimDead(me, ProcessIdentity::isAlive, record), "the dead reclaimer's work is taken over");
        assertEquals(List.of(1L), retired);
        assertEquals(0, mem.get(SharedHolderLayout.LE_LONG, rowAt), "row free");
    }

    @Test
    void rowsRunOutOnlyWhenEveryOneIsTaken() {
        HolderFile f = file(1, 2, HolderWord.DEFAULT_DRAIN_AT);
        assertTrue(f.registerReader(GHOST.packed()) >= 0);
        assertTrue(f.registerReader(ME.packed()) >= 0);
        assertEquals(-1, f.registerReader((new ProcessIdentity(2, 5)).packed()));
        f.reclaimDead(ME.packed(), ProcessIdentity::isAlive, record);
        assertTrue(f.registerReader((new ProcessIdentity(2, 5)).packed()) >= 0,
                "the dead process's row was freed");
    }

    @Test
    void aFreeRowIsClaimedEmptyWhateverWasWrittenIntoIt() {
        HolderFile f = file(2, 2, HolderWord.DEFAULT_DRAIN_AT);
        Geometry g = f.geometry();
        // a hostile writer (or a bug elsewhere) left counts in a row nobody owns
        mem.set(SharedHolderLayout.LE_LONG, g.heldOffset(0, 0), -5);
        mem.set(SharedHolderLayout.LE_LONG, g.heldOffset(0, 1), 7);
        int row = f.registerReader(ME.packed());
        assertEquals(0, row);
        assertEquals(0, f.held(row, 0));
        assertEquals(0, f.held(row, 1));
        publish(f, "one", record);
        long w = f.acquire(row);
        f.release(row, HolderWord.slot(w), record);
        assertEquals(0, f.held(row, HolderWord.slot(w)));
    }

    @Test
    void slotsRunOutWhileReadersHoldThem() {
        HolderFile f = file(2, 1, HolderWord.DEFAULT_DRAIN_AT);
        int row = f.registerReader(ME.packed());
        publish(f, "one", record);
        long held = f.acquire(row);
        publish(f, "two", record);
        assertEquals(-1, f.claimSlot(), "one slot current, one held");
        f.release(row, HolderWord.slot(held), record);
        long word = f.claimSlot();
        assertTrue(word >= 0);
        assertEquals(1, HolderWord.slot(held) == HolderWord.slot(word) ? 1 : 0, "the freed slot is reused");
        assertEquals(HolderWord.nextGeneration(HolderWord.generation(held)), HolderWord.generation(word),
                "with the next generation");
        f.abandon(word);
    }

    @Test
    void corruptContentsAreRefusedWithAClearError() {
        HolderFile f = file(2, 1, HolderWord.DEFAULT_DRAIN_AT);
        Geometry g = f.geometry();
        int row = f.registerReader(ME.packed());
        publish(f, "one", record);
        MemorySegment m = mem;
        // a descriptor length beyond the slot
        long w = f.acquire(row);
        int slot = HolderWord.slot(w);
        m.set(SharedHolderLayout.LE_INT, g.slotOffset(slot) + SharedHolderLayout.SLOT_DESCRIPTOR_LENGTH, 5000);
        InvalidDataException e = assertThrows(InvalidDataException.class,
                () -> f.descriptor(slot, HolderWord.generation(w)));
        assertTrue(e.getMessage().contains("5000"), e.getMessage());
        // a generation that is not the slot's
        assertThrows(InvalidDataException.class, () -> f.descriptor(slot, HolderWord.generation(w) + 1));
        // a holder word naming a slot beyond the table
        m.set(SharedHolderLayout.LE_LONG, SharedHolderLayout.WORD_OFFSET, HolderWord.of(7, 1));
        assertThrows(InvalidDataException.class, () -> f.acquire(row));
        // a header that lies about its sizes
        m.set(SharedHolderLayout.LE_INT, SharedHolderLayout.SLOT_CAPACITY_OFFSET, 3);
        assertThrows(InvalidDataException.class, () -> SharedHolderLayout.readGeometry(m, "corrupt"));
        m.set(SharedHolderLayout.LE_LONG, SharedHolderLayout.MAGIC_OFFSET, 42);
        e = assertThrows(InvalidDataException.class, () -> SharedHolderLayout.readGeometry(m, "corrupt"));
        assertTrue(e.getMessage().contains("not a refshare holder file"), e.getMessage());
    }

    @Test
    void threadsRacingReleasesAgainstPublishesRetireEachVersionOnce() throws Exception {
        HolderFile f = file(8, 2, 3);
        int row = f.registerReader(ME.packed());
        AtomicLong retirements = new AtomicLong();
        long[] retiredCount = new long[20_002];
        HolderFile.Retirement counting = (slot, sequence, d) -> {
            synchronized (retiredCount) {
                retiredCount[(int) sequence]++;
            }
            retirements.incrementAndGet();
        };
        publish(f, "0", counting);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong bad = new AtomicLong();
        Thread reader = Thread.ofPlatform().start(() -> {
            while (!stop.get()) {
                long w = f.acquire(row);
                int slot = HolderWord.slot(w);
                byte[] d = f.descriptor(slot, HolderWord.generation(w));
                if (!new String(d, StandardCharsets.US_ASCII).equals(Long.toString(f.sequence(slot) - 1))) {
                    bad.incrementAndGet();
                }
                f.release(row, slot, counting);
            }
        });
        for (int i = 1; i <= 20_000; i++) {
            long word;
            while ((word = f.claimSlot()) < 0) {
                Thread.onSpinWait();
            }
            f.fill(word, 1, Long.toString(i).getBytes(StandardCharsets.US_ASCII));
            f.unpin(f.swap(word), counting);
        }
        stop.set(true);
        reader.join();
        f.unpin(f.swap(HolderWord.EMPTY), counting);
        assertEquals(0, bad.get(), "a reader saw a slot rewritten under it");
        assertEquals(20_001, retirements.get());
        for (int s = 1; s <= 20_001; s++) {
            assertEquals(1, retiredCount[s], "version " + s);
        }
        assertEquals(0, f.slotsInUse());
    }
}
