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
 * <table class="striped">
 * <caption>Wire codes</caption>
 * <thead>
 * <tr><th scope="col">DType</th><th scope="col">Code</th><th scope="col">Element bytes</th>
 *     <th scope="col">numpy</th><th scope="col">PyTorch</th></tr>
 * </thead>
 * <tbody>
 * <tr><th scope="row">{@link #BOOL}</th><td>1</td><td>1</td><td>{@code bool}</td><td>{@code torch.bool}</td></tr>
 * <tr><th scope="row">{@link #UINT8}</th><td>2</td><td>1</td><td>{@code uint8}</td><td>{@code torch.uint8}</td></tr>
 * <tr><th scope="row">{@link #INT8}</th><td>3</td><td>1</td><td>{@code int8}</td><td>{@code torch.int8}</td></tr>
 * <tr><th scope="row">{@link #INT16}</th><td>4</td><td>2</td><td>{@code int16}</td><td>{@code torch.int16}</td></tr>
 * <tr><th scope="row">{@link #INT32}</th><td>5</td><td>4</td><td>{@code int32}</td><td>{@code torch.int32}</td></tr>
 * <tr><th scope="row">{@link #INT64}</th><td>6</td><td>8</td><td>{@code int64}</td><td>{@code torch.int64}</td></tr>
 * <tr><th scope="row">{@link #FLOAT16}</th><td>7</td><td>2</td><td>{@code float16}</td><td>{@code torch.float16}</td></tr>
 * <tr><th scope="row">{@link #BFLOAT16}</th><td>8</td><td>2</td><td>{@code bfloat16} (from {@code ml_dtypes})</td>
 *     <td>{@code torch.bfloat16}</td></tr>
 * <tr><th scope="row">{@link #FLOAT32}</th><td>9</td><td>4</td><td>{@code float32}</td><td>{@code torch.float32}</td></tr>
 * <tr><th scope="row">{@link #FLOAT64}</th><td>10</td><td>8</td><td>{@code float64}</td><td>{@code torch.float64}</td></tr>
 * </tbody>
 * </table>
 *
 * <p>Elements are little-endian. {@link #numpyName()} is the name numpy uses for the type
 * ({@code numpy.dtype(name)}), so a Python reader can map a code to an array type;
 * {@code bfloat16} is not a numpy built-in and needs {@code ml_dtypes}, as it does for
 * PyTorch and JAX users (or read it as raw {@code uint16}).
 *
 * <p>The codes are specified in
 * {@code docs/protocol.md}, section 7.3: the reference for every implementation.
 */
public enum DType {
    /** One byte per element, 0 for false and 1 for true (memory another process wrote may
     * hold other values: test for non-zero). */
    BOOL(1, 1, "bool"),
    /** Unsigned 8-bit integer; the type of {@link io.refshare.Refshare#allocateBytes(long)}
     * buffers. */
    UINT8(2, 1, "uint8"),
    /** Signed 8-bit integer. */
    INT8(3, 1, "int8"),
    /** Signed 16-bit integer. */
    INT16(4, 2, "int16"),
    /** Signed 32-bit integer. */
    INT32(5, 4, "int32"),
    /** Signed 64-bit integer. */
    INT64(6, 8, "int64"),
    /** IEEE 754 half precision (binary16). */
    FLOAT16(7, 2, "float16"),
    /** bfloat16: the upper 16 bits of a float32 (8 exponent bits, 7 fraction bits). */
    BFLOAT16(8, 2, "bfloat16"),
    /** IEEE 754 single precision (binary32). */
    FLOAT32(9, 4, "float32"),
    /** IEEE 754 double precision (binary64). */
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

    /**
     * The wire code of this type (see the table above).
     *
     * @return the stable one-byte code descriptors carry, 1 .. 255
     */
    public int code() {
        return code;
    }

    /**
     * The size of one element.
     *
     * @return bytes one element occupies: 1, 2, 4 or 8
     */
    public int byteSize() {
        return byteSize;
    }

    /**
     * The numpy name of this type, as {@code numpy.dtype(name)} takes it ({@code "bfloat16"}
     * only with {@code ml_dtypes} loaded).
     *
     * @return the name, for example {@code "float32"}
     */
    public String numpyName() {
        return numpyName;
    }

    /**
     * Whether this is a floating-point type: those {@link io.refshare.Tensor#getFloat} and
     * {@link io.refshare.Tensor#setFloat} accept.
     *
     * @return true for {@link #FLOAT16}, {@link #BFLOAT16}, {@link #FLOAT32} and {@link #FLOAT64}
     */
    public boolean isFloatingPoint() {
        return this == FLOAT16 || this == BFLOAT16 || this == FLOAT32 || this == FLOAT64;
    }

    /**
     * The type with this wire code, for decoding what another process wrote.
     *
     * @param code a wire code, as {@link #code()} returns it
     * @return the type
     * @throws InvalidDataException when no type has this code (0 and negative codes included):
     *                              the bytes it came from are not a valid descriptor
     */
    public static DType fromCode(int code) {
        DType t = code >= 0 && code < BY_CODE.length ? BY_CODE[code] : null;
        if (t == null) {
            throw new InvalidDataException("unknown dtype code " + code + " (known: " + KNOWN_CODES + ")");
        }
        return t;
    }

    /**
     * The type with this numpy name, matched exactly (case-sensitive, no aliases such as
     * {@code "f4"} or {@code "<f4"}).
     *
     * @param name a name as {@link #numpyName()} returns it
     * @return the type
     * @throws IllegalArgumentException when no type has this name
     * @throws NullPointerException     when {@code name} is null
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
