package io.refshare.cuda;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One CUDA device as this process uses it: the device's <em>primary</em> context (the one
 * the runtime API and PyTorch use too, so memory, streams and events interoperate with
 * them), retained while this object is open.
 *
 * <p>Driver calls act on the calling thread's current context, and refshare calls the
 * driver from whatever thread frees or sends a block (the background collector included).
 * So every use goes through {@link #bind()}, which makes this context current on the
 * calling thread first: cheap, and it never trusts what another library left current.
 */
public final class CudaContext implements AutoCloseable {
    private final CudaDriver driver;
    private final int ordinal;
    private final int device;
    private final String name;
    private final MemorySegment context;
    private final AtomicBoolean closed = new AtomicBoolean();

    private CudaContext(CudaDriver driver, int ordinal, int device, String name, MemorySegment context) {
        this.driver = driver;
        this.ordinal = ordinal;
        this.device = device;
        this.name = name;
        this.context = context;
    }

    /**
     * Retains the primary context of device {@code ordinal}.
     *
     * @throws CudaUnavailableException when the machine has no such device
     */
    public static CudaContext open(CudaDriver driver, int ordinal) {
        int count = driver.deviceCount();
        if (count == 0) {
            throw new CudaUnavailableException("no CUDA device: the driver " + driver.library() + " reports none");
        }
        if (ordinal < 0 || ordinal >= count) {
            throw new CudaUnavailableException("no CUDA device " + ordinal + ": this machine has " + count
                    + (count == 1 ? " (cuda:0)" : " (cuda:0 to cuda:" + (count - 1) + ")"));
        }
        int device = driver.device(ordinal);
        String name = driver.deviceName(device);
        MemorySegment context = driver.primaryContextRetain(device);
        return new CudaContext(driver, ordinal, device, name, context);
    }

    /** The driver, with this context made current on the calling thread. */
    public CudaDriver bind() {
        if (closed.get()) {
            throw new IllegalStateException(this + " is closed");
        }
        driver.setCurrentContext(context);
        return driver;
    }

    public int ordinal() {
        return ordinal;
    }

    /** The device's name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3". */
    public String deviceName() {
        return name;
    }

    /** Releases the primary context; idempotent. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            driver.primaryContextRelease(device);
        }
    }

    @Override
    public String toString() {
        return "cuda:" + ordinal + " (" + name + ")";
    }
}
