package io.refshare.holder;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A count spread over per-thread stripes, each on cache lines of its own, that is summed
 * once, when it is closed: threads counting on different stripes write no common cache
 * line. {@link AtomicHolder} counts a version's releases here while the holder points at
 * it; {@link StripedUses} counts the uses of a {@code SharedHolder} handle (each acquired
 * tensor until its release).
 *
 * <p>A stripe is <i>open</i> until {@link #close()} swaps it to {@link #CLOSED} and returns
 * what it held; while open, its value is the sum of what was added on it (it can be
 * negative: what one thread adds, another may take back on its own stripe). Nothing sums
 * the stripes before the close. An {@link #add} that lands on a closed stripe learns so from
 * the value its add returns (far below zero), and the caller counts it elsewhere. Each add
 * is thus counted exactly once: in a stripe before the swap closing it (and so in the sum
 * {@code close} returns), or by its caller after it.
 *
 * <p>The same idea as the Linux kernel's per-CPU reference counts, which count per CPU
 * while an object is live and switch to one shared count when it is being torn down; here
 * the switch is per stripe and needs no grace period, because the returned value tells a
 * late add which side of the switch it landed on.
 */
public final class ThreadStripes {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    /** 128 bytes between stripes: two cache lines, as adjacent-line prefetch pairs them. */
    private static final int SPACING = 16;
    /** A closed stripe's value. */
    static final long CLOSED = -(1L << 62);
    /**
     * Stripes below this are closed: open stripes stay above it, and late adds on a closed one
     * stay below it (either takes 2<sup>61</sup> adds of one to cross).
     */
    private static final long CLOSED_BELOW = CLOSED / 2;
    /** Enough stripes that threads on different CPUs seldom share one; a power of two. */
    public static final int STRIPES = Math.min(32, Integer.highestOneBit(4 * Runtime.getRuntime().availableProcessors() - 1) << 1);
    private static final int SHIFT = 64 - Integer.numberOfTrailingZeros(STRIPES);

    private final long[] cells = new long[(STRIPES + 1) * SPACING];

    /**
     * Adds {@code delta} on the calling thread's stripe. Returns false when that stripe is
     * already closed: the add is in no sum, and the caller must count it elsewhere.
     */
    public boolean add(long delta) {
        return (long) LONGS.getAndAdd(cells, index(Thread.currentThread().threadId()), delta) > CLOSED_BELOW;
    }

    /** Closes every stripe and returns the sum of what was added on them. Once. */
    public long close() {
        long sum = 0;
        for (int i = 1; i <= STRIPES; i++) {
            sum += (long) LONGS.getAndSet(cells, i * SPACING, CLOSED);
        }
        return sum;
    }

    /** Fibonacci hashing: consecutive thread ids, the common case, land on different stripes. */
    private static int index(long threadId) {
        return ((int) ((threadId * 0x9E3779B97F4A7C15L) >>> SHIFT) + 1) * SPACING;
    }
}
