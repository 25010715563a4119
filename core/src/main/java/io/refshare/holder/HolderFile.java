package io.refshare.holder;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.holder.SharedHolderLayout.Geometry;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmKind;
import io.refshare.shm.ShmDirectory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.function.Predicate;

import static io.refshare.holder.SharedHolderLayout.*;

/**
 * The differential-reference-counting protocol of {@link AtomicHolder}, run on a holder
 * file ({@link SharedHolderLayout}) that many processes map: the holder word, the
 * versions' own counts, the version slots, and a row per reading process recording what it
 * holds. It knows nothing of what a version is (a descriptor's bytes); whoever lets go of
 * a version last is told, through {@link Retirement}. Works on any memory segment, so it
 * can be tested without files.
 *
 * <h2>Implementation notes</h2>
 * <b>Counts and transfer</b> are those of {@link AtomicHolder} (read its notes), with the
 * table entry a version slot of the file: acquire is {@code getAndAdd(word, 1)}; release is
 * {@code getAndAdd(count, -1)}; publishing is {@code getAndSet(word, new)} followed by one
 * {@code getAndAdd(count, e - PINNED)} on the old version; whoever leaves a count at zero
 * retires the version. The invariant {@code count = PINNED + out - e + credit} while the
 * word names the version, {@code count = out + credit} after, and hence the exactly-once
 * retirement, hold across processes because every update is an atomic read-modify-write
 * on the shared mapping. As there, {@code count - PINNED} is transiently negative while the
 * holder still points at the version: a reader's release can land before the transfer of
 * the acquisition it matches, which the holder word still counts.
 * <p>
 * <b>Slots.</b> A slot's state word goes (FREE, g) &rarr; (WRITING, g + 1) by the
 * compare-and-set of the publisher that claims it, &rarr; (LIVE, g + 1) by that publisher
 * once the count, sequence and descriptor are written, &rarr; (FREE, g + 1) by the process
 * that retires the version. The generation travels in the holder word, so a drain's
 * compare-and-set cannot mistake a reused slot for the version it drains.
 * <p>
 * <b>Attribution.</b> Row {@code r} belongs to one process (pid and start time, claimed by
 * compare-and-set); {@code held[r][s]} counts the references that process holds on the
 * version in slot {@code s}. Acquire adds to it after the holder word; release subtracts
 * from it before the count. So at every instant {@code held} never exceeds what the
 * process really holds, and a process killed between the two steps leaks one reference
 * (its version stays until its publisher goes) but never gives one back twice. A reader's
 * references are all in its row: once its process is dead, {@link #reclaimDead} moves each
 * {@code held[r][s]} out by get-and-set (so each unit moves once, even when reclaimers
 * race or one dies half-way and the next takes over its mark) and releases that many on
 * the slot's count. A slot with {@code held > 0} cannot be retired, so the held counts
 * always refer to the version now in the slot. A row is free only once reclaimed to zero,
 * so a process claiming a free row zeroes it: counts found there can only be a hostile
 * write, never references of anyone.
 * <p>
 * <b>Memory ordering.</b> The publisher writes the count, sequence and descriptor with
 * plain stores, then the LIVE state with a release store, then installs the word with a
 * getAndSet; a reader's getAndAdd of the word is ordered after that getAndSet (all RMWs
 * of the word are totally ordered), so it sees the whole slot. The retiring process reads
 * the descriptor before freeing the slot with a compare-and-set, and a publisher's claim
 * (compare-and-set of the same word) comes after it, so a slot is rewritten only after
 * its previous version was read for the last time. A reader's last access to the version's
 * memory precedes its release RMW of the count, which precedes the retiring RMW, so the
 * version's memory is given back only after every reader is done with it. Between
 * processes the Java memory model is silent; the argument rests on what these VarHandle
 * operations are on memory both processes map: locked instructions, full fences on x86-64
 * (and acquire/release atomics elsewhere), the same ones the JDK uses within a process.
 */
public final class HolderFile {
    /** Told the contents of a version whose last reference went, before its slot is freed. */
    public interface Retirement {
        void retired(int slot, long sequence, byte[] descriptor);
    }

    private final MemorySegment mem;
    private final Geometry geometry;
    private final long drainAt;

    public HolderFile(MemorySegment mem, Geometry geometry, int drainAt) {
        if (drainAt < 1 || drainAt > HolderWord.DEFAULT_DRAIN_AT) {
            throw new IllegalArgumentException("drainAt must be in 1.." + HolderWord.DEFAULT_DRAIN_AT + ": " + drainAt);
        }
        this.mem = mem;
        this.geometry = geometry;
        this.drainAt = drainAt;
    }

