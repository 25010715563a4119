package io.refshare.share;

/**
 * Whether the CPUs are oversubscribed, as one thread sees it from how late its timed rests
 * end: a thread that asks to sleep a few hundred microseconds and wakes more than
 * {@value #LATE_MICROS} µs after it asked was runnable with no CPU free to run it (the
 * kernel's timer slack is 50 µs). Measured on two CPUs with the collector's 250 µs rests:
 * one producer streaming to one consumer woke late in 2 % of its rests, the same producer
 * streaming to eight consumers in 13 %.
 *
 * <p>The answer is the late share of about the last few hundred rests (an exponentially weighted
 * average, in fixed point), compared with {@value #OVERSUBSCRIBED_PERCENT} %. It is a hint for
 * pacing only: a wrong answer costs speed, never correctness. Not thread-safe: one thread
 * records and asks.
 */
final class LateWakeups {
    static final long LATE_MICROS = 128;
    static final int OVERSUBSCRIBED_PERCENT = 6;
    /** The weight of a new rest is 1/2^{@value}. */
    private static final int WEIGHT_SHIFT = 8;
    private static final int ONE = 1 << 16;
    private static final int THRESHOLD = ONE * OVERSUBSCRIBED_PERCENT / 100;

    /** The late share of recent rests, in units of 1/{@link #ONE}. */
    private int lateShare;

    /** Records a rest of {@code askedNanos} that took {@code tookNanos}. */
    void rested(long askedNanos, long tookNanos) {
        int late = tookNanos - askedNanos > LATE_MICROS * 1_000 ? ONE : 0;
        lateShare += (late - lateShare) >> WEIGHT_SHIFT;
    }

    boolean oversubscribed() {
        return lateShare > THRESHOLD;
    }
}
