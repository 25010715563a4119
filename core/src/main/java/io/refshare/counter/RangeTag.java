package io.refshare.counter;

/**
 * The range tag that binds a token to the block it was handed out for: CRC-32 (IEEE, as
 * {@code java.util.zip.CRC32} and Python's {@code zlib.crc32} compute it) of
 * <pre>
 *   block offset in its segment (8 bytes, little-endian)
 *   || block length (8 bytes, little-endian)
 *   || segment name (ASCII)
 * </pre>
 * with offset, length and name as the descriptor carries them. The owner stores it in the
 * upper half of the slot word when it hands the token out, and a claim succeeds only with
 * the same tag, so a genuine slot number presented with another range of the same (or
 * another) segment takes nothing.
 *
 * <p>A CRC is not a secret: it stops a token being used for a range it was not handed out
 * for by mistake or by a careless peer, not by a process that can write the counter file
 * (which anyone of this uid can).
 */
public final class RangeTag {
    /** CRC-32 (IEEE, reflected polynomial 0xEDB88320) of every byte value: a tag costs no allocation on send or take. */
    private static final int[] TABLE = new int[256];

    static {
        for (int n = 0; n < 256; n++) {
            int c = n;
            for (int k = 0; k < 8; k++) {
                c = (c & 1) != 0 ? 0xEDB88320 ^ (c >>> 1) : c >>> 1;
            }
            TABLE[n] = c;
        }
    }

    private RangeTag() {
    }

    /** The tag of the block at {@code offset} of {@code length} bytes in segment {@code segmentName}. */
    public static int of(long offset, long length, String segmentName) {
        int crc = ~0;
        crc = update(crc, offset);
        crc = update(crc, length);
        for (int i = 0; i < segmentName.length(); i++) {
            char c = segmentName.charAt(i);
            crc = update(crc, c < 0x80 ? c : '?'); // as US-ASCII encoding does; names are checked to be ASCII
        }
        return ~crc;
    }

    private static int update(int crc, long littleEndian) {
        for (int i = 0; i < 8; i++) {
            crc = update(crc, (int) (littleEndian >>> (8 * i)) & 0xFF);
        }
        return crc;
    }

    private static int update(int crc, int b) {
        return TABLE[(crc ^ b) & 0xFF] ^ (crc >>> 8);
    }
}
