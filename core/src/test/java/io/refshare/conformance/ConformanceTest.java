package io.refshare.conformance;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.CheckedFile;
import io.refshare.shm.FileHeader;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Replays the shared fixtures of {@code conformance/} (conformance/README.md) against the
 * Java decoder and header reader; the Python package replays the same files. Also checks
 * that the committed fixtures are exactly what {@link FixtureGenerator} produces, so they
 * stay the real encoder's bytes.
 */
class ConformanceTest {
    private static Path root;
    private static Path scratch;

    @BeforeAll
    static void locate() throws IOException {
        root = ConformanceFiles.root();
        scratch = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-conformance-");
    }

    @AfterAll
    static void cleanUp() throws IOException {
        if (scratch != null) {
            try (Stream<Path> s = Files.walk(scratch)) {
                for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
    }

    @Test
    void committedFixturesAreWhatTheGeneratorWrites() throws IOException {
        Map<String, String> generated = FixtureGenerator.generate();
        Map<String, String> onDisk = new TreeMap<>();
        for (String dir : List.of(FixtureGenerator.DESCRIPTORS_VALID, FixtureGenerator.DESCRIPTORS_MALFORMED,
                FixtureGenerator.HEADERS)) {
            for (Path p : jsonFiles(dir)) {
                onDisk.put(dir + "/" + p.getFileName(), Files.readString(p, StandardCharsets.US_ASCII));
            }
        }
        assertEquals(generated.keySet(), onDisk.keySet(),
                "fixture files differ from the generator's: regenerate (see FixtureGenerator)");
        for (String name : generated.keySet()) {
            assertEquals(generated.get(name), onDisk.get(name), name + " is stale: regenerate (see FixtureGenerator)");
        }
    }

    @TestFactory
    List<DynamicTest> validDescriptorsDecodeToEveryFieldAndReencodeToTheSameBytes() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (Path p : jsonFiles(FixtureGenerator.DESCRIPTORS_VALID)) {
            Map<String, Object> f = fixture(p);
            tests.add(DynamicTest.dynamicTest((String) f.get("name"), () -> checkValid(f)));
        }
        assertFalse(tests.isEmpty(), "no valid descriptor fixtures found under " + root);
        return tests;
    }

    @TestFactory
    List<DynamicTest> malformedDescriptorsAreRefusedWithTheDocumentedException() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (Path p : jsonFiles(FixtureGenerator.DESCRIPTORS_MALFORMED)) {
            Map<String, Object> f = fixture(p);
            tests.add(DynamicTest.dynamicTest(f.get("name") + ": " + f.get("reason"), () -> {
                byte[] bytes = HexFormat.of().parseHex((String) f.get("hex"));
                RuntimeException e = assertThrows(RuntimeException.class, () -> DescriptorCodec.decode(bytes));
                assertEquals(f.get("error_java"), e.getClass().getSimpleName(), "wrong exception: " + e);
                assertTrue(e instanceof InvalidDataException);
            }));
        }
        assertFalse(tests.isEmpty(), "no malformed descriptor fixtures found under " + root);
        return tests;
    }

