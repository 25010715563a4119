package io.refshare.channel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * How a consumer reads a message out of the cell it claimed, in place: the counterpart of
 * {@link Outgoing}. A descriptor is decoded straight from the cell this way, with no array in
 * between.
 *
 * <p>The bytes are shared memory that any process of this uid can write while they are read:
 * an implementation reads each byte it relies on once (or copies first) and checks what it
 * read, as the descriptor codec does.
 *
 * @param <T> what the message becomes
 */
@FunctionalInterface
public interface Incoming<T> {
    /** The bytes of the message, copied into an array. */
    Incoming<byte[]> COPY = (cell, offset, length) -> cell.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);

    /**
     * Reads the message of {@code length} bytes at {@code offset} of {@code cell}; the cell is
     * this consumer's only during the call.
     */
    T readFrom(MemorySegment cell, long offset, int length);
}
