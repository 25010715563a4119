package io.refshare.testing;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** A deterministic byte pattern per seed, so a consumer can verify every byte it received. */
public final class Patterns {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private Patterns() {
    }

    private static long word(long seed, long index) {
        long z = seed * 0x9E3779B97F4A7C15L + index * 0xBF58476D1CE4E5B9L;
        z ^= z >>> 31;
        return z * 0x94D049BB133111EBL;
    }

    /** The pattern's byte at {@code offset}. */
    public static byte byteAt(long seed, long offset) {
        long aligned = offset & ~7L;
        return (byte) (word(seed, aligned) >>> (8 * (offset - aligned)));
    }

    public static void fill(MemorySegment m, long seed) {
        long n = m.byteSize();
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            m.set(LONG, i, word(seed, i));
        }
        for (; i < n; i++) {
            m.set(ValueLayout.JAVA_BYTE, i, byteAt(seed, i));
        }
    }

    /** The offset of the first byte that differs from the pattern, or -1. */
    public static long firstMismatch(MemorySegment m, long seed) {
        long n = m.byteSize();
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            if (m.get(LONG, i) != word(seed, i)) {
                return i;
            }
        }
        for (; i < n; i++) {
            if (m.get(ValueLayout.JAVA_BYTE, i) != byteAt(seed, i)) {
                return i;
            }
        }
        return -1;
    }
}
