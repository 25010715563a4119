package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.function.Consumer;

import static io.refshare.wire.DescriptorTest.CNT;
import static io.refshare.wire.DescriptorTest.MEMORY;
import static io.refshare.wire.DescriptorTest.SEG;
import static io.refshare.wire.DescriptorTest.SENDER;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

class DescriptorCodecTest {
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static byte[] event(int seed) {
        byte[] e = new byte[Descriptor.EVENT_HANDLE_BYTES];
        new Random(seed).nextBytes(e);
        return e;
    }

    private static Descriptor hostTensor() {
        TensorLayout t = TensorLayout.contiguous(DType.FLOAT32, 3, 5).slice(1, 1, 4);
        return Descriptor.host(SEG, 1 << 20, 8192, 256, CNT, 7, t, SENDER);
    }

    private static Descriptor hostRaw() {
        return Descriptor.host(SEG, 4096, 0, 4096, CNT, 0, null, SENDER);
    }

    private static Descriptor cudaEvent() {
        TensorLayout t = TensorLayout.contiguous(DType.BFLOAT16, 2, 3, 4).transpose(0, 2);
        return Descriptor.cuda(SEG, 2 << 20, 1 << 20, 1 << 20, MEMORY, CNT, 9_999, event(1), t, SENDER);
    }

    /** The largest encoding this version can produce. */
    private static Descriptor largest() {
        long[] shape = new long[TensorLayout.MAX_RANK];
        Arrays.fill(shape, 2);
        TensorLayout t = TensorLayout.contiguous(DType.FLOAT64, shape);
        return new Descriptor(Backend.CUDA, "S".repeat(128), Long.MAX_VALUE, Long.MAX_VALUE - t.byteSpan(),
                t.byteSpan(), MEMORY, "C".repeat(128), Integer.MAX_VALUE, event(2), t, Long.MAX_VALUE, Long.MAX_VALUE);
    }

    private static List<Descriptor> samples() {
        return List.of(hostTensor(), hostRaw(), cudaEvent(), largest(),
                Descriptor.cuda(SEG, 64, 0, 0, MEMORY, CNT, 0, new byte[0], null, SENDER),
                Descriptor.host("a", 1, 1, 0, "b", 0, new TensorLayout(DType.BOOL, new long[] {0}, new long[] {1}, 0),
                        new ProcessIdentity(1, 0)));
    }

    private static Descriptor roundTrip(Descriptor d) {
        byte[] bytes = DescriptorCodec.encode(d);
        assertEquals(DescriptorCodec.encodedSize(d), bytes.length);
        assertTrue(bytes.length <= DescriptorCodec.MAX_ENCODED_BYTES);
        Descriptor back = DescriptorCodec.decode(bytes);
        assertEquals(d, back);
        assertArrayEquals(bytes, DescriptorCodec.encode(back), "one encoding per descriptor");
        return back;
    }

    @Test
    void roundTripsHostCudaAndRawBlocks() {
        for (Descriptor d : samples()) {
            roundTrip(d);
        }
        Descriptor cuda = roundTrip(cudaEvent());
        assertArrayEquals(event(1), cuda.eventHandle());
        assertEquals(Backend.CUDA, cuda.backend());
        assertTrue(roundTrip(hostRaw()).isRawBlock());
        assertArrayEquals(MEMORY, cuda.memoryHandle());
        assertEquals(712, DescriptorCodec.encodedSize(largest()), "the documented maximum");
    }

