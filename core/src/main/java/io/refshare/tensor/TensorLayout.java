package io.refshare.tensor;

import io.refshare.exceptions.InvalidDataException;

import java.util.Arrays;
import java.util.Objects;

/**
 * How a tensor's elements sit in a block of storage: element type, shape, strides and
 * storage offset, the last two counted in elements (as PyTorch does, not bytes as numpy
 * does). Element {@code [i0, i1, ...]} lives at element index
 * {@code storageOffset + i0*strides[0] + i1*strides[1] + ...} of the block.
 *
 * <p>Layouts arrive from other processes, so a layout that exists is always sane: rank at
 * most {@link #MAX_RANK}, no negative dimension, stride or offset, and no arithmetic on it
 * overflows a {@code long} (the element count, the largest addressed index and its byte
 * position are all checked with exact arithmetic). Negative strides are not supported:
 * numpy and PyTorch readers would need different pointer arithmetic for them.
 *
 * <p>Views ({@link #slice}, {@link #narrow}, {@link #select}, {@link #transpose},
 * {@link #reshape}) return new layouts over the same storage and never address an element
 * outside what this layout addresses; an empty view keeps this layout's storage offset,
 * so a view of a layout that {@linkplain #checkFits fits} its block fits it too.
 *
 * <p>The arrays are copied in and out, so a layout is immutable; {@code equals},
 * {@code hashCode} and {@code toString} compare and show their contents.
 *
 * @param dtype         element type
 * @param shape         size of each dimension, outermost first
 * @param strides       distance in elements between neighbours along each dimension
 * @param storageOffset element index in the block of element {@code [0, 0, ...]}
 */
public record TensorLayout(DType dtype, long[] shape, long[] strides, long storageOffset) {

    /** The largest rank a layout may have (as in numpy before 2.0; the wire format relies on it). */
    public static final int MAX_RANK = 16;

    /**
     * The last layout {@link #contiguous} made: a producer allocating tensor after tensor of
     * one shape gets the same immutable layout instead of checking and copying it anew each
     * time. Read and written without synchronization: a layout is immutable (its fields are
     * final), so any reference a thread finds here is whole.
     */
    private static TensorLayout lastContiguous;

    /**
     * A layout as given, checked to be sane; the arrays are copied.
     *
     * @param dtype         element type
     * @param shape         size of each dimension, outermost first
     * @param strides       distance in elements between neighbours along each dimension, one
     *                      per dimension
     * @param storageOffset element index in the block of element {@code [0, 0, ...]}
     * @throws IllegalArgumentException when the layout is not sane (see the class comment)
     * @throws NullPointerException     when {@code dtype}, {@code shape} or {@code strides} is null
     */
    public TensorLayout {
        Objects.requireNonNull(dtype, "dtype");
        Objects.requireNonNull(shape, "shape");
        Objects.requireNonNull(strides, "strides");
        shape = shape.clone();
        strides = strides.clone();
        if (shape.length > MAX_RANK) {
            throw new IllegalArgumentException("rank " + shape.length + " exceeds the maximum of " + MAX_RANK);
        }
        if (strides.length != shape.length) {
            throw new IllegalArgumentException("shape has rank " + shape.length + " but strides has "
                    + strides.length + " entries");
        }
        if (storageOffset < 0) {
            throw new IllegalArgumentException("storage offset is negative: " + storageOffset);
        }
        for (int i = 0; i < shape.length; i++) {
            if (shape[i] < 0) {
                throw new IllegalArgumentException("shape[" + i + "] is negative: " + shape[i]);
            }
            if (strides[i] < 0) {
                throw new IllegalArgumentException("strides[" + i + "] is negative: " + strides[i]
                        + " (negative strides are not supported)");
            }
        }
        // Both are checked for empty layouts too (treating a 0 dimension as 1): views,
        // reshapes and byteSpan then never need to think about overflow again.
        try {
            long count = 1;
            for (long d : shape) {
                count = Math.multiplyExact(count, Math.max(d, 1));
            }
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("element count of shape " + Arrays.toString(shape)
                    + " overflows 64 bits");
        }
        try {
            long last = lastIndex(shape, strides, storageOffset);
            Math.multiplyExact(Math.addExact(last, 1), dtype.byteSize());
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("addressed range of shape " + Arrays.toString(shape) + ", strides "
                    + Arrays.toString(strides) + ", storage offset " + storageOffset + " overflows 64 bits");
        }
    }

