package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.ShmDirectory;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * The binary form of a {@link Descriptor}: little-endian, a fixed 72-byte header, then
 * variable parts whose presence and sizes the header states. No Java serialization; a
 * reader in any language can be written from this comment alone.
 *
 * <pre>
 *  offset size type      field
 *  ------ ---- --------- ---------------------------------------------------------------
 *     0     4  u8[4]     magic: ASCII "RFSD" (bytes 52 46 53 44)
 *     4     2  u16       format version: 2
 *     6     2  u16       flags: bit 0 TENSOR (a tensor layout follows), bit 1 EVENT (an
 *                        event handle follows), bit 2 MEMORY (a memory handle follows; set
 *                        exactly when the backend is CUDA); every other bit 0
 *     8     4  u32       total length of the encoding in bytes, header included
 *    12     1  u8        backend: 1 HOST, 2 CUDA
 *    13     1  u8        dtype code (see DType; 1..10), 0 without TENSOR
 *    14     1  u8        rank r, 0..16; 0 without TENSOR (a rank-0 tensor has TENSOR set)
 *    15     1  u8        segment name length n, 1..128
 *    16     1  u8        counter file name length m, 1..128
 *    17     3  -         reserved, 0
 *    20     4  i32       slot of the counter in the counter file, &gt;= 0
 *    24     8  i64       segment size in bytes, &gt; 0
 *    32     8  i64       block offset in the segment, &gt;= 0
 *    40     8  i64       block length, &gt;= 0; offset + length &lt;= segment size
 *    48     8  i64       tensor storage offset in elements, &gt;= 0; 0 without TENSOR
 *    56     8  i64       sender pid, &gt; 0
 *    64     8  i64       sender start time in clock ticks since boot, &gt;= 0
 *  ------ ---- --------- --------------------------------------------- end of fixed header
 *    72    64  u8[64]    CUDA IPC memory handle of the segment     (only with MEMORY)
 *     .    64  u8[64]    CUDA interprocess event handle            (only with EVENT)
 *     .   8*r  i64[r]    tensor shape, outermost first             (only with TENSOR)
 *     .   8*r  i64[r]    tensor strides in elements                (only with TENSOR)
 *     .     n  ASCII     segment name
 *     .     m  ASCII     counter file name
 *
 *  total = 72 + (MEMORY ? 64 : 0) + (EVENT ? 64 : 0) + (TENSOR ? 16*r : 0) + n + m   (at most 712)
 * </pre>
 *
 * Every integer field sits at an offset that is a multiple of its size, counted from the
 * start of the encoding. Names are {@code [A-Za-z0-9_-]} only. The tensor's storage offset,
 * shape and strides are relative to the block (byte {@code offset} of the segment), and
 * its elements must lie within the block's {@code length}. The two handles are opaque bytes
 * ({@code CUipcMemHandle} and {@code CUipcEventHandle}, passed to the driver as they are). A
 * Python reader of the header:
 * {@code struct.unpack_from("<4sHHIBBBBB3xiqqqqqq", buf)}.
 *
 * <p><b>Decoding is strict</b>, because the bytes come from another process: the input must
 * be exactly one encoding (the total length equals the bytes given, no trailing bytes),
 * every code must be known, every reserved byte and every field an absent part would use
 * must be 0, and the decoded values must form a valid {@link Descriptor}. Anything else is
 * an {@link InvalidDataException} naming the offending field, and no other exception escapes
 * for any input. As a result each descriptor has exactly one encoding, and
 * {@code encode(decode(b))} equals {@code b} for every {@code b} that decodes. The input is
 * copied once before it is read, so a peer that rewrites shared memory while it is being
 * decoded cannot make one field be checked and another value used.
 *
 * <p>The format version changes whenever the layout does; a reader refuses versions it
 * does not know rather than guess. Version 2 added the memory handle (version 1 CUDA
 * descriptors could not say which allocation to open).
 *
 * <p>The format and every decoding check are specified in
 * {@code docs/protocol.md}, section 7: the reference for every implementation (its test
 * data, shared with the Python package, is in {@code conformance/}).
 */
public final class DescriptorCodec {

