package io.refshare.memory;

/**
 * A binary buddy allocator over one 4 MiB segment, for blocks of 512 B to 1 MiB.
 *
 * <p>A chunk of order {@code k} is {@code 512 << k} bytes and starts at a multiple of its
 * own size, so every block is aligned to its size class (at least 512 bytes). Free chunks
 * are kept as one bitmap per order, indexed by {@code offset >> (9 + k)}; a chunk's buddy
 * is at {@code offset ^ size}. Freeing merges with free buddies upwards, so a segment whose
 * blocks are all freed is again a single free chunk of the top order, and can be released.
 *
 * <p>Not thread-safe: guarded by the owning allocator's lock.
 */
final class BuddySegment {
    static final int MIN_SHIFT = 9;
    static final int SEGMENT_SHIFT = 22;
    static final long SEGMENT_BYTES = 1L << SEGMENT_SHIFT;
    private static final int TOP_ORDER = SEGMENT_SHIFT - MIN_SHIFT;

    private final Segment segment;
    /**
     * One bitmap per order, a bit per chunk: plain words rather than {@link java.util.BitSet},
     * whose {@code clear} rescans for its highest word in use whenever it clears a bit there
     * (a quarter of the collector's time freeing a stream of 1 KiB blocks).
     */
    private final long[][] free = new long[TOP_ORDER + 1][];
    /** Per order, a word index below which its bitmap has no bit set: where a search starts. */
    private final int[] firstWord = new int[TOP_ORDER + 1];
    private final int[] freeCount = new int[TOP_ORDER + 1];
    /**
     * Bit {@code k} set while a chunk of order {@code k} is free: the allocator asks every
     * segment for its best fit on each allocation, and with a pool grown to dozens of
     * segments (1 MiB blocks waiting for eight consumers) walking each one's counts was a
     * third of the producer's time.
     */
    private int freeOrders;
    private long usedBytes;

    BuddySegment(Segment segment) {
        if (segment.size() < SEGMENT_BYTES) {
            throw new IllegalArgumentException("a small-block segment needs " + SEGMENT_BYTES + " bytes, "
                    + segment.name() + " has " + segment.size());
        }
        this.segment = segment;
        for (int order = 0; order <= TOP_ORDER; order++) {
            free[order] = new long[Math.max(1, (1 << (TOP_ORDER - order)) / Long.SIZE)];
        }
        addFree(TOP_ORDER, 0);
    }

    /** The order of a chunk of {@code blockBytes} (a power of two between 512 B and the segment size). */
    static int orderOf(long blockBytes) {
        return Long.numberOfTrailingZeros(blockBytes) - MIN_SHIFT;
    }

    Segment segment() {
        return segment;
    }

    /** The smallest order at or above {@code order} that has a free chunk, or -1: lets the caller pick the best fit across segments. */
    int smallestFreeOrder(int order) {
        int above = freeOrders >>> order;
        return above == 0 ? -1 : order + Integer.numberOfTrailingZeros(above);
    }

    /** Takes a chunk of {@code order}, splitting a larger one if needed; returns its offset, or -1 when none fits. */
    long allocate(int order) {
        int o = smallestFreeOrder(order);
        if (o < 0) {
            return -1;
        }
        int index = firstFree(o);
        removeFree(o, index);
        long offset = (long) index << (MIN_SHIFT + o);
        while (o > order) {
            // keep the lower half, the upper half becomes a free chunk one order down
            o--;
            long upper = offset + (1L << (MIN_SHIFT + o));
            addFree(o, (int) (upper >>> (MIN_SHIFT + o)));
        }
        usedBytes += 1L << (MIN_SHIFT + order);
        return offset;
    }

    /** Returns the chunk at {@code offset} of {@code order}, merging it with free buddies. */
    void release(long offset, int order) {
        usedBytes -= 1L << (MIN_SHIFT + order);
        int o = order;
        while (o < TOP_ORDER) {
            long size = 1L << (MIN_SHIFT + o);
            int buddy = (int) ((offset ^ size) >>> (MIN_SHIFT + o));
            if (!isFree(o, buddy)) {
                break;
            }
            removeFree(o, buddy);
            offset &= ~size;
            o++;
        }
        int index = (int) (offset >>> (MIN_SHIFT + o));
        if (isFree(o, index)) {
            throw new IllegalStateException("buddy bookkeeping corrupted: chunk at " + offset + " of order " + o
                    + " in " + segment.name() + " is already free");
        }
        addFree(o, index);
    }

    private boolean isFree(int order, int index) {
        return (free[order][index >>> 6] & 1L << index) != 0;
    }

    /** The lowest free chunk of {@code order}, which has one. */
    private int firstFree(int order) {
        long[] words = free[order];
        int w = firstWord[order];
        while (words[w] == 0) {
            w++;
        }
        firstWord[order] = w;
        return w << 6 | Long.numberOfTrailingZeros(words[w]);
    }

    private void addFree(int order, int index) {
        free[order][index >>> 6] |= 1L << index;
        firstWord[order] = Math.min(firstWord[order], index >>> 6);
        if (freeCount[order]++ == 0) {
            freeOrders |= 1 << order;
        }
    }

    private void removeFree(int order, int index) {
        free[order][index >>> 6] &= ~(1L << index);
        if (--freeCount[order] == 0) {
            freeOrders &= ~(1 << order);
        }
    }

    /** True when no block is allocated from this segment, so it can be given back. */
    boolean isUnused() {
        return usedBytes == 0;
    }

    int freeChunks() {
        int n = 0;
        for (int c : freeCount) {
            n += c;
        }
        return n;
    }
}
