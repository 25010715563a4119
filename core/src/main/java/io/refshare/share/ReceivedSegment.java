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
     * The segment's start address in this process, for device memory.
     *
     * @throws UnsupportedOperationException for host memory
     */
    long deviceAddress();

    /** The handle that opens the segment in another process: empty for host memory. */
    byte[] memoryHandle();
}
