package io.refshare.channel;

import io.refshare.shm.Libc;

import java.lang.foreign.MemorySegment;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * One direction of wake-ups between processes ("not empty" or "not full"): a 32-bit
 * futex sequence word, a count of sleepers and a count of spinners in the queue file, plus
 * each participant's share of both counts in its table entry.
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
 * <b>Spinners.</b> A waiter that spins counts itself ({@link #startSpinning}) while it
 * polls, and a signaller that sees a spinner wakes nobody: the spinner will find the new
 * state. This is what keeps many waiters from costing the signaller one system call per
 * message, and from taking its CPU (eight consumers and a producer on two cores): only a
 * few waiters spin ({@code limit}), the rest sleep, and a message goes to a spinner
 * without a wake-up. It stays free of lost wake-ups because a spinner, once it has
 * stopped counting itself ({@link #stopSpinning}, volatile), always looks at the state
 * again before it sleeps or returns, and a taker that sees more waiting behind it signals
 * on (the queue's {@code deliver}): either the signaller read the count after the
 * spinner's decrement (and woke a sleeper), or the spinner's look comes after the
 * signaller's state change.
 * <p>
 * <b>One wake-up in flight.</b> A signaller that wakes a sleeper first sets the direction's
 * wake-pending flag (compare-and-set from 0), and while it is set other signallers skip
 * theirs: without it, every consumer that freed a cell while the one sleeping producer was
 * still being scheduled made its own system call (eight consumers on two cores: one per take).
 * Every sleeper clears the flag when it registers and when it wakes, each time before it
 * re-checks its condition, so a skipped signaller's change is seen: its read of the flag came
 * before some sleeper's clearing, which comes before that sleeper's re-check. A registering
 * sleeper reads the sequence it will sleep on before it clears the flag: a signaller that set
 * the flag after that read also bumps the sequence after it, so the sleep ends at once, and one
 * that set it before has it cleared after its setting. Cleared first, the flag could be set by
 * a signaller whose bump came before the sleeper's read and whose change another waiter took:
 * that wake-up reached nobody, the sleeper slept on the bumped sequence, and every signaller
 * after it skipped its wake-up for the set flag, a whole sleep slice with messages queued
 * (jcstress {@code WakePendingVsRegisteringSleeper}). A wake-up that
 * found nobody (the sleeper had left on its own) leaves the flag set only until the next
 * sleeper registers; a signaller that died between setting it and waking delays sleepers by
 * one sleep slice at most.
 * <p>
 * A participant that dies asleep or spinning leaves its share in the global count;
 * recovery removes exactly that share ({@link #forget}). For sleepers the global count is
 * raised before the share and lowered after it, so a process killed between the two
 * leaves the global count too high (a wasted wake-up), never too low (a missed one). For
 * spinners it is the other way round, for the same reason: a spinner counted too low costs
 * a wasted wake-up, one counted too high would keep signallers from waking the sleepers
 * (until their sleep slice ends).
 */
final class QueueSignal {
    private final MemorySegment mem;
    private final MemorySegment futexWord;
    private final long sequenceOffset;
    private final long sleepingOffset;
    private final long shareOffsetInEntry;
    private final long spinningOffset;
    private final long spinShareOffsetInEntry;
    private final long wakePendingOffset;

    private QueueSignal(MemorySegment mem, long sequenceOffset, long sleepingOffset, long shareOffsetInEntry,
                        long spinningOffset, long spinShareOffsetInEntry, long wakePendingOffset) {
        this.mem = mem;
        this.futexWord = mem.asSlice(sequenceOffset, 4);
        this.sequenceOffset = sequenceOffset;
        this.sleepingOffset = sleepingOffset;
        this.shareOffsetInEntry = shareOffsetInEntry;
        this.spinningOffset = spinningOffset;
        this.spinShareOffsetInEntry = spinShareOffsetInEntry;
        this.wakePendingOffset = wakePendingOffset;
    }

    /** Consumers waiting for a message. */
    static QueueSignal notEmpty(MemorySegment queueFile) {
        return new QueueSignal(queueFile, NOT_EMPTY_SEQ_OFFSET, CONSUMERS_SLEEPING_OFFSET, PARTICIPANT_CONSUMERS_SLEEPING,
                CONSUMERS_SPINNING_OFFSET, PARTICIPANT_CONSUMERS_SPINNING, CONSUMER_WAKE_PENDING_OFFSET);
    }

    /** Producers waiting for room. */
    static QueueSignal notFull(MemorySegment queueFile) {
        return new QueueSignal(queueFile, NOT_FULL_SEQ_OFFSET, PRODUCERS_SLEEPING_OFFSET, PARTICIPANT_PRODUCERS_SLEEPING,
                PRODUCERS_SPINNING_OFFSET, PARTICIPANT_PRODUCERS_SPINNING, PRODUCER_WAKE_PENDING_OFFSET);
    }

    /**
     * Counts the caller as spinning, unless {@code limit} waiters (in every process) already
     * spin: false then, and the caller should sleep instead. A true answer must be followed by
     * {@link #stopSpinning} and then by a look at the state before the caller sleeps or returns.
     */
    boolean startSpinning(long entryOffset, int limit) {
        INT.getAndAdd(mem, entryOffset + spinShareOffsetInEntry, 1);
        if ((int) INT.getAndAdd(mem, spinningOffset, 1) < limit) {
            return true;
        }
        stopSpinning(entryOffset);
        return false;
    }

    void stopSpinning(long entryOffset) {
        INT.getAndAdd(mem, spinningOffset, -1);
        INT.getAndAdd(mem, entryOffset + spinShareOffsetInEntry, -1);
    }

    /** Counts the caller as asleep and returns the sequence to pass to {@link #await}. */
    int prepare(long entryOffset) {
        INT.getAndAdd(mem, sleepingOffset, 1);
        INT.getAndAdd(mem, entryOffset + shareOffsetInEntry, 1);
        int sequence = (int) INT.getVolatile(mem, sequenceOffset);
        clearWakePending(); // after the sequence is read, before the caller's re-check: see the notes
        return sequence;
    }

    /** Sleeps while the sequence is still {@code sequence}, at most {@code nanos}. */
    void await(int sequence, long nanos) {
        Libc.futexWait(futexWord, sequence, nanos);
    }

    /** Undoes {@link #prepare}; always called, however the wait ended, and followed by a re-check. */
    void awake(long entryOffset) {
        INT.getAndAdd(mem, entryOffset + shareOffsetInEntry, -1);
        INT.getAndAdd(mem, sleepingOffset, -1);
        clearWakePending();
    }

    private void clearWakePending() {
        if ((int) INT.getVolatile(mem, wakePendingOffset) != 0) {
            INT.setVolatile(mem, wakePendingOffset, 0);
        }
    }

    boolean anyoneAsleep() {
        return (int) INT.getVolatile(mem, sleepingOffset) > 0;
    }

    /**
     * Wakes one sleeper, if any, unless a spinner will see the change; call after the state
     * change it announces.
     */
    void signal() {
        if (wakeNeeded() && INT.compareAndSet(mem, wakePendingOffset, 0, 1)) {
            wakeOne();
        }
    }

    /** Whether a change made now must wake a sleeper: someone sleeps and nobody spins. */
    boolean wakeNeeded() {
        return anyoneAsleep() && (int) INT.getVolatile(mem, spinningOffset) <= 0;
    }

    /**
     * Wakes one sleeper, if any, spinners or not: for a change spinners do not look for (a
     * message given back, which only a sweep finds).
     */
    void signalSleeper() {
        if (anyoneAsleep()) {
            wakeOne();
        }
    }

    private void wakeOne() {
        INT.getAndAdd(mem, sequenceOffset, 1);
        Libc.futexWake(futexWord, 1);
    }

    /** Wakes every sleeper in every process, so each re-checks (closing, recovery). */
    void signalAll() {
        INT.getAndAdd(mem, sequenceOffset, 1);
        Libc.futexWake(futexWord, Integer.MAX_VALUE);
    }

    /** Removes a dead participant's shares of the sleeping and spinning counts; exact even if called twice. */
    void forget(long entryOffset) {
        int share = (int) INT.getAndSet(mem, entryOffset + shareOffsetInEntry, 0);
        if (share != 0) {
            INT.getAndAdd(mem, sleepingOffset, -share);
        }
        int spinning = (int) INT.getAndSet(mem, entryOffset + spinShareOffsetInEntry, 0);
        if (spinning != 0) {
            INT.getAndAdd(mem, spinningOffset, -spinning);
        }
    }
}
