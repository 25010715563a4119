package io.refshare.channel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A message as a queue writes it into its cell: its length, and how to write its bytes there.
 * A descriptor is encoded straight into the cell this way, with no array in between (the
 * message path's largest allocation otherwise).
 */
public interface Outgoing {
    /** Bytes the message takes (at most the queue's maximum). */
    int byteSize();

    /** Writes exactly {@link #byteSize()} bytes at {@code offset} of {@code cell}. */
    void writeTo(MemorySegment cell, long offset);

    /** The bytes of an array, copied. */
    static Outgoing of(byte[] bytes) {
        return new Outgoing() {
            @Override
            public int byteSize() {
                return bytes.length;
            }

            @Override
            public void writeTo(MemorySegment cell, long offset) {
                MemorySegment.copy(bytes, 0, cell, ValueLayout.JAVA_BYTE, offset, bytes.length);
            }
        };
    }
}