    public Geometry geometry() {
        return geometry;
    }

    long word() {
        return (long) LONG.getVolatile(mem, WORD_OFFSET);
    }

    // ---------------------------------------------------------------- readers

    /**
     * A row for process {@code identity} (packed): the row it already has, else a free one
     * claimed now; -1 when every row is taken.
     */
    public int registerReader(long identity) {
        for (int r = 0; r < geometry.readerCapacity(); r++) {
            if ((long) LONG.getVolatile(mem, geometry.rowOffset(r) + ROW_IDENTITY) == identity) {
                return r;
            }
        }
        for (int r = 0; r < geometry.readerCapacity(); r++) {
            long at = geometry.rowOffset(r) + ROW_IDENTITY;
            if ((long) LONG.getVolatile(mem, at) == 0 && LONG.compareAndSet(mem, at, 0L, identity)) {
                // a free row records nothing (rows are freed only once reclaimed to zero): whatever a
                // hostile writer left in it must not pass for references of ours
                for (int s = 0; s < geometry.slotCapacity(); s++) {
                    LONG.setVolatile(mem, geometry.heldOffset(r, s), 0L);
                }
                return r;
            }
        }
        return -1;
    }

    /**
     * Acquires a reference to the current version for the process of {@code row}. Returns
     * the holder word as it was before the increment: its slot and generation name the
     * version (slot -1: the holder was empty and nothing is held).
     */
    public long acquire(int row) {
        long w = (long) LONG.getAndAdd(mem, WORD_OFFSET, 1L);
        int slot = HolderWord.slot(w);
        boolean drain = HolderWord.count(w) + 1 >= drainAt;
        if (slot < 0) {
            if (drain) {
                forgetEmptyCount();
            }
            return w;
        }
        if (slot >= geometry.slotCapacity()) {
            throw new InvalidDataException("holder word names slot " + slot + " of " + geometry.slotCapacity()
                    + " (corrupt holder file)");
        }
        LONG.getAndAdd(mem, geometry.heldOffset(row, slot), 1L);
        if (drain) {
            drain(slot, w);
        }
        return w;
    }

    /** Releases one reference the process of {@code row} holds on the version in {@code slot}. */
    public void release(int row, int slot, Retirement retirement) {
        long at = geometry.heldOffset(row, slot);
        long held = (long) LONG.getAndAdd(mem, at, -1L);
        if (held <= 0) {
            // our own releases are matched one to one with acquires, so only a write from outside gets here
            LONG.getAndAdd(mem, at, 1L);
            throw new InvalidDataException("reader row " + row + " holds " + held + " references on slot " + slot
                    + " but releases one (corrupt holder file)");
        }
        releaseCount(slot, 1, retirement);
    }

    /** References the process of {@code row} holds on the version in {@code slot}. */
    long held(int row, int slot) {
        return (long) LONG.getVolatile(mem, geometry.heldOffset(row, slot));
    }

    /** The publish sequence of the version in {@code slot}; stable while the caller holds it. */
    public long sequence(int slot) {
        return mem.get(LE_LONG, geometry.slotOffset(slot) + SLOT_SEQUENCE);
    }

    /**
     * A copy of the descriptor of the version the caller holds in {@code slot}, checked to
     * be that generation's and of a sane length.
     */
    public byte[] descriptor(int slot, int generation) {
        long base = geometry.slotOffset(slot);
        long state = (long) LONG.getAcquire(mem, base + SLOT_STATE);
        if (stateOf(state) != LIVE || generationOf(state) != generation) {
            throw new InvalidDataException("version slot " + slot + " is in state " + stateOf(state) + " generation "
                    + generationOf(state) + ", expected a live generation " + generation + " (corrupt holder file)");
        }
        int length = mem.get(LE_INT, base + SLOT_DESCRIPTOR_LENGTH);
        if (length < 1 || length > MAX_DESCRIPTOR_BYTES) {
            throw new InvalidDataException("version slot " + slot + " claims a descriptor of " + length + " bytes");
        }
        byte[] bytes = new byte[length];
        MemorySegment.copy(mem, ValueLayout.JAVA_BYTE, base + SLOT_DESCRIPTOR, bytes, 0, length);
        return bytes;
    }

    // ---------------------------------------------------------------- publishers