    @Test
    void roundTripsTensorsOfEveryRankAndDtype() {
        for (DType dtype : DType.values()) {
            for (int rank = 0; rank <= TensorLayout.MAX_RANK; rank++) {
                long[] shape = new long[rank];
                for (int i = 0; i < rank; i++) {
                    shape[i] = 1 + (i + rank) % 3;
                }
                TensorLayout t = TensorLayout.contiguous(dtype, shape);
                Descriptor d = Descriptor.host(SEG, 1L << 40, 4096, t.byteSpan(), CNT, rank, t, SENDER);
                assertEquals(t, roundTrip(d).tensor());
                if (rank > 0) {
                    TensorLayout view = t.slice(rank - 1, shape[rank - 1] - 1, shape[rank - 1]).transpose(0, rank - 1);
                    assertEquals(view, roundTrip(d.withTensor(view)).tensor());
                }
                if (rank > 1) {
                    TensorLayout selected = t.select(0, shape[0] - 1);
                    assertEquals(selected, roundTrip(d.withTensor(selected)).tensor());
                }
            }
        }
    }

    /** Pins the documented layout, so that a non-Java reader written from the javadoc stays right. */
    @Test
    void bytesAreAtTheDocumentedOffsets() {
        Descriptor d = cudaEvent();
        byte[] b = DescriptorCodec.encode(d);
        MemorySegment s = MemorySegment.ofArray(b);
        assertEquals("RFSD", new String(b, 0, 4, StandardCharsets.US_ASCII));
        assertEquals(2, s.get(U16, 4));
        assertEquals(DescriptorCodec.FLAG_TENSOR | DescriptorCodec.FLAG_EVENT | DescriptorCodec.FLAG_MEMORY,
                s.get(U16, 6));
        assertEquals(0b111, s.get(U16, 6), "the documented bits");
        int total = 72 + 64 + 64 + 16 * 3 + SEG.length() + CNT.length();
        assertEquals(total, s.get(I32, 8));
        assertEquals(total, b.length);
        assertEquals(2, b[12]);
        assertEquals(DType.BFLOAT16.code(), b[13]);
        assertEquals(3, b[14]);
        assertEquals(SEG.length(), b[15]);
        assertEquals(CNT.length(), b[16]);
        assertArrayEquals(new byte[3], Arrays.copyOfRange(b, 17, 20));
        assertEquals(9_999, s.get(I32, 20));
        assertEquals(2 << 20, s.get(I64, 24));
        assertEquals(1 << 20, s.get(I64, 32));
        assertEquals(1 << 20, s.get(I64, 40));
        assertEquals(0, s.get(I64, 48));
        assertEquals(SENDER.pid(), s.get(I64, 56));
        assertEquals(SENDER.startTicks(), s.get(I64, 64));
        assertArrayEquals(MEMORY, Arrays.copyOfRange(b, 72, 136));
        assertArrayEquals(event(1), Arrays.copyOfRange(b, 136, 200));
        long[] shape = {4, 3, 2};
        long[] strides = {1, 4, 12};
        for (int i = 0; i < 3; i++) {
            assertEquals(shape[i], s.get(I64, 200 + 8 * i), "shape[" + i + "]");
            assertEquals(strides[i], s.get(I64, 224 + 8 * i), "strides[" + i + "]");
        }
        assertEquals(SEG, new String(b, 248, SEG.length(), StandardCharsets.US_ASCII));
        assertEquals(CNT, new String(b, 248 + SEG.length(), CNT.length(), StandardCharsets.US_ASCII));

        // a CUDA block without an event: the memory handle, then straight to the names
        byte[] noEvent = DescriptorCodec.encode(Descriptor.cuda(SEG, 64, 0, 0, MEMORY, CNT, 0, new byte[0], null, SENDER));
        assertEquals(DescriptorCodec.FLAG_MEMORY, MemorySegment.ofArray(noEvent).get(U16, 6));
        assertEquals(72 + 64 + SEG.length() + CNT.length(), noEvent.length);
        assertArrayEquals(MEMORY, Arrays.copyOfRange(noEvent, 72, 136));
        assertEquals(SEG, new String(noEvent, 136, SEG.length(), StandardCharsets.US_ASCII));

        byte[] raw = DescriptorCodec.encode(hostRaw());
        assertEquals(0, MemorySegment.ofArray(raw).get(U16, 6), "no flags");
        assertEquals(1, raw[12]);
        assertEquals(0, raw[13] | raw[14]);
        assertEquals(72 + SEG.length() + CNT.length(), raw.length);
        assertEquals(SEG, new String(raw, 72, SEG.length(), StandardCharsets.US_ASCII));
    }

