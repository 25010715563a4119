package io.refshare.cuda.driver;

import io.refshare.memory.Segment;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A segment of CUDA device memory: one {@code cuMemAlloc} allocation, exported by its IPC
 * handle. Blocks are carved from it at offsets, and a descriptor carries (handle, offset),
 * so a consumer opens the allocation once for all its blocks. The host cannot address it:
 * {@link #memory()} refuses; the device address is {@link #address()}.
 */
public final class CudaSegment implements Segment {
    private final CudaBackend backend;
    private final String name;
    private final long address;
    private final long size;
    private final HandleKey handle;
    private final AtomicBoolean freed = new AtomicBoolean();

    CudaSegment(CudaBackend backend, String name, long address, long size, HandleKey handle) {
        this.backend = backend;
        this.name = name;
        this.address = address;
        this.size = size;
        this.handle = handle;
    }

    /** The ordinal of the device this segment is on. */
    int deviceOrdinal() {
        return backend.ordinal();
    }

    /** An identifier for descriptors, logs and tools; what opens the memory is {@link #memoryHandle()}. */
    @Override
    public String name() {
        return name;
    }

    @Override
    public long size() {
        return size;
    }

    /** Device memory has no header: offsets in descriptors count from the allocation's start. */
    @Override
    public long exportOffset() {
        return 0;
    }

    @Override
    public MemorySegment memory() {
        throw new UnsupportedOperationException("segment " + name + " is CUDA device memory: the host cannot address"
                + " it; copy with CudaSharing.copyToHost/copyFromHost, or use its device address");
    }

    /** The device address of the segment's first byte, in this process. */
    public long address() {
        return address;
    }

    /** The {@code CUipcMemHandle} other processes open this allocation with. */
    public byte[] memoryHandle() {
        return handle.bytes();
    }

    HandleKey handle() {
        return handle;
    }

    CudaBackend backend() {
        return backend;
    }

    /** True the first time only: a segment is freed exactly once. */
    boolean markFreed() {
        return freed.compareAndSet(false, true);
    }

    @Override
    public String toString() {
        return name + " (" + size + " bytes of device memory at " + CudaDriver.hex(address) + ")";
    }
}
