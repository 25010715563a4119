package io.refshare;

import io.refshare.wire.Backend;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.observe.LeakDetector;
import io.refshare.share.Storage;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Locale;

/**
 * A typed, shaped view ({@link TensorLayout}) over a block of memory: host shared memory,
 * or CUDA device memory ({@link #isCuda()}). Tensors come from {@link Refshare#allocate},
 * {@link Refshare#receive}, {@link ShareQueue#take} and {@link SharedHolder#acquire}. Views
 * made with {@link #view}, {@link #narrow}, {@link #slice}, {@link #select},
 * {@link #transpose} or {@link #reshape} share the block and are shared with other
 * processes as the same block. The metadata ({@link #layout()}, {@link #dtype()},
 * {@link #shape()}, {@link #elementCount()}) stays readable after close.
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
 * <li>After the {@code Refshare} it belongs to is closed (which gave back every reference and
 * unmapped the memory), the tensor reports {@link #isClosed()} {@code true}, {@link #data()}
 * throws {@link IllegalStateException} saying so, and {@code close()} does nothing.</li>
 * </ul>
 *
 * <h2>Bytes</h2>
 * Elements are little-endian (the wire format's order, and the native order of every machine
 * refshare runs on). A received tensor's {@link #data()} is read-only: its bytes are another
 * process's memory, which every other receiver sees (a write through it throws
 * {@link IllegalArgumentException}, the JDK's answer for a read-only segment); so is that of a
 * tensor acquired from a {@link SharedHolder}. {@link #writableData()} is there for protocols
 * that really mean to write into it. The host cannot address device memory: for a CUDA
 * tensor, {@link #data()} and the element accessors throw
 * {@link UnsupportedOperationException}; copy it through {@link Refshare#cuda()}.
 */
