package io.refshare.conformance;

import io.refshare.channel.ShmQueueLayout;
import io.refshare.counter.CounterFileLayout;
import io.refshare.holder.SharedHolderLayout;
import io.refshare.memory.HostBackend;
import io.refshare.share.StatusFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.LifeFile;
import io.refshare.shm.ProcessIdentity;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.zip.CRC32;

/**
 * Writes the conformance fixtures under {@code conformance/} (see conformance/README.md):
 * valid descriptors encoded by the real {@link DescriptorCodec} with every field as the
 * real decoder reads it back, malformed descriptors assembled by {@link RawDescriptor}, and
 * sample 32-byte file headers built from the layout classes' constants.
 *
 * <p>Run it after changing the wire format or a layout constant, from the repository root:
 * <pre>
 *   mvn -B -q -ntp -pl core test-compile
 *   $JAVA_HOME/bin/java -cp core/target/classes:core/target/test-classes \
 *       io.refshare.conformance.FixtureGenerator conformance
 * </pre>
 * {@code ConformanceTest} regenerates them in memory and fails when the files on disk
 * differ, so committed fixtures are always what this code produces.
 */
public final class FixtureGenerator {
    static final String DESCRIPTORS_VALID = "descriptors/valid";
    static final String DESCRIPTORS_MALFORMED = "descriptors/malformed";
    static final String HEADERS = "headers";
    static final String JAVA_ERROR = "InvalidDataException";
    static final String PYTHON_ERROR = "InvalidDataError";

    /** The sender every fixture names, unless a fixture is about the sender. */
    static final ProcessIdentity SENDER = new ProcessIdentity(4242, 123456);
    private static final long SEGMENT_HEADER = HostBackend.HEADER_BYTES;
    private static final long SMALL_SEGMENT = SEGMENT_HEADER + (4L << 20);

    private final Map<String, String> files = new TreeMap<>();

    private FixtureGenerator() {
    }

    public static void main(String[] args) throws IOException {
        Path root = args.length > 0 ? Path.of(args[0]) : ConformanceFiles.root();
        Map<String, String> all = generate();
        for (String dir : List.of(DESCRIPTORS_VALID, DESCRIPTORS_MALFORMED, HEADERS)) {
            Path d = root.resolve(dir);
            Files.createDirectories(d);
            try (var old = Files.list(d)) {
                for (Path p : old.filter(p -> p.toString().endsWith(".json")).toList()) {
                    Files.delete(p);
                }
            }
        }
        for (Map.Entry<String, String> e : all.entrySet()) {
            Files.writeString(root.resolve(e.getKey()), e.getValue(), StandardCharsets.US_ASCII);
        }
        System.out.println("wrote " + all.size() + " fixtures under " + root.toAbsolutePath());
    }

    /** Every fixture: path relative to the conformance folder -> file content. */
    static Map<String, String> generate() {
        FixtureGenerator g = new FixtureGenerator();
        g.validDescriptors();
        g.malformedDescriptors();
        g.headers();
        return g.files;
    }

    // ------------------------------------------------------------------ valid descriptors

    private static String segmentName(int n) {
        return String.format("refshare-seg-%032x", 0x5e6000L + n);
    }

    private static String counterName(int n) {
        return String.format("refshare-cnt-%032x", 0xc07000L + n);
    }

