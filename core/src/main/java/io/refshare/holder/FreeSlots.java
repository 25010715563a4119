package io.refshare.holder;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The free entries of an {@link AtomicHolder}'s version table: one bit per entry, set when
 * the entry is free. Taking clears a bit by compare-and-set, giving sets it with an atomic
 * or; a bit has no history, so unlike a free-list stack there is no ABA to guard against.
 * Taking scans, which is fine on the publishing path (one scan of a few words per
 * {@code set}); acquiring and releasing never come here.
 */
public final class FreeSlots {
    private static final VarHandle BITS = MethodHandles.arrayElementVarHandle(long[].class);

    private final long[] bits;
    private final int capacity;

    public FreeSlots(int capacity) {
        this.capacity = capacity;
        this.bits = new long[(capacity + 63) >>> 6];
        for (int slot = 0; slot < capacity; slot++) {
            bits[slot >>> 6] |= 1L << (slot & 63);
        }
    }

    /** A free entry, now taken by the caller; -1 when every entry is in use. */
    public int take() {
        for (int i = 0; i < bits.length; i++) {
            long b;
            while ((b = (long) BITS.getVolatile(bits, i)) != 0) {
                long lowest = b & -b;
                if (BITS.compareAndSet(bits, i, b, b & ~lowest)) {
                    return (i << 6) + Long.numberOfTrailingZeros(lowest);
                }
            }
        }
        return -1;
    }

    public void give(int slot) {
        long bit = 1L << (slot & 63);
        long before = (long) BITS.getAndBitwiseOr(bits, slot >>> 6, bit);
        if ((before & bit) != 0) {
            throw new IllegalStateException("version slot " + slot + " freed twice");
        }
    }

    /** Entries in use now (a snapshot; for statistics and tests). */
    public int inUse() {
        int free = 0;
        for (int i = 0; i < bits.length; i++) {
            free += Long.bitCount((long) BITS.getVolatile(bits, i));
        }
        return capacity - free;
    }
}