public final class Tensor implements AutoCloseable {
    private static final VarHandle STATE;
    /** The state of a closed tensor. */
    private static final Object CLOSED = new Object();

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(Tensor.class, "state", Object.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Storage storage;
    private final TensorLayout layout;
    /**
     * While open, null or the {@link LeakDetector.Watch} on this tensor; {@link #CLOSED} once
     * closed. One field for both: a received tensor is the one object its message leaves behind,
     * and this keeps it at 24 bytes.
     */
    private volatile Object state;

    /**
     * Wraps a storage reference the caller hands over (it is released on {@link #close()}).
     * The one place where memory of another process reaches user code: every tensor over a
     * mapping (received, acquired from a holder, or a view of one) is watched by the
     * {@link LeakDetector}, which reports and releases the reference if the tensor is
     * garbage-collected without {@link #close()}.
     */
    Tensor(Storage storage, TensorLayout layout) {
        layout.checkFits(storage.byteSize());
        this.storage = storage;
        this.layout = layout;
        if (storage.isMapping() && LeakDetector.sample()) {
            // a release store, and none for the usual null: a volatile store is a full fence on x86
            STATE.setRelease(this, LeakDetector.watch(this, storage::release, storage.byteSize()));
        }
    }

    /**
     * The element type, shape, strides and offset of this view. Readable after close.
     *
     * @return the layout, immutable
     */
    public TensorLayout layout() {
        return layout;
    }

    /**
     * The element type. Readable after close.
     *
     * @return {@code layout().dtype()}
     */
    public DType dtype() {
        return layout.dtype();
    }

    /**
     * The size of each dimension, outermost first. Readable after close.
     *
     * @return a fresh copy, so changing it changes nothing here
     */
    public long[] shape() {
        return layout.shape();
    }

    /**
     * The number of elements: the product of the shape. Readable after close.
     *
     * @return the count; 1 for a rank-0 tensor, 0 when a dimension is 0
     */
    public long elementCount() {
        return layout.elementCount();
    }

    /**
     * Where this device tensor's first element is in this process's CUDA address space, for
     * kernels and other CUDA code (PyTorch's {@code data_ptr()}): its memory's device address
     * plus the layout's byte offset.
     *
     * @return a device pointer, valid until this tensor is closed
     * @throws UnsupportedOperationException for a tensor in host memory (use {@link #data()})
     * @throws IllegalStateException         once this tensor, or its {@code Refshare}, is closed
     */
    public long deviceAddress() {
        ensureOpen();
        return storage.deviceAddress() + layout.byteOffset();
    }

    /**
     * The storage this tensor views, for the classes beside this one (sharing, the CUDA copies);
     * valid while the tensor is open.
     *
     * @return the storage, without a reference of its own: do not use it past {@link #close()}
     * @throws IllegalStateException once this tensor, or its {@code Refshare}, is closed
     */
    Storage storage() {
        ensureOpen();
        return storage;
    }

    /**
     * The bytes this tensor addresses: from its first element to one past its last, in
     * storage order. For a contiguous tensor that is exactly its elements; for a strided view
     * it includes the elements between them that the view skips. Read-only for a received
     * tensor and one acquired from a {@link SharedHolder}. Empty when the tensor is.
     *
     * <p>The segment is not tied to this tensor's lifetime: it must not be used after
     * {@link #close()}, when the memory may already be reused or unmapped.
     *
     * @return the bytes, little-endian elements
     * @throws IllegalStateException         once this tensor, or its {@code Refshare}, is closed
     * @throws UnsupportedOperationException for a CUDA tensor: the host cannot address its memory
     */
    public MemorySegment data() {
        ensureOpen();
        return bytesOf(storage.memory());
    }

    /**
     * Like {@link #data()}, but writable also for a received tensor: writes land in the
     * producer's memory, seen by every process that holds it, with no synchronization (the
     * processes must agree among themselves who writes when).
     *
     * @return the bytes, writable
     * @throws IllegalStateException         once this tensor, or its {@code Refshare}, is closed
     * @throws UnsupportedOperationException for a CUDA tensor: the host cannot address its memory
     */
    public MemorySegment writableData() {
        ensureOpen();
        return bytesOf(storage.writableMemory());
    }

    private MemorySegment bytesOf(MemorySegment memory) {
        long start = layout.byteOffset();
        long length = layout.byteSpan() - start;
        // a tensor over its whole block (the common case) needs no slice object of its own
        return start == 0 && length == memory.byteSize() ? memory : memory.asSlice(start, length);
    }

    /**
     * {@link #data()} as a {@link ByteBuffer}, its order set to little-endian (the JDK's
     * default is big-endian, which would misread every multi-byte element). Same lifetime
     * rule as {@code data()}: not to be used after {@link #close()}.
     *
     * @return a buffer over the same bytes, read-only where {@code data()} is
     * @throws IllegalStateException         once this tensor, or its {@code Refshare}, is closed
     * @throws UnsupportedOperationException for a CUDA tensor, or one whose bytes exceed what a
     *                                       {@code ByteBuffer} can hold (2 GiB)
     */
    public ByteBuffer asByteBuffer() {
        return data().asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * The element at {@code index} of a floating-point tensor as a {@code float}: float16 and
     * bfloat16 widened exactly, float64 rounded.
     *
     * @param index one index per dimension (none for a rank-0 tensor)
     * @return the element's value
     * @throws UnsupportedOperationException for a tensor of another dtype, or a CUDA tensor
     * @throws IllegalArgumentException      when {@code index} has not one entry per dimension
     * @throws IndexOutOfBoundsException     when an index is outside its dimension
     * @throws IllegalStateException         once this tensor, or its {@code Refshare}, is closed
     */
    public float getFloat(long... index) {
        MemorySegment m = storage().memory();
        long at = byteIndex(index);
        return switch (floatingDtype()) {
            case FLOAT16 -> Float.float16ToFloat(m.get(SHORT_LE, at));
            case BFLOAT16 -> Float.intBitsToFloat((m.get(SHORT_LE, at) & 0xFFFF) << 16);
            case FLOAT32 -> m.get(FLOAT_LE, at);
            default -> (float) m.get(DOUBLE_LE, at);
        };
    }

    /**
     * Stores {@code value} at {@code index} of a floating-point tensor, rounded to nearest even
     * for float16 and bfloat16 (as PyTorch converts), widened exactly for float64.
     *
     * @param value the value to store
     * @param index one index per dimension (none for a rank-0 tensor)
     * @throws UnsupportedOperationException for a tensor of another dtype, or a CUDA tensor
     * @throws IllegalArgumentException      for a received tensor, whose {@link #data()} is
     *                                       read-only, or when {@code index} has not one entry
     *                                       per dimension
     * @throws IndexOutOfBoundsException     when an index is outside its dimension
     * @throws IllegalStateException         once this tensor, or its {@code Refshare}, is closed
     */
    public void setFloat(float value, long... index) {
        MemorySegment m = storage().memory();
        long at = byteIndex(index);
        switch (floatingDtype()) {
            case FLOAT16 -> m.set(SHORT_LE, at, Float.floatToFloat16(value));
            case BFLOAT16 -> m.set(SHORT_LE, at, toBfloat16(value));
            case FLOAT32 -> m.set(FLOAT_LE, at, value);
            default -> m.set(DOUBLE_LE, at, value);
        }
    }

    /** bfloat16 bits of {@code value}: the upper half of its float32 bits, rounded to nearest even. */
    static short toBfloat16(float value) {
        int bits = Float.floatToRawIntBits(value);
        if (Float.isNaN(value)) {
            return (short) ((bits >>> 16) | 0x40); // stays a (quiet) NaN
        }
        return (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
    }

    private static final ValueLayout.OfShort SHORT_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble DOUBLE_LE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private DType floatingDtype() {
        if (!layout.dtype().isFloatingPoint()) {
            throw new UnsupportedOperationException("getFloat/setFloat need a floating-point tensor; this one is "
                    + layout.dtype().numpyName());
        }
        return layout.dtype();
    }

    /** Byte offset of the element at {@code index} within the storage. */
    private long byteIndex(long[] index) {
        return layout.byteOffset() + offsetOf(index);
    }

    /**
     * Where an element lies within {@link #data()}, for reading it with a
     * {@link ValueLayout}. Needs no open tensor: it is arithmetic on the layout.
     *
     * @param index one index per dimension (none for a rank-0 tensor)
     * @return the element's byte offset from the start of {@code data()}
     * @throws IllegalArgumentException  when {@code index} has not one entry per dimension
     * @throws IndexOutOfBoundsException when an index is outside its dimension
     */
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

    /**
     * Another tensor over the same memory with {@code layout} (any shape, strides and offset
     * that stay within the memory), holding its own reference: close both. The general form
     * of {@link #narrow}, {@link #select}, {@link #transpose} and {@link #reshape}, like
     * PyTorch's {@code as_strided}.
     *
     * <p>The layout's offset and strides count from the start of the memory block, not from
     * this view's first element: take them from {@link #layout()} to stay relative to it.
     *
     * @param layout the view's element type, shape, strides and offset
     * @return the view, open however this tensor is closed later
     * @throws IllegalArgumentException when {@code layout} addresses bytes outside the memory
     * @throws IllegalStateException    once this tensor, or its {@code Refshare}, is closed
     * @throws NullPointerException     when {@code layout} is null
     */
    public Tensor view(TensorLayout layout) {
        ensureOpen();
        if (layout.byteSpan() > storage.byteSize()) {
            throw new IllegalArgumentException("a view " + layout + " needs " + layout.byteSpan()
                    + " bytes; this tensor's memory has " + storage.byteSize());
        }
        Storage s = storage.retain();
        try {
            return new Tensor(s, layout);
        } catch (RuntimeException e) {
            s.release();
            throw e;
        }
    }

    /**
     * Where this tensor's memory is. Answers after close too.
     *
     * @return true for CUDA device memory, false for host shared memory
     */
    public boolean isCuda() {
        return storage.backend() == Backend.CUDA;
    }

    /**
     * {@code length} elements from {@code start} along {@code dim}, a view (PyTorch's
     * {@code narrow}); see {@link #view} for how views are held and closed.
     *
     * @param dim    the dimension, 0 .. rank - 1
     * @param start  the first element taken
     * @param length how many elements; 0 gives an empty view
     * @return the view
     * @throws IllegalArgumentException when the range is not within the dimension, or
     *                                  {@code dim} does not exist
     * @throws IllegalStateException    once this tensor, or its {@code Refshare}, is closed
     */
    public Tensor narrow(int dim, long start, long length) {
        return view(layout().narrow(dim, start, length));
    }

    /**
     * Elements {@code start} (inclusive) to {@code end} (exclusive) along {@code dim}, a view
     * (Python's {@code t[start:end]}, without negative indices); see {@link #view} for how
     * views are held and closed.
     *
     * @param dim   the dimension, 0 .. rank - 1
     * @param start the first element taken
     * @param end   one past the last element taken
     * @return the view
     * @throws IllegalArgumentException unless {@code 0 <= start <= end <= shape[dim]} and
     *                                  {@code dim} exists
     * @throws IllegalStateException    once this tensor, or its {@code Refshare}, is closed
     */
    public Tensor slice(int dim, long start, long end) {
        return view(layout().slice(dim, start, end));
    }

    /**
     * The view one rank lower at {@code index} along {@code dim} (PyTorch's {@code select});
     * see {@link #view} for how views are held and closed.
     *
     * @param dim   the dimension removed, 0 .. rank - 1
     * @param index the position kept along it
     * @return the view
     * @throws IllegalArgumentException when {@code index} is outside the dimension, or
     *                                  {@code dim} does not exist
     * @throws IllegalStateException    once this tensor, or its {@code Refshare}, is closed
     */
    public Tensor select(int dim, long index) {
        return view(layout().select(dim, index));
    }

    /**
     * The view with dimensions {@code a} and {@code b} swapped (no data moves: only the
     * strides are exchanged, so the result is usually not contiguous); see {@link #view} for
     * how views are held and closed.
     *
     * @param a one dimension, 0 .. rank - 1
     * @param b the other; equal to {@code a} gives a view of the same layout
     * @return the view
     * @throws IllegalArgumentException when a dimension does not exist
     * @throws IllegalStateException    once this tensor, or its {@code Refshare}, is closed
     */
    public Tensor transpose(int a, int b) {
        return view(layout().transpose(a, b));
    }

    /**
     * The same elements in a new shape, a view; at most one dimension may be -1 and is then
     * inferred. See {@link #view} for how views are held and closed.
     *
     * @param shape the new shape
     * @return the view
     * @throws IllegalStateException    when this tensor is not contiguous (reshaping it would
     *                                  need a copy), or once it or its {@code Refshare} is closed
     * @throws IllegalArgumentException when the new shape does not hold the same number of elements
     */
    public Tensor reshape(long... shape) {
        return view(layout().reshape(shape));
    }

    /**
     * Whether this tensor can no longer be read.
     *
     * @return true once {@link #close()} was called or the {@code Refshare} this tensor belongs
     *         to was closed
     */
    public boolean isClosed() {
        return state == CLOSED || storage.isDetached();
    }

    /**
     * Gives this tensor's reference back. Idempotent, safe from any thread, quiet after the
     * producer died and after this process's {@code Refshare} was closed (which already gave
     * every reference back).
     */
    @Override
    public void close() {
        Object was = STATE.getAndSet(this, CLOSED);
        if (was != CLOSED) {
            if (was instanceof LeakDetector.Watch watch) {
                watch.closed();
            }
            if (!storage.isDetached()) {
                storage.release();
            }
        }
    }

    private void ensureOpen() {
        if (state == CLOSED) {
            throw new IllegalStateException("tensor is closed");
        }
        if (storage.isDetached()) {
            throw new IllegalStateException("the Refshare this tensor belongs to is closed: its references were "
                    + "given back and its memory unmapped");
        }
    }

    /**
     * A description for logs: dtype, shape, strides and offset when not the defaults, where
     * the memory is, and whether the tensor is closed. Never the contents.
     *
     * @return the description
     */
    @Override
    public String toString() {
        return "Tensor[" + layout.dtype().numpyName() + " " + Arrays.toString(layout.shape())
                + (layout.isContiguous() ? "" : ", strides " + Arrays.toString(layout.strides()))
                + (layout.storageOffset() == 0 ? "" : ", offset " + layout.storageOffset())
                + ", " + storage.backend().name().toLowerCase(Locale.ROOT)
                + (isClosed() ? ", closed" : "") + "]";
    }
}
