package io.refshare.tensor;

import io.refshare.exceptions.InvalidDataException;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DTypeTest {

    /** The codes are wire format: this table must only ever grow. */
    @Test
    void codesSizesAndNumpyNamesAreFixed() {
        Object[][] expected = {
                {DType.BOOL, 1, 1, "bool"},
                {DType.UINT8, 2, 1, "uint8"},
                {DType.INT8, 3, 1, "int8"},
                {DType.INT16, 4, 2, "int16"},
                {DType.INT32, 5, 4, "int32"},
                {DType.INT64, 6, 8, "int64"},
                {DType.FLOAT16, 7, 2, "float16"},
                {DType.BFLOAT16, 8, 2, "bfloat16"},
                {DType.FLOAT32, 9, 4, "float32"},
                {DType.FLOAT64, 10, 8, "float64"},
        };
        assertEquals(expected.length, DType.values().length, "a new dtype needs a row here");
        for (Object[] row : expected) {
            DType t = (DType) row[0];
            assertEquals(row[1], t.code(), t + " code");
            assertEquals(row[2], t.byteSize(), t + " size");
            assertEquals(row[3], t.numpyName(), t + " numpy name");
        }
    }

    @Test
    void everyCodeRoundTripsAndIsUnique() {
        Set<Integer> codes = new HashSet<>();
        for (DType t : DType.values()) {
            assertTrue(t.code() >= 1 && t.code() <= 255, t + " code fits a non-zero byte");
            assertTrue(codes.add(t.code()));
            assertSame(t, DType.fromCode(t.code()));
            assertSame(t, DType.fromNumpyName(t.numpyName()));
        }
    }

    @Test
    void unknownCodesAreInvalidData() {
        for (int code : new int[] {0, 11, 127, 128, 255, 256, -1, Integer.MIN_VALUE, Integer.MAX_VALUE}) {
            var e = assertThrows(InvalidDataException.class, () -> DType.fromCode(code));
            assertTrue(e.getMessage().contains("dtype code " + code), e.getMessage());
        }
    }

    @Test
    void unknownNumpyNameIsRefused() {
        var e = assertThrows(IllegalArgumentException.class, () -> DType.fromNumpyName("complex64"));
        assertTrue(e.getMessage().contains("complex64"));
    }

    @Test
    void floatingPointClassification() {
        assertTrue(DType.BFLOAT16.isFloatingPoint());
        assertTrue(DType.FLOAT64.isFloatingPoint());
        assertFalse(DType.INT64.isFloatingPoint());
        assertFalse(DType.BOOL.isFloatingPoint());
    }
}
