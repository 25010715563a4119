package io.refshare.share;

import io.refshare.wire.Backend;

import java.lang.foreign.MemorySegment;

/**
 * A segment another process shared with this one, as this process reaches it: a mapped
 * host file ({@link ReceiveCache}) or opened device memory ({@link DeviceSharing#open}).
 * One is shared by every block received from the same segment.
 */
public interface ReceivedSegment {

    /** The segment's name, as descriptors carry it. */
    String name();

    /** The segment's size in bytes, as descriptors carry it. */
    long size();

    Backend backend();

    /**
     * The segment's bytes, for host memory.
     *
     * @throws UnsupportedOperationException for device memory
     */
    MemorySegment hostMemory();

    /**
     * {@link #hostMemory()}, read-only: what received blocks slice their bytes from (one
     * object per block, not two).
     *
     * @throws UnsupportedOperationException for device memory
     */
    default MemorySegment readOnlyHostMemory() {
        return hostMemory().asReadOnly();
    }

    /**
     * The segment's start address in this process, for device memory.
     *
     * @throws UnsupportedOperationException for host memory
     */
    long deviceAddress();

    /** The handle that opens the segment in another process: empty for host memory. */
    byte[] memoryHandle();
}
