package io.refshare.harness;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * What a message holds and how a consumer reads it: the same for every system measured,
 * so the numbers compare. A consumer reads the first and the last element and 64 bytes
 * from the middle, which touches up to three pages of a large tensor without streaming
 * through it (a zero-copy receiver pays only for what it reads; a copying one has paid
 * for everything before it can read anything).
 */
final class Payload {
    static final int PROBE_BYTES = 64;
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final long BROADCAST = 0x0101010101010101L;

    private Payload() {
    }

    /**
     * The byte every position of message {@code index} holds. Fresh tensors get a tag that
     * changes from message to message, so a consumer that saw a stale or reused block
     * before the producer's fill would notice.
     */
    static byte tag(Mode mode, long index) {
        return mode == Mode.REUSE ? (byte) 0x5A : (byte) (1 + Math.floorMod(index, 251));
    }

    static void fill(MemorySegment data, byte tag) {
        data.fill(tag);
    }

    /**
     * Writes {@code tag} only where {@link #read} looks: the first and last byte and the 64 bytes
     * in the middle (for measurements of something other than filling, such as reclamation).
     */
    static void mark(MemorySegment data, byte tag) {
        long n = data.byteSize();
        long from = Math.max(0, Math.min(n - PROBE_BYTES, n / 2)) & ~7L;
        data.asSlice(from, Math.min(n, from + PROBE_BYTES) - from).fill(tag);
        data.set(ValueLayout.JAVA_BYTE, 0, tag);
        data.set(ValueLayout.JAVA_BYTE, n - 1, tag);
    }

    /** Reads the first and last element and 64 bytes from the middle; true when all of them hold {@code tag}. */
    static boolean read(MemorySegment data, byte tag) {
        long n = data.byteSize();
        boolean ok = data.get(ValueLayout.JAVA_BYTE, 0) == tag && data.get(ValueLayout.JAVA_BYTE, n - 1) == tag;
        long expected = (tag & 0xFFL) * BROADCAST;
        long from = Math.max(0, Math.min(n - PROBE_BYTES, n / 2)) & ~7L;
        long to = Math.min(n, from + PROBE_BYTES);
        for (long off = from; off + Long.BYTES <= to; off += Long.BYTES) {
            ok &= data.get(WORD, off) == expected;
        }
        return ok;
    }
}
