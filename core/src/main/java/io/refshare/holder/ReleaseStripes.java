package io.refshare.holder;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Where the releases of an {@link AtomicHolder} version are counted while the holder still
 * points at it: one counter per stripe, each on cache lines of its own, a releasing thread
 * picking its stripe from its thread id. Readers on different threads then release
 * without writing a common cache line, so an acquire + release pays for one contended line
 * (the holder word) instead of two.
 *
 * <p>A stripe only goes down while it is <i>open</i>: its value is minus the releases it
 * counted. While the version is pinned nobody needs the total (its own count cannot reach
 * zero), so nothing sums the stripes on the way. When the holder is re-pointed away from
 * the version, {@link #close()} swaps each stripe to {@link #CLOSED} and returns what they
 * held; a release that lands on a closed stripe learns so from the value its add returns
 * ({@code <= CLOSED}) and counts itself on the version's own count instead. Each release is
 * thus counted exactly once: in a stripe before the swap closing it (and so in the sum
 * {@code close} returns), or on the version's count after it.
 *
 * <p>The same idea as the Linux kernel's per-CPU reference counts, which count per CPU
 * while an object is live and switch to one shared count when it is being torn down; here
 * the switch is per stripe and needs no grace period, because the returned value tells a
 * late release which side of the switch it landed on.
 */
public final class ReleaseStripes {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    /** 128 bytes between stripes: two cache lines, as adjacent-line prefetch pairs them. */
    private static final int SPACING = 16;
    /** A closed stripe's value; open stripes stay above it (that takes 2<sup>62</sup> releases). */
    static final long CLOSED = -(1L << 62);
    /** Enough stripes that threads on different CPUs seldom share one; a power of two. */
    public static final int STRIPES = Math.min(32, Integer.highestOneBit(4 * Runtime.getRuntime().availableProcessors() - 1) << 1);
    private static final int SHIFT = 64 - Integer.numberOfTrailingZeros(STRIPES);

    private final long[] cells = new long[(STRIPES + 1) * SPACING];

    /**
     * Counts one release on the calling thread's stripe. Returns false when that stripe is
     * already closed: the caller must count the release on the version's own count.
     */
    public boolean release() {
        return (long) LONGS.getAndAdd(cells, index(Thread.currentThread().threadId()), -1L) > CLOSED;
    }

    /** Closes every stripe and returns the releases counted in them, as a negative number. Once. */
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
