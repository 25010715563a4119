package io.refshare.cuda.driver;

import io.refshare.cuda.CudaException;
import io.refshare.exceptions.OutOfSharedMemoryException;
import io.refshare.memory.Segment;
import io.refshare.memory.SegmentBackend;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;

import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Segments in CUDA device memory, for the {@link io.refshare.memory.CachingAllocator}:
 * {@link #create} is {@code cuMemAlloc_v2} followed by {@code cuIpcGetMemHandle} (the handle
 * is taken once, here, not per send), {@link #free} is {@code cuMemFree_v2}. Both are slow
 * driver calls; the allocator keeps them off its hot path by caching segments.
 *
 * <p>Every live segment of this process is also registered process-wide by its handle, so
 * that a descriptor naming one of them (a block forwarded back to its producer, or received
 * by another refshare instance of the same process) is used directly: a process never
 * IPC-opens its own memory, which the driver refuses.
 */
public final class CudaBackend implements SegmentBackend {
    private static final ConcurrentHashMap<HandleKey, CudaSegment> OWN = new ConcurrentHashMap<>();

    private final CudaContext context;
    private final ShmDirectory names;

    /** Segments on {@code context}'s device, named like refshare files of {@code names} (but no file exists). */
    public CudaBackend(CudaContext context, ShmDirectory names) {
        this.context = Objects.requireNonNull(context, "context");
        this.names = Objects.requireNonNull(names, "names");
    }

    @Override
    public Segment create(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("segment size must be positive: " + bytes);
        }
        try (CudaContext.Scope scope = context.enter()) {
            return create(scope.driver(), bytes);
        }
    }

    private Segment create(CudaDriver driver, long bytes) {
        long address;
        try {
            address = driver.memAlloc(bytes);
        } catch (CudaException e) {
            if (e.code() == CudaDriver.CUDA_ERROR_OUT_OF_MEMORY) {
                throw new OutOfSharedMemoryException("no device memory left on " + context + " for a " + bytes
                        + "-byte segment: " + e.getMessage(), e);
            }
            throw e;
        }
        try {
            CudaDriver.AddressRange range = driver.addressRange(address);
            if (range.base() != address || range.size() < bytes) {
                throw new IllegalStateException("the driver reports allocation " + CudaDriver.hex(address) + " of "
                        + bytes + " bytes as [" + CudaDriver.hex(range.base()) + ", +" + range.size() + ")");
            }
            HandleKey handle = new HandleKey(driver.ipcGetMemHandle(address));
            CudaSegment segment = new CudaSegment(this, names.newName(ShmKind.SEGMENT), address, range.size(), handle);
            if (OWN.putIfAbsent(handle, segment) != null) {
                throw new IllegalStateException("the driver gave allocation " + CudaDriver.hex(address)
                        + " the IPC handle of another live allocation");
            }
            return segment;
        } catch (RuntimeException e) {
            try {
                driver.memFree(address);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    @Override
    public void free(Segment segment) {
        Objects.requireNonNull(segment, "segment");
        if (!(segment instanceof CudaSegment s) || s.backend() != this) {
            throw new IllegalArgumentException("segment " + segment.name() + " was not created by this CUDA backend ("
                    + context + ")");
        }
        if (!s.markFreed()) {
            throw new IllegalStateException("segment " + s.name() + " was already freed");
        }
        // unregistered first: from now on a descriptor naming it must not find it
        OWN.remove(s.handle(), s);
        try (CudaContext.Scope scope = context.enter()) {
            scope.driver().memFree(s.address());
        }
    }

    /** The device ordinal this backend allocates on. */
    int ordinal() {
        return context.ordinal();
    }

    /** The live segment of this process with this handle, or null. */
    static CudaSegment ownSegment(HandleKey handle) {
        return OWN.get(handle);
    }

    @Override
    public String toString() {
        return "CUDA segments on " + context;
    }
}
