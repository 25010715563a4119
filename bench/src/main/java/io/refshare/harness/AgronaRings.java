package io.refshare.harness;

import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Two Agrona one-to-one ring buffers in one file of the shared-memory directory, mapped by both
 * JVMs: {@link #ping} from the producer to the peer, {@link #pong} back. The "physical limit"
 * rows of the bench: a bounded ring between two processes that copies each message in and reads
 * it in place, busy-spinning on both sides, with no references to count. Agrona reaches memory
 * through {@code jdk.internal.misc.Unsafe}, so both JVMs run with {@link #JVM_OPTIONS} (the bench's, never
 * the library's).
 */
final class AgronaRings implements AutoCloseable {
    /** What Agrona 2 needs of a JVM: its memory access goes through jdk.internal.misc.Unsafe. */
    static final List<String> JVM_OPTIONS = List.of("--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED");
    /** Bytes of each ring's data part: room for several 1 MiB messages with their headers. */
    static final int CAPACITY = 8 << 20;
    static final int MESSAGE_TYPE = 1;

    private final Arena arena;
    final OneToOneRingBuffer ping;
    final OneToOneRingBuffer pong;

    private AgronaRings(Arena arena, MemorySegment mapped) {
        this.arena = arena;
        long ring = CAPACITY + RingBufferDescriptor.TRAILER_LENGTH;
        this.ping = new OneToOneRingBuffer(new UnsafeBuffer(mapped.address(), (int) ring));
        this.pong = new OneToOneRingBuffer(new UnsafeBuffer(mapped.address() + ring, (int) ring));
    }

    /** Maps {@code file}, creating it (zeroed: empty rings) when {@code create}. */
    static AgronaRings map(Path file, boolean create) throws IOException {
        long length = 2L * (CAPACITY + RingBufferDescriptor.TRAILER_LENGTH);
        Arena arena = Arena.ofShared();
        try (FileChannel ch = create
                ? FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE)
                : FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            if (create) {
                ch.truncate(length);
                ch.write(java.nio.ByteBuffer.allocate(1), length - 1);
            }
            return new AgronaRings(arena, ch.map(FileChannel.MapMode.READ_WRITE, 0, length, arena));
        } catch (IOException | RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** The bytes of a message the ring handed to a reader, as a segment (for {@link Payload#read}). */
    static MemorySegment view(org.agrona.DirectBuffer buffer, int index, int length) {
        return MemorySegment.ofAddress(buffer.addressOffset() + index).reinterpret(length);
    }

    @Override
    public void close() {
        arena.close();
    }
}