    /** ASCII "RFSD" read as a little-endian u32. */
    public static final int MAGIC = 'R' | 'F' << 8 | 'S' << 16 | 'D' << 24;
    public static final int VERSION = 2;
    /** Size of the fixed header. */
    public static final int HEADER_BYTES = 72;
    /**
     * Upper bound on an encoding, of this version (at most 712 bytes) and of any later one:
     * transports may size their cells by it. Larger inputs are refused before being read.
     */
    public static final int MAX_ENCODED_BYTES = 1024;

    public static final int FLAG_TENSOR = 1;
    public static final int FLAG_EVENT = 1 << 1;
    public static final int FLAG_MEMORY = 1 << 2;
    private static final int KNOWN_FLAGS = FLAG_TENSOR | FLAG_EVENT | FLAG_MEMORY;

    // byte offsets of the fixed header fields
    private static final int OFF_MAGIC = 0;
    private static final int OFF_VERSION = 4;
    private static final int OFF_FLAGS = 6;
    private static final int OFF_TOTAL = 8;
    private static final int OFF_BACKEND = 12;
    private static final int OFF_DTYPE = 13;
    private static final int OFF_RANK = 14;
    private static final int OFF_SEGMENT_NAME_LENGTH = 15;
    private static final int OFF_COUNTER_NAME_LENGTH = 16;
    /** For {@link DecodeMemo}: where the counter file name's length is. */
    static final int COUNTER_NAME_LENGTH_OFFSET = OFF_COUNTER_NAME_LENGTH;
    private static final int OFF_RESERVED = 17;
    private static final int RESERVED_BYTES = 3;
    private static final int OFF_SLOT = 20;
    /** Where the slot is in an encoding: the one field in which messages of one block differ. */
    static final int SLOT_OFFSET = OFF_SLOT;
    private static final int OFF_SEGMENT_SIZE = 24;
    private static final int OFF_OFFSET = 32;
    /** Where the block offset is: the other field in which messages of one segment's blocks of one size differ. */
    static final int BLOCK_OFFSET_OFFSET = OFF_OFFSET;
    private static final int OFF_LENGTH = 40;
    private static final int OFF_STORAGE_OFFSET = 48;
    private static final int OFF_SENDER_PID = 56;
    private static final int OFF_SENDER_START = 64;

    // for encoding, through the caller's segment at any offset: hence unaligned
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfByte U8 = ValueLayout.JAVA_BYTE;
    // decoding reads a private byte[] copy (and encodeHost a name's words): these views are the JIT's fastest path
    private static final VarHandle SHORTS = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INTS = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    private static final byte[] NO_BYTES = new byte[0];

    private DescriptorCodec() {
    }

    /** Bytes {@link #encode} writes for {@code d}. */
    public static int encodedSize(Descriptor d) {
        return encodedSize(d.segmentName().length(), d.counterFileName().length(), d.backend() == Backend.CUDA,
                d.hasEvent(), d.tensor());
    }

    /** Bytes {@link #encodeHost} writes for a host block with names of these lengths and this tensor. */
    public static int encodedHostSize(int segmentNameLength, int counterFileNameLength, TensorLayout tensor) {
        return encodedSize(segmentNameLength, counterFileNameLength, false, false, tensor);
    }

    private static int encodedSize(int segmentNameLength, int counterFileNameLength, boolean hasMemory,
                                   boolean hasEvent, TensorLayout tensor) {
        int size = HEADER_BYTES + segmentNameLength + counterFileNameLength;
        if (hasMemory) {
            size += Descriptor.MEMORY_HANDLE_BYTES;
        }
        if (hasEvent) {
            size += Descriptor.EVENT_HANDLE_BYTES;
        }
        if (tensor != null) {
            size += 2 * Long.BYTES * tensor.rank();
        }
        return size;
    }

    /** The encoding of {@code d}. */
    public static byte[] encode(Descriptor d) {
        byte[] out = new byte[encodedSize(d)];
        encode(d, MemorySegment.ofArray(out), 0);
        return out;
    }

    /**
     * Writes the encoding of {@code d} into {@code dst} at {@code offset} (for example
     * straight into a shared-memory cell) and returns the number of bytes written.
     *
     * @throws IndexOutOfBoundsException when it does not fit; nothing is written then
     */
    public static int encode(Descriptor d, MemorySegment dst, long offset) {
        String segmentName = d.segmentName();
        String counterFileName = d.counterFileName();
        int size = encodedSize(d);
        Objects.checkFromIndexSize(offset, size, dst.byteSize());
        long at = encodeAllButNames(d.backend(), segmentName.length(), d.segmentSize(), d.offset(), d.length(),
                d.memoryHandle(), counterFileName.length(), d.slot(), d.eventHandle(), d.tensor(), d.senderPid(),
                d.senderStartTicks(), size, dst, offset);
        at = putAscii(dst, at, segmentName);
        putAscii(dst, at, counterFileName);
        return size;
    }

