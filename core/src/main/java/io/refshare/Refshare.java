package io.refshare;

import io.refshare.stats.RefshareStats;
import io.refshare.holder.SharedHolderLayout;
import io.refshare.tensor.Device;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.cuda.driver.CudaSharing;
import io.refshare.inspect.Janitor;
import io.refshare.share.ReceivedBlock;
import io.refshare.share.Sharing;
import io.refshare.shm.ShmDirectory;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DecodeMemo;
import io.refshare.wire.DescriptorCodec;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * refshare in one process: allocate tensors in shared memory, share them with other
 * processes as small messages, and receive what others share, zero-copy, with the
 * producer's memory kept alive exactly as long as any process still uses it.
 *
 * <pre>{@code
 * // producer
 * try (Refshare rs = Refshare.open();
 *      Tensor t = rs.allocate(DType.FLOAT32, 1024, 1024)) {
 *     t.data().fill((byte) 1);
 *     byte[] message = rs.share(t);   // counts one reference; send the bytes any way you like
 * }                                   // t waits in the limbo until the consumer closes its copy
 *
 * // consumer
 * try (Refshare rs = Refshare.open();
 *      Tensor t = rs.receive(message)) {
 *     float first = t.data().get(ValueLayout.JAVA_FLOAT, 0);
 * }                                   // the producer may now reuse the memory
 * }</pre>
 *
 * <p>One instance per process is the normal use; it is thread-safe. {@link #close()}
 * gives back what this process still holds and removes its files; memory it shared stays
 * valid in processes that mapped it.
 */
public final class Refshare implements AutoCloseable {
    private final RefshareConfig config;
    private final Sharing sharing;
    /** The public face of the CUDA side, made on the first {@link #cuda()}. */
    private volatile Cuda cuda;
    private final AtomicBoolean closed = new AtomicBoolean();
    /** What receive(byte[]) decoded lately: a pool's blocks come again and again. */
    private final DecodeMemo decoded = new DecodeMemo();

    private Refshare(RefshareConfig config) {
        this.config = config;
        ShmDirectory directory = config.shmDirectory();
        OpenDirectories.opened(directory);
        try {
            this.sharing = new Sharing(directory, config.capacityBytes(), config.slotsPerCounterFile(),
                    config.peersPerCounterFile(), s -> CudaSharing.open(s, config.cuda()));
        } catch (RuntimeException | Error e) {
            OpenDirectories.closed(directory);
            throw e;
        }
        Thread.ofVirtual().name("refshare-startup-sweep").start(this::sweepDeadProcessesFiles);
    }

    /** A cheap sweep at startup: files left by dead processes go (what {@code refshare gc} does). */
    private void sweepDeadProcessesFiles() {
        try {
            var report = Janitor.sweep(sharing.directory(), false);
            if (!report.removed().isEmpty()) {
                System.getLogger(Refshare.class.getName()).log(System.Logger.Level.DEBUG,
                        "removed {0} files left by dead processes in {1}", report.removed().size(),
                        sharing.directory());
            }
        } catch (IOException | RuntimeException e) {
            System.getLogger(Refshare.class.getName()).log(System.Logger.Level.DEBUG, "startup sweep failed", e);
        }
    }

    /**
     * Opens refshare in this process with {@link RefshareConfig#defaults()}: files in
     * {@code /dev/shm}, named with the prefix {@code refshare}.
     *
     * @return a new instance; close it when the process is done sharing
     * @throws io.refshare.exceptions.RefshareException when the directory does not exist or its
     *                                                  files cannot be created
     * @see #open(RefshareConfig)
     */
    public static Refshare open() {
        return open(RefshareConfig.defaults());
    }

    /**
     * Opens refshare in this process. Several instances may be open at once, on the same
     * directory or on others; each has its own pool, limbo and files. In the background it
     * removes files that processes which died left in the directory, as {@code refshare gc}
     * does.
     *
     * @param config where the files live and how much this process may hold
     * @return a new instance; close it when the process is done sharing
     * @throws NullPointerException                     when {@code config} is null
     * @throws IllegalArgumentException                 when the prefix is not 1 to 32 letters,
     *                                                  digits or {@code _}
     * @throws io.refshare.exceptions.RefshareException when the directory does not exist or its
     *                                                  files cannot be created
     */
    public static Refshare open(RefshareConfig config) {
        return new Refshare(config);
    }

    /**
     * The configuration this instance was opened with.
     *
     * @return the configuration
     */
    public RefshareConfig config() {
        return config;
    }

    /**
     * A new contiguous (row-major) tensor in host shared memory. Its contents are unspecified:
     * pooled memory is reused, so write every element before sharing. A tensor with no
     * elements still takes a block (of one byte) so that it can be shared like any other.
     *
     * @param dtype the element type
     * @param shape the size of each dimension, outermost first; none for a scalar
     * @return the tensor, holding one reference; close it when done
     * @throws IllegalStateException       when this instance is closed
     * @throws IllegalArgumentException    when the shape has a negative dimension, more than
     *                                     {@value TensorLayout#MAX_RANK} dimensions, or more
     *                                     bytes than a {@code long} counts
     * @throws NullPointerException        when {@code dtype} or {@code shape} is null
     * @throws io.refshare.exceptions.OutOfSharedMemoryException when
     *         {@link RefshareConfig#capacityBytes()} would be exceeded or the directory is full,
     *         even after freeing what the limbo and the cache could give back
     */
    public Tensor allocate(DType dtype, long... shape) {
        TensorLayout layout = TensorLayout.contiguous(dtype, shape);
        return new Tensor(sharing.allocate(Math.max(1, layout.byteSpan())), layout);
    }

    /**
     * A new contiguous tensor on {@code device}: {@link Device#HOST} (as {@link #allocate(DType, long...)}),
     * or the CUDA device of {@link RefshareConfig#cuda()} (pooled device memory, shared through
     * CUDA IPC; reach it through {@link #cuda()}). The first device allocation loads the driver.
     * A device tensor's bytes are not addressable from the host: {@link Tensor#data()} throws.
     *
     * @param device where the memory lives
     * @param dtype  the element type
     * @param shape  the size of each dimension, outermost first
     * @return the tensor, holding one reference; close it when done
     * @throws io.refshare.cuda.CudaUnavailableException when there is no CUDA driver or no such device
     * @throws IllegalArgumentException when {@code device} is another CUDA device than the configured
     *                                  one, or the shape is invalid (see {@link #allocate(DType, long...)})
     * @throws IllegalStateException    when this instance is closed
     * @throws io.refshare.exceptions.OutOfSharedMemoryException when the device has no memory left,
     *                                  even after freeing what the limbo and the cache could give back
     */
    public Tensor allocate(Device device, DType dtype, long... shape) {
        if (device.isHost()) {
            return allocate(dtype, shape);
        }
        int configured = config.cuda().device();
        if (device.index() != configured) {
            throw new IllegalArgumentException("this refshare instance uses " + Device.cuda(configured) + " (see "
                    + "RefshareConfig.withCudaDevice), not " + device);
        }
        TensorLayout layout = TensorLayout.contiguous(dtype, shape);
        return new Tensor(sharing.allocateOnDevice(Math.max(1, layout.byteSpan())), layout);
    }

    /**
     * This process's CUDA side: copies between host and device tensors, its stream, counts.
     * Loads the driver on first use.
     *
     * @return the CUDA side of this instance, the same object on every call
     * @throws io.refshare.cuda.CudaUnavailableException when there is no CUDA driver or no such device
     * @throws IllegalStateException                     when this instance is closed before the
     *                                                   driver was ever loaded
     */
    public Cuda cuda() {
        Cuda c = cuda;
        if (c == null) {
            synchronized (this) {
                if (cuda == null) {
                    cuda = new Cuda((CudaSharing) sharing.device());
                }
                c = cuda;
            }
        }
        return c;
    }

    /**
     * A new buffer of {@code bytes} bytes: a one-dimensional {@link DType#UINT8} tensor, as
     * {@link #allocate(DType, long...)} makes it.
     *
     * @param bytes the buffer's length, 0 or more
     * @return the buffer, holding one reference; close it when done
     * @throws IllegalStateException    when this instance is closed
     * @throws IllegalArgumentException when {@code bytes} is negative
     * @throws io.refshare.exceptions.OutOfSharedMemoryException as {@link #allocate(DType, long...)}
     */
    public Tensor allocateBytes(long bytes) {
        return allocate(DType.UINT8, bytes);
    }

    /**
     * Counts one reference for a message carrying {@code tensor} and returns the message: a
     * few hundred bytes (at most 1024) to send to another process by any means. The memory then
     * stays alive until the receiver closes what it received, however soon this process closes
     * its tensor. Each call counts a reference of its own, so a message is received exactly
     * once, in one process; one that will never be received must be given back with
     * {@link #cancel(byte[])}, or its memory is not freed before this instance closes.
     *
     * <p>A received tensor can be shared onward; its producer's memory then lives until the
     * last process it was forwarded to lets go. For a device tensor, the work queued on
     * {@code cuda().stream()} before the call is ordered before the receiver's.
     *
     * @param tensor an open tensor of this instance, allocated or received here
     * @return the message, for {@link #receive(byte[])} in any process using the same
     *         directory and prefix
     * @throws IllegalStateException when this instance or {@code tensor} is closed
     * @throws NullPointerException  when {@code tensor} is null
     */
    public byte[] share(Tensor tensor) {
        return DescriptorCodec.encode(shareDescriptor(tensor));
    }

    /**
     * Like {@link #share}, counting one reference just the same, but returns the descriptor
     * before encoding (for transports that carry its fields themselves). A descriptor that is
     * never received must be given back with {@link #cancel(byte[])} on its encoding.
     */
    Descriptor shareDescriptor(Tensor tensor) {
        return sharing.share(tensor.storage(), tensor.layout());
    }

    // ---------------------------------------------------------------- queues and holders

    /**
     * Creates a queue holding at most {@code capacity} messages, its handle waiting with
     * {@link WaitStrategy#BACKOFF}; other processes open it by its {@link ShareQueue#name()}.
     *
     * @param capacity the most messages queued at once, 1 .. 2<sup>20</sup>
     * @return the queue, with this process its creator (see {@link ShareQueue} for what that means)
     * @throws IllegalStateException    when this instance is closed
     * @throws IllegalArgumentException when {@code capacity} is out of range
     */
    public ShareQueue createQueue(int capacity) {
        return createQueue(capacity, WaitStrategy.BACKOFF);
    }

    /**
     * Creates a queue as {@link #createQueue(int)}, this handle waiting with {@code waiting}.
     *
     * @param capacity the most messages queued at once, 1 .. 2<sup>20</sup>
     * @param waiting  how this handle's blocked {@code put}s and {@code take}s wait
     * @return the queue, with this process its creator
     * @throws IllegalStateException    when this instance is closed
     * @throws IllegalArgumentException when {@code capacity} is out of range
     */
    public ShareQueue createQueue(int capacity, WaitStrategy waiting) {
        return ShareQueue.create(this, capacity, waiting);
    }

    /**
     * Opens a queue another process (or this one) created, its handle waiting with
     * {@link WaitStrategy#BACKOFF}.
     *
     * @param name the queue's {@link ShareQueue#name()}
     * @return a handle to the queue
     * @throws IllegalStateException when this instance is closed
     * @throws RefshareException     when there is no such queue or its file is unusable
     */
    public ShareQueue openQueue(String name) {
        return openQueue(name, WaitStrategy.BACKOFF);
    }

    /**
     * Opens a queue as {@link #openQueue(String)}, this handle waiting with {@code waiting}.
     *
     * @param name    the queue's {@link ShareQueue#name()}
     * @param waiting how this handle's blocked {@code put}s and {@code take}s wait
     * @return a handle to the queue
     * @throws IllegalStateException when this instance is closed
     * @throws RefshareException     when there is no such queue or its file is unusable
     */
    public ShareQueue openQueue(String name, WaitStrategy waiting) {
        return ShareQueue.open(this, name, waiting);
    }

    /**
     * Creates an empty holder with room for 64 live versions and 64 processes, as
     * {@link #createHolder(int, int)}.
     *
     * @return the holder, with this process its creator
     * @throws IllegalStateException when this instance is closed
     */
    public SharedHolder createHolder() {
        return createHolder(SharedHolderLayout.DEFAULT_SLOTS, SharedHolderLayout.DEFAULT_READERS);
    }

    /**
     * Creates an empty holder: at most {@code versionSlots} versions alive at once (the
     * current one and those readers still hold), at most {@code readerProcesses} processes
     * using it.
     *
     * @param versionSlots    versions alive at once, 1 .. 4096
     * @param readerProcesses processes using the holder at once, 1 .. 65536
     * @return the holder, with this process its creator
     * @throws IllegalStateException    when this instance is closed
     * @throws IllegalArgumentException when a size is out of range
     */
    public SharedHolder createHolder(int versionSlots, int readerProcesses) {
        return SharedHolder.create(this, versionSlots, readerProcesses);
    }

    /**
     * Opens a holder another process (or this one) created.
     *
     * @param name the holder's {@link SharedHolder#name()}
     * @return a handle to the holder
     * @throws IllegalStateException when this instance is closed
     * @throws RefshareException     when there is no such holder or its file is unusable
     */
    public SharedHolder openHolder(String name) {
        return SharedHolder.open(this, name);
    }

    /**
     * Whether this instance is closed.
     *
     * @return true once {@link #close()} was called, from any thread
     */
    public boolean isClosed() {
        return closed.get();
    }

    /**
     * Receives a message made by {@link #share} in any process; close the tensor when done.
     * The tensor maps the producer's memory: its {@link Tensor#data()} is read-only. One that
     * is never closed pins the producer's memory until this instance closes; a sample of
     * received tensors (one in 128; every one with {@code -Drefshare.leakDetection=paranoid})
     * is watched, and one of those found unreachable and unclosed is logged as a leak, with
     * where it was received, and its reference given back.
     *
     * @param message the bytes {@code share} returned, unchanged
     * @return the tensor, holding the message's reference
     * @throws IllegalStateException  when this instance is closed
     * @throws NullPointerException   when {@code message} is null
     * @throws InvalidDataException   when the bytes are not a message refshare made, or name
     *                                files that do not match it (nothing is taken)
     * @throws ResourceLimitException when this process cannot be recorded in the sender's
     *                                counter file (every peer entry taken), runs out of open
     *                                files or mappings opening the sender's files, or (a device
     *                                tensor) out of device memory to open it: nothing is taken,
     *                                the message can be received later or elsewhere
     * @throws OutOfMemoryError       when the heap is full: nothing is taken either, the
     *                                message's reference is in flight again
     * @throws io.refshare.exceptions.ReceiveInterruptedException when the thread is interrupted
     *                                while the receive of a device tensor waits for its sender's
     *                                device work: nothing is taken, the thread's interrupt status
     *                                stays set
     * @throws RefshareException      when the message was already received or returned, it is
     *                                a device tensor whose sender is dead (its reference goes
     *                                back), or a file it names is unusable (gone with its
     *                                producer, say)
     */
    public Tensor receive(byte[] message) {
        Objects.requireNonNull(message, "message (the bytes share() returned)");
        return receive(MemorySegment.ofArray(message), 0, message.length);
    }

    /**
     * Receives the message of {@code length} bytes at {@code offset} of {@code src}, as
     * {@link #receive(byte[])}, reading it in place (a queue's cell): a message of a block
     * received before allocates nothing but the tensor.
     */
    Tensor receive(MemorySegment src, long offset, int length) {
        Descriptor block = decoded.decodeBlock(src, offset, length);
        return receive(block, DescriptorCodec.slot(src, offset, length));
    }

    /**
     * Receives a descriptor, as {@link #receive(byte[])}.
     *
     * @throws NullPointerException when {@code descriptor} is null
     */
    Tensor receive(Descriptor descriptor) {
        Objects.requireNonNull(descriptor, "descriptor");
        return receive(descriptor, descriptor.slot());
    }

    /** Receives the token in {@code slot} of a message of the block {@code descriptor} describes. */
    private Tensor receive(Descriptor descriptor, int slot) {
        TensorLayout layout = descriptor.tensor() != null ? descriptor.tensor()
                : TensorLayout.contiguous(DType.UINT8, descriptor.length());
        ReceivedBlock block = sharing.receive(descriptor, slot);
        try {
            return new Tensor(block, layout);
        } catch (OutOfMemoryError e) {
            sharing.unreceive(block, e); // unused: in flight again, for a queue to give the message back
            throw e;
        } catch (RuntimeException e) {
            block.release();
            throw e;
        }
    }

    /**
     * Returns the reference of a message that will never be received: its transport failed,
     * its receiver left. Any process that has the message may cancel it; once cancelled it
     * can no longer be received.
     *
     * @param message the bytes {@link #share} returned
     * @return true when the reference was returned; false when the message was already
     *         received or cancelled (then nothing changes)
     * @throws NullPointerException when {@code message} is null
     * @throws InvalidDataException when the bytes are not a message refshare made
     * @throws RefshareException    when the counter file the message names is unusable
     */
    public boolean cancel(byte[] message) {
        Objects.requireNonNull(message, "message (the bytes share() returned)");
        return sharing.cancel(DescriptorCodec.decode(message));
    }

    /**
     * Frees the blocks in the limbo that no process uses any more. A background collector
     * does this by itself; call it before reading {@link #stats()}, or to get memory back at
     * once. On return the limbo holds only blocks still in use: a collection the background
     * collector was running at the same time has finished too.
     *
     * @return the blocks this call freed (not those the background collector freed meanwhile)
     */
    public int collect() {
        return sharing.collectAndSettle();
    }

    /**
     * Frees what the limbo can and returns cached free memory to the system (removing the
     * segment files that hold no block). Allocation stays possible and grows again on
     * demand. For a process that is done with a burst of work and should shrink.
     *
     * @return the bytes of segments given back, host and device
     */
    public long trim() {
        return sharing.trim();
    }

    /**
     * Waits until no block of this process is in the limbo (every consumer is done), up to
     * {@code timeout}, collecting as it polls (every millisecond). For an orderly shutdown:
     * close the tensors, wait here, then {@link #close()}. Only blocks whose tensors this
     * process has closed are in the limbo: one still open here is not waited for.
     *
     * @param timeout how long to wait; zero or negative checks once
     * @return true when the limbo is empty, false when the timeout passed first
     * @throws InterruptedException when the waiting thread is interrupted
     * @throws NullPointerException when {@code timeout} is null
     */
    public boolean awaitLimboEmpty(Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            sharing.collectAndSettle();
            if (sharing.stats().limboBlocks() == 0) {
                return true;
            }
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            Thread.sleep(1);
        }
    }

    /**
     * What this instance holds now: its pool, its limbo, the files it created and mapped, and
     * counts since it opened.
     *
     * @return a snapshot
     */
    public RefshareStats stats() {
        return sharing.stats();
    }

    /**
     * References to this process's memory that are counted now: messages in flight and blocks
     * other processes hold. Scans the counter files: for monitoring, not hot paths.
     *
     * @return the number of live references
     */
    public long liveCounts() {
        return sharing.liveCounts();
    }

    /** The engine underneath, for the queue and holder classes beside this one. */
    Sharing sharing() {
        return sharing;
    }

    /**
     * Gives back every reference this process still holds (its peer entries in other
     * processes' counter files are freed), removes its files, and, when this was the last open
     * instance of its directory in this process, gives up its life lock there. Idempotent;
     * safe from any thread.
     *
     * <p>Every tensor of this instance still open then reports {@link Tensor#isClosed()} and
     * its data can no longer be read; queues and holders opened through it can no longer put,
     * take, publish or acquire (close them first).
     * Messages it shared that no process has received yet can then fail to be received (their
     * files are gone): let consumers finish first ({@link #awaitLimboEmpty}).
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            sharing.close();
        } finally {
            OpenDirectories.closed(sharing.directory());
        }
    }
}
