package io.refshare.stats;

/**
 * A consistent snapshot of one of this process's memory pools (its host shared memory, in
 * {@link RefshareStats#allocator()}, or its CUDA device memory), taken under the pool's
 * lock: the segments it holds (a shared-memory file each, or a device allocation), the
 * blocks allocated from them, and counts since the pool was created.
 *
 * @param segments         segments held (those of small blocks, large blocks in use, and large
 *                         ones cached for reuse)
 * @param segmentBytes     bytes of all held segments: what counts against the cap
 * @param blocksInUse      blocks allocated and not yet freed
 * @param bytesInUse       bytes requested by those blocks (before size-class rounding)
 * @param freeBlocks       cached free blocks: free buddy chunks in small segments plus cached large segments
 * @param cap              the most segment bytes the pool may hold ({@link Long#MAX_VALUE}: unlimited); for
 *                         host memory, {@link io.refshare.RefshareConfig#capacityBytes()}
 * @param allocations      successful allocations since creation
 * @param reuses           allocations served from segments already held (no new segment, no new file)
 * @param segmentCreations segments created
 * @param segmentReleases  segments given back to the system ({@link io.refshare.Refshare#trim()}, cap
 *                         pressure; not those freed at close)
 * @param missHandlerCalls times no cached block fitted and the pool first collected its limbo
 *                         (freeing blocks no consumer uses any more) before growing
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
