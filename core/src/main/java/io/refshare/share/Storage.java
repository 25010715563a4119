package io.refshare.share;

import io.refshare.wire.Backend;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Memory that tensors in this process point into, counted within the process: each
 * tensor or view holds one reference. When the last one goes, the storage is either
 * disposed (never shared, or every shared reference already came back) or handed to the
 * limbo to wait for the consumers that still hold it.
 *
 * <p>Two kinds: a {@link LocalBlock} (this process allocated it) and a
 * {@link ReceivedBlock} (another process shared it with us). A received block can itself
 * be shared onward (forwarding); it then stays open until the last process it was
 * forwarded to lets it go.
 *
 * <p>Either kind lives in host shared memory or in CUDA device memory ({@link #backend()}):
 * host bytes are reached through {@link #memory()}, device bytes through
 * {@link #deviceAddress()} (and the copies of {@code io.refshare.cuda.driver.CudaSharing}).
 */
public abstract sealed class Storage permits LocalBlock, MappedBlock {
    private static final VarHandle REFERENCES;
    private static final byte[] NO_HANDLE = new byte[0];

    static {
        try {
            REFERENCES = MethodHandles.lookup().findVarHandle(Storage.class, "references", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** In-process references; 0 once released for good. A field, not an AtomicInteger: one object fewer per block. */
    private volatile int references;
    final Sharing sharing;
    private volatile SentBlock sent;

    Storage(Sharing sharing) {
        this.sharing = sharing;
        // a release store: a volatile one is a full fence on x86, once per message received
        REFERENCES.setRelease(this, 1);
    }

    /**
     * The bytes of this storage; throws {@link IllegalStateException} once it is released,
     * {@link UnsupportedOperationException} for device memory (the host cannot address it).
     */
    public final MemorySegment memory() {
        if (references <= 0) {
            throw new IllegalStateException(this + " is released");
        }
        return bytes();
    }

    abstract MemorySegment bytes();

    /**
     * The bytes of this storage for writing, also where {@link #memory()} is read-only (a block
     * another process shared); same failures as {@link #memory()}.
     */
    public final MemorySegment writableMemory() {
        memory();
        return writableBytes();
    }

    /** See {@link #writableMemory()}; a block read-only to this process overrides it. */
    MemorySegment writableBytes() {
        return bytes();
    }

    /**
     * True once the {@code Refshare} this storage belongs to was closed: everything it held was
     * given back and its mappings are gone, whatever the in-process count says.
     */
    public final boolean isDetached() {
        return sharing.isClosed();
    }

    /**
     * True for memory mapped from another process (received, or acquired from a holder): a
     * reference to it left unclosed pins that process's memory, so the tensors over it are
     * watched for leaks.
     */
    public final boolean isMapping() {
        return this instanceof MappedBlock;
    }

    /** Where the bytes are: host shared memory (the default) or CUDA device memory. */
    public Backend backend() {
        return Backend.HOST;
    }

    /**
     * The device address of this storage's first byte in this process (for kernels, copies,
     * interop); throws {@link IllegalStateException} once released,
     * {@link UnsupportedOperationException} for host memory.
     */
    public final long deviceAddress() {
        if (references <= 0) {
            throw new IllegalStateException(this + " is released");
        }
        return address();
    }

    /** See {@link #deviceAddress()}; device storage overrides it. */
    long address() {
        throw new UnsupportedOperationException(this + " is host memory: use memory()");
    }

    /** The IPC handle of this storage's segment, as a CUDA descriptor carries it; empty for host memory. */
    byte[] memoryHandle() {
        return NO_HANDLE;
    }

    public abstract long byteSize();

    /** Name of the segment this storage lies in, as a consumer opens it. */
    abstract String segmentName();

    abstract long segmentSize();

    /** Offset of this storage within its segment. */
    abstract long segmentOffset();

    /** Frees the memory for good: back to the allocator, or the received reference returned. */
    abstract void dispose();

    /** Adds an in-process reference; fails once the storage is released. */
    public final Storage retain() {
        int r;
        do {
            r = references;
            if (r <= 0) {
                throw new IllegalStateException(this + " is already released");
            }
        } while (!REFERENCES.compareAndSet(this, r, r + 1));
        return this;
    }

    /** Drops an in-process reference; the last one frees the storage or puts it in the limbo. */
    public final void release() {
        int r = (int) REFERENCES.getAndAdd(this, -1) - 1;
        if (r == 0) {
            sharing.lastReferenceDropped(this);
        } else if (r < 0) {
            REFERENCES.getAndAdd(this, 1);
            throw new IllegalStateException(this + " was released more often than retained");
        }
    }

    /**
     * Drops the one reference of a storage no other thread got to see, without disposing of it:
     * for a caller that gives it back another way ({@link Sharing#unreceive}). A plain write, no
     * compare-and-set: it runs when the heap is full, where linking a call site may fail.
     */
    final void dropOnlyReference() {
        references = 0;
    }

    public final int references() {
        return references;
    }

    /** The sent-block record of this storage, created at its first share. */
    final SentBlock sentBlock() {
        SentBlock s = sent;
        if (s == null) {
            synchronized (this) {
                s = sent;
                if (s == null) {
                    sent = s = new SentBlock(this);
                }
            }
        }
        return s;
    }

    /** The sent-block record, or null when this storage was never shared. */
    final SentBlock sentBlockOrNull() {
        return sent;
    }
}
