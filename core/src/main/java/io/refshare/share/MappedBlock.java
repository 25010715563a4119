package io.refshare.share;

import io.refshare.wire.Backend;

import java.lang.foreign.MemorySegment;

/**
 * A block of a segment this process reached through a descriptor, mapped (host) or opened
 * (device) once per process however many of its blocks are held: what a received block
 * and a viewed block have in common. They differ only in what keeps the memory alive (a
 * token, or a count kept elsewhere) and so in what disposing gives back.
 */
abstract sealed class MappedBlock extends Storage permits ReceivedBlock, ViewedBlock {
    final ReceivedSegment segment;
    private final long offset;
    private final long length;
    /** The host bytes, read-only (another process's memory); null for device memory. */
    private final MemorySegment bytes;

    MappedBlock(Sharing sharing, ReceivedSegment segment, long offset, long length) {
        super(sharing);
        this.segment = segment;
        this.offset = offset;
        this.length = length;
        this.bytes = segment.backend() == Backend.HOST ? segment.readOnlyHostMemory().asSlice(offset, length) : null;
    }

    /** Another block over the same bytes as {@code same}, sharing its segment and its slice of it. */
    MappedBlock(MappedBlock same) {
        super(same.sharing);
        this.segment = same.segment;
        this.offset = same.offset;
        this.length = same.length;
        this.bytes = same.bytes;
    }

    @Override
    final MemorySegment bytes() {
        if (bytes == null) {
            throw new UnsupportedOperationException(this + " is device memory: copy it to the host"
                    + " (CudaSharing.copyToHost) or use its deviceAddress()");
        }
        return bytes;
    }

    @Override
    final MemorySegment writableBytes() {
        bytes();
        return segment.hostMemory().asSlice(offset, length);
    }

    @Override
    public final long byteSize() {
        return length;
    }

    @Override
    public final Backend backend() {
        return segment.backend();
    }

    @Override
    final long address() {
        return segment.deviceAddress() + offset;
    }

    @Override
    final byte[] memoryHandle() {
        return segment.memoryHandle();
    }

    @Override
    final String segmentName() {
        return segment.name();
    }

    @Override
    final long segmentSize() {
        return segment.size();
    }

    @Override
    final long segmentOffset() {
        return offset;
    }

    /** "received" or "viewed": how the block was reached, for messages. */
    abstract String kind();

    @Override
    public final String toString() {
        return kind() + " " + (bytes == null ? "device " : "") + "block of " + length + " bytes at " + offset + " in "
                + segment.name();
    }
}
