package io.refshare.tensor;

import io.refshare.exceptions.InvalidDataException;

/**
 * The element type of a tensor.
 *
 * <p>Each type has a one-byte <b>wire code</b> that descriptors carry. The codes are part of
 * the wire format and of any non-Java reader: they are assigned explicitly (never derived
 * from {@link #ordinal()}), must never be changed or reused, and a new type takes the next
 * free code. Code 0 is deliberately unassigned so that a zeroed byte never reads as a type.
 *
 * <p>{@link #numpyName()} is the name numpy uses for the type ({@code numpy.dtype(name)}),
 * so a Python reader can map a code to an array type; {@code bfloat16} is not a numpy
 * built-in and needs {@code ml_dtypes}, as it does for PyTorch and JAX users.
 *
 * <p>The codes are specified in
 * {@code docs/protocol.md}, section 7.3: the reference for every implementation.
 */
public enum DType {
    BOOL(1, 1, "bool"),
    UINT8(2, 1, "uint8"),
    INT8(3, 1, "int8"),
    INT16(4, 2, "int16"),
    INT32(5, 4, "int32"),
    INT64(6, 8, "int64"),
    FLOAT16(7, 2, "float16"),
    BFLOAT16(8, 2, "bfloat16"),
    FLOAT32(9, 4, "float32"),
    FLOAT64(10, 8, "float64");

    // indexed by code; built once so fromCode is a bounds check and an array load
    private static final DType[] BY_CODE = new DType[256];
    private static final String KNOWN_CODES;

    static {
        StringBuilder known = new StringBuilder();
        for (DType t : values()) {
            if (BY_CODE[t.code] != null) {
                throw new AssertionError("duplicate dtype code " + t.code);
            }
            BY_CODE[t.code] = t;
            known.append(known.isEmpty() ? "" : ", ").append(t.code).append('=').append(t.numpyName);
        }
        KNOWN_CODES = known.toString();
    }

    private final int code;
    private final int byteSize;
    private final String numpyName;

    DType(int code, int byteSize, String numpyName) {
        this.code = code;
        this.byteSize = byteSize;
        this.numpyName = numpyName;
    }

    /** The stable one-byte code descriptors carry (1..255). */
    public int code() {
        return code;
    }

    /** Bytes one element occupies. */
    public int byteSize() {
        return byteSize;
    }

    /** The numpy name of this type, for example {@code "float32"}. */
    public String numpyName() {
        return numpyName;
    }

    /** True for the floating-point types. */
    public boolean isFloatingPoint() {
        return this == FLOAT16 || this == BFLOAT16 || this == FLOAT32 || this == FLOAT64;
    }

    /**
     * The type with this wire code.
     *
     * @throws InvalidDataException when no type has this code
     */
    public static DType fromCode(int code) {
        DType t = code >= 0 && code < BY_CODE.length ? BY_CODE[code] : null;
        if (t == null) {
            throw new InvalidDataException("unknown dtype code " + code + " (known: " + KNOWN_CODES + ")");
        }
        return t;
    }

    /**
     * The type with this numpy name.
     *
     * @throws IllegalArgumentException when no type has this name
     */
    public static DType fromNumpyName(String name) {
        for (DType t : values()) {
            if (t.numpyName.equals(name)) {
                return t;
            }
        }
        throw new IllegalArgumentException("no dtype named '" + name + "'");
    }
}
