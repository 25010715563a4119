package io.refshare.stats;

/**
 * What one {@code Refshare} instance's CUDA side holds and has done, a moment's snapshot.
 *
 * @param device          the device, e.g. {@code cuda:0 (NVIDIA H100 80GB HBM3)}
 * @param allocator       the pool of device memory
 * @param liveEvents      interprocess events alive now (one per shared storage until it is freed)
 * @param eventsCreated   interprocess events created so far
 * @param eventsDestroyed interprocess events destroyed so far
 * @param eventSends      sends ordered by an event
 * @param syncSends       sends that synchronized the stream instead (over the event cap)
 * @param eventWaits      waits on a producer's event made for received blocks
 * @param openSegments    other processes' device segments open now
 * @param ipcOpens        CUDA IPC opens so far
 * @param ipcCloses       CUDA IPC closes so far
 */
public record CudaStats(String device, AllocatorStats allocator, int liveEvents, long eventsCreated,
        long eventsDestroyed, long eventSends, long syncSends, long eventWaits, int openSegments, long ipcOpens,
        long ipcCloses) {
}
