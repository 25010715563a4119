package io.refshare.counter;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;

/**
 * The range tag that binds a token to the block it was handed out for: CRC-32 (IEEE, as
 * {@link CRC32} and Python's {@code zlib.crc32} compute it) of
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
    private RangeTag() {
    }

    /** The tag of the block at {@code offset} of {@code length} bytes in segment {@code segmentName}. */
    public static int of(long offset, long length, String segmentName) {
        CRC32 crc = new CRC32();
        crc.update(ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(offset).putLong(length).array());
        crc.update(segmentName.getBytes(StandardCharsets.US_ASCII));
        return (int) crc.getValue();
    }
}