    /**
     * Claims a free slot for a new version and returns the holder word that will name it
     * (count 0); -1 when every slot holds a live version.
     */
    public long claimSlot() {
        for (int s = 0; s < geometry.slotCapacity(); s++) {
            long at = geometry.slotOffset(s) + SLOT_STATE;
            long state = (long) LONG.getVolatile(mem, at);
            if (stateOf(state) == FREE) {
                int generation = HolderWord.nextGeneration(generationOf(state));
                if (LONG.compareAndSet(mem, at, state, SharedHolderLayout.state(WRITING, generation))) {
                    return HolderWord.of(s, generation);
                }
            }
        }
        return -1;
    }

    /**
     * Writes the claimed slot's version (pinned, numbered, described) and marks it LIVE;
     * returns its sequence number.
     */
    public long fill(long word, long publisher, byte[] descriptor) {
        if (descriptor.length < 1 || descriptor.length > MAX_DESCRIPTOR_BYTES) {
            throw new IllegalArgumentException("descriptor of " + descriptor.length + " bytes does not fit a slot");
        }
        int slot = HolderWord.slot(word);
        long base = geometry.slotOffset(slot);
        long sequence = (long) LONG.getAndAdd(mem, PUBLISHED_OFFSET, 1L) + 1;
        mem.set(LE_LONG, base + SLOT_COUNT, HolderWord.PINNED);
        mem.set(LE_LONG, base + SLOT_SEQUENCE, sequence);
        mem.set(LE_LONG, base + SLOT_PUBLISHER, publisher);
        mem.set(LE_INT, base + SLOT_DESCRIPTOR_LENGTH, descriptor.length);
        MemorySegment.copy(descriptor, 0, mem, ValueLayout.JAVA_BYTE, base + SLOT_DESCRIPTOR, descriptor.length);
        LONG.setRelease(mem, base + SLOT_STATE, SharedHolderLayout.state(LIVE, HolderWord.generation(word)));
        return sequence;
    }

    /** Gives back a slot claimed by {@link #claimSlot} that will not be filled. */
    public void abandon(long word) {
        LONG.setRelease(mem, geometry.slotOffset(HolderWord.slot(word)) + SLOT_STATE,
                SharedHolderLayout.state(FREE, HolderWord.generation(word)));
    }

    /**
     * Points the holder at {@code word} ({@link HolderWord#EMPTY} empties it); returns the
     * word it replaced, which the caller must hand to {@link #unpin} (even if it fails
     * before: the old version stays pinned until then).
     */
    public long swap(long word) {
        return (long) LONG.getAndSet(mem, WORD_OFFSET, word);
    }

    /**
     * The transfer: moves the external count of {@code old} (a word {@link #swap} returned)
     * to its version's own count and unpins it, retiring it if nobody holds it.
     */
    public void unpin(long old, Retirement retirement) {
        int slot = HolderWord.slot(old);
        if (slot < 0) {
            return; // acquisitions of an empty holder hold nothing
        }
        if (slot >= geometry.slotCapacity()) {
            throw new InvalidDataException("holder word named slot " + slot + " of " + geometry.slotCapacity()
                    + " (corrupt holder file)");
        }
        releaseCount(slot, HolderWord.PINNED - HolderWord.count(old), retirement);
    }

    public boolean isClosed() {
        return (long) LONG.getVolatile(mem, CLOSED_OFFSET) != 0;
    }

    public void markClosed() {
        LONG.setVolatile(mem, CLOSED_OFFSET, 1L);
    }

    public long published() {
        return (long) LONG.getVolatile(mem, PUBLISHED_OFFSET);
    }

    public long retired() {
        return (long) LONG.getVolatile(mem, RETIRED_OFFSET);
    }

    public long reclaimed() {
        return (long) LONG.getVolatile(mem, RECLAIMED_OFFSET);
    }

    /** Slots holding a version now (live or being written). */
    public int slotsInUse() {
        int n = 0;
        for (int s = 0; s < geometry.slotCapacity(); s++) {
            if (stateOf((long) LONG.getVolatile(mem, geometry.slotOffset(s) + SLOT_STATE)) != FREE) {
                n++;
            }
        }
        return n;
    }

    /** The processes that have a row (alive or not). */
    public java.util.List<ProcessIdentity> readers() {
        java.util.List<ProcessIdentity> list = new java.util.ArrayList<>();
        for (int r = 0; r < geometry.readerCapacity(); r++) {
            ProcessIdentity p = ProcessIdentity.unpack((long) LONG.getVolatile(mem, geometry.rowOffset(r) + ROW_IDENTITY));
            if (p != null) {
                list.add(p);
            }
        }
        return list;
    }

    // ---------------------------------------------------------------- dead readers

