package io.refshare.holder;

/**
 * The one 64-bit word of a holder, described once: which version the holder points at and
 * how many references have been acquired through it since that version was installed
 * (or since the count was last drained). {@link AtomicHolder} keeps it in a field,
 * {@link SharedHolder} in its file ({@link SharedHolderLayout}); both change it only with
 * atomic read-modify-writes, so reading the version and counting an acquisition are one
 * indivisible step.
 *
 * <pre>
 *   63              48 47                           24 23                            0
 *   +-----------------+-------------------------------+-------------------------------+
 *   |    slot + 1     |          generation           |        external count         |
 *   +-----------------+-------------------------------+-------------------------------+
 *   slot + 1:   0 = the holder is empty; otherwise the version table entry (0..65534) + 1
 *   generation: how many times that table entry had been reused when the version was
 *               installed (mod 2^24); (slot, generation) names one version for as long
 *               as any compare-and-set could mistake it for another (no ABA)
 *   external count: acquisitions through the holder not yet moved to the version's own
 *               count; an acquire is a getAndAdd(1) on the whole word
 * </pre>
 *
 * An all-zero word is an empty holder, so a freshly created (zero-filled) file needs no
 * initialisation. The count field is drained well before it can carry into the
 * generation: see {@link #DEFAULT_DRAIN_AT}.
 */
public final class HolderWord {
    /** A version's own count while the holder points at it (see the implementation notes). */
    public static final long PINNED = 1L << 62;

    static final int COUNT_BITS = 24;
    static final int GENERATION_BITS = 24;
    static final int SLOT_SHIFT = COUNT_BITS + GENERATION_BITS;
    static final long COUNT_MASK = (1L << COUNT_BITS) - 1;
    static final int GENERATION_MASK = (1 << GENERATION_BITS) - 1;
    /** Largest number of version slots a holder can have (slot + 1 must fit 16 bits). */
    public static final int MAX_SLOTS = (1 << 16) - 1;
    /**
     * An acquirer that makes the external count reach this moves it to the version's own
     * count. Half the field's range stays free for acquirers that incremented before the
     * drain landed: the count can only overflow if 2^23 threads sit between their
     * getAndAdd and their drain at once.
     */
    public static final int DEFAULT_DRAIN_AT = 1 << (COUNT_BITS - 1);

    public static final long EMPTY = 0;

    private HolderWord() {
    }

    public static long of(int slot, int generation) {
        if (slot < 0 || slot >= MAX_SLOTS) {
            throw new IllegalArgumentException("slot out of range: " + slot);
        }
        return ((long) (slot + 1) << SLOT_SHIFT) | ((long) (generation & GENERATION_MASK) << COUNT_BITS);
    }

    /** The slot the word names, or -1 for an empty holder. */
    public static int slot(long word) {
        return (int) (word >>> SLOT_SHIFT) - 1;
    }

    public static int generation(long word) {
        return (int) (word >>> COUNT_BITS) & GENERATION_MASK;
    }

    public static long count(long word) {
        return word & COUNT_MASK;
    }

    /** The word without its count: equal for two words exactly when they name the same version. */
    public static long version(long word) {
        return word & ~COUNT_MASK;
    }

    public static int nextGeneration(int generation) {
        return (generation + 1) & GENERATION_MASK;
    }

    public static String toString(long word) {
        int slot = slot(word);
        return slot < 0 ? "empty (count " + count(word) + ")"
                : "slot " + slot + " generation " + generation(word) + " count " + count(word);
    }
}