    /**
     * Writes the encoding of the host descriptor with these fields (the names as their ASCII
     * bytes), as {@link #encode(Descriptor, MemorySegment, long)} writes that of
     * {@code Descriptor.host(...)}, with no descriptor object: for a sender encoding its own
     * block (a queue's puts write through a {@link HostEncoder}, which keeps what this wrote as
     * its copy). The fields are the sender's own (not checked again as a {@link Descriptor}
     * checks them).
     *
     * <p>Past the slot, only the bytes that differ from what {@code dst} holds are written. A
     * queue cell comes back to its producer holding the message it carried a lap ago, most often
     * of the same block or of a block in the same segment, so only its first words change (the
     * slot, the offset); bytes left alone keep their cache lines clean, and the consumer that
     * reads the cell next finds them without a transfer from the producer's cache. Streaming 1
     * KiB tensors between two processes this was 3 to 8% more tensors a second, batches of 32
     * included.
     *
     * @throws IndexOutOfBoundsException when it does not fit; nothing is written then
     */
    public static int encodeHost(byte[] segmentName, long segmentSize, long offset, long length,
                                 byte[] counterFileName, int slot, TensorLayout tensor, long senderPid,
                                 long senderStartTicks, MemorySegment dst, long at) {
        int size = encodedHostSize(segmentName.length, counterFileName.length, tensor);
        Objects.checkFromIndexSize(at, size, dst.byteSize());
        long names = encodeAllButNames(Backend.HOST, segmentName.length, segmentSize, offset, length, NO_BYTES,
                counterFileName.length, slot, NO_BYTES, tensor, senderPid, senderStartTicks, size, dst, at);
        putBytes(dst, names, segmentName);
        putBytes(dst, names + segmentName.length, counterFileName);
        return size;
    }

    /**
     * Writes an encoding of {@code size} bytes at {@code offset} of {@code dst} (checked to fit)
     * up to its names, in place (no slice object per message), the words after the slot only
     * where they differ (see {@link #encodeHost}); returns where the names go.
     */
    private static long encodeAllButNames(Backend backend, int segmentNameLength, long segmentSize, long blockOffset,
                                          long length, byte[] memoryHandle, int counterFileNameLength, int slot,
                                          byte[] eventHandle, TensorLayout t, long senderPid, long senderStartTicks,
                                          int size, MemorySegment dst, long offset) {
        boolean hasMemory = backend == Backend.CUDA;
        boolean hasEvent = eventHandle.length > 0;
        int flags = (t != null ? FLAG_TENSOR : 0) | (hasEvent ? FLAG_EVENT : 0) | (hasMemory ? FLAG_MEMORY : 0);
        // the first 24 bytes end with the slot, which changes with every message: written as they are
        dst.set(I32, offset + OFF_MAGIC, MAGIC);
        dst.set(U16, offset + OFF_VERSION, (short) VERSION);
        dst.set(U16, offset + OFF_FLAGS, (short) flags);
        dst.set(I32, offset + OFF_TOTAL, size);
        dst.set(U8, offset + OFF_BACKEND, (byte) backend.code());
        dst.set(U8, offset + OFF_DTYPE, (byte) (t != null ? t.dtype().code() : 0));
        dst.set(U8, offset + OFF_RANK, (byte) (t != null ? t.rank() : 0));
        dst.set(U8, offset + OFF_SEGMENT_NAME_LENGTH, (byte) segmentNameLength);
        dst.set(U8, offset + OFF_COUNTER_NAME_LENGTH, (byte) counterFileNameLength);
        for (int i = 0; i < RESERVED_BYTES; i++) {
            dst.set(U8, offset + OFF_RESERVED + i, (byte) 0);
        }
        dst.set(I32, offset + OFF_SLOT, slot);
        putI64(dst, offset + OFF_SEGMENT_SIZE, segmentSize);
        putI64(dst, offset + OFF_OFFSET, blockOffset);
        putI64(dst, offset + OFF_LENGTH, length);
        putI64(dst, offset + OFF_STORAGE_OFFSET, t != null ? t.storageOffset() : 0);
        putI64(dst, offset + OFF_SENDER_PID, senderPid);
        putI64(dst, offset + OFF_SENDER_START, senderStartTicks);
        long at = offset + HEADER_BYTES;
        if (hasMemory) {
            MemorySegment.copy(memoryHandle, 0, dst, U8, at, Descriptor.MEMORY_HANDLE_BYTES);
            at += Descriptor.MEMORY_HANDLE_BYTES;
        }
        if (hasEvent) {
            MemorySegment.copy(eventHandle, 0, dst, U8, at, Descriptor.EVENT_HANDLE_BYTES);
            at += Descriptor.EVENT_HANDLE_BYTES;
        }
        if (t != null) {
            for (int i = 0; i < t.rank(); i++, at += Long.BYTES) {
                putI64(dst, at, t.shape(i));
            }
            for (int i = 0; i < t.rank(); i++, at += Long.BYTES) {
                putI64(dst, at, t.stride(i));
            }
        }
        return at;
    }

