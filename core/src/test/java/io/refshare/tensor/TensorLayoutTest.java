package io.refshare.tensor;

import io.refshare.exceptions.InvalidDataException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static io.refshare.tensor.DType.FLOAT32;
import static io.refshare.tensor.DType.FLOAT64;
import static io.refshare.tensor.DType.INT16;
import static io.refshare.tensor.DType.UINT8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TensorLayoutTest {

    @Test
    void contiguousLayoutIsRowMajor() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 2, 3, 4);
        assertArrayEquals(new long[] {12, 4, 1}, t.strides());
        assertEquals(3, t.rank());
        assertEquals(24, t.elementCount());
        assertEquals(96, t.byteSpan());
        assertEquals(0, t.byteOffset());
        assertTrue(t.isContiguous());
        assertFalse(t.isEmpty());
    }

    @Test
    void scalarHasOneElement() {
        TensorLayout t = new TensorLayout(FLOAT64, new long[0], new long[0], 3);
        assertEquals(0, t.rank());
        assertEquals(1, t.elementCount());
        assertEquals(32, t.byteSpan(), "element 3 of 8 bytes ends at byte 32");
        assertTrue(t.isContiguous());
    }

    @Test
    void emptyLayoutSpansOnlyUpToItsOffset() {
        TensorLayout t = new TensorLayout(INT16, new long[] {4, 0, 5}, new long[] {100, 100, 100}, 7);
        assertTrue(t.isEmpty());
        assertEquals(0, t.elementCount());
        assertEquals(14, t.byteSpan());
        assertTrue(t.isContiguous());
        assertArrayEquals(new long[] {5, 5, 1}, TensorLayout.contiguousStrides(4, 0, 5), "0 counts as 1, as in PyTorch");
    }

    @Test
    void byteSpanCoversTheLastAddressedElement() {
        // a transposed 3x2 view of a 2x3 int16 matrix starting at element 1
        TensorLayout t = new TensorLayout(INT16, new long[] {3, 2}, new long[] {1, 3}, 1);
        assertFalse(t.isContiguous());
        assertEquals((1 + 2 * 1 + 1 * 3 + 1) * 2, t.byteSpan());
        // broadcast (stride 0): many elements, one address
        TensorLayout b = new TensorLayout(FLOAT32, new long[] {1000, 1000}, new long[] {0, 0}, 0);
        assertEquals(1_000_000, b.elementCount());
        assertEquals(4, b.byteSpan());
        assertFalse(b.isContiguous());
    }

    @Test
    void sizeOneDimensionsDoNotBreakContiguity() {
        assertTrue(new TensorLayout(FLOAT32, new long[] {1, 3}, new long[] {99, 1}, 5).isContiguous());
        assertTrue(new TensorLayout(FLOAT32, new long[] {2, 1, 3}, new long[] {3, 42, 1}, 0).isContiguous());
        assertFalse(new TensorLayout(FLOAT32, new long[] {2, 3}, new long[] {4, 1}, 0).isContiguous());
        assertFalse(new TensorLayout(FLOAT32, new long[] {3}, new long[] {2}, 0).isContiguous());
    }

    @Test
    void checkFitsIsExact() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 10).slice(0, 2, 5);
        assertEquals(20, t.byteSpan());
        assertDoesNotThrow(() -> t.checkFits(20));
        var e = assertThrows(InvalidDataException.class, () -> t.checkFits(19));
        assertTrue(e.getMessage().contains("needs 20 bytes") && e.getMessage().contains("19"), e.getMessage());
        assertThrows(InvalidDataException.class, () -> t.checkFits(-1));
    }

    @Test
    void arraysAreCopiedInAndOut() {
        long[] shape = {2, 3};
        long[] strides = {3, 1};
        TensorLayout t = new TensorLayout(UINT8, shape, strides, 0);
        shape[0] = 99;
        strides[0] = 99;
        t.shape()[1] = 77;
        t.strides()[1] = 77;
        assertArrayEquals(new long[] {2, 3}, t.shape());
        assertArrayEquals(new long[] {3, 1}, t.strides());
        assertEquals(3, t.shape(1));
        assertEquals(1, t.stride(1));
        assertThrows(IndexOutOfBoundsException.class, () -> t.shape(2));
    }

    @Test
    void equalsHashCodeAndToStringUseContents() {
        TensorLayout a = TensorLayout.contiguous(FLOAT32, 2, 3);
        TensorLayout b = new TensorLayout(FLOAT32, new long[] {2, 3}, new long[] {3, 1}, 0);
        assertEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode());
        assertNotEquals(a, TensorLayout.contiguous(FLOAT64, 2, 3));
        assertNotEquals(a, TensorLayout.contiguous(FLOAT32, 3, 2));
        assertNotEquals(a, new TensorLayout(FLOAT32, new long[] {2, 3}, new long[] {1, 2}, 0));
        assertNotEquals(a, new TensorLayout(FLOAT32, new long[] {2, 3}, new long[] {3, 1}, 1));
        assertEquals("TensorLayout[float32, shape=[2, 3], strides=[3, 1], storageOffset=0]", a.toString());
    }

    @Test
    void insaneLayoutsAreRefusedWithTheReason() {
        assertRefused("rank 17", () -> TensorLayout.contiguous(UINT8, new long[17]));
        assertRefused("shape[1] is negative", () -> TensorLayout.contiguous(UINT8, 2, -1));
        assertRefused("strides[0] is negative",
                () -> new TensorLayout(UINT8, new long[] {2}, new long[] {-1}, 4));
        assertRefused("storage offset is negative",
                () -> new TensorLayout(UINT8, new long[] {2}, new long[] {1}, -1));
        assertRefused("strides has 1 entries",
                () -> new TensorLayout(UINT8, new long[] {2, 2}, new long[] {1}, 0));
        assertRefused("element count",
                () -> new TensorLayout(UINT8, new long[] {1L << 32, 1L << 32}, new long[] {0, 0}, 0));
        assertRefused("element count", () -> new TensorLayout(UINT8, new long[] {1L << 32, 1L << 32, 0},
                new long[] {0, 0, 0}, 0));
        assertRefused("addressed range",
                () -> new TensorLayout(UINT8, new long[] {3}, new long[] {Long.MAX_VALUE / 2 + 1}, 0));
        assertRefused("addressed range",
                () -> new TensorLayout(UINT8, new long[] {2}, new long[] {1}, Long.MAX_VALUE - 1));
        // the element index fits, its byte position does not
        assertRefused("addressed range",
                () -> new TensorLayout(FLOAT64, new long[] {2}, new long[] {Long.MAX_VALUE / 4}, 0));
        assertThrows(NullPointerException.class, () -> new TensorLayout(null, new long[0], new long[0], 0));
        // the largest rank is fine
        assertEquals(16, TensorLayout.contiguous(UINT8, new long[16]).rank());
    }

    @Test
    void sliceMovesTheOffsetAndKeepsStrides() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 4, 5);
        TensorLayout rows = t.slice(0, 1, 3);
        assertArrayEquals(new long[] {2, 5}, rows.shape());
        assertArrayEquals(new long[] {5, 1}, rows.strides());
        assertEquals(5, rows.storageOffset());
        assertTrue(rows.isContiguous());
        TensorLayout cols = t.slice(1, 2, 4);
        assertEquals(2, cols.storageOffset());
        assertFalse(cols.isContiguous());
        TensorLayout stepped = t.slice(1, 1, 5, 2);
        assertArrayEquals(new long[] {4, 2}, stepped.shape());
        assertArrayEquals(new long[] {5, 2}, stepped.strides());
        assertEquals(1, stepped.storageOffset());
        assertArrayEquals(new long[] {4, 3}, t.slice(1, 0, 5, 2).shape(), "ceil(5 / 2) elements");
        assertEquals(t.slice(0, 1, 3), t.narrow(0, 1, 2));
    }

    @Test
    void emptyViewsKeepTheOffsetSoTheyStillFit() {
        TensorLayout sparse = new TensorLayout(UINT8, new long[] {2}, new long[] {100}, 0);
        assertEquals(101, sparse.byteSpan());
        TensorLayout end = sparse.slice(0, 2, 2);
        assertTrue(end.isEmpty());
        assertEquals(0, end.storageOffset());
        end.checkFits(101);
    }

    @Test
    void badSlicesAreRefused() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 4, 5);
        assertRefused("not within dimension 0", () -> t.slice(0, 3, 2));
        assertRefused("not within dimension 1", () -> t.slice(1, 0, 6));
        assertRefused("not within dimension 1", () -> t.slice(1, -1, 2));
        assertRefused("step", () -> t.slice(1, 0, 2, 0));
        assertRefused("dimension 2 does not exist", () -> t.slice(2, 0, 1));
        assertRefused("dimension -1 does not exist", () -> t.slice(-1, 0, 1));
        assertRefused("narrow", () -> t.narrow(0, 1, -1));
        assertRefused("narrow", () -> t.narrow(0, Long.MAX_VALUE, 1));
    }

    @Test
    void selectDropsADimension() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 3, 4, 5);
        TensorLayout s = t.select(1, 2);
        assertArrayEquals(new long[] {3, 5}, s.shape());
        assertArrayEquals(new long[] {20, 1}, s.strides());
        assertEquals(10, s.storageOffset());
        TensorLayout scalar = TensorLayout.contiguous(FLOAT32, 7).select(0, 6);
        assertEquals(0, scalar.rank());
        assertEquals(6, scalar.storageOffset());
        assertRefused("index 3 is out of bounds", () -> t.select(0, 3));
        assertRefused("index -1 is out of bounds", () -> t.select(0, -1));
    }

    @Test
    void transposeSwapsShapeAndStrides() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 2, 3).transpose(0, 1);
        assertArrayEquals(new long[] {3, 2}, t.shape());
        assertArrayEquals(new long[] {1, 3}, t.strides());
        assertFalse(t.isContiguous());
        assertEquals(TensorLayout.contiguous(FLOAT32, 2, 3), t.transpose(1, 0));
    }

    @Test
    void reshapeOfContiguousLayouts() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 4, 6).slice(0, 1, 3); // 2x6 at offset 6
        TensorLayout r = t.reshape(3, 4);
        assertArrayEquals(new long[] {4, 1}, r.strides());
        assertEquals(6, r.storageOffset());
        assertEquals(t.byteSpan(), r.byteSpan());
        assertArrayEquals(new long[] {2, 2, 3}, t.reshape(2, -1, 3).shape());
        assertArrayEquals(new long[] {12}, t.reshape(-1).shape());
        assertRefused("cannot reshape 12 elements", t::reshape);
    }

    @Test
    void reshapeRefusals() {
        TensorLayout t = TensorLayout.contiguous(FLOAT32, 4, 6);
        var e = assertThrows(IllegalStateException.class, () -> t.transpose(0, 1).reshape(24));
        assertTrue(e.getMessage().contains("non-contiguous"), e.getMessage());
        assertRefused("cannot reshape 24 elements", () -> t.reshape(5, 5));
        assertRefused("cannot reshape 24 elements", () -> t.reshape(5, -1));
        assertRefused("only one dimension can be -1", () -> t.reshape(-1, -1));
        assertRefused("dimension 1 is negative", () -> t.reshape(24, -2));
        assertRefused("cannot reshape 24 elements", () -> t.reshape(Long.MAX_VALUE, Long.MAX_VALUE, 2));
        TensorLayout empty = TensorLayout.contiguous(FLOAT32, 0, 3);
        assertArrayEquals(new long[] {3, 0}, empty.reshape(3, 0).shape());
        assertRefused("cannot reshape 0 elements", () -> empty.reshape(-1, 0));
        assertEquals(0, TensorLayout.contiguous(FLOAT32, 1, 1).reshape().rank());
    }

    /**
     * For random layouts and random chains of views: each element of a view is the element
     * of its base that the view's definition names, and no view reaches past its base.
     */
    @Test
    void viewsAddressExactlyTheElementsTheyName() {
        Random random = new Random(0x5eed);
        for (int round = 0; round < 2_000; round++) {
            TensorLayout base = randomLayout(random);
            TensorLayout view = base;
            for (int step = 0; step < 3 && view.rank() > 0; step++) {
                TensorLayout next = randomView(random, view);
                checkViewAgainstBase(view, next);
                assertTrue(next.byteSpan() <= view.byteSpan(), next + " reaches past " + view);
                view = next;
            }
            assertTrue(view.byteSpan() <= base.byteSpan(), view + " reaches past " + base);
            view.checkFits(base.byteSpan());
        }
    }

    // what the last randomView did: {kind, dim, start, end, step, other dim}
    private long[] lastViewArgs;

    private TensorLayout randomView(Random random, TensorLayout t) {
        int dim = random.nextInt(t.rank());
        long size = t.shape(dim);
        long start = random.nextLong(size + 1);
        long end = start + random.nextLong(size - start + 1);
        long step = 1 + random.nextInt(3);
        int other = random.nextInt(t.rank());
        int kind = size > 0 ? random.nextInt(4) : random.nextInt(2);
        lastViewArgs = new long[] {kind, dim, start, end, step, other};
        return switch (kind) {
            case 0 -> t.slice(dim, start, end, step);
            case 1 -> t.transpose(dim, other);
            case 2 -> t.select(dim, Math.min(start, size - 1));
            default -> t.isContiguous() ? t.reshape(t.elementCount()) : t.narrow(dim, start, end - start);
        };
    }

    private void checkViewAgainstBase(TensorLayout base, TensorLayout view) {
        long[] args = lastViewArgs;
        int kind = (int) args[0];
        int dim = (int) args[1];
        for (long[] vi : multiIndices(view.shape())) {
            long[] bi;
            if (kind == 1) {
                bi = vi.clone();
                bi[dim] = vi[(int) args[5]];
                bi[(int) args[5]] = vi[dim];
            } else if (kind == 0) {
                bi = vi.clone();
                bi[dim] = args[2] + vi[dim] * args[4];
            } else if (kind == 2) {
                bi = new long[base.rank()];
                for (int i = 0, j = 0; i < bi.length; i++) {
                    bi[i] = i == dim ? Math.min(args[2], base.shape(dim) - 1) : vi[j++];
                }
            } else if (base.isContiguous()) {
                // flattened: the row-major position of the base index
                bi = unflatten(vi[0], base.shape());
            } else {
                bi = vi.clone();
                bi[dim] = args[2] + vi[dim];
            }
            assertEquals(index(base, bi), index(view, vi), () -> "view " + view + " of " + base);
        }
    }

    private static long index(TensorLayout t, long[] idx) {
        long at = t.storageOffset();
        for (int i = 0; i < idx.length; i++) {
            assertTrue(idx[i] >= 0 && idx[i] < t.shape(i));
            at += idx[i] * t.stride(i);
        }
        assertTrue((at + 1) * t.dtype().byteSize() <= t.byteSpan(), "element within byteSpan");
        return at;
    }

    private static long[] unflatten(long flat, long[] shape) {
        long[] idx = new long[shape.length];
        for (int i = shape.length - 1; i >= 0; i--) {
            idx[i] = flat % shape[i];
            flat /= shape[i];
        }
        return idx;
    }

    private static List<long[]> multiIndices(long[] shape) {
        List<long[]> out = new ArrayList<>();
        for (long d : shape) {
            if (d == 0) {
                return out;
            }
        }
        long[] idx = new long[shape.length];
        while (true) {
            out.add(idx.clone());
            int i = shape.length - 1;
            while (i >= 0 && ++idx[i] == shape[i]) {
                idx[i--] = 0;
            }
            if (i < 0) {
                return out;
            }
        }
    }

    private static TensorLayout randomLayout(Random random) {
        int rank = random.nextInt(5);
        long[] shape = new long[rank];
        long[] strides = new long[rank];
        for (int i = 0; i < rank; i++) {
            shape[i] = random.nextInt(5);
            strides[i] = random.nextInt(4) == 0 ? 0 : random.nextInt(30);
        }
        DType dtype = DType.values()[random.nextInt(DType.values().length)];
        if (random.nextBoolean()) {
            strides = TensorLayout.contiguousStrides(shape);
        }
        return new TensorLayout(dtype, shape, strides, random.nextInt(10));
    }

    private static void assertRefused(String expectedInMessage, Runnable action) {
        var e = assertThrows(IllegalArgumentException.class, action::run);
        assertTrue(e.getMessage().contains(expectedInMessage),
                () -> "message '" + e.getMessage() + "' should contain '" + expectedInMessage + "'");
    }
}
