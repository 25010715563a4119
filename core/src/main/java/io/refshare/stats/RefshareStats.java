package io.refshare.stats;

/**
 * What one {@code Refshare} instance holds, a moment's snapshot (figures moved by concurrent
 * operations may be off by those operations).
 *
 * @param allocator          this process's host shared-memory pool
 * @param limboBlocks        blocks this process freed that other processes still use
 * @param limboBytes         their bytes
 * @param ownCounterFiles    counter files this process created and still needs
 * @param mappedSegments     other processes' memory segments this process has mapped to receive
 * @param mappedCounterFiles other processes' counter files this process has mapped to receive
 * @param shared             tensors shared since the instance opened
 * @param received           tensors received since the instance opened
 * @param collected          blocks freed from the limbo since the instance opened
 * @param reclaimed          references of dead processes released since the instance opened
 */
public record RefshareStats(AllocatorStats allocator, int limboBlocks, long limboBytes, int ownCounterFiles,
        int mappedSegments, int mappedCounterFiles, long shared, long received, long collected,
        long reclaimed) {
}
