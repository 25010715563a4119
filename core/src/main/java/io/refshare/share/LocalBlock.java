package io.refshare.share;

import io.refshare.memory.AllocatedBlock;
import io.refshare.memory.CachingAllocator;
import io.refshare.wire.Backend;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Storage this process allocated from one of its caching allocators: the host one, or the
 * device one of its {@link DeviceSharing} ({@code device} is null for host memory).
 */
public final class LocalBlock extends Storage {
    private final CachingAllocator allocator;
    private final AllocatedBlock block;
    private final DeviceSharing device;

    LocalBlock(Sharing sharing, CachingAllocator allocator, AllocatedBlock block, DeviceSharing device) {
        super(sharing);
        this.allocator = allocator;
        this.block = block;
        this.device = device;
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
    public Backend backend() {
        return device == null ? Backend.HOST : Backend.CUDA;
    }

    @Override
    long address() {
        return device == null ? super.address() : device.address(block.segment()) + block.offset();
    }

    @Override
    byte[] memoryHandle() {
        return device == null ? super.memoryHandle() : device.memoryHandle(block.segment());
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

    /**
     * For host memory, adds this block to {@code hostBlocks} instead of freeing it, for the
     * caller to free together with others ({@link CachingAllocator#freeAll} of the process's host
     * allocator, the only one host blocks come from); false (nothing done) for device memory.
     */
    boolean disposeInto(List<AllocatedBlock> hostBlocks) {
        if (device != null) {
            return false;
        }
        hostBlocks.add(block);
        return true;
    }

    @Override
    void dispose() {
        if (device != null) {
            device.disposed(this);
        }
        allocator.free(block);
    }

    @Override
    public String toString() {
        return (device == null ? "" : "device ") + "block of " + block.length() + " bytes at " + block.offset() + " in "
                + block.segment().name();
    }
}