    // writes that leave equal bytes alone (see encodeHost)

    static void putI64(MemorySegment dst, long at, long v) {
        if (dst.get(I64, at) != v) {
            dst.set(I64, at, v);
        }
    }

    private static void putBytes(MemorySegment dst, long at, byte[] src) {
        putBytes(dst, at, src, 0, src.length);
    }

    /** Writes {@code src[from, from + length)} at {@code at} of {@code dst}, word by word where it differs. */
    static void putBytes(MemorySegment dst, long at, byte[] src, int from, int length) {
        int i = 0;
        for (; i + Long.BYTES <= length; i += Long.BYTES) {
            putI64(dst, at + i, (long) LONGS.get(src, from + i));
        }
        if (i < length && length >= Long.BYTES) {
            // the last word overlaps the one before: a word instead of a loop of bytes
            int last = length - Long.BYTES;
            putI64(dst, at + last, (long) LONGS.get(src, from + last));
            return;
        }
        for (; i < length; i++) {
            if (dst.get(U8, at + i) != src[from + i]) {
                dst.set(U8, at + i, src[from + i]);
            }
        }
    }

    private static long putAscii(MemorySegment out, long at, String s) {
        // the Descriptor guarantees [A-Za-z0-9_-], so one char is one byte
        for (int i = 0; i < s.length(); i++) {
            out.set(U8, at + i, (byte) s.charAt(i));
        }
        return at + s.length();
    }

    /**
     * The slot of the encoding of {@code length} bytes at {@code offset} of {@code src}, read
     * on its own (see {@link DecodeMemo}).
     *
     * @throws InvalidDataException when the bytes are too short to hold a slot, or it is negative
     */
    public static int slot(MemorySegment src, long offset, long length) {
        if (length < HEADER_BYTES) {
            throw new InvalidDataException("malformed descriptor: " + length + " bytes is shorter than the "
                    + HEADER_BYTES + "-byte header");
        }
        int slot = src.get(I32, offset + OFF_SLOT);
        if (slot < 0) {
            throw new InvalidDataException("malformed descriptor: slot is negative: " + slot);
        }
        return slot;
    }

    /** Decodes exactly {@code src}, applying only the wire name rule to names. */
    public static Descriptor decode(byte[] src) {
        return decode(src, 0, src.length);
    }

    /** Decodes exactly {@code src[offset, offset + length)}, applying only the wire name rule to names. */
    public static Descriptor decode(byte[] src, int offset, int length) {
        return decode(MemorySegment.ofArray(src), offset, length, name -> true);
    }

    /** Decodes exactly {@code length} bytes of {@code src} at {@code offset}, applying only the wire name rule. */
    public static Descriptor decode(MemorySegment src, long offset, long length) {
        return decode(src, offset, length, name -> true);
    }

