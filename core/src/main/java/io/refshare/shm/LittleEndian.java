package io.refshare.shm;

import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * The byte order of every shared file and of the descriptor: little-endian, as
 * {@code docs/protocol.md} (section 1) fixes it, whatever the machine's own order. Every
 * layout reads and writes its words through these, so no file is left in native order.
 */
public final class LittleEndian {
    /** A 32-bit word, aligned. */
    public static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** A 64-bit word, aligned. */
    public static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** Atomic and ordered access to an aligned 64-bit word ({@code getAcquire}, {@code compareAndSet}, ...). */
    public static final VarHandle ATOMIC_LONG = LONG.varHandle();
    /** Atomic and ordered access to an aligned 32-bit word. */
    public static final VarHandle ATOMIC_INT = INT.varHandle();

    private LittleEndian() {
    }
}