    private static byte[] pattern(int length, int seed) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (seed + 7 * i);
        }
        return b;
    }

    private void validDescriptors() {
        int n = 0;
        // every dtype, one small host block each
        for (DType t : DType.values()) {
            n++;
            TensorLayout layout = TensorLayout.contiguous(t, 7);
            valid("host_" + t.numpyName() + "_vector", "a contiguous 7-element " + t.numpyName()
                            + " vector in a 512-byte block of a small-block segment",
                    Descriptor.host(segmentName(n), SMALL_SEGMENT, SEGMENT_HEADER + 512L * n, 512, counterName(1), n,
                            layout, SENDER));
        }
        valid("host_float32_matrix", "a 512x512 float32 matrix filling a 1 MiB block",
                Descriptor.host(segmentName(20), SMALL_SEGMENT, SEGMENT_HEADER + (1L << 20), 1L << 20, counterName(2),
                        9_999, TensorLayout.contiguous(DType.FLOAT32, 512, 512), SENDER));
        valid("host_raw_block", "a raw block (no tensor): readers see uint8[length]",
                Descriptor.host(segmentName(21), SMALL_SEGMENT, SEGMENT_HEADER + 4096, 1000, counterName(3), 17, null,
                        SENDER));
        valid("host_raw_empty_block", "a raw block of length 0 at the very end of its segment",
                Descriptor.host(segmentName(22), SMALL_SEGMENT, SMALL_SEGMENT, 0, counterName(3), 18, null, SENDER));
        valid("host_block_ends_at_segment_end", "offset + length == segment size exactly",
                Descriptor.host(segmentName(23), SMALL_SEGMENT, SMALL_SEGMENT - 1024, 1024, counterName(3), 19,
                        TensorLayout.contiguous(DType.INT64, 128), SENDER));
        valid("host_scalar_0d", "a 0-d float64 tensor (rank 0, TENSOR flag set) at storage offset 3",
                Descriptor.host(segmentName(24), SMALL_SEGMENT, SEGMENT_HEADER, 512, counterName(4), 0,
                        new TensorLayout(DType.FLOAT64, new long[0], new long[0], 3), SENDER));
        valid("host_view_transposed", "a transposed 3x4 int32 view: strides [1, 3]",
                Descriptor.host(segmentName(25), SMALL_SEGMENT, SEGMENT_HEADER + 512, 512, counterName(4), 1,
                        new TensorLayout(DType.INT32, new long[] {3, 4}, new long[] {1, 3}, 0), SENDER));
        valid("host_view_strided_slice", "a 2x3 int16 slice with steps: strides [8, 2], storage offset 5",
                Descriptor.host(segmentName(26), SMALL_SEGMENT, SEGMENT_HEADER + 1024, 512, counterName(4), 2,
                        new TensorLayout(DType.INT16, new long[] {2, 3}, new long[] {8, 2}, 5), SENDER));
        valid("host_view_broadcast", "a broadcast 4x5 float32 view: stride 0 on the outer dimension",
                Descriptor.host(segmentName(27), SMALL_SEGMENT, SEGMENT_HEADER + 1536, 512, counterName(4), 3,
                        new TensorLayout(DType.FLOAT32, new long[] {4, 5}, new long[] {0, 1}, 0), SENDER));
        valid("host_empty_tensor", "a 0x5 uint8 tensor: addresses nothing, its storage offset 2 still lies in the block",
                Descriptor.host(segmentName(28), SMALL_SEGMENT, SEGMENT_HEADER + 2048, 512, counterName(4), 4,
                        new TensorLayout(DType.UINT8, new long[] {0, 5}, new long[] {5, 1}, 2), SENDER));
        long[] rank16 = new long[TensorLayout.MAX_RANK];
        Arrays.fill(rank16, 1);
        rank16[0] = 2;
        rank16[15] = 3;
        valid("host_rank_16", "the largest rank, 16",
                Descriptor.host(segmentName(29), SMALL_SEGMENT, SEGMENT_HEADER + 2560, 512, counterName(4), 5,
                        TensorLayout.contiguous(DType.BOOL, rank16), SENDER));
        long large = 1L << 33;
        valid("host_large_shape", "an 8 GiB int8 tensor of shape [2^31, 4] in a segment of its own",
                Descriptor.host(segmentName(30), SEGMENT_HEADER + large, SEGMENT_HEADER, large, counterName(5), 6,
                        TensorLayout.contiguous(DType.INT8, 1L << 31, 4), SENDER));
        long hugeStride = 1L << 40;
        valid("host_huge_stride", "two float64 elements 2^40 elements apart: values near the limits, no overflow",
                Descriptor.host(segmentName(31), SEGMENT_HEADER + (hugeStride + 1) * 8, SEGMENT_HEADER,
                        (hugeStride + 1) * 8, counterName(5), 7,
                        new TensorLayout(DType.FLOAT64, new long[] {2}, new long[] {hugeStride}, 0), SENDER));
        valid("host_extreme_identity_and_slot", "slot 2^31-1, sender pid 2^22-1, start ticks 2^41-1",
                Descriptor.host(segmentName(32), SMALL_SEGMENT, SEGMENT_HEADER, 512, counterName(6), Integer.MAX_VALUE,
                        TensorLayout.contiguous(DType.UINT8, 512),
                        new ProcessIdentity((1L << 22) - 1, (1L << 41) - 1)));
        valid("host_longest_names", "names of 128 characters: the wire rule allows them (a directory would not)",
                Descriptor.host("S".repeat(64) + "-_".repeat(32), SMALL_SEGMENT, SEGMENT_HEADER, 512,
                        "c".repeat(127) + "9", 0, null, SENDER));
        valid("host_shortest_names", "names of one character: the wire rule allows them (a directory would not)",
                Descriptor.host("s", SMALL_SEGMENT, SEGMENT_HEADER, 512, "c", 0, null, SENDER));
        // CUDA
        valid("cuda_float16_with_event", "a CUDA float16 matrix with a memory handle and an event handle",
                Descriptor.cuda(segmentName(40), 2L << 20, 0, 1L << 20, pattern(64, 1), counterName(7), 8,
                        pattern(64, 2), TensorLayout.contiguous(DType.FLOAT16, 512, 1024), SENDER));
        valid("cuda_bfloat16_no_event", "a CUDA bfloat16 view without an event (the producer synchronised)",
                Descriptor.cuda(segmentName(41), 2L << 20, 4096, 8192, pattern(64, 3), counterName(7), 9, new byte[0],
                        new TensorLayout(DType.BFLOAT16, new long[] {16, 64}, new long[] {1, 16}, 0), SENDER));
        valid("cuda_raw_block_with_event", "a raw CUDA block with an event",
                Descriptor.cuda(segmentName(42), 2L << 20, 0, 2L << 20, pattern(64, 4), counterName(7), 10,
                        pattern(64, 5), null, SENDER));
    }

    private void valid(String name, String description, Descriptor d) {
        byte[] encoded = DescriptorCodec.encode(d);
        if (!Arrays.equals(encoded, raw(d).build())) {
            throw new AssertionError(name + ": RawDescriptor and DescriptorCodec disagree");
        }
        Descriptor back = DescriptorCodec.decode(encoded);
        if (!back.equals(d)) {
            throw new AssertionError(name + ": does not decode to what was encoded");
        }
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("name", name);
        f.put("description", description);
        f.put("hex", HexFormat.of().formatHex(encoded));
        f.put("decoded", decodedFields(encoded, back));
        put(DESCRIPTORS_VALID, name, f);
    }

    /** Every field of docs/protocol.md §7.1 as decoded, plus values derived from them. */
    static Map<String, Object> decodedFields(byte[] encoded, Descriptor d) {
        ByteBuffer b = ByteBuffer.wrap(encoded).order(ByteOrder.LITTLE_ENDIAN);
        TensorLayout t = d.tensor();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("magic", "RFSD");
        m.put("version", (long) Short.toUnsignedInt(b.getShort(4)));
        m.put("flags", (long) Short.toUnsignedInt(b.getShort(6)));
        m.put("total_length", Integer.toUnsignedLong(b.getInt(8)));
        m.put("backend", (long) d.backend().code());
        m.put("backend_name", d.backend().name());
        m.put("tensor", t != null);
        m.put("dtype", t != null ? (long) t.dtype().code() : 0L);
        m.put("dtype_name", t != null ? t.dtype().numpyName() : null);
        m.put("rank", t != null ? (long) t.rank() : 0L);
        m.put("segment_name_length", (long) d.segmentName().length());
        m.put("counter_file_name_length", (long) d.counterFileName().length());
        m.put("slot", (long) d.slot());
        m.put("segment_size", d.segmentSize());
        m.put("offset", d.offset());
        m.put("length", d.length());
        m.put("storage_offset", t != null ? t.storageOffset() : 0L);
        m.put("sender_pid", d.senderPid());
        m.put("sender_start_ticks", d.senderStartTicks());
        m.put("memory_handle", HexFormat.of().formatHex(d.memoryHandle()));
        m.put("event_handle", HexFormat.of().formatHex(d.eventHandle()));
        m.put("shape", t != null ? t.shape() : new long[0]);
        m.put("strides", t != null ? t.strides() : new long[0]);
        m.put("segment_name", d.segmentName());
        m.put("counter_file_name", d.counterFileName());
        m.put("itemsize", t != null ? (long) t.dtype().byteSize() : 1L);
        m.put("element_count", t != null ? t.elementCount() : d.length());
        m.put("byte_span", t != null ? t.byteSpan() : d.length());
        m.put("range_tag", rangeTag(d.offset(), d.length(), d.segmentName()));
        return m;
    }

    /** docs/protocol.md §8.3: CRC-32 of offset (8 LE) || length (8 LE) || segment name. */
    static long rangeTag(long offset, long length, String segmentName) {
        ByteBuffer b = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(offset).putLong(length);
        CRC32 crc = new CRC32();
        crc.update(b.array());
        crc.update(segmentName.getBytes(StandardCharsets.US_ASCII));
        return crc.getValue();
    }

    /** The raw builder's view of a descriptor, for the cross-check and for mutating. */
    private static RawDescriptor raw(Descriptor d) {
        RawDescriptor r = new RawDescriptor();
        r.backend = d.backend().code();
        r.slot = d.slot();
        r.segmentSize = d.segmentSize();
        r.offset = d.offset();
        r.length = d.length();
        r.senderPid = d.senderPid();
        r.senderStartTicks = d.senderStartTicks();
        r.memoryHandle = d.backend() == Backend.CUDA ? d.memoryHandle() : null;
        r.eventHandle = d.hasEvent() ? d.eventHandle() : null;
        r.segmentName = RawDescriptor.bytes(d.segmentName());
        r.counterFileName = RawDescriptor.bytes(d.counterFileName());
        TensorLayout t = d.tensor();
        if (t != null) {
            r.dtype = t.dtype().code();
            r.shape = t.shape();
            r.strides = t.strides();
            r.storageOffset = t.storageOffset();
        }
        return r;
    }

    // ------------------------------------------------------------------ malformed descriptors

    /** A valid host float32 [2, 3] descriptor to mutate. */
    private static RawDescriptor hostBase() {
        return raw(Descriptor.host(segmentName(1), SMALL_SEGMENT, SEGMENT_HEADER + 512, 512, counterName(1), 3,
                TensorLayout.contiguous(DType.FLOAT32, 2, 3), SENDER));
    }

    /** A valid CUDA descriptor with every optional part, to truncate. */
    private static RawDescriptor cudaBase() {
        return raw(Descriptor.cuda(segmentName(2), 2L << 20, 0, 4096, pattern(64, 9), counterName(2), 4,
                pattern(64, 10), TensorLayout.contiguous(DType.FLOAT32, 8, 16), SENDER));
    }

    private void malformed(String name, String reason, byte[] bytes) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("name", name);
        f.put("reason", reason);
        f.put("hex", HexFormat.of().formatHex(bytes));
        f.put("error_java", JAVA_ERROR);
        f.put("error_python", PYTHON_ERROR);
        put(DESCRIPTORS_MALFORMED, name, f);
    }

    private void malformed(String name, String reason, Consumer<RawDescriptor> mutation) {
        RawDescriptor r = hostBase();
        mutation.accept(r);
        malformed(name, reason, r.build());
    }

    private void malformedDescriptors() {
        byte[] full = cudaBase().build();
        if (!Arrays.equals(full, DescriptorCodec.encode(DescriptorCodec.decode(full)))) {
            throw new AssertionError("the truncation base is not a valid descriptor");
        }
        int names = 72 + 64 + 64 + 2 * 16;
        int segEnd = names + segmentName(2).length();
        int[] cuts = {0, 1, 3, 4, 71, 72, 135, 136, 199, 200, 215, 216, 231, 232, segEnd - 1, segEnd, full.length - 1};
        for (int cut : cuts) {
            malformed(String.format("truncated_at_%03d", cut), "the first " + cut + " of " + full.length
                    + " bytes of a valid CUDA descriptor with every part (boundaries: 4 magic, 72 fixed header,"
                    + " 136 memory handle, 200 event handle, 216 shape, 232 strides, " + segEnd + " segment name)",
                    Arrays.copyOf(full, cut));
        }
        for (int cut : new int[] {72, 136, 200, 216, 232, segEnd}) {
            byte[] b = Arrays.copyOf(full, cut);
            ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(8, cut);
            malformed(String.format("truncated_consistently_at_%03d", cut), "the first " + cut + " bytes of the same"
                    + " descriptor with total_length patched to " + cut + ": the parts the header announces do not fit",
                    b);
        }
        malformed("trailing_byte", "one byte more than total_length", Arrays.copyOf(full, full.length + 1));
        malformed("too_long_input", "1025 bytes: more than any encoding may be", new byte[1025]);

        malformed("bad_magic", "magic is RFSE", r -> r.magic = 'R' | 'F' << 8 | 'S' << 16 | 'E' << 24);
        malformed("bad_magic_zero", "magic is 0", r -> r.magic = 0);
        malformed("bad_version_1", "version 1 (the pre-memory-handle format)", r -> r.version = 1);
        malformed("bad_version_3", "version 3, unknown to this reader", r -> r.version = 3);
        malformed("bad_version_ffff", "version 0xFFFF", r -> r.version = 0xFFFF);
        malformed("unknown_flag_bit3", "flag bit 3 set", r -> r.flags = r.effectiveFlags() | 8);
        malformed("unknown_flag_bit15", "flag bit 15 set", r -> r.flags = r.effectiveFlags() | 0x8000);
        malformed("total_length_too_small", "total_length one less than the bytes given",
                r -> r.totalLength = r.build().length - 1);
        malformed("total_length_huge", "total_length 0xFFFFFFFF", r -> r.totalLength = 0xFFFFFFFFL);
        malformed("total_length_disagrees_with_parts",
                "total_length equals the bytes given but the header announces fewer: one trailing byte counted in",
                r -> {
                    r.trailing = new byte[] {0};
                    r.totalLength = r.build().length;
                });
        malformed("backend_zero", "backend code 0 (unassigned)", r -> r.backend = 0);
        malformed("backend_three", "backend code 3 (unknown)", r -> r.backend = 3);
        malformed("backend_ff", "backend code 255", r -> r.backend = 255);
        malformed("event_on_host", "EVENT flag and an event handle on a HOST descriptor",
                r -> r.eventHandle = pattern(64, 1));
        malformed("memory_on_host", "MEMORY flag and a memory handle on a HOST descriptor",
                r -> r.memoryHandle = pattern(64, 1));
        malformed("cuda_without_memory", "a CUDA descriptor without the MEMORY flag", r -> r.backend = 2);
        malformed("dtype_zero", "TENSOR set with dtype code 0", r -> r.dtype = 0);
        malformed("dtype_eleven", "TENSOR set with dtype code 11 (unknown)", r -> r.dtype = 11);
        malformed("dtype_ff", "TENSOR set with dtype code 255", r -> r.dtype = 255);
        malformed("rank_17", "rank 17, above the maximum 16", r -> {
            r.shape = new long[17];
            r.strides = new long[17];
            Arrays.fill(r.shape, 1);
            Arrays.fill(r.strides, 1);
        });
        malformed("rank_disagrees_with_parts", "rank byte 3 but two dimensions laid out", r -> r.rank = 3);
        malformed("dtype_without_tensor", "dtype code 9 without the TENSOR flag", r -> {
            r.shape = null;
            r.strides = null;
            r.storageOffset = 0;
            r.dtype = 9;
        });
        malformed("rank_without_tensor", "rank 1 without the TENSOR flag (and no dimensions laid out)", r -> {
            r.shape = null;
            r.strides = null;
            r.storageOffset = 0;
            r.dtype = 0;
            r.rank = 1;
        });
        malformed("storage_offset_without_tensor", "storage offset 4 without the TENSOR flag", r -> {
            r.shape = null;
            r.strides = null;
            r.dtype = 0;
            r.storageOffset = 4;
        });
        malformed("segment_name_length_zero", "segment name length 0", r -> {
            r.segmentName = new byte[0];
        });
        malformed("counter_name_length_zero", "counter file name length 0", r -> {
            r.counterFileName = new byte[0];
        });
        malformed("segment_name_length_129", "a 129-character segment name", r -> {
            r.segmentName = RawDescriptor.bytes("s".repeat(129));
        });
        malformed("counter_name_length_255", "a 255-character counter file name", r -> {
            r.counterFileName = RawDescriptor.bytes("c".repeat(255));
        });
        for (int i = 0; i < 3; i++) {
            int at = i;
            malformed("reserved_byte_" + (17 + i), "reserved byte at offset " + (17 + i) + " is 0x01",
                    r -> r.reserved[at] = 1);
        }
        malformed("slot_negative", "slot -1", r -> r.slot = -1);
        malformed("segment_size_zero", "segment size 0", r -> r.segmentSize = 0);
        malformed("segment_size_negative", "segment size -4096", r -> r.segmentSize = -4096);
        malformed("offset_negative", "block offset -512", r -> r.offset = -512);
        malformed("length_negative", "block length -1", r -> r.length = -1);
        malformed("offset_beyond_segment", "block offset one past the segment size", r -> {
            r.offset = r.segmentSize + 1;
            r.length = 0;
            r.shape = null;
            r.strides = null;
            r.dtype = 0;
        });
        malformed("block_beyond_segment", "offset + length one past the segment size",
                r -> r.length = r.segmentSize - r.offset + 1);
        malformed("offset_plus_length_overflows", "offset + length overflows a signed 64-bit integer", r -> {
            r.segmentSize = Long.MAX_VALUE;
            r.offset = Long.MAX_VALUE - 8;
            r.length = Long.MAX_VALUE - 8;
        });
        malformed("shape_negative", "shape [-2, 3]", r -> r.shape = new long[] {-2, 3});
        malformed("stride_negative", "strides [3, -1] (negative strides are not supported)",
                r -> r.strides = new long[] {3, -1});
        malformed("storage_offset_negative", "storage offset -1", r -> r.storageOffset = -1);
        malformed("element_count_overflows", "shape [2^32, 2^32]: the element count overflows 64 bits", r -> {
            r.shape = new long[] {1L << 32, 1L << 32};
            r.strides = new long[] {0, 0};
        });
        malformed("shape_times_strides_overflows", "shape [3, 1], strides [2^62, 1]: the last index overflows", r -> {
            r.shape = new long[] {3, 1};
            r.strides = new long[] {1L << 62, 1};
        });
        malformed("byte_span_overflows", "last index 2^62 fits, times itemsize 4 does not", r -> {
            r.shape = new long[] {2, 1};
            r.strides = new long[] {1L << 62, 1};
        });
        malformed("tensor_beyond_block", "a float32 [2, 3] tensor at storage offset 123: 516 bytes in a 512-byte block",
                r -> r.storageOffset = 123);
        malformed("empty_tensor_offset_beyond_block", "a 0x3 tensor whose storage offset 129 lies beyond the block",
                r -> {
                    r.shape = new long[] {0, 3};
                    r.storageOffset = 129;
                });
        malformed("sender_pid_zero", "sender pid 0", r -> r.senderPid = 0);
        malformed("sender_pid_negative", "sender pid -1", r -> r.senderPid = -1);
        malformed("sender_start_negative", "sender start ticks -1", r -> r.senderStartTicks = -1);
        String[] hostile = {"../../etc/passwd", "a/b", "a\\b", "..", ".", "name with space", "tab\there",
                "nul\0byte", "colon:name", "refshare-seg-0.0", "caf\u00e9", "\u00ff\u00fe"};
        String[] hostileNames = {"dotdot_path", "slash", "backslash", "dotdot", "dot", "space", "tab", "nul",
                "colon", "dot_inside", "latin1_e_acute", "high_bytes"};
        for (int i = 0; i < hostile.length; i++) {
            String bad = hostile[i];
            malformed("hostile_segment_name_" + hostileNames[i], "segment name '" + bad.replace("\0", "\\0")
                    .replace("\t", "\\t") + "' (not [A-Za-z0-9_-])",
                    r -> r.segmentName = bad.getBytes(StandardCharsets.ISO_8859_1));
        }
        malformed("hostile_counter_name_dotdot_path", "counter file name '../cnt'",
                r -> r.counterFileName = RawDescriptor.bytes("../cnt"));
        malformed("hostile_counter_name_utf8", "counter file name with a UTF-8 sequence (bytes c3 a9)",
                r -> r.counterFileName = "caf\u00e9".getBytes(StandardCharsets.UTF_8));
    }

    // ------------------------------------------------------------------ headers

    private record Kind(String name, String tag, long magic, int version, int headerLength) {
    }

    /** The kinds as the layout classes define them. */
    static List<Map<String, Object>> kinds() {
        List<Map<String, Object>> l = new ArrayList<>();
        for (Kind k : kindList()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("kind", k.name());
            m.put("tag", k.tag());
            m.put("magic", k.magic());
            m.put("version", (long) k.version());
            m.put("header_length", (long) k.headerLength());
            l.add(m);
        }
        return l;
    }

    private static List<Kind> kindList() {
        return List.of(
                new Kind("segment", "seg", HostBackend.MAGIC, HostBackend.VERSION, HostBackend.HEADER_BYTES),
                new Kind("counter", "cnt", CounterFileLayout.MAGIC, CounterFileLayout.VERSION,
                        CounterFileLayout.HEADER_LENGTH),
                new Kind("queue", "q", ShmQueueLayout.MAGIC, ShmQueueLayout.VERSION, ShmQueueLayout.HEADER_LENGTH),
                new Kind("holder", "hold", SharedHolderLayout.MAGIC, SharedHolderLayout.VERSION,
                        SharedHolderLayout.HEADER_LENGTH),
                new Kind("status", "proc", StatusFile.MAGIC, StatusFile.VERSION, 40),
                new Kind("life", "life", LifeFile.MAGIC, LifeFile.VERSION, FileHeader.LENGTH));
    }

    static byte[] header(long magic, int version, int headerLength, long pid, long start) {
        return ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN).putLong(magic).putInt(version)
                .putInt(headerLength).putLong(pid).putLong(start).array();
    }

    private void header(String name, String description, byte[] bytes, String expect, String kind,
                        Map<String, Object> values, String reason) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("name", name);
        f.put("description", description);
        f.put("hex", HexFormat.of().formatHex(bytes));
        f.put("expect", expect);
        if (kind != null || "owner".equals(expect)) {
            f.put("kind", kind);
        }
        if (values != null) {
            f.putAll(values);
        }
        if ("error".equals(expect)) {
            f.put("error_java", JAVA_ERROR);
            f.put("error_python", PYTHON_ERROR);
            f.put("reason", reason);
        }
        put(HEADERS, name, f);
    }

    private static Map<String, Object> values(long magic, int version, int headerLength, long pid, long start) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("magic", magic);
        m.put("magic_text", new String(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(magic).array(),
                StandardCharsets.ISO_8859_1).replaceAll("[^\\x20-\\x7e]", "?"));
        m.put("version", (long) version);
        m.put("header_length", (long) headerLength);
        m.put("owner_pid", pid);
        m.put("owner_start_ticks", start);
        return m;
    }

    private void headers() {
        long pid = SENDER.pid();
        long start = SENDER.startTicks();
        for (Kind k : kindList()) {
            header("valid_" + k.name(), "a complete " + k.name() + " file header",
                    header(k.magic(), k.version(), k.headerLength(), pid, start), "owner", k.name(),
                    values(k.magic(), k.version(), k.headerLength(), pid, start), null);
        }
        Kind counter = kindList().get(1);
        long maxPid = (1L << 22) - 1;
        long maxStart = (1L << 41) - 1;
        header("valid_counter_extreme_owner", "owner pid 2^22-1 and start ticks 2^41-1, the largest recordable",
                header(counter.magic(), counter.version(), counter.headerLength(), maxPid, maxStart), "owner",
                "counter", values(counter.magic(), counter.version(), counter.headerLength(), maxPid, maxStart), null);
        header("owner_only_header", "what a creator writes first (docs/protocol.md §2.4 step 3): the owner,"
                        + " magic/version/length still 0; names its owner, no kind yet",
                header(0, 0, 0, pid, start), "owner", null, values(0, 0, 0, pid, start), null);
        header("unknown_magic", "a valid owner under a magic no kind has: the owner is readable, the kind unknown",
                header(0x3030303030303030L, 1, 64, pid, start), "owner", null,
                values(0x3030303030303030L, 1, 64, pid, start), null);
        byte[] valid = header(counter.magic(), counter.version(), counter.headerLength(), pid, start);
        for (int cut : new int[] {0, 1, 16, 24, 31}) {
            header(String.format("truncated_%02d", cut), "the first " + cut + " bytes of a header: names no owner"
                    + " (a creator killed before its first write, or one being created)", Arrays.copyOf(valid, cut),
                    "no_owner", null, null, null);
        }
        header("owner_pid_zero", "a full header whose owner pid is 0: names no owner",
                header(counter.magic(), counter.version(), counter.headerLength(), 0, start), "no_owner", null, null,
                null);
        header("owner_pid_negative", "owner pid -1",
                header(counter.magic(), counter.version(), counter.headerLength(), -1, start), "error", null, null,
                "impossible owner pid");
        header("owner_pid_2_31", "owner pid 2^31: beyond every limit",
                header(counter.magic(), counter.version(), counter.headerLength(), 1L << 31, start), "error", null,
                null, "impossible owner pid");
        header("owner_pid_max_long", "owner pid 2^63-1",
                header(counter.magic(), counter.version(), counter.headerLength(), Long.MAX_VALUE, start), "error",
                null, null, "impossible owner pid");
        header("owner_start_negative", "owner start ticks -1",
                header(counter.magic(), counter.version(), counter.headerLength(), pid, -1), "error", null, null,
                "impossible owner start ticks");
    }

    private void put(String dir, String name, Map<String, Object> fixture) {
        String path = dir + "/" + name + ".json";
        if (files.put(path, Json.write(fixture)) != null) {
            throw new AssertionError("two fixtures named " + path);
        }
    }
}
