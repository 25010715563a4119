package io.refshare.cli;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The demo's payload: the message's sequence number in the first 8 bytes, then a pattern
 * derived from it in every other byte, so a consumer verifies every byte it receives.
 */
final class DemoPattern {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private DemoPattern() {
    }

    private static long word(long seq, long index) {
        long z = (seq + 1) * 0x9E3779B97F4A7C15L ^ index * 0xBF58476D1CE4E5B9L;
        return z ^ (z >>> 29);
    }

    static void fill(MemorySegment m, long seq) {
        long n = m.byteSize();
        m.set(LONG, 0, seq);
        long i = 8;
        for (; i + 8 <= n; i += 8) {
            m.set(LONG, i, word(seq, i));
        }
        for (; i < n; i++) {
            m.set(ValueLayout.JAVA_BYTE, i, (byte) word(seq, i));
        }
    }

    /** The sequence number, after checking every byte; -1 when any byte is wrong. */
    static long verify(MemorySegment m) {
        long n = m.byteSize();
        long seq = m.get(LONG, 0);
        long i = 8;
        for (; i + 8 <= n; i += 8) {
            if (m.get(LONG, i) != word(seq, i)) {
                return -1;
            }
        }
        for (; i < n; i++) {
            if (m.get(ValueLayout.JAVA_BYTE, i) != (byte) word(seq, i)) {
                return -1;
            }
        }
        return seq;
    }
}
