package io.refshare.memory;

import java.lang.foreign.MemorySegment;

/**
 * A block handed out by a {@link CachingAllocator}: {@link #length()} bytes at
 * {@link #offset()} inside {@link #segment()}. The triple (segment name, offset, length) is
 * what another process needs to reach the same bytes.
 *
 * <p>A block is valid until it is {@linkplain CachingAllocator#free freed} or its allocator
 * is {@linkplain CachingAllocator#close closed}; {@link #memory()} refuses it afterwards.
 * A {@link MemorySegment} obtained earlier is not revoked on free (the bytes may already
 * belong to another block), and throws {@link IllegalStateException} on access once the
 * allocator has closed the segment.
 */
public final class AllocatedBlock {
    final CachingAllocator owner;
    /** The buddy segment this block was carved from; null for a large block, which owns its segment. */
    final BuddySegment small;
    /** The buddy order of a small block; unused for a large one. */
    final int order;
    private final Segment segment;
    private final long offset;
    private final long length;
    /** Written under the owner's lock; volatile so {@link #memory()} can check it without the lock. */
    volatile boolean freed;

    AllocatedBlock(CachingAllocator owner, Segment segment, BuddySegment small, int order, long offset, long length) {
        this.owner = owner;
        this.segment = segment;
        this.small = small;
        this.order = order;
        this.offset = offset;
        this.length = length;
    }

    public Segment segment() {
        return segment;
    }

    /** Offset of the block in its segment: a multiple of {@link CachingAllocator#BLOCK_ALIGNMENT}. */
    public long offset() {
        return offset;
    }

    /** The length that was requested (the block may occupy more: see {@link CachingAllocator#sizeClassOf}). */
    public long length() {
        return length;
    }

    /**
     * The block's bytes in this process: exactly {@link #length()} bytes of host memory.
     *
     * @throws IllegalStateException when the block was freed or its allocator closed
     * @throws UnsupportedOperationException when the block is in device memory
     */
    public MemorySegment memory() {
        if (freed) {
            throw new IllegalStateException("block " + this + " was freed");
        }
        if (owner.isClosed()) {
            throw new IllegalStateException("block " + this + " is invalid: its allocator was closed");
        }
        return segment.memory().asSlice(offset, length);
    }

    @Override
    public String toString() {
        return segment.name() + "+" + offset + "[" + length + "]";
    }
}
