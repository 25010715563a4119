package io.refshare.share;

import io.refshare.wire.Backend;

import java.lang.foreign.MemorySegment;

/**
 * A block of another process (or of this one) mapped under a count kept elsewhere: unlike a
 * {@link ReceivedBlock} it takes no token of its own. Holders use it
 * ({@code io.refshare.holder.SharedHolder}): one token keeps a published version alive for
 * every reader, and each reader's acquisition is counted in the holder's file. Disposing it
 * drops the segment reference (host: the mapping; device: the opened IPC segment, after this
 * process's stream is done with it) and then runs the action that gives the outside count
 * back.
 */
public final class ViewedBlock extends Storage {
    private final ReceivedSegment segment;
    private final long offset;
    private final long length;
    /** The host bytes; null for device memory. */
    private final MemorySegment bytes;
    private final Runnable onDispose;

    ViewedBlock(Sharing sharing, ReceivedSegment segment, long offset, long length, Runnable onDispose) {
        super(sharing);
        this.segment = segment;
        this.offset = offset;
        this.length = length;
        this.bytes = segment.backend() == Backend.HOST ? segment.hostMemory().asSlice(offset, length) : null;
        this.onDispose = onDispose;
    }

    @Override
    MemorySegment bytes() {
        if (bytes == null) {
            throw new UnsupportedOperationException(this + " is device memory: copy it to the host"
                    + " (CudaSharing.copyToHost) or use its deviceAddress()");
        }
        return bytes;
    }

    @Override
    public long byteSize() {
        return length;
    }

    @Override
    public Backend backend() {
        return segment.backend();
    }

    @Override
    long address() {
        return segment.deviceAddress() + offset;
    }

    @Override
    byte[] memoryHandle() {
        return segment.memoryHandle();
    }

    @Override
    String segmentName() {
        return segment.name();
    }

    @Override
    long segmentSize() {
        return segment.size();
    }

    @Override
    long segmentOffset() {
        return offset;
    }

    @Override
    void dispose() {
        try {
            sharing.releaseViewed(this, segment);
        } finally {
            onDispose.run(); // after our last access: the count it gives back may free the memory
        }
    }

    @Override
    public String toString() {
        return "viewed " + (bytes == null ? "device " : "") + "block of " + length + " bytes at " + offset + " in "
                + segment.name();
    }
}
