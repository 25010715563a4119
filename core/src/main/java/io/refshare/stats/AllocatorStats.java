package io.refshare.stats;

import io.refshare.memory.CachingAllocator;
/**
 * A consistent snapshot of a {@link CachingAllocator}, taken under its lock.
 *
 * @param segments         segments held (small, large in use, large cached)
 * @param segmentBytes     bytes of all held segments: what counts against the cap
 * @param blocksInUse      blocks allocated and not yet freed
 * @param bytesInUse       bytes requested by those blocks (before size-class rounding)
 * @param freeBlocks       cached free blocks: free buddy chunks in small segments plus cached large segments
 * @param cap              the most segment bytes the allocator may hold ({@link Long#MAX_VALUE}: unlimited)
 * @param allocations      successful allocations since creation
 * @param reuses           allocations served from segments already held (no new segment, no new file)
 * @param segmentCreations segments created through the backend
 * @param segmentReleases  segments given back to the backend (cache trimming, cap pressure; not close)
 * @param missHandlerCalls times the miss handler ran
 */
public record AllocatorStats(
        int segments,
        long segmentBytes,
        long blocksInUse,
        long bytesInUse,
        long freeBlocks,
        long cap,
        long allocations,
        long reuses,
        long segmentCreations,
        long segmentReleases,
        long missHandlerCalls) {
}
