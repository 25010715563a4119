package io.refshare.memory;

/**
 * Where segments come from: the only thing that differs between host shared memory and
 * device memory. The {@link CachingAllocator} sits on top and keeps both calls off its
 * hot path, because both are slow (a file creation plus page reservation on the host, a
 * driver allocation plus handle export on a GPU).
 *
 * <p>A CUDA backend would implement {@link #create} with {@code cuMemAlloc} followed by
 * {@code cuIpcGetMemHandle}, returning a {@link Segment} whose name encodes the export
 * handle (that handle, not a pointer, is what travels to consumers, who map it with
 * {@code cuIpcOpenMemHandle}); its {@link Segment#memory()} would throw
 * {@link UnsupportedOperationException} and the device pointer would be exposed by the
 * CUDA segment type. {@link #free} would be {@code cuMemFree}.
 *
 * <p>Implementations must be thread-safe; the allocator never calls them while holding
 * its own lock.
 */
public interface SegmentBackend {

    /**
     * Allocates a new segment of at least {@code bytes} bytes (the allocator asks only for
     * multiples of 2 MiB), ready to be written.
     *
     * @throws io.refshare.exceptions.OutOfSharedMemoryException when the memory cannot be had (a full
     *         {@code /dev/shm}, device memory exhausted); nothing is left behind
     * @throws IllegalArgumentException when {@code bytes} is not positive
     */
    Segment create(long bytes);

    /**
     * Releases a segment this backend created: its memory, its mapping in this process and
     * its name (no consumer can open it afterwards; those that already did keep their
     * mapping).
     *
     * @throws IllegalArgumentException when the segment was not created by this backend
     * @throws IllegalStateException when it was freed already
     */
    void free(Segment segment);
}