    @TestFactory
    List<DynamicTest> headersReadAsTheFixturesSay() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (Path p : jsonFiles(FixtureGenerator.HEADERS)) {
            Map<String, Object> f = fixture(p);
            tests.add(DynamicTest.dynamicTest((String) f.get("name"), () -> checkHeader(f)));
        }
        assertFalse(tests.isEmpty(), "no header fixtures found under " + root);
        return tests;
    }

    private static void checkValid(Map<String, Object> f) {
        byte[] bytes = HexFormat.of().parseHex((String) f.get("hex"));
        @SuppressWarnings("unchecked")
        Map<String, Object> v = (Map<String, Object>) f.get("decoded");
        Descriptor d = DescriptorCodec.decode(bytes);

        assertEquals(v.get("total_length"), (long) bytes.length);
        assertEquals(v.get("backend"), (long) d.backend().code());
        assertEquals(v.get("backend_name"), d.backend().name());
        assertEquals(v.get("segment_name"), d.segmentName());
        assertEquals(v.get("segment_name_length"), (long) d.segmentName().length());
        assertEquals(v.get("counter_file_name"), d.counterFileName());
        assertEquals(v.get("counter_file_name_length"), (long) d.counterFileName().length());
        assertEquals(v.get("slot"), (long) d.slot());
        assertEquals(v.get("segment_size"), d.segmentSize());
        assertEquals(v.get("offset"), d.offset());
        assertEquals(v.get("length"), d.length());
        assertEquals(v.get("sender_pid"), d.senderPid());
        assertEquals(v.get("sender_start_ticks"), d.senderStartTicks());
        assertEquals(v.get("memory_handle"), HexFormat.of().formatHex(d.memoryHandle()));
        assertEquals(v.get("event_handle"), HexFormat.of().formatHex(d.eventHandle()));
        assertEquals(d.backend() == Backend.CUDA, !((String) v.get("memory_handle")).isEmpty());

        TensorLayout t = d.tensor();
        assertEquals(v.get("tensor"), t != null);
        long flags = (t != null ? 1 : 0) | (d.hasEvent() ? 2 : 0) | (d.backend() == Backend.CUDA ? 4 : 0);
        assertEquals(v.get("flags"), flags);
        if (t != null) {
            assertEquals(v.get("dtype"), (long) t.dtype().code());
            assertEquals(DType.fromCode(((Long) v.get("dtype")).intValue()), DType.fromNumpyName((String) v.get("dtype_name")));
            assertEquals(v.get("rank"), (long) t.rank());
            assertEquals(v.get("storage_offset"), t.storageOffset());
            assertArrayEquals(longs(v.get("shape")), t.shape());
            assertArrayEquals(longs(v.get("strides")), t.strides());
            assertEquals(v.get("itemsize"), (long) t.dtype().byteSize());
            assertEquals(v.get("element_count"), t.elementCount());
            assertEquals(v.get("byte_span"), t.byteSpan());
            assertTrue(t.byteSpan() <= d.length());
        } else {
            assertEquals(0L, v.get("dtype"));
            assertNull(v.get("dtype_name"));
            assertEquals(0L, v.get("rank"));
            assertEquals(0L, v.get("storage_offset"));
            assertEquals(0, longs(v.get("shape")).length);
            assertEquals(v.get("byte_span"), d.length());
        }
        assertEquals(v.get("range_tag"), FixtureGenerator.rangeTag(d.offset(), d.length(), d.segmentName()));
        assertArrayEquals(bytes, DescriptorCodec.encode(d), "encode(decode(b)) must be b");
    }

    private static void checkHeader(Map<String, Object> f) throws IOException {
        byte[] bytes = HexFormat.of().parseHex((String) f.get("hex"));
        Path file = scratch.resolve(f.get("name") + ".hdr");
        Files.write(file, bytes);
        try (CheckedFile checked = CheckedFile.open(file, false)) {
            switch ((String) f.get("expect")) {
                case "owner" -> {
                    FileHeader h = FileHeader.read(checked);
                    assertEquals(h, FileHeader.readOrNull(checked));
                    assertEquals(f.get("magic"), h.magic());
                    assertEquals(f.get("magic_text"), FileHeader.magicText(h.magic()));
                    assertEquals(f.get("version"), (long) h.version());
                    assertEquals(f.get("header_length"), (long) h.headerLength());
                    assertEquals(f.get("owner_pid"), h.owner().pid());
                    assertEquals(f.get("owner_start_ticks"), h.owner().startTicks());
                    assertEquals(f.get("kind"), kindOfMagic(h.magic()));
                }
                case "no_owner" -> {
                    assertNull(FileHeader.readOrNull(checked), "a header naming no owner reads as null");
                    if (bytes.length < FileHeader.LENGTH) {
                        assertThrows(InvalidDataException.class, () -> FileHeader.read(checked));
                    }
                }
                case "error" -> {
                    RuntimeException e = assertThrows(RuntimeException.class, () -> FileHeader.readOrNull(checked));
                    assertEquals(f.get("error_java"), e.getClass().getSimpleName(), "wrong exception: " + e);
                    assertThrows(InvalidDataException.class, () -> FileHeader.read(checked));
                }
                default -> throw new AssertionError("unknown expectation " + f.get("expect"));
            }
        } finally {
            Files.delete(file);
        }
    }

    /** The kind a magic names, by the table of docs/protocol.md §4; null for none. */
    private static String kindOfMagic(long magic) {
        for (Map<String, Object> k : FixtureGenerator.kinds()) {
            if (((Long) k.get("magic")) == magic) {
                return (String) k.get("kind");
            }
        }
        return null;
    }

    private static long[] longs(Object list) {
        List<?> l = (List<?>) list;
        long[] a = new long[l.size()];
        for (int i = 0; i < a.length; i++) {
            a[i] = (Long) l.get(i);
        }
        return a;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> fixture(Path p) throws IOException {
        return (Map<String, Object>) Json.parse(Files.readString(p, StandardCharsets.US_ASCII));
    }

    private static List<Path> jsonFiles(String dir) throws IOException {
        Path d = root.resolve(dir);
        if (!Files.isDirectory(d)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(d)) {
            return s.filter(p -> p.getFileName().toString().endsWith(".json")).sorted().toList();
        }
    }
}