    /**
     * Decodes exactly {@code length} bytes of {@code src} at {@code offset}. Both file names
     * must follow the wire name rule and also be accepted by {@code names} (for example
     * {@link #namesOf(ShmDirectory)}, so that only names of our own shape get through).
     *
     * @throws InvalidDataException      when the bytes are not exactly one valid encoding
     * @throws IndexOutOfBoundsException when {@code [offset, offset + length)} is not within {@code src}
     */
    public static Descriptor decode(MemorySegment src, long offset, long length, Predicate<? super String> names) {
        Objects.requireNonNull(names, "names");
        Objects.checkFromIndexSize(offset, length, src.byteSize());
        if (length > MAX_ENCODED_BYTES) {
            throw new InvalidDataException("malformed descriptor: " + length + " bytes is larger than the maximum of "
                    + MAX_ENCODED_BYTES);
        }
        // one private copy: each byte is read exactly once from the source (see class comment)
        byte[] copy = new byte[(int) length];
        MemorySegment.copy(src, U8, offset, copy, 0, (int) length);
        return new Reader(copy, names).read();
    }

    /** Byte-array form of {@link #decode(MemorySegment, long, long, Predicate)}. */
    public static Descriptor decode(byte[] src, int offset, int length, Predicate<? super String> names) {
        return decode(MemorySegment.ofArray(src), offset, length, names);
    }

    /** A name check that accepts only names of files of {@code dir} (its prefix, a known kind, 128 random bits). */
    public static Predicate<String> namesOf(ShmDirectory dir) {
        return dir::isOurs;
    }

    /** One decoding pass over a private copy; every read is bounds-checked by a length check before it. */
    private record Reader(byte[] bytes, Predicate<? super String> names) {

        Descriptor read() {
            long given = bytes.length;
            if (given < 4) {
                throw bad("truncated: " + given + " bytes, not even the 4-byte magic");
            }
            int magic = i32(OFF_MAGIC);
            if (magic != MAGIC) {
                throw bad(String.format("wrong magic 0x%08X (expected 0x%08X, \"RFSD\"): not a refshare descriptor",
                        magic, MAGIC));
            }
            if (given < HEADER_BYTES) {
                throw bad("truncated: " + given + " bytes, the fixed header alone is " + HEADER_BYTES);
            }
            int version = u16(OFF_VERSION);
            if (version != VERSION) {
                throw bad("unsupported format version " + version + " (this reader understands " + VERSION + ")");
            }
            int flags = u16(OFF_FLAGS);
            if ((flags & ~KNOWN_FLAGS) != 0) {
                throw bad(String.format("unknown flags 0x%04X set (known: 0x%04X)", flags & ~KNOWN_FLAGS, KNOWN_FLAGS));
            }
            long total = Integer.toUnsignedLong(i32(OFF_TOTAL));
            if (total > given) {
                throw bad("truncated: total length says " + total + " bytes, only " + given + " given");
            }
            if (total < given) {
                throw bad("trailing bytes: " + given + " bytes given, total length says " + total);
            }
            boolean hasTensor = (flags & FLAG_TENSOR) != 0;
            boolean hasEvent = (flags & FLAG_EVENT) != 0;
            boolean hasMemory = (flags & FLAG_MEMORY) != 0;

            Backend backend;
            try {
                backend = Backend.fromCode(u8(OFF_BACKEND));
            } catch (InvalidDataException e) {
                throw bad(e.getMessage());
            }
            if (hasEvent && backend != Backend.CUDA) {
                throw bad("event handle flag set on a " + backend + " descriptor: only CUDA blocks carry one");
            }
            if (hasMemory != (backend == Backend.CUDA)) {
                throw bad(hasMemory ? "memory handle flag set on a " + backend + " descriptor: only CUDA blocks carry one"
                        : "CUDA descriptor without the memory handle flag: a CUDA block must name its allocation");
            }
            int dtypeCode = u8(OFF_DTYPE);
            int rank = u8(OFF_RANK);
            long storageOffset = i64(OFF_STORAGE_OFFSET);
            DType dtype = null;
            if (hasTensor) {
                try {
                    dtype = DType.fromCode(dtypeCode);
                } catch (InvalidDataException e) {
                    throw bad(e.getMessage());
                }
                if (rank > TensorLayout.MAX_RANK) {
                    throw bad("tensor rank " + rank + " exceeds the maximum of " + TensorLayout.MAX_RANK);
                }
            } else if (dtypeCode != 0 || rank != 0 || storageOffset != 0) {
                throw bad("tensor dtype/rank/storage offset set (" + dtypeCode + "/" + rank + "/" + storageOffset
                        + ") without the tensor flag");
            }
            int segmentNameLength = nameLength("segment name", OFF_SEGMENT_NAME_LENGTH);
            int counterNameLength = nameLength("counter file name", OFF_COUNTER_NAME_LENGTH);
            for (int i = 0; i < RESERVED_BYTES; i++) {
                int b = u8(OFF_RESERVED + i);
                if (b != 0) {
                    throw bad(String.format("reserved byte at offset %d is 0x%02X, must be 0", OFF_RESERVED + i, b));
                }
            }
            long needed = HEADER_BYTES + (hasMemory ? Descriptor.MEMORY_HANDLE_BYTES : 0)
                    + (hasEvent ? Descriptor.EVENT_HANDLE_BYTES : 0)
                    + (hasTensor ? 2L * Long.BYTES * rank : 0) + segmentNameLength + counterNameLength;
            if (needed != total) {
                throw bad("total length says " + total + " bytes but the fields it announces take " + needed);
            }
            // from here on every read is within the input: its size is exactly `needed`

            int slot = i32(OFF_SLOT);
            if (slot < 0) {
                throw bad("slot is negative: " + slot);
            }
            int at = HEADER_BYTES;
            byte[] memory = hasMemory ? Arrays.copyOfRange(bytes, at, at + Descriptor.MEMORY_HANDLE_BYTES) : NO_BYTES;
            at += memory.length;
            byte[] event = hasEvent ? Arrays.copyOfRange(bytes, at, at + Descriptor.EVENT_HANDLE_BYTES) : NO_BYTES;
            at += event.length;
            TensorLayout tensor = null;
            if (hasTensor) {
                long[] shape = new long[rank];
                long[] strides = new long[rank];
                for (int i = 0; i < rank; i++, at += Long.BYTES) {
                    shape[i] = i64(at);
                }
                for (int i = 0; i < rank; i++, at += Long.BYTES) {
                    strides[i] = i64(at);
                }
                try {
                    tensor = new TensorLayout(dtype, shape, strides, storageOffset);
                } catch (IllegalArgumentException e) {
                    throw new InvalidDataException("malformed descriptor: tensor: " + e.getMessage(), e);
                }
            }
            String segmentName = name("segment name", at, segmentNameLength);
            at += segmentNameLength;
            String counterFileName = name("counter file name", at, counterNameLength);
            Descriptor d;
            try {
                d = new Descriptor(backend, segmentName, i64(OFF_SEGMENT_SIZE), i64(OFF_OFFSET),
                        i64(OFF_LENGTH), memory, counterFileName, slot, event, tensor, i64(OFF_SENDER_PID),
                        i64(OFF_SENDER_START));
            } catch (IllegalArgumentException e) {
                throw new InvalidDataException("malformed descriptor: " + e.getMessage(), e);
            }
            // last, so that the check only ever sees names that follow the wire rule
            checkAccepted("segment name", segmentName);
            checkAccepted("counter file name", counterFileName);
            return d;
        }