    /**
     * A dense row-major layout at storage offset 0: what {@code numpy.empty(shape)} and
     * {@code torch.empty(shape)} make.
     *
     * @param dtype element type
     * @param shape size of each dimension, outermost first; none for a scalar
     * @return the layout
     * @throws IllegalArgumentException when the shape has a negative dimension, more than
     *                                  {@value #MAX_RANK} dimensions, or too many elements
     * @throws NullPointerException     when {@code dtype} or {@code shape} is null
     */
    public static TensorLayout contiguous(DType dtype, long... shape) {
        TensorLayout last = lastContiguous;
        if (last != null && last.dtype == dtype && Arrays.equals(last.shape, shape)) {
            return last;
        }
        return lastContiguous = new TensorLayout(dtype, shape, contiguousStrides(shape), 0);
    }

    /**
     * Row-major strides for {@code shape}. A 0 dimension counts as 1, as in PyTorch, so the
     * strides stay meaningful (and finite) for empty shapes.
     *
     * @param shape size of each dimension, outermost first
     * @return the strides, in elements: the last is 1
     * @throws IllegalArgumentException when the shape has a negative dimension or too many elements
     */
    public static long[] contiguousStrides(long... shape) {
        long[] strides = new long[shape.length];
        long next = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            if (shape[i] < 0) {
                throw new IllegalArgumentException("shape[" + i + "] is negative: " + shape[i]);
            }
            strides[i] = next;
            try {
                next = Math.multiplyExact(next, Math.max(shape[i], 1));
            } catch (ArithmeticException e) {
                throw new IllegalArgumentException("element count of shape " + Arrays.toString(shape)
                        + " overflows 64 bits");
            }
        }
        return strides;
    }

    /**
     * The size of each dimension, outermost first.
     *
     * @return a copy of the shape, so changing it changes nothing here
     */
    @Override
    public long[] shape() {
        return shape.clone();
    }

    /**
     * The distance in elements between neighbours along each dimension.
     *
     * @return a copy of the strides, so changing it changes nothing here
     */
    @Override
    public long[] strides() {
        return strides.clone();
    }

    /**
     * The number of dimensions.
     *
     * @return 0 (a scalar) .. {@value #MAX_RANK}
     */
    public int rank() {
        return shape.length;
    }

    /**
     * Size of one dimension, without copying the shape.
     *
     * @param dim the dimension, 0 .. rank - 1
     * @return its size
     * @throws IndexOutOfBoundsException when {@code dim} does not exist
     */
    public long shape(int dim) {
        return shape[Objects.checkIndex(dim, shape.length)];
    }

    /**
     * Stride of one dimension in elements, without copying the strides.
     *
     * @param dim the dimension, 0 .. rank - 1
     * @return its stride
     * @throws IndexOutOfBoundsException when {@code dim} does not exist
     */
    public long stride(int dim) {
        return strides[Objects.checkIndex(dim, strides.length)];
    }

    /**
     * Number of elements: the product of the shape.
     *
     * @return the count; 1 for rank 0, 0 when a dimension is 0
     */
    public long elementCount() {
        long count = 1;
        for (long d : shape) {
            count *= d; // cannot overflow: the constructor checked the product
        }
        return count;
    }

    /**
     * Whether the layout addresses no element.
     *
     * @return true when a dimension is 0
     */
    public boolean isEmpty() {
        for (long d : shape) {
            if (d == 0) {
                return true;
            }
        }
        return false;
    }

    /**
     * Byte position in the block of element {@code [0, 0, ...]}.
     *
     * @return {@code storageOffset * dtype.byteSize()}
     */
    public long byteOffset() {
        return storageOffset * dtype.byteSize();
    }

    /**
     * Bytes the block must hold for this layout: from byte 0 of the block to one past the
     * last addressed element. An empty layout addresses nothing, but its storage offset
     * must still lie within the block (numpy refuses an offset beyond its buffer), so its
     * span is {@link #byteOffset()}.
     *
     * @return the bytes needed, counted from the start of the block
     */
    public long byteSpan() {
        if (isEmpty()) {
            return byteOffset();
        }
        return (lastIndex(shape, strides, storageOffset) + 1) * dtype.byteSize();
    }

    /**
     * Checks that this layout stays within a block of {@code storageBytes} bytes: that its
     * {@link #byteSpan()} is at most that.
     *
     * @param storageBytes the block's length in bytes
     * @throws InvalidDataException when it addresses bytes beyond the block
     */
    public void checkFits(long storageBytes) {
        long span = byteSpan();
        if (span > storageBytes) {
            throw new InvalidDataException("tensor " + this + " needs " + span + " bytes of storage but the block has "
                    + storageBytes);
        }
    }

    /**
     * True when the elements are dense and row-major from the storage offset on, as in
     * PyTorch's {@code is_contiguous()}: strides of dimensions of size 1 do not matter, and
     * an empty layout is contiguous. Only a contiguous layout can be reshaped.
     *
     * @return true when contiguous
     */
    public boolean isContiguous() {
        if (isEmpty()) {
            return true;
        }
        long expected = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            if (shape[i] != 1) {
                if (strides[i] != expected) {
                    return false;
                }
                expected *= shape[i];
            }
        }
        return true;
    }

    /**
     * Elements {@code start} (inclusive) to {@code end} (exclusive) along {@code dim}, as
     * Python's {@code t[start:end]} without negative indices.
     *
     * @param dim   the dimension, 0 .. rank - 1
     * @param start the first element taken
     * @param end   one past the last element taken
     * @return the view's layout
     * @throws IllegalArgumentException unless {@code dim} exists and {@code 0 <= start <= end <= shape(dim)}
     */
    public TensorLayout slice(int dim, long start, long end) {
        return slice(dim, start, end, 1);
    }

    /**
     * Every {@code step}-th element from {@code start} (inclusive) to {@code end} (exclusive)
     * along {@code dim}, as Python's {@code t[start:end:step]}.
     *
     * @param dim   the dimension, 0 .. rank - 1
     * @param start the first element taken
     * @param end   the bound, exclusive
     * @param step  the distance between taken elements, 1 or more
     * @return the view's layout
     * @throws IllegalArgumentException unless {@code dim} exists, {@code 0 <= start <= end <= shape(dim)}
     *                                  and {@code step >= 1}
     */
    public TensorLayout slice(int dim, long start, long end, long step) {
        checkDim(dim);
        if (start < 0 || start > end || end > shape[dim]) {
            throw new IllegalArgumentException("slice [" + start + ", " + end + ") is not within dimension " + dim
                    + " of size " + shape[dim]);
        }
        if (step < 1) {
            throw new IllegalArgumentException("slice step must be at least 1: " + step);
        }
        long[] newShape = shape.clone();
        long[] newStrides = strides.clone();
        newShape[dim] = end == start ? 0 : (end - start - 1) / step + 1;
        if (newShape[dim] > 1) {
            // only multiplied when it is used, so a huge step on one element cannot overflow
            newStrides[dim] = Math.multiplyExact(strides[dim], step);
        }
        return view(newShape, newStrides, start * strides[dim]);
    }

    /**
     * {@code length} elements from {@code start} along {@code dim} (PyTorch's {@code narrow}).
     *
     * @param dim    the dimension, 0 .. rank - 1
     * @param start  the first element taken
     * @param length how many elements; 0 gives an empty layout
     * @return the view's layout
     * @throws IllegalArgumentException unless {@code dim} exists and the range lies within it
     */
    public TensorLayout narrow(int dim, long start, long length) {
        if (length < 0 || start < 0 || start > Long.MAX_VALUE - length) {
            throw new IllegalArgumentException("narrow(" + dim + ", " + start + ", " + length + "): negative or too large");
        }
        return slice(dim, start, start + length);
    }

    /**
     * The layout one rank lower at {@code index} along {@code dim} (PyTorch's {@code select},
     * numpy's {@code t[..., index, ...]}).
     *
     * @param dim   the dimension removed, 0 .. rank - 1
     * @param index the position kept along it
     * @return the view's layout
     * @throws IllegalArgumentException unless {@code dim} exists and {@code 0 <= index < shape(dim)}
     */
    public TensorLayout select(int dim, long index) {
        checkDim(dim);
        if (index < 0 || index >= shape[dim]) {
            throw new IllegalArgumentException("index " + index + " is out of bounds for dimension " + dim
                    + " of size " + shape[dim]);
        }
        long[] newShape = new long[shape.length - 1];
        long[] newStrides = new long[shape.length - 1];
        for (int i = 0, j = 0; i < shape.length; i++) {
            if (i != dim) {
                newShape[j] = shape[i];
                newStrides[j++] = strides[i];
            }
        }
        return view(newShape, newStrides, index * strides[dim]);
    }

    /**
     * The layout with dimensions {@code a} and {@code b} swapped: shape and strides exchanged,
     * no element moved, so the result is usually not contiguous.
     *
     * @param a one dimension, 0 .. rank - 1
     * @param b the other; equal to {@code a} gives an equal layout
     * @return the view's layout
     * @throws IllegalArgumentException when a dimension does not exist
     */
    public TensorLayout transpose(int a, int b) {
        checkDim(a);
        checkDim(b);
        long[] newShape = shape.clone();
        long[] newStrides = strides.clone();
        newShape[a] = shape[b];
        newShape[b] = shape[a];
        newStrides[a] = strides[b];
        newStrides[b] = strides[a];
        return new TensorLayout(dtype, newShape, newStrides, storageOffset);
    }

    /**
     * The same elements in a new shape, row-major; at most one dimension may be -1 and is
     * then inferred. Only a {@linkplain #isContiguous() contiguous} layout can be reshaped
     * without copying, so any other is refused.
     *
     * @param newShape the new shape; at most one -1
     * @return the layout, contiguous at this layout's storage offset
     * @throws IllegalStateException    when this layout is not contiguous
     * @throws IllegalArgumentException when the new shape does not hold the same number of
     *                                  elements, has more than one -1 or another negative
     *                                  dimension, or more than {@value #MAX_RANK} dimensions
     */
    public TensorLayout reshape(long... newShape) {
        if (!isContiguous()) {
            throw new IllegalStateException("cannot reshape non-contiguous " + this
                    + " without copying; copy it into a contiguous block first");
        }
        long count = elementCount();
        long[] target = newShape.clone();
        int inferred = -1;
        long known = 1;
        for (int i = 0; i < target.length; i++) {
            if (target[i] == -1) {
                if (inferred >= 0) {
                    throw new IllegalArgumentException("reshape " + Arrays.toString(newShape)
                            + ": only one dimension can be -1");
                }
                inferred = i;
            } else if (target[i] < 0) {
                throw new IllegalArgumentException("reshape " + Arrays.toString(newShape) + ": dimension " + i
                        + " is negative");
            } else {
                known = saturatingMultiply(known, target[i]);
            }
        }
        if (inferred >= 0) {
            if (known == 0 || count % known != 0) {
                throw new IllegalArgumentException("cannot reshape " + count + " elements into "
                        + Arrays.toString(newShape));
            }
            target[inferred] = count / known;
        } else if (known != count) {
            throw new IllegalArgumentException("cannot reshape " + count + " elements of shape "
                    + Arrays.toString(shape) + " into " + Arrays.toString(newShape));
        }
        return new TensorLayout(dtype, target, contiguousStrides(target), storageOffset);
    }

    private TensorLayout view(long[] newShape, long[] newStrides, long offsetDelta) {
        boolean empty = false;
        for (long d : newShape) {
            empty |= d == 0;
        }
        // An empty view addresses nothing; moving its offset could push it past the end of
        // the block (offsetDelta may be a whole dimension's extent), so keep ours.
        long offset = empty ? storageOffset : storageOffset + offsetDelta;
        return new TensorLayout(dtype, newShape, newStrides, offset);
    }

    private void checkDim(int dim) {
        if (dim < 0 || dim >= shape.length) {
            throw new IllegalArgumentException("dimension " + dim + " does not exist in a rank-" + shape.length
                    + " layout");
        }
    }

    // A product that overflows is larger than any element count, so saturating keeps
    // "does it match the count" exact; a later 0 still (correctly) makes it 0.
    private static long saturatingMultiply(long a, long b) {
        long high = Math.multiplyHigh(a, b);
        long low = a * b;
        return high != 0 || low < 0 ? Long.MAX_VALUE : low;
    }

    /** Index of the last addressed element, as if no dimension were 0; exact arithmetic. */
    private static long lastIndex(long[] shape, long[] strides, long storageOffset) {
        long last = storageOffset;
        for (int i = 0; i < shape.length; i++) {
            last = Math.addExact(last, Math.multiplyExact(Math.max(shape[i] - 1, 0), strides[i]));
        }
        return last;
    }

    /**
     * Whether {@code o} is a layout with the same dtype, shape, strides and storage offset
     * (array contents compared, not identities).
     *
     * @param o the object to compare with
     * @return true when equal
     */
    @Override
    public boolean equals(Object o) {
        return o instanceof TensorLayout that
                && dtype == that.dtype
                && storageOffset == that.storageOffset
                && Arrays.equals(shape, that.shape)
                && Arrays.equals(strides, that.strides);
    }

    /**
     * A hash consistent with {@link #equals(Object)}.
     *
     * @return the hash of the dtype, the arrays' contents and the offset
     */
    @Override
    public int hashCode() {
        return Objects.hash(dtype, Arrays.hashCode(shape), Arrays.hashCode(strides), storageOffset);
    }

    /**
     * A description for logs, with the arrays' contents.
     *
     * @return {@code TensorLayout[dtype, shape=[...], strides=[...], storageOffset=n]}
     */
    @Override
    public String toString() {
        return "TensorLayout[" + dtype.numpyName() + ", shape=" + Arrays.toString(shape) + ", strides="
                + Arrays.toString(strides) + ", storageOffset=" + storageOffset + "]";
    }
}
