package io.refshare;

import io.refshare.cuda.CudaConfig;
import io.refshare.cuda.driver.CudaSharing;
import io.refshare.share.Storage;
import io.refshare.stats.CudaStats;
import io.refshare.tensor.Device;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A process's CUDA device as one {@link Refshare} uses it: copies between host memory and
 * device tensors, the stream refshare orders its device work on, and counts. Obtained from
 * {@link Refshare#cuda()}; the same object on every call, valid until that {@code Refshare}
 * closes (then every call throws {@link IllegalStateException}). Thread-safe.
 *
 * <p>A device tensor's bytes are where {@link Tensor#data()} would put them on the host: from
 * its first element to one past its last, in storage order. The copies move exactly that span.
 * Ordering across processes needs no call here: a send records the stream's work so far, and
 * a receiver's copies and reads run after it (see {@code docs/cuda.md}).
 */
public final class Cuda {
    private final CudaSharing sharing;

    Cuda(CudaSharing sharing) {
        this.sharing = sharing;
    }

    /**
     * The device this instance allocates on and opens received device memory on.
     *
     * @return {@code cuda:N}
     */
    public Device device() {
        return Device.cuda(sharing.config().device());
    }

    /**
     * The CUDA settings this instance runs with.
     *
     * @return the configuration it was opened with
     */
    public CudaConfig config() {
        return sharing.config();
    }

    /**
     * The {@code CUstream} refshare orders this process's device work on, for interop with other
     * CUDA code: work queued on it before a send is ordered before the receivers' use.
     *
     * @return the stream handle, a native pointer
     */
    public MemorySegment stream() {
        return sharing.stream();
    }

    /**
     * Copies {@code src} into the bytes {@code dst} spans on the device and returns once they
     * are there.
     *
     * @param src host memory of exactly the span's size (heap memory is staged through native)
     * @param dst an open device tensor
     * @throws IllegalArgumentException when {@code dst} is in host memory or its span is not
     *                                  {@code src.byteSize()} bytes
     * @throws io.refshare.cuda.CudaException when the driver fails the copy
     */
    public void copyFromHost(MemorySegment src, Tensor dst) {
        sharing.copyFromHost(src, deviceSpan(dst, src.byteSize()));
    }

    /**
     * Queues the copy of {@code src} into {@code dst} on {@link #stream()} and returns at once;
     * a later send of {@code dst} orders its consumers after the copy.
     *
     * @param src native memory (an {@link Arena}'s) of exactly the span's size, left unchanged
     *            until the stream has run the copy (after {@link #synchronize()} or any blocking copy)
     * @param dst an open device tensor
     * @throws IllegalArgumentException when {@code src} is heap memory, {@code dst} is in host
     *                                  memory, or the sizes differ
     * @throws io.refshare.cuda.CudaException when the driver refuses the copy
     */
    public void copyFromHostAsync(MemorySegment src, Tensor dst) {
        sharing.copyFromHostAsync(src, deviceSpan(dst, src.byteSize()));
    }

    /**
     * Copies the bytes {@code src} spans on the device into {@code dst}, after everything queued
     * on {@link #stream()} before (for a received tensor: after its producer's work), and
     * returns once they are there.
     *
     * @param src an open device tensor
     * @param dst host memory of exactly the span's size
     * @throws IllegalArgumentException when {@code src} is in host memory or the sizes differ
     * @throws io.refshare.cuda.CudaException when the driver fails the copy
     */
    public void copyToHost(Tensor src, MemorySegment dst) {
        sharing.copyToHost(deviceSpan(src, dst.byteSize()), dst);
    }

    /**
     * The bytes {@code src} spans on the device, copied into new memory of {@code arena} (as
     * {@link #copyToHost(Tensor, MemorySegment)}).
     *
     * @param src   an open device tensor
     * @param arena where the host copy is allocated
     * @return the host copy
     * @throws IllegalArgumentException when {@code src} is in host memory
     * @throws io.refshare.cuda.CudaException when the driver fails the copy
     */
    public MemorySegment copyToHost(Tensor src, Arena arena) {
        MemorySegment dst = arena.allocate(spanBytes(src.layout()));
        copyToHost(src, dst);
        return dst;
    }

    /**
     * Waits until everything queued on {@link #stream()} has run.
     *
     * @throws io.refshare.cuda.CudaException when the driver reports a failure of that work
     */
    public void synchronize() {
        sharing.synchronize();
    }

    /**
     * What the CUDA side holds and has done now.
     *
     * @return a snapshot
     */
    public CudaStats stats() {
        return sharing.stats();
    }

    /** The device and its name, e.g. {@code cuda:0 (NVIDIA H100 80GB HBM3)}. */
    @Override
    public String toString() {
        return sharing.context().toString();
    }

    /** The device address of the first byte {@code t} spans, checking it spans {@code hostBytes} bytes. */
    private static long deviceSpan(Tensor t, long hostBytes) {
        Objects.requireNonNull(t, "tensor");
        TensorLayout layout = t.layout();
        long bytes = spanBytes(layout);
        if (bytes != hostBytes) {
            throw new IllegalArgumentException(t + " spans " + bytes + " bytes, the host memory has " + hostBytes);
        }
        Storage storage = t.storage();
        if (storage.backend() != Backend.CUDA) {
            throw new IllegalArgumentException(t + " is in host memory: use its data() directly");
        }
        return storage.deviceAddress() + layout.byteOffset();
    }

    /** Bytes from a tensor's first element to one past its last, as {@link Tensor#data()} spans them. */
    private static long spanBytes(TensorLayout layout) {
        return layout.byteSpan() - layout.byteOffset();
    }
}
