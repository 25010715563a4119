package io.refshare.cuda.driver;

import io.refshare.cuda.CudaUnavailableException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One CUDA device as this process uses it: the device's <em>primary</em> context (the one
 * the runtime API and PyTorch use too, so memory, streams and events interoperate with
 * them), retained while this object is open.
 *
 * <p>Driver calls act on the calling thread's current context, and refshare calls the
 * driver from whatever thread frees or sends a block (the background collector included),
 * threads an application may use with contexts of its own. So every use goes through
 * {@link #enter()}: it makes this context current for the calls inside it and then makes
 * the caller's previous context current again, never trusting nor disturbing what another
 * library left current.
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
     * @throws CudaUnavailableException when the machine has no such device, or the device
     *                                  cannot share memory between processes (see {@link #checkSharable})
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
        checkSharable(driver, device, "CUDA device " + ordinal + " (" + name + ")");
        MemorySegment context = driver.primaryContextRetain(device);
        return new CudaContext(driver, ordinal, device, name, context);
    }

    /**
     * Refuses, with a plain message, a device whose memory cannot be shared between
     * processes: one in compute mode PROHIBITED (no process may use it) or EXCLUSIVE_PROCESS
     * (one process at a time), one without unified addressing (CUDA IPC needs it), and one
     * without interprocess events (the attribute exists from CUDA 12 on; older drivers are
     * taken to support them).
     */
    static void checkSharable(CudaDriver driver, int device, String what) {
        int mode = driver.deviceAttribute(CudaDriver.CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, device, 0);
        if (mode == CudaDriver.CU_COMPUTEMODE_PROHIBITED) {
            throw new CudaUnavailableException(what + " is in compute mode PROHIBITED: no process may use it"
                    + " (an administrator can change it with nvidia-smi -c DEFAULT)");
        }
        if (mode == CudaDriver.CU_COMPUTEMODE_EXCLUSIVE_PROCESS) {
            throw new CudaUnavailableException(what + " is in compute mode EXCLUSIVE_PROCESS: only one process may"
                    + " use it at a time, so no memory can be shared between processes (an administrator can change"
                    + " it with nvidia-smi -c DEFAULT)");
        }
        if (driver.deviceAttribute(CudaDriver.CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device, 1) == 0) {
            throw new CudaUnavailableException(what + " does not support CUDA IPC (no unified addressing), so its"
                    + " memory cannot be shared between processes");
        }
        if (driver.deviceAttribute(CudaDriver.CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, device, 1) == 0) {
            throw new CudaUnavailableException(what + " does not support CUDA IPC events (as on Tegra/Jetson),"
                    + " so consumers cannot be ordered after a producer's device work");
        }
    }

    /**
     * The driver, with this context current on the calling thread until the returned scope
     * closes; closing makes the thread's previous context (or none) current again. Scopes
     * nest; a scope is for the thread that entered it.
     */
    public Scope enter() {
        if (closed.get()) {
            throw new IllegalStateException(this + " is closed");
        }
        MemorySegment previous = driver.currentContext();
        boolean switched = previous.address() != context.address();
        if (switched) {
            driver.setCurrentContext(context);
        }
        return new Scope(switched ? previous : null);
    }

    /** This context current on one thread; {@link #close()} restores what was current before. */
    public final class Scope implements AutoCloseable {
        private final MemorySegment previous; // null: this context was current already, nothing to restore

        private Scope(MemorySegment previous) {
            this.previous = previous;
        }

        public CudaDriver driver() {
            return driver;
        }

        @Override
        public void close() {
            if (previous != null) {
                driver.setCurrentContext(previous);
            }
        }
    }

    /**
     * The driver, with this context made current on the calling thread and left current (the
     * caller's previous context is not restored). refshare itself uses {@link #enter()}.
     */
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
