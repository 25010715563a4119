package io.refshare.channel;

import io.refshare.shm.Libc;

import java.lang.foreign.MemorySegment;

import static io.refshare.channel.ShmQueueLayout.INT;

/**
 * One direction of wake-ups between processes ("not empty" or "not full"): a 32-bit
 * futex sequence word and a count of sleepers in the queue file, plus each participant's
 * share of that count in its table entry.
 *
 * <h2>Implementation notes</h2>
 * A sleeper registers ({@link #prepare}: both sleeping counts up, then reads the
 * sequence), re-checks its condition, and only then waits on the futex while the
 * sequence still has the value it read. A signaller changes the state first (the cell
 * word, a volatile write) and then reads the sleeping count; only when it is non-zero
 * does it bump the sequence and wake. All of these are volatile accesses, which Java
 * orders sequentially consistently, so either the signaller sees the sleeper's count
 * (and bumps the sequence: the futex wait returns at once or is woken), or the sleeper's
 * re-check sees the new state. No wake-up is lost, and the fast path with nobody asleep
 * makes no system call and no atomic write to a shared line.
 * <p>
 * Waking one sleeper per state change is enough for correctness: a woken sleeper
 * re-checks before sleeping again. Sleepers still wait in bounded slices, so even a
 * signal that a dying process never sent delays nobody forever.
 * <p>
 * A participant that dies asleep leaves its share in the global count; recovery removes
 * exactly that share ({@link #forget}), so producers do not pay for wake-ups forever.
 * The global count is raised before the share and lowered after it, so a process killed
 * between the two leaves the global count too high (a wasted wake-up), never too low (a
 * missed one).
 */
final class QueueSignal {
    private final MemorySegment mem;
    private final MemorySegment futexWord;
    private final long sequenceOffset;
    private final long sleepingOffset;
    private final long shareOffsetInEntry;

    QueueSignal(MemorySegment mem, long sequenceOffset, long sleepingOffset, long shareOffsetInEntry) {
        this.mem = mem;
        this.futexWord = mem.asSlice(sequenceOffset, 4);
        this.sequenceOffset = sequenceOffset;
        this.sleepingOffset = sleepingOffset;
        this.shareOffsetInEntry = shareOffsetInEntry;
    }

    /** Counts the caller as asleep and returns the sequence to pass to {@link #await}. */
    int prepare(long entryOffset) {
        INT.getAndAdd(mem, sleepingOffset, 1);
        INT.getAndAdd(mem, entryOffset + shareOffsetInEntry, 1);
        return (int) INT.getVolatile(mem, sequenceOffset);
    }

    /** Sleeps while the sequence is still {@code sequence}, at most {@code nanos}. */
    void await(int sequence, long nanos) {
        Libc.futexWait(futexWord, sequence, nanos);
    }

    /** Undoes {@link #prepare}; always called, however the wait ended. */
    void awake(long entryOffset) {
        INT.getAndAdd(mem, entryOffset + shareOffsetInEntry, -1);
        INT.getAndAdd(mem, sleepingOffset, -1);
    }

    boolean anyoneAsleep() {
        return (int) INT.getVolatile(mem, sleepingOffset) > 0;
    }

    /** Wakes one sleeper, if any; call after the state change it announces. */
    void signal() {
        if (anyoneAsleep()) {
            INT.getAndAdd(mem, sequenceOffset, 1);
            Libc.futexWake(futexWord, 1);
        }
    }

    /** Wakes every sleeper in every process, so each re-checks (closing, recovery). */
    void signalAll() {
        INT.getAndAdd(mem, sequenceOffset, 1);
        Libc.futexWake(futexWord, Integer.MAX_VALUE);
    }

    /** Removes a dead participant's share of the sleeping count; exact even if called twice. */
    void forget(long entryOffset) {
        int share = (int) INT.getAndSet(mem, entryOffset + shareOffsetInEntry, 0);
        if (share != 0) {
            INT.getAndAdd(mem, sleepingOffset, -share);
        }
    }
}
