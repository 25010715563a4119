package io.refshare.share;

import io.refshare.memory.AllocatedBlock;

import java.lang.foreign.MemorySegment;

/** Storage this process allocated from its caching allocator. */
public final class LocalBlock extends Storage {
    private final AllocatedBlock block;

    LocalBlock(Sharing sharing, AllocatedBlock block) {
        super(sharing);
        this.block = block;
    }

    @Override
    MemorySegment bytes() {
        return block.memory();
    }

    @Override
    public long byteSize() {
        return block.length();
    }

    @Override
    String segmentName() {
        return block.segment().name();
    }

    @Override
    long segmentSize() {
        return block.segment().exportSize();
    }

    @Override
    long segmentOffset() {
        return block.segment().exportOffset() + block.offset();
    }

    @Override
    void dispose() {
        sharing.allocator().free(block);
    }

    @Override
    public String toString() {
        return "block of " + block.length() + " bytes at " + block.offset() + " in " + block.segment().name();
    }
}
