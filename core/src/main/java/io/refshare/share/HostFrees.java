package io.refshare.share;

import io.refshare.memory.AllocatedBlock;
import io.refshare.memory.CachingAllocator;

import java.util.ArrayList;
import java.util.List;

/**
 * The host blocks one collection frees, given back to their allocator together
 * ({@link CachingAllocator#freeAll}): one taking of its lock per collection instead of one per
 * block, so that a thread allocating meanwhile waits at most once. Every host block of a
 * process comes from one allocator; a block of another would be refused and freed alone.
 */
final class HostFrees {
    private final CachingAllocator allocator;
    private final List<AllocatedBlock> blocks = new ArrayList<>();

    HostFrees(CachingAllocator allocator) {
        this.allocator = allocator;
    }

    /** Takes {@code block} of {@code owner} to free later; false when {@code owner} is not this batch's allocator. */
    boolean add(CachingAllocator owner, AllocatedBlock block) {
        if (owner != allocator) {
            return false;
        }
        blocks.add(block);
        return true;
    }

    /** Frees every block taken, as {@link CachingAllocator#freeAll} does. */
    void free() {
        if (!blocks.isEmpty()) {
            allocator.freeAll(blocks);
        }
    }
}