    @Test
    void encodesIntoAndDecodesFromMemorySegments() {
        Descriptor d = cudaEvent();
        int size = DescriptorCodec.encodedSize(d);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cell = arena.allocate(DescriptorCodec.MAX_ENCODED_BYTES + 5);
            assertEquals(size, DescriptorCodec.encode(d, cell, 5));
            assertEquals(d, DescriptorCodec.decode(cell, 5, size));
            assertEquals(d, DescriptorCodec.decode(cell, 5, size, name -> name.startsWith("refshare-")));

            MemorySegment small = arena.allocate(size + 3);
            assertThrows(IndexOutOfBoundsException.class, () -> DescriptorCodec.encode(d, small, 4));
            assertTrue(small.elements(ValueLayout.JAVA_BYTE).allMatch(x -> x.get(ValueLayout.JAVA_BYTE, 0) == 0),
                    "nothing written when it does not fit");
            assertThrows(IndexOutOfBoundsException.class, () -> DescriptorCodec.decode(small, 4, size));
            assertThrows(IndexOutOfBoundsException.class, () -> DescriptorCodec.decode(small, -1, 10));
        }
        byte[] framed = new byte[size + 10];
        System.arraycopy(DescriptorCodec.encode(d), 0, framed, 3, size);
        assertEquals(d, DescriptorCodec.decode(framed, 3, size));
    }

    @Test
    void everyTruncationIsRejected() {
        for (Descriptor d : samples()) {
            byte[] full = DescriptorCodec.encode(d);
            for (int n = 0; n < full.length; n++) {
                byte[] prefix = Arrays.copyOf(full, n);
                var e = assertThrows(InvalidDataException.class, () -> DescriptorCodec.decode(prefix),
                        "prefix of " + n + " bytes");
                assertTrue(e.getMessage().contains("truncated"), e.getMessage());
            }
        }
    }

    @Test
    void trailingAndOversizedInputIsRejected() {
        byte[] full = DescriptorCodec.encode(hostTensor());
        rejected(Arrays.copyOf(full, full.length + 1), "trailing bytes");
        rejected(Arrays.copyOf(full, DescriptorCodec.MAX_ENCODED_BYTES), "trailing bytes");
        rejected(Arrays.copyOf(full, DescriptorCodec.MAX_ENCODED_BYTES + 1), "larger than the maximum of 1024");
        rejected(Arrays.copyOf(full, 4097), "4097 bytes is larger than the maximum");
        // a total length beyond what was given, and beyond anything allowed
        rejected(patched(full, s -> s.set(I32, 8, full.length + 1)), "total length says " + (full.length + 1));
        rejected(patched(full, s -> s.set(I32, 8, -1)), "total length says 4294967295");
        // total length consistent with the input, but not with the fields it announces
        byte[] padded = Arrays.copyOf(full, full.length + 8);
        MemorySegment.ofArray(padded).set(I32, 8, padded.length);
        rejected(padded, "fields it announces take " + full.length);
    }

    @Test
    void headerFieldsAreChecked() {
        byte[] full = DescriptorCodec.encode(cudaEvent());
        byte[] host = DescriptorCodec.encode(hostTensor());
        byte[] raw = DescriptorCodec.encode(hostRaw());
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 0, (byte) 'X')), "wrong magic");
        rejected(new byte[] {'R', 'F', 'S', 'X', 0, 0}, "wrong magic");
        rejected(patched(full, s -> s.set(U16, 4, (short) 1)), "unsupported format version 1");
        rejected(patched(full, s -> s.set(U16, 4, (short) 3)), "unsupported format version 3");
        rejected(patched(full, s -> s.set(U16, 4, (short) 0)), "unsupported format version 0");
        rejected(patched(full, s -> s.set(U16, 6, (short) 0x8007)), "unknown flags 0x8000");
        rejected(patched(full, s -> s.set(U16, 6, (short) 0x0b)), "unknown flags 0x0008");
        rejected(patched(full, s -> s.set(U16, 6, (short) 0x03)), "CUDA descriptor without the memory handle flag");
        rejected(patched(host, s -> s.set(U16, 6, (short) 0x05)), "memory handle flag set on a HOST descriptor");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 12, (byte) 0)), "unknown backend code 0");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 12, (byte) 3)), "unknown backend code 3");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 12, (byte) 1)), "event handle flag set on a HOST");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 13, (byte) 0)), "unknown dtype code 0");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 13, (byte) 11)), "unknown dtype code 11");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 13, (byte) 0xff)), "unknown dtype code 255");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 14, (byte) 17)), "tensor rank 17 exceeds");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 14, (byte) 0xff)), "tensor rank 255 exceeds");
        rejected(patched(raw, s -> s.set(ValueLayout.JAVA_BYTE, 13, (byte) 9)), "without the tensor flag");
        rejected(patched(raw, s -> s.set(ValueLayout.JAVA_BYTE, 14, (byte) 1)), "without the tensor flag");
        rejected(patched(raw, s -> s.set(I64, 48, 5)), "without the tensor flag");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 15, (byte) 0)), "segment name length is 0");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 15, (byte) 129)), "segment name length 129 exceeds");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 16, (byte) 0)), "counter file name length is 0");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 16, (byte) 200)), "counter file name length 200");
        for (int i = 17; i < 20; i++) {
            int at = i;
            rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, at, (byte) 1)), "reserved byte at offset " + i);
        }
        // a rank or name length that changes the announced size without the total following
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 14, (byte) 2)), "fields it announces");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, 15, (byte) (SEG.length() - 1))), "fields it announces");
        rejected(patched(host, s -> s.set(U16, 6, (short) 0)), "without the tensor flag");
        rejected(patched(raw, s -> s.set(U16, 6, (short) DescriptorCodec.FLAG_TENSOR)), "unknown dtype code 0");
    }

    @Test
    void rangeFieldsAreChecked() {
        byte[] full = DescriptorCodec.encode(cudaEvent()); // segment 2 MiB, block [1 MiB, 2 MiB)
        rejected(patched(full, s -> s.set(I32, 20, -1)), "slot is negative: -1");
        rejected(patched(full, s -> s.set(I64, 24, 0)), "segment size must be positive: 0");
        rejected(patched(full, s -> s.set(I64, 24, -5)), "segment size must be positive: -5");
        rejected(patched(full, s -> s.set(I64, 24, (2 << 20) - 1)), "does not lie within the segment size");
        rejected(patched(full, s -> s.set(I64, 32, -1)), "offset is negative: -1");
        rejected(patched(full, s -> s.set(I64, 32, (1 << 20) + 1)), "does not lie within the segment size");
        rejected(patched(full, s -> s.set(I64, 32, Long.MAX_VALUE)), "does not lie within the segment size");
        rejected(patched(full, s -> s.set(I64, 40, -1)), "length is negative: -1");
        rejected(patched(full, s -> s.set(I64, 40, Long.MAX_VALUE)), "does not lie within the segment size");
        rejected(patched(full, s -> s.set(I64, 40, 47)), "needs 48 bytes but the block length is 47");
        rejected(patched(full, s -> s.set(I64, 48, -1)), "tensor: storage offset is negative");
        rejected(patched(full, s -> s.set(I64, 48, 1 << 19)), "but the block length is");
        rejected(patched(full, s -> s.set(I64, 56, 0)), "sender pid must be positive: 0");
        rejected(patched(full, s -> s.set(I64, 56, -7)), "sender pid must be positive: -7");
        rejected(patched(full, s -> s.set(I64, 64, Long.MIN_VALUE)), "sender start ticks is negative");
        // shape at 200, strides at 224 (after the 64-byte memory and event handles)
        rejected(patched(full, s -> s.set(I64, 200, -1)), "tensor: shape[0] is negative: -1");
        rejected(patched(full, s -> s.set(I64, 224 + 16, -3)), "tensor: strides[2] is negative: -3");
        rejected(patched(full, s -> s.set(I64, 200, Long.MAX_VALUE)), "tensor: element count");
        rejected(patched(full, s -> s.set(I64, 224, Long.MAX_VALUE)), "tensor: addressed range");
        rejected(patched(full, s -> s.set(I64, 224, 1 << 20)), "but the block length is");
        // any bytes are a valid memory or event handle
        byte[] otherMemory = patched(full, s -> s.set(I64, 72, -1));
        assertArrayEquals(otherMemory, DescriptorCodec.encode(DescriptorCodec.decode(otherMemory)));
        byte[] otherEvent = patched(full, s -> s.set(I64, 136, -1));
        assertArrayEquals(otherEvent, DescriptorCodec.encode(DescriptorCodec.decode(otherEvent)));
    }

    @Test
    void hostileNamesAreRejected() {
        byte[] full = DescriptorCodec.encode(hostTensor());
        int seg = full.length - CNT.length() - SEG.length();
        int cnt = full.length - CNT.length();
        assertEquals(hostTensor(), DescriptorCodec.decode(withNames(full, SEG, CNT)), "the helper itself is sound");
        rejected(withNames(full, "../../etc/passwd", CNT), "segment name '../../etc/passwd' contains a path separator");
        rejected(withNames(full, SEG, "/dev/shm/x"), "counter file name '/dev/shm/x' contains a path separator");
        rejected(withNames(full, "a..b", CNT), "segment name 'a..b' contains '..'");
        rejected(withNames(full, SEG, ".."), "counter file name '..' contains '..'");
        rejected(withNames(full, "a\\b", CNT), "contains a path separator");
        rejected(withNames(full, "ab.c", CNT), "segment name 'ab.c' contains character '.' at index 2");
        rejected(withNames(full, "ab c", CNT), "contains character ' ' at index 2");
        rejected(withNames(full, "ab\nc", CNT), "contains control character 0x0A at index 2");
        rejected(withNames(full, "ab\0c", CNT), "contains control character 0x00 at index 2");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, seg + 4, (byte) 0xC3)),
                "segment name contains non-ASCII byte 0xC3 at index 4");
        rejected(patched(full, s -> s.set(ValueLayout.JAVA_BYTE, cnt, (byte) 0x80)),
                "counter file name contains non-ASCII byte 0x80 at index 0");
    }

    @Test
    void theNameCheckSeesBothNames(@TempDir Path tmp) {
        ShmDirectory dir = new ShmDirectory(tmp, "refshare", ShmDirectory.OWNER_ONLY);
        String seg = dir.newName(ShmKind.SEGMENT);
        String cnt = dir.newName(ShmKind.COUNTERS);
        byte[] ours = DescriptorCodec.encode(Descriptor.host(seg, 100, 0, 10, cnt, 0, null, SENDER));
        assertEquals(seg, DescriptorCodec.decode(ours, 0, ours.length, DescriptorCodec.namesOf(dir)).segmentName());

        byte[] foreignSegment = DescriptorCodec.encode(Descriptor.host("torch_123_4", 100, 0, 10, cnt, 0, null, SENDER));
        var e = assertThrows(InvalidDataException.class, () -> DescriptorCodec.decode(
                MemorySegment.ofArray(foreignSegment), 0, foreignSegment.length, DescriptorCodec.namesOf(dir)));
        assertTrue(e.getMessage().contains("segment name 'torch_123_4' is refused by the name check"), e.getMessage());
        byte[] otherPrefix = DescriptorCodec.encode(Descriptor.host(seg, 100, 0, 10,
                "other-cnt-0123456789abcdef0123456789abcdef", 0, null, SENDER));
        e = assertThrows(InvalidDataException.class,
                () -> DescriptorCodec.decode(otherPrefix, 0, otherPrefix.length, DescriptorCodec.namesOf(dir)));
        assertTrue(e.getMessage().contains("counter file name 'other-cnt-"), e.getMessage());
        // without a name check, both are well-formed descriptors
        DescriptorCodec.decode(foreignSegment);
        DescriptorCodec.decode(otherPrefix);
    }

    /**
     * Mutated encodings either decode to a valid descriptor whose encoding is exactly the
     * mutated bytes, or are refused with InvalidDataException; nothing else ever escapes.
     */
    @Test
    void randomMutationsNeverEscapeAsAnotherException() {
        Random random = new Random(0xDE5C_0DECL);
        List<byte[]> seeds = new ArrayList<>();
        for (Descriptor d : samples()) {
            seeds.add(DescriptorCodec.encode(d));
        }
        int decoded = 0;
        int refused = 0;
        for (int round = 0; round < 100_000; round++) {
            byte[] b = seeds.get(random.nextInt(seeds.size()));
            int mutations = 1 + random.nextInt(4);
            for (int m = 0; m < mutations; m++) {
                b = mutate(random, b);
            }
            try {
                Descriptor d = DescriptorCodec.decode(b);
                decoded++;
                if (!Arrays.equals(b, DescriptorCodec.encode(d))) {
                    fail("decoded but encodes differently: " + HexFormat.of().formatHex(b));
                }
                if (d.tensor() != null) {
                    d.tensor().checkFits(d.length());
                }
            } catch (InvalidDataException e) {
                refused++;
                assertTrue(e.getMessage().startsWith("malformed descriptor: "), e.getMessage());
            } catch (Throwable t) {
                fail("round " + round + ": " + t + " for input " + HexFormat.of().formatHex(b), t);
            }
        }
        System.out.println("mutation loop: " + decoded + " decoded, " + refused + " refused");
        // both outcomes must be common, or the loop tests one path only
        assertTrue(decoded > 5_000, "decoded " + decoded);
        assertTrue(refused > 50_000, "refused " + refused);
    }

    private static final long[] INTERESTING = {0, 1, -1, 2, 16, 17, 64, 127, 128, 129, 255, 256, 648, 712, 1024,
            Integer.MAX_VALUE, Integer.MIN_VALUE, 1L << 32, Long.MAX_VALUE, Long.MIN_VALUE, Long.MAX_VALUE / 2};

    private static byte[] mutate(Random r, byte[] b) {
        int kind = r.nextInt(10);
        if (b.length == 0) {
            kind = 5;
        }
        byte[] out;
        switch (kind) {
            case 0 -> { // flip a bit
                out = b.clone();
                out[r.nextInt(out.length)] ^= (byte) (1 << r.nextInt(8));
            }
            case 1 -> { // any byte, with a bias to the fixed header
                out = b.clone();
                int at = r.nextBoolean() ? r.nextInt(Math.min(72, out.length)) : r.nextInt(out.length);
                out[at] = (byte) r.nextInt(256);
            }
            case 2 -> { // a boundary value in a byte
                out = b.clone();
                int[] values = {0, 1, 0x2e, 0x2f, 0x7f, 0x80, 0xff, 16, 17};
                out[r.nextInt(out.length)] = (byte) values[r.nextInt(values.length)];
            }
            case 3, 4 -> { // a boundary value in an aligned 4- or 8-byte field
                out = b.clone();
                int width = kind == 3 ? 4 : 8;
                if (out.length >= width) {
                    int at = r.nextInt(out.length / width) * width;
                    long v = INTERESTING[r.nextInt(INTERESTING.length)] + r.nextInt(3) - 1;
                    MemorySegment s = MemorySegment.ofArray(out);
                    if (width == 4) {
                        s.set(I32, at, (int) v);
                    } else {
                        s.set(I64, at, v);
                    }
                }
            }
            case 5 -> { // append
                out = Arrays.copyOf(b, b.length + 1 + r.nextInt(8));
                for (int i = b.length; i < out.length; i++) {
                    out[i] = (byte) r.nextInt(256);
                }
            }
            case 6 -> out = Arrays.copyOf(b, r.nextInt(b.length)); // truncate
            case 7 -> { // insert a byte
                int at = r.nextInt(b.length + 1);
                out = new byte[b.length + 1];
                System.arraycopy(b, 0, out, 0, at);
                out[at] = (byte) r.nextInt(256);
                System.arraycopy(b, at, out, at + 1, b.length - at);
            }
            case 8 -> { // delete a byte
                int at = r.nextInt(b.length);
                out = new byte[b.length - 1];
                System.arraycopy(b, 0, out, 0, at);
                System.arraycopy(b, at + 1, out, at, b.length - at - 1);
            }
            default -> { // make the total length agree with the input, to get past that check
                out = b.clone();
                if (out.length >= 12) {
                    MemorySegment.ofArray(out).set(I32, 8, out.length);
                }
            }
        }
        return out;
    }

    private static byte[] patched(byte[] valid, Consumer<MemorySegment> patch) {
        byte[] copy = valid.clone();
        patch.accept(MemorySegment.ofArray(copy));
        return copy;
    }

    /**
     * {@code valid} (whose names are SEG and CNT) with other names, bypassing the checks a
     * Descriptor would make: name lengths and total length are rewritten to match.
     */
    private static byte[] withNames(byte[] valid, String segmentName, String counterFileName) {
        int namesAt = valid.length - SEG.length() - CNT.length();
        byte[] seg = segmentName.getBytes(StandardCharsets.ISO_8859_1);
        byte[] cnt = counterFileName.getBytes(StandardCharsets.ISO_8859_1);
        byte[] out = Arrays.copyOf(valid, namesAt + seg.length + cnt.length);
        System.arraycopy(seg, 0, out, namesAt, seg.length);
        System.arraycopy(cnt, 0, out, namesAt + seg.length, cnt.length);
        out[15] = (byte) seg.length;
        out[16] = (byte) cnt.length;
        MemorySegment.ofArray(out).set(I32, 8, out.length);
        return out;
    }

    private static void rejected(byte[] bytes, String expected) {
        var e = assertThrows(InvalidDataException.class, () -> DescriptorCodec.decode(bytes));
        assertTrue(e.getMessage().contains(expected),
                () -> "message '" + e.getMessage() + "' should contain '" + expected + "'");
    }

    /** A sender's field-wise encoding of its own host block is byte for byte the descriptor's encoding. */
    @Test
    void encodeHostWritesExactlyWhatEncodingTheHostDescriptorWrites() {
        List<TensorLayout> layouts = Arrays.asList(TensorLayout.contiguous(DType.FLOAT32, 4, 8),
                TensorLayout.contiguous(DType.UINT8, 4096), TensorLayout.contiguous(DType.BFLOAT16, 2, 3, 4), null);
        for (TensorLayout layout : layouts) {
            Descriptor d = Descriptor.host(SEG, 1 << 20, 8192, 4096, CNT, 77, layout, SENDER);
            byte[] expected = DescriptorCodec.encode(d);
            byte[] seg = SEG.getBytes(StandardCharsets.US_ASCII);
            byte[] cnt = CNT.getBytes(StandardCharsets.US_ASCII);
            assertEquals(expected.length, DescriptorCodec.encodedHostSize(seg.length, cnt.length, layout));
            MemorySegment cell = MemorySegment.ofArray(new byte[expected.length + 16]);
            cell.fill((byte) 0x5A); // the reserved bytes must be written, not left as they were
            int written = DescriptorCodec.encodeHost(seg, 1 << 20, 8192, 4096, cnt, 77, layout, SENDER.pid(),
                    SENDER.startTicks(), cell, 8);
            assertEquals(expected.length, written);
            assertArrayEquals(expected, cell.asSlice(8, written).toArray(ValueLayout.JAVA_BYTE), "layout " + layout);
            assertEquals((byte) 0x5A, cell.get(ValueLayout.JAVA_BYTE, 8 + written), "nothing written past the end");
            assertThrows(IndexOutOfBoundsException.class, () -> DescriptorCodec.encodeHost(seg, 1 << 20, 8192, 4096,
                    cnt, 77, layout, SENDER.pid(), SENDER.startTicks(), cell, cell.byteSize() - written + 1));
        }
    }

    /**
     * A queue cell is written again a lap later over the message it held: encodeHost writes only
     * the bytes that differ, and what the cell holds afterwards is byte for byte the new encoding,
     * whatever was there (another block, a longer encoding, the same block with another slot).
     */
    @Test
    void encodeHostOverAnEarlierMessageLeavesExactlyTheNewEncoding() {
        byte[] seg = SEG.getBytes(StandardCharsets.US_ASCII);
        byte[] cnt = CNT.getBytes(StandardCharsets.US_ASCII);
        byte[] otherSeg = (SEG.substring(0, SEG.length() - 3) + "zzz").getBytes(StandardCharsets.US_ASCII);
        MemorySegment cell = MemorySegment.ofArray(new byte[512]);
        DescriptorCodec.encodeHost(otherSeg, 1 << 21, 64, 8192, cnt, 5, TensorLayout.contiguous(DType.BFLOAT16, 2, 3, 4),
                SENDER.pid(), SENDER.startTicks(), cell, 16);
        int[] slots = {77, 78, 78, 0, Integer.MAX_VALUE};
        for (int slot : slots) {
            for (TensorLayout layout : Arrays.asList(null, TensorLayout.contiguous(DType.FLOAT32, 4, 8))) {
                byte[] expected = DescriptorCodec.encode(Descriptor.host(SEG, 1 << 20, 8192, 4096, CNT, slot, layout,
                        SENDER));
                int written = DescriptorCodec.encodeHost(seg, 1 << 20, 8192, 4096, cnt, slot, layout, SENDER.pid(),
                        SENDER.startTicks(), cell, 16);
                assertArrayEquals(expected, cell.asSlice(16, written).toArray(ValueLayout.JAVA_BYTE),
                        "slot " + slot + ", layout " + layout);
                assertEquals(DescriptorCodec.decode(expected), DescriptorCodec.decode(cell, 16, written));
            }
        }
    }
    /** Names of every length up to three words, each written over the encoding of names one byte longer. */
    @Test
    void encodeHostWritesNamesOfEveryLengthExactly() {
        MemorySegment cell = MemorySegment.ofArray(new byte[512]);
        cell.fill((byte) 0x5A);
        for (int length = 25; length >= 1; length--) {
            String segName = "s0123456789abcdefghijklmnopqrstuvwxyz".substring(0, length);
            String cntName = "c9876543210zyxwvutsrqponmlkjihgfedcba".substring(0, length);
            byte[] expected = DescriptorCodec.encode(Descriptor.host(segName, 1 << 20, 8192, 4096, cntName, 3, null,
                    SENDER));
            int written = DescriptorCodec.encodeHost(segName.getBytes(StandardCharsets.US_ASCII), 1 << 20, 8192, 4096,
                    cntName.getBytes(StandardCharsets.US_ASCII), 3, null, SENDER.pid(), SENDER.startTicks(), cell, 16);
            assertArrayEquals(expected, cell.asSlice(16, written).toArray(ValueLayout.JAVA_BYTE), "names of " + length);
        }
    }
}