    /**
     * Gives back every reference held by rows whose process is not alive, and frees those
     * rows; returns the references given back. {@code me} is the caller's packed identity,
     * marking the rows it is reclaiming.
     */
    public long reclaimDead(long me, Predicate<ProcessIdentity> alive, Retirement retirement) {
        long total = 0;
        for (int r = 0; r < geometry.readerCapacity(); r++) {
            long at = geometry.rowOffset(r) + ROW_IDENTITY;
            long id = (long) LONG.getVolatile(mem, at);
            ProcessIdentity p = ProcessIdentity.unpack(id);
            if (p == null || alive.test(p)) {
                continue; // free, live, or being reclaimed by a live process
            }
            long mark = me | RECLAIM_MARK;
            if (!LONG.compareAndSet(mem, at, id, mark)) {
                continue; // someone else got there first
            }
            long released = 0;
            for (int s = 0; s < geometry.slotCapacity(); s++) {
                long n = (long) LONG.getAndSet(mem, geometry.heldOffset(r, s), 0L);
                if (n > 0) {
                    released += n;
                    releaseCount(s, n, retirement);
                }
            }
            if (released > 0) {
                LONG.getAndAdd(mem, RECLAIMED_OFFSET, released);
            }
            LONG.compareAndSet(mem, at, mark, 0L);
            total += released;
        }
        return total;
    }

    // ---------------------------------------------------------------- internals

    private void releaseCount(int slot, long n, Retirement retirement) {
        long countAt = geometry.slotOffset(slot) + SLOT_COUNT;
        long c = (long) LONG.getAndAdd(mem, countAt, -n) - n;
        if (c == 0) {
            retire(slot, retirement);
        } else if (c < 0) {
            throw new InvalidDataException("the count of version slot " + slot + " went negative (" + c
                    + "): the holder file was corrupted or a reference was released twice");
        }
    }

    private void drain(int slot, long w) {
        long countAt = geometry.slotOffset(slot) + SLOT_COUNT;
        LONG.getAndAdd(mem, countAt, drainAt);
        long cur = word();
        while (HolderWord.version(cur) == HolderWord.version(w) && HolderWord.count(cur) >= drainAt) {
            if (LONG.compareAndSet(mem, WORD_OFFSET, cur, cur - drainAt)) {
                return;
            }
            cur = word();
        }
        LONG.getAndAdd(mem, countAt, -drainAt); // the transfer or another drainer took the count; we still hold it
    }

    private void forgetEmptyCount() {
        long cur = word();
        while (HolderWord.slot(cur) < 0 && HolderWord.count(cur) >= drainAt) {
            if (LONG.compareAndSet(mem, WORD_OFFSET, cur, HolderWord.EMPTY)) {
                return;
            }
            cur = word();
        }
    }

    private void retire(int slot, Retirement retirement) {
        long base = geometry.slotOffset(slot);
        long state = (long) LONG.getVolatile(mem, base + SLOT_STATE);
        if (stateOf(state) != LIVE) {
            throw new InvalidDataException("retiring version slot " + slot + " found it in state " + stateOf(state)
                    + " (corrupt holder file)");
        }
        try {
            // a corrupt descriptor is reported (thrown) after the slot is freed: nothing more can be done for it
            retirement.retired(slot, sequence(slot), descriptor(slot, generationOf(state)));
        } finally {
            LONG.getAndAdd(mem, RETIRED_OFFSET, 1L);
            if (!LONG.compareAndSet(mem, base + SLOT_STATE, state,
                    SharedHolderLayout.state(FREE, generationOf(state)))) {
                throw new InvalidDataException("version slot " + slot + " changed while being retired (corrupt holder"
                        + " file)");
            }
        }
    }

    /**
     * The figures every process sees, each read on its own (operations running meanwhile may
     * move them apart).
     *
     * @param published    versions installed so far, by every publisher
     * @param retired      versions whose last reference went, anywhere
     * @param reclaimed    references given back on behalf of dead processes
     * @param liveVersions version slots in use: the current version and those still held
     * @param readers      the processes with a reader row
     */
    public record Figures(long published, long retired, long reclaimed, int liveVersions,
            java.util.List<ProcessIdentity> readers) {
    }

    public Figures figures() {
        return new Figures(published(), retired(), reclaimed(), slotsInUse(), readers());
    }

    /** The figures of the holder file {@code name}, read without taking a reader row: for inspection. */
    public static Figures peek(ShmDirectory directory, String name) {
        return directory.open(name, ShmKind.HOLDER, SharedHolderLayout.HEADER_LENGTH).readAndClose(f -> {
            Geometry g = SharedHolderLayout.readGeometry(f.segment(), f.path().toString());
            return new HolderFile(f.segment(), g, HolderWord.DEFAULT_DRAIN_AT).figures();
        });
    }
}
