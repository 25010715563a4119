package io.refshare.holder;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A 64-bit word alone on its cache lines, for the words that every reader thread
 * read-modify-writes (the holder word, a version's count): the middle element of a
 * {@code long[]} with 128 bytes of unused elements on either side, so that neither another
 * object nor a read-mostly field next to it is invalidated by each update (false sharing
 * doubled the contended cost of acquire + release in the benchmarks, and made it vary
 * with where the allocator happened to put the objects). An array, not padding fields,
 * because the JVM may reorder fields but not array elements.
 */
public final class PaddedLong {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final int AT = 16;

    private PaddedLong() {
    }

    /** A new padded word; publish it through a final field. */
    public static long[] of(long initial) {
        long[] cell = new long[2 * AT + 1];
        cell[AT] = initial;
        return cell;
    }

    public static long get(long[] cell) {
        return (long) LONGS.getVolatile(cell, AT);
    }

    public static long getAndAdd(long[] cell, long delta) {
        return (long) LONGS.getAndAdd(cell, AT, delta);
    }

    public static long getAndSet(long[] cell, long value) {
        return (long) LONGS.getAndSet(cell, AT, value);
    }

    public static boolean compareAndSet(long[] cell, long expected, long value) {
        return LONGS.compareAndSet(cell, AT, expected, value);
    }
}
