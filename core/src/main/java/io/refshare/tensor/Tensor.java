package io.refshare.tensor;

import io.refshare.observe.LeakDetector;
import io.refshare.share.Storage;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A typed, shaped view ({@link TensorLayout}) over a {@link Storage}. Views made with
 * {@link #slice}, {@link #select}, {@link #transpose} or {@link #reshape} share the storage
 * and are shared with other processes as the same block.
 *
 * <h2>Lifecycle</h2>
 * Each tensor holds one reference to its storage; {@link #close()} gives it back. The
 * storage is freed (or, if other processes still use it, parked in the limbo until they
 * are done) when the last tensor over it in this process is closed.
 * <ul>
 * <li>{@code close()} twice: the second call does nothing.</li>
 * <li>{@code close()} from another thread: safe; exactly one call releases the reference.</li>
 * <li>After {@code close()}, {@link #data()} and the view methods throw
 * {@link IllegalStateException}. A {@code MemorySegment} obtained before must not be
 * used after: producer memory is pooled and will be reused.</li>
 * <li>For a received tensor whose producer has died, the memory stays valid until it is
 * closed, and closing succeeds quietly.</li>
 * </ul>
 */
public final class Tensor implements AutoCloseable {
    private final Storage storage;
    private final TensorLayout layout;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LeakDetector.Watch leakWatch;

    /** Wraps a storage reference the caller hands over (it is released on {@link #close()}). */
    public Tensor(Storage storage, TensorLayout layout) {
        this(storage, layout, false);
    }

    /**
     * Like {@link #Tensor(Storage, TensorLayout)}; with {@code watchForLeaks} the
     * {@link LeakDetector} reports (and releases) the reference if this tensor is
     * garbage-collected without {@link #close()}.
     */
    public Tensor(Storage storage, TensorLayout layout, boolean watchForLeaks) {
        layout.checkFits(storage.byteSize());
        this.storage = storage;
        this.layout = layout;
        this.leakWatch = watchForLeaks ? LeakDetector.watch(this, storage::release, storage.byteSize()) : null;
    }

    public TensorLayout layout() {
        return layout;
    }

    public DType dtype() {
        return layout.dtype();
    }

    public long[] shape() {
        return layout.shape();
    }

    public long elementCount() {
        return layout.elementCount();
    }

    /** The storage this tensor views (for sharing); valid while the tensor is open. */
    public Storage storage() {
        ensureOpen();
        return storage;
    }

    /**
     * The bytes this tensor addresses: from its first element to one past its last, in
     * storage order. For a contiguous tensor that is exactly its elements.
     */
    public MemorySegment data() {
        ensureOpen();
        long start = layout.byteOffset();
        return storage.memory().asSlice(start, layout.byteSpan() - start);
    }

    /** Byte offset of an element within {@link #data()}. */
    public long offsetOf(long... index) {
        if (index.length != layout.rank()) {
            throw new IllegalArgumentException("index of rank " + index.length + " for a tensor of rank " + layout.rank());
        }
        long elements = 0;
        for (int d = 0; d < index.length; d++) {
            if (index[d] < 0 || index[d] >= layout.shape(d)) {
                throw new IndexOutOfBoundsException("index " + index[d] + " out of range for dimension " + d
                        + " of size " + layout.shape(d));
            }
            elements += index[d] * layout.stride(d);
        }
        return elements * layout.dtype().byteSize();
    }

    public Tensor slice(int dim, long start, long end) {
        return view(layout().slice(dim, start, end));
    }

    public Tensor select(int dim, long index) {
        return view(layout().select(dim, index));
    }

    public Tensor transpose(int a, int b) {
        return view(layout().transpose(a, b));
    }

    public Tensor reshape(long... shape) {
        return view(layout().reshape(shape));
    }

    private Tensor view(TensorLayout viewLayout) {
        ensureOpen();
        return new Tensor(storage.retain(), viewLayout);
    }

    public boolean isClosed() {
        return closed.get();
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            if (leakWatch != null) {
                leakWatch.closed();
            }
            storage.release();
        }
    }

    private void ensureOpen() {
        if (closed.get()) {
            throw new IllegalStateException("tensor is closed");
        }
    }

    @Override
    public String toString() {
        return "Tensor" + layout + (closed.get() ? " (closed)" : "");
    }
}
