package io.refshare.cuda.driver;

import io.refshare.cuda.CudaConfig;
import io.refshare.cuda.CudaException;
import io.refshare.cuda.CudaUnavailableException;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.ReceiveInterruptedException;
import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.stats.CudaStats;
import io.refshare.memory.CachingAllocator;
import io.refshare.memory.Segment;
import io.refshare.share.DeviceSharing;
import io.refshare.share.ReceivedSegment;
import io.refshare.share.Sharing;
import io.refshare.share.Storage;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Verdict;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * The CUDA half of one process's sharing engine: device blocks carved from {@code cuMemAlloc}
 * segments by a caching allocator, the interprocess events that order a consumer after the
 * producer's device work, and the device segments other processes shared with this one.
 * Reach it through {@link io.refshare.Refshare#cuda()}; it is created on first use, so a
 * process that never touches the device never loads a driver. Thread-safe.
 *
 * <h2>Stream ordering</h2>
 * refshare queues this process's device work on one stream, {@link #stream()}. Each send of a
 * device storage records an interprocess event on that stream (one event per storage,
 * re-recorded at every send, destroyed when the storage is freed); the receive returns once
 * that event has completed (polled on the receiving thread, the sender's life checked
 * meanwhile: see {@link #awaitSendersWork}). So a producer may write with
 * {@link #copyFromHostAsync} and send at once: consumers see the written bytes, on any
 * stream. At most {@link CudaConfig#maxLiveEvents()} events live at once (1,000 by default,
 * as PyTorch); a send that would need one more synchronizes the stream instead and carries
 * no event. Work of the producer on other streams is the caller's to order (synchronize it
 * before sending).
 *
 * <h2>Receiving</h2>
 * A device segment of another process is opened ({@code cuIpcOpenMemHandle}) once, however
 * many of its blocks arrive, and closed ({@code cuIpcCloseMemHandle}) when the last of them
 * is closed: after this process's stream has finished with it, and before the block's count
 * goes back, since the producer may free the memory once it has (and CUDA leaves freeing
 * before the importer's close undefined). Segments and events of this very process (a block
 * forwarded back to its producer, two instances in one process) are used directly, never
 * IPC-opened.
 *
 * <h2>Limitations</h2>
 * Device memory belongs to the producing process: unlike host memory, it does not outlive
 * that process, and closing the producer's {@code Refshare} frees it even if consumers still
 * hold blocks. Keep producers alive until their consumers are done. A receive refuses a
 * device block whose sender is already dead before it gets here ({@link Sharing#receive}),
 * or dies while the receive waits for its event; a sender that dies after the receive has
 * returned takes its memory with it (reads of it are then undefined).
 */
public final class CudaSharing implements DeviceSharing {
    private static final System.Logger LOG = System.getLogger(CudaSharing.class.getName());
    private static final byte[] NO_EVENT = new byte[0];
    /** Waiting for a sender's event: spins, then yields, then parks this long between polls. */
    private static final int SPINS = 100;
    private static final int YIELDS = 100;
    private static final long PARK_NANOS = 50_000;
    private static final long VERDICT_INTERVAL_MILLIS = 10;
    private static final long VERDICT_INTERVAL_NANOS = VERDICT_INTERVAL_MILLIS * 1_000_000;
    /** Send events of every instance in this process, by handle: a receiver here uses them directly. */
    private static final Map<HandleKey, MemorySegment> OWN_EVENTS = new ConcurrentHashMap<>();

    private final CudaConfig config;
    private final ShmDirectory directory;
    private final CudaContext context;
    private final MemorySegment stream;
    private final CachingAllocator allocator;
    /**
     * Every use of the stream and the context holds the read lock, {@link #close()} the write
     * lock: a release, open or copy racing with close either finishes first or finds it closed,
     * never uses a stream close destroyed. The read lock is taken before this object's monitor.
     */
    private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();
    private volatile boolean closed; // written with the write lock held
    /** Set before {@link #close()} takes the write lock: a receive waiting for a sender's event gives up. */
    private volatile boolean closing;
    // ---- guarded by this ----
    private final Map<Storage, SendEvent> events = new IdentityHashMap<>();
    private final Map<HandleKey, Opened> opened = new HashMap<>();
    // ----
    private final LongAdder eventsCreated = new LongAdder();
    private final LongAdder eventsDestroyed = new LongAdder();
    private final LongAdder eventSends = new LongAdder();
    private final LongAdder syncSends = new LongAdder();
    private final LongAdder eventWaits = new LongAdder();
    private final LongAdder ipcOpens = new LongAdder();
    private final LongAdder ipcCloses = new LongAdder();

    /** The event a storage's sends record, and its IPC handle. */
    private record SendEvent(MemorySegment event, HandleKey handle) {
    }

    private CudaSharing(CudaConfig config, ShmDirectory directory, CudaContext context, MemorySegment stream,
                        CudaBackend backend, Runnable missHandler) {
        this.config = config;
        this.directory = directory;
        this.context = context;
        this.stream = stream;
        this.allocator = new CachingAllocator(backend, missHandler, CachingAllocator.UNLIMITED);
    }

    /**
     * The CUDA half of {@code sharing}, on the device {@code config} names: loads the driver
     * (see {@link CudaDriver#system()}), retains the device's primary context and creates
     * the stream. The device allocator's misses collect {@code sharing}'s limbo.
     *
     * @throws CudaUnavailableException when there is no driver or no such device
     */
    public static CudaSharing open(Sharing sharing, CudaConfig config) {
        CudaContext context = CudaContext.open(CudaDriver.system(), config.device());
        try {
            MemorySegment stream;
            try (CudaContext.Scope scope = context.enter()) {
                stream = scope.driver().streamCreate(CudaDriver.CU_STREAM_NON_BLOCKING);
            }
            return new CudaSharing(config, sharing.directory(), context, stream,
                    new CudaBackend(context, sharing.directory()),
                    sharing::collectOnMiss);
        } catch (RuntimeException e) {
            try {
                context.close();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /** The device, e.g. {@code cuda:0 (NVIDIA H100 80GB HBM3)}. */
    public CudaContext context() {
        return context;
    }

    /** The {@code CUstream} refshare orders this process's device work on, for interop. */
    public MemorySegment stream() {
        return stream;
    }

    /**
     * The stream and the context in use on this thread: holds off {@link #close()} until it
     * closes, with the context current (the caller's restored at the end).
     */
    private final class Use implements AutoCloseable {
        private final CudaContext.Scope scope;

        Use() {
            lifecycle.readLock().lock();
            try {
                ensureOpen();
                scope = context.enter();
            } catch (RuntimeException | Error e) {
                lifecycle.readLock().unlock();
                throw e;
            }
        }

        CudaDriver driver() {
            return scope.driver();
        }

        @Override
        public void close() {
            try {
                scope.close();
            } finally {
                lifecycle.readLock().unlock();
            }
        }
    }

    /** A {@link Use}, or null once closed (for the calls that then do nothing). */
    private Use useIfOpen() {
        lifecycle.readLock().lock();
        try {
            return closed ? null : new Use();
        } finally {
            lifecycle.readLock().unlock(); // the Use holds its own read lock
        }
    }

    // ---- copies (the public CUDA API, io.refshare.Cuda, maps tensors to device addresses) ---

    /** Copies {@code src} to device address {@code address} and returns once the bytes are there. */
    public void copyFromHost(MemorySegment src, long address) {
        try (Use use = new Use()) {
            CudaDriver driver = use.driver();
            if (src.isNative()) {
                driver.memcpyHtoDAsync(address, src, src.byteSize(), stream);
                driver.streamSynchronize(stream);
            } else {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment staged = arena.allocate(src.byteSize()).copyFrom(src);
                    driver.memcpyHtoDAsync(address, staged, staged.byteSize(), stream);
                    driver.streamSynchronize(stream); // before the staging memory goes
                }
            }
        }
    }

    /**
     * Queues the copy of {@code src} (native memory, unchanged until the stream ran the copy)
     * to device address {@code address} on {@link #stream()} and returns at once.
     */
    public void copyFromHostAsync(MemorySegment src, long address) {
        if (!src.isNative()) {
            throw new IllegalArgumentException("an asynchronous copy needs native memory (an Arena's), not a heap"
                    + " segment");
        }
        try (Use use = new Use()) {
            use.driver().memcpyHtoDAsync(address, src, src.byteSize(), stream);
        }
    }

    /**
     * Copies {@code dst.byteSize()} bytes from device address {@code address} into {@code dst},
     * after everything queued on {@link #stream()} before, and returns once they are there.
     */
    public void copyToHost(long address, MemorySegment dst) {
        try (Use use = new Use()) {
            CudaDriver driver = use.driver();
            // the copy is asynchronous (into pinned memory it is with the driver too): the bytes are
            // there only after the synchronize
            if (dst.isNative()) {
                driver.memcpyDtoHAsync(dst, address, dst.byteSize(), stream);
                driver.streamSynchronize(stream);
            } else {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment staged = arena.allocate(dst.byteSize());
                    driver.memcpyDtoHAsync(staged, address, staged.byteSize(), stream);
                    driver.streamSynchronize(stream);
                    dst.copyFrom(staged);
                }
            }
        }
    }

    /** Waits until everything queued on {@link #stream()} has run. */
    public void synchronize() {
        try (Use use = new Use()) {
            use.driver().streamSynchronize(stream);
        }
    }

    // ---- DeviceSharing: allocation ------------------------------------------------------------

    @Override
    public CachingAllocator allocator() {
        return allocator;
    }

    @Override
    public long address(Segment segment) {
        return ((CudaSegment) segment).address();
    }

    @Override
    public byte[] memoryHandle(Segment segment) {
        return ((CudaSegment) segment).memoryHandle();
    }

    // ---- DeviceSharing: sending -----------------------------------------------------------

    @Override
    public byte[] orderForSend(Storage storage) {
        try (Use use = new Use()) {
            CudaDriver driver = use.driver();
            synchronized (this) {
                SendEvent e = events.get(storage);
                if (e == null) {
                    if (events.size() >= config.maxLiveEvents()) {
                        // over the cap: everything queued so far is done when the message leaves
                        driver.streamSynchronize(stream);
                        syncSends.increment();
                        return NO_EVENT;
                    }
                    e = createEvent(driver);
                    events.put(storage, e);
                }
                driver.eventRecord(e.event(), stream);
                eventSends.increment();
                return e.handle().bytes();
            }
        }
    }

    private SendEvent createEvent(CudaDriver driver) {
        MemorySegment event = driver.eventCreate(CudaDriver.CU_EVENT_INTERPROCESS | CudaDriver.CU_EVENT_DISABLE_TIMING);
        try {
            HandleKey handle = new HandleKey(driver.ipcGetEventHandle(event));
            OWN_EVENTS.put(handle, event);
            eventsCreated.increment();
            return new SendEvent(event, handle);
        } catch (RuntimeException e) {
            try {
                driver.eventDestroy(event);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    @Override
    public void disposed(Storage storage) {
        try (Use use = useIfOpen()) {
            if (use == null) {
                return; // close destroyed every event
            }
            SendEvent e;
            synchronized (this) {
                e = events.remove(storage);
            }
            if (e != null) {
                try {
                    destroy(use.driver(), e);
                } catch (RuntimeException failure) {
                    synchronized (this) {
                        events.put(storage, e); // close() tries again, rather than leak it
                    }
                    throw failure;
                }
            }
        }
    }

    private void destroy(CudaDriver driver, SendEvent e) {
        OWN_EVENTS.remove(e.handle(), e.event());
        driver.eventDestroy(e.event());
        eventsDestroyed.increment();
    }

    // ---- DeviceSharing: receiving ---------------------------------------------------------

    /** A device segment as this process reaches it, shared by the blocks received from it. */
    private static final class Opened implements ReceivedSegment {
        final HandleKey handle;
        final String name;
        final long address;
        final long size;
        /** A segment of this process: used directly, never IPC-opened or closed. */
        final boolean own;
        int users;

        Opened(HandleKey handle, String name, long address, long size, boolean own) {
            this.handle = handle;
            this.name = name;
            this.address = address;
            this.size = size;
            this.own = own;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public long size() {
            return size;
        }

        @Override
        public Backend backend() {
            return Backend.CUDA;
        }

        @Override
        public MemorySegment hostMemory() {
            throw new UnsupportedOperationException("segment " + name + " is CUDA device memory");
        }

        @Override
        public long deviceAddress() {
            return address;
        }

        @Override
        public byte[] memoryHandle() {
            return handle.bytes();
        }
    }

    @Override
    public ReceivedSegment open(Descriptor d) {
        HandleKey handle = new HandleKey(d.memoryHandle());
        try (Use use = new Use()) {
            CudaDriver driver = use.driver();
            Opened o;
            synchronized (this) {
                o = opened.get(handle);
                if (o == null) {
                    o = openSegment(driver, handle, d);
                    opened.put(handle, o);
                } else if (o.size != d.segmentSize()) {
                    throw new InvalidDataException("descriptor says segment " + d.segmentName() + " is "
                            + d.segmentSize() + " bytes, but its memory handle names an allocation of " + o.size);
                }
                o.users++;
            }
            if (d.hasEvent()) {
                try {
                    awaitSendersWork(driver, d);
                } catch (RuntimeException e) {
                    release(o);
                    throw e;
                }
            }
            return o;
        }
    }

    private Opened openSegment(CudaDriver driver, HandleKey handle, Descriptor d) {
        CudaSegment own = CudaBackend.ownSegment(handle);
        if (own != null) {
            if (own.deviceOrdinal() != context.ordinal()) {
                // its address is valid on its own device only; using it from this one needs peer access,
                // which refshare does not enable behind the user's back
                throw new RefshareException("segment " + d.segmentName() + " was allocated on cuda:"
                        + own.deviceOrdinal() + " by another refshare instance of this process, and this instance uses "
                        + context + ": receive it with an instance on cuda:" + own.deviceOrdinal()
                        + ", or copy it through the host");
            }
            checkSize(d, own.size());
            return new Opened(handle, own.name(), own.address(), own.size(), true);
        }
        long address;
        try {
            address = driver.ipcOpenMemHandle(handle.bytes());
        } catch (CudaException e) {
            if (e.code() == CudaDriver.CUDA_ERROR_OUT_OF_MEMORY) {
                // this device's limit, not the message's fault: the message can be received later,
                // or by another process, and a queue gives it back (protocol 12.2)
                throw new ResourceLimitException("no device memory left on " + context + " to open segment "
                        + d.segmentName() + " of " + d.sender() + ": " + e.getMessage(), e);
            }
            throw e;
        }
        ipcOpens.increment();
        try {
            CudaDriver.AddressRange range = driver.addressRange(address);
            if (range.base() != address) {
                throw new InvalidDataException("the allocation of " + d.segmentName() + " opened at "
                        + CudaDriver.hex(address) + " but the driver says it starts at "
                        + CudaDriver.hex(range.base()));
            }
            checkSize(d, range.size());
            return new Opened(handle, d.segmentName(), address, range.size(), false);
        } catch (RuntimeException e) {
            try {
                driver.ipcCloseMemHandle(address);
                ipcCloses.increment();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    private static void checkSize(Descriptor d, long actual) {
        if (actual != d.segmentSize()) {
            throw new InvalidDataException("descriptor says segment " + d.segmentName() + " is " + d.segmentSize()
                    + " bytes, but its memory handle names an allocation of " + actual);
        }
    }

    /**
     * Returns once the device work {@code d}'s sender recorded in its event before sending is
     * done. The wait is on this thread, polling the event, and never on {@link #stream()}: a
     * stream made to wait ({@code cuStreamWaitEvent}) for another process's event waits for good
     * if that process dies first. That was seen on an H100 (driver 580.159): the stream, and
     * every call that synchronized it afterwards, stayed blocked, each spinning a core, and
     * nothing can take such a wait back. Polling, the sender's life is checked every
     * {@value #VERDICT_INTERVAL_MILLIS} ms once the wait has lasted that long; DEAD ends the
     * wait with a refusal (the caller gives the token back), and so do an interrupt and
     * {@link #close()}. UNKNOWN keeps waiting, as a live sender in another PID namespace may
     * still finish.
     */
    private void awaitSendersWork(CudaDriver driver, Descriptor d) {
        HandleKey handle = new HandleKey(d.eventHandle());
        MemorySegment own = OWN_EVENTS.get(handle);
        if (own != null) {
            awaitEvent(driver, own, d); // this process's own work: its sender cannot die without us
            return;
        }
        MemorySegment event = driver.ipcOpenEventHandle(handle.bytes());
        try {
            awaitEvent(driver, event, d);
        } finally {
            driver.eventDestroy(event);
        }
    }

    private void awaitEvent(CudaDriver driver, MemorySegment event, Descriptor d) {
        long start = System.nanoTime();
        long nextVerdict = start + VERDICT_INTERVAL_NANOS;
        for (int idle = 0; !driver.eventQuery(event); idle++) {
            if (idle < SPINS) {
                Thread.onSpinWait();
                continue;
            }
            if (idle < SPINS + YIELDS) {
                Thread.yield();
                continue;
            }
            LockSupport.parkNanos(PARK_NANOS);
            if (closing) {
                throw new IllegalStateException("the CUDA side of this refshare instance is closing: the receive of"
                        + " a block of segment " + d.segmentName() + " stopped waiting for the device work its sender, "
                        + d.sender() + ", recorded; the message's reference is in flight again");
            }
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new ReceiveInterruptedException("interrupted while waiting for the device work that "
                        + d.sender() + " recorded before sending a block of segment " + d.segmentName()
                        + "; the message's reference is in flight again");
            }
            long now = System.nanoTime();
            if (now - nextVerdict >= 0) {
                if (directory.verdict(d.sender()) == Verdict.DEAD) {
                    throw new RefshareException("device block of segment " + d.segmentName() + " refused: its sender, "
                            + d.sender() + ", died before the device work it recorded for this send was done ("
                            + (now - start) / 1_000_000 + " ms waited), and device memory and events do not outlive"
                            + " their process; the reference goes back");
                }
                nextVerdict = now + VERDICT_INTERVAL_NANOS;
            }
        }
        eventWaits.increment();
    }

    @Override
    public void release(ReceivedSegment segment) {
        Opened o = (Opened) segment;
        try (Use use = useIfOpen()) {
            if (use == null) {
                return; // close closed every segment
            }
            CudaDriver driver = use.driver();
            // work queued on our stream may still read the block: it finishes before the count goes back
            driver.streamSynchronize(stream);
            synchronized (this) {
                if (--o.users > 0) {
                    return;
                }
                opened.remove(o.handle);
                if (!o.own) {
                    driver.ipcCloseMemHandle(o.address);
                    ipcCloses.increment();
                }
            }
        }
    }

    // ---- state ----------------------------------------------------------------------------

    /** What the CUDA side holds and has done (see {@link CudaStats}). */
    public CudaStats stats() {
        int live;
        int open;
        synchronized (this) {
            live = events.size();
            open = opened.size();
        }
        return new CudaStats(context.toString(), allocator.stats(), live, eventsCreated.sum(), eventsDestroyed.sum(),
                eventSends.sum(), syncSends.sum(), eventWaits.sum(), open, ipcOpens.sum(), ipcCloses.sum());
    }

    public CudaConfig config() {
        return config;
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("the CUDA side of this refshare instance is closed");
        }
    }

    /**
     * Closes received device segments, destroys send events, frees every device segment
     * (blocks still held by consumers included: see the class comment), and releases the
     * stream and the context. Failures are logged, not thrown: the rest still goes. Idempotent.
     */
    @Override
    public void close() {
        closing = true;
        lifecycle.writeLock().lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            try (CudaContext.Scope scope = context.enter()) {
                CudaDriver driver = scope.driver();
                quietly("synchronize the stream", () -> driver.streamSynchronize(stream));
                synchronized (this) {
                    for (Opened o : opened.values()) {
                        if (!o.own) {
                            quietly("close " + o.name, () -> driver.ipcCloseMemHandle(o.address));
                            ipcCloses.increment();
                        }
                    }
                    opened.clear();
                    for (SendEvent e : events.values()) {
                        quietly("destroy an event", () -> destroy(driver, e));
                    }
                    events.clear();
                }
                allocator.close();
                quietly("destroy the stream", () -> driver.streamDestroy(stream));
            }
            quietly("release " + context, context::close);
        } finally {
            lifecycle.writeLock().unlock();
        }
    }

    private static void quietly(String what, Runnable action) {
        try {
            action.run();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "closing CUDA: cannot " + what + ": " + e.getMessage(), e);
        }
    }

    @Override
    public String toString() {
        return "CUDA sharing on " + context;
    }
}
