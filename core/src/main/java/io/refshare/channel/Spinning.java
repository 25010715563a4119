package io.refshare.channel;

/**
 * The first phase of every wait on a queue: spinning on reads of shared lines, then spinning
 * and yielding, before the waiter parks on the queue's futex (the second phase, in
 * {@link ShmQueue}). The measured default ({@link io.refshare.WaitStrategy#BACKOFF}) spins
 * for {@value #SPIN_NANOS} ns, yielding after {@value #SPIN_ONLY_NANOS} ns; a busy-spinning
 * handle spins without yielding, slice after slice, and never parks.
 *
 * <p>Why yield: the peer a waiter waits for may be runnable on this very CPU (two cores and
 * anything else running are enough). A spin that never yields then holds the CPU the peer
 * needs to publish, so the wait always ends by running out and sleeping, and every hand-off
 * costs the whole spin plus a futex wake-up: measured on two cores, p50 swung between 1 and
 * 37 µs with where the scheduler put the two processes, and yielding every 16 spins brought
 * the co-located case to about 4 µs. Why not yield at once: a yield is a system call, and
 * when the peer runs on another CPU the message usually comes within the first microsecond
 * or two; yielding from the first spin made that case about 3 µs instead of 1. A yield with
 * nothing else runnable returns at once, so a waiter alone on its CPU keeps spinning as before.
 */
final class Spinning {
    /** The CPUs this process may use. */
    static final int CPUS = Runtime.getRuntime().availableProcessors();
    /** How long a backing-off waiter polls the queue before it sleeps on the futex. */
    static final long SPIN_NANOS = 30_000;
    /**
     * How long it spins without yielding: long enough to catch a peer running on another CPU
     * (a one-way hand-off there takes about a microsecond), short enough that a peer waiting
     * for this CPU is not kept off it for long.
     */
    static final long SPIN_ONLY_NANOS = 2_000;
    /**
     * How many waiters of one direction of a queue (consumers waiting for a message, or
     * producers for room), in every process together, spin at a time; the others sleep at once.
     * Half the CPUs this process may use, at least one: enough spinners to catch every message
     * without a wake-up, leaving the rest of the CPUs to the peers that publish them.
     */
    static final int SPINNERS = Math.max(1, CPUS / 2);
    /** Spins between clock reads, and (after {@link #SPIN_ONLY_NANOS}) between yields. */
    private static final int SPINS_PER_CHECK = 16;

    /** What a waiter waits for; read often, so it must be cheap (reads of shared words). */
    interface Condition {
        boolean holds();
    }

    private Spinning() {
    }

    /**
     * Spins until {@code condition} holds (true) or {@code deadline} (a {@link System#nanoTime()}
     * value) passes (false), yielding every {@value #SPINS_PER_CHECK} spins once
     * {@link #SPIN_ONLY_NANOS} have passed since {@code start} when {@code yields}: a
     * busy-spinning handle passes false, its user gave it a CPU.
     */
    static boolean until(long start, long deadline, Condition condition, boolean yields) {
        long yieldFrom = start + SPIN_ONLY_NANOS;
        for (int i = 1; ; i++) {
            Thread.onSpinWait();
            if (condition.holds()) {
                return true;
            }
            if (i % SPINS_PER_CHECK == 0) {
                long now = System.nanoTime();
                if (now - deadline >= 0) {
                    return false;
                }
                if (yields && now - yieldFrom >= 0) {
                    Thread.yield();
                }
            }
        }
    }
}
