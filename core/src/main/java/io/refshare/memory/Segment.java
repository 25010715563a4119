package io.refshare.memory;

import java.lang.foreign.MemorySegment;

/**
 * One contiguous allocation made by a {@link SegmentBackend}: the unit that is exported to
 * other processes. Blocks handed out by the {@link CachingAllocator} are (segment, offset,
 * length) triples inside a segment, so a consumer opens each segment once and then reaches
 * any number of blocks in it.
 *
 * <p>A host segment is a file in the shared-memory directory; its {@link #name()} is the
 * file name a consumer passes to {@code ShmDirectory.open}. A CUDA segment would be device
 * memory: its name would be the encoded IPC export handle ({@code CUipcMemHandle}), the
 * thing that travels in a descriptor, and it would offer its device pointer through its own
 * type instead of {@link #memory()}.
 */
public interface Segment {

    /** What a consumer needs to open this segment: the shm file name, or a CUDA export handle. */
    String name();

    /** Size in bytes of {@link #memory()}, as created (at least what was asked for). */
    long size();

    /**
     * Where {@link #memory()} starts within what a consumer opens: a host segment file begins
     * with a header page ({@link HostBackend#HEADER_BYTES}), device memory has none. Offsets
     * that travel in descriptors are counted from the start of the file, so they include it.
     */
    long exportOffset();

    /** Size of what a consumer opens: {@code exportOffset() + size()}. */
    default long exportSize() {
        return exportOffset() + size();
    }

    /**
     * The segment's bytes, mapped into this process.
     *
     * @throws UnsupportedOperationException for memory the host cannot address (device memory)
     * @throws IllegalStateException when accessed after the segment was freed
     */
    MemorySegment memory();
}
