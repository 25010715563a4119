package io.refshare.share;

import io.refshare.wire.Backend;

import java.lang.foreign.MemorySegment;

/**
 * A block another process shared with this one: a token this process holds, and a view
 * into the sender's segment, mapped (host) or opened (device) once per process however many
 * blocks of it arrive. Disposing it releases the token (the sender may then reuse the
 * memory) and drops the segment reference; the last block of a segment unmaps it.
 *
 * <p>If the sender has died, host memory stays valid (the mapping outlives the file's
 * name) and the release still succeeds quietly.
 */
public final class ReceivedBlock extends Storage {
    private final Token token;
    private final ReceivedSegment segment;
    private final long offset;
    private final long length;
    /** The host bytes; null for device memory. */
    private final MemorySegment bytes;

    ReceivedBlock(Sharing sharing, Token token, ReceivedSegment segment, long offset, long length) {
        super(sharing);
        this.token = token;
        this.segment = segment;
        this.offset = offset;
        this.length = length;
        this.bytes = segment.backend() == Backend.HOST ? segment.hostMemory().asSlice(offset, length) : null;
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
        sharing.releaseReceived(this, token, segment);
    }

    @Override
    public String toString() {
        return "received " + (bytes == null ? "device " : "") + "block of " + length + " bytes at " + offset + " in "
                + segment.name();
    }
}