        private void checkAccepted(String what, String name) {
            if (!names.test(name)) {
                throw bad(what + " " + WireNames.quoted(name) + " is refused by the name check"
                        + " (not a file name of this refshare directory)");
            }
        }

        private int nameLength(String what, int at) {
            int n = u8(at);
            if (n == 0) {
                throw bad(what + " length is 0");
            }
            if (n > WireNames.MAX_LENGTH) {
                throw bad(what + " length " + n + " exceeds the maximum of " + WireNames.MAX_LENGTH);
            }
            return n;
        }

        /** The name at {@code at}; the wire name rule is checked again, by the Descriptor. */
        private String name(String what, int at, int length) {
            for (int i = 0; i < length; i++) {
                if (bytes[at + i] < 0) {
                    throw bad(String.format("%s contains non-ASCII byte 0x%02X at index %d", what,
                            Byte.toUnsignedInt(bytes[at + i]), i));
                }
            }
            // ASCII was checked above, so Latin-1 maps each byte to the same character
            return new String(bytes, at, length, StandardCharsets.ISO_8859_1);
        }

        private int u8(int at) {
            return Byte.toUnsignedInt(bytes[at]);
        }

        private int u16(int at) {
            return Short.toUnsignedInt((short) SHORTS.get(bytes, at));
        }

        private int i32(int at) {
            return (int) INTS.get(bytes, at);
        }

        private long i64(int at) {
            return (long) LONGS.get(bytes, at);
        }

        private static InvalidDataException bad(String message) {
            return new InvalidDataException("malformed descriptor: " + message);
        }
    }
}
