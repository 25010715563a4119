package io.refshare.fuzz;

import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.SharedHolder;
import io.refshare.memory.HostBackend;
import io.refshare.memory.Segment;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.tensor.TensorLayout;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Writes the hand-made part of the seed corpus: valid files and messages of every format
 * the fuzz tests read, made by the real code, so that the fuzzer starts from inputs that
 * pass every check and mutates from there. The corpus is committed; run this again only
 * when a format changes:
 * <pre>
 *   java --enable-native-access=ALL-UNNAMED -cp core/target/classes:core/target/test-classes \
 *        io.refshare.fuzz.SeedCorpus core/src/test/resources/io/refshare/fuzz
 * </pre>
 * The files carry this process's pid as their owner; when the corpus is replayed that
 * process is long gone, as it would be for a file a crashed process left behind.
 */
public final class SeedCorpus {
    private final Path root;

    private SeedCorpus(Path root) {
        this.root = root;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: SeedCorpus <resources dir of io.refshare.fuzz>");
            System.exit(2);
        }
        new SeedCorpus(Path.of(args[0])).writeAll();
    }

    private void writeAll() throws Exception {
        descriptors();
        try (TempShm shm = new TempShm()) {
            ShmDirectory dir = shm.directory();
            queues(dir);
            counterFiles(dir);
            refshareFiles(shm);
        }
    }

    private void descriptors() throws IOException {
        ProcessIdentity me = ProcessIdentity.current();
        String seg = "refshare-seg-0123456789abcdef0123456789abcdef";
        String cnt = "refshare-cnt-fedcba9876543210fedcba9876543210";
        Descriptor raw = Descriptor.host(seg, 1 << 20, 4096, 1000, cnt, 7, null, me);
        Descriptor matrix = Descriptor.host(seg, 1 << 20, 8192, 4 * 6 * 8,
                cnt, 0, TensorLayout.contiguous(DType.FLOAT32, 6, 8), me);
        Descriptor transposed = matrix.withTensor(TensorLayout.contiguous(DType.FLOAT32, 6, 8).transpose(0, 1));
        Descriptor scalar = Descriptor.host("a", 8, 0, 8, "b", 0, TensorLayout.contiguous(DType.FLOAT64), me);
        byte[] event = new byte[Descriptor.EVENT_HANDLE_BYTES];
        Arrays.fill(event, (byte) 0xE7);
        byte[] memory = new byte[Descriptor.MEMORY_HANDLE_BYTES];
        Arrays.fill(memory, (byte) 0x3C);
        Descriptor cuda = Descriptor.cuda("dev0-alloc", 1L << 30, 0, 1 << 20, memory, cnt, 3, event,
                TensorLayout.contiguous(DType.BFLOAT16, 512, 1024), me);
        long[] ones = new long[TensorLayout.MAX_RANK];
        Arrays.fill(ones, 1);
        Descriptor deep = Descriptor.host("x".repeat(Descriptor.MAX_NAME_LENGTH), 64, 0, 64,
                "y".repeat(Descriptor.MAX_NAME_LENGTH), Integer.MAX_VALUE,
                TensorLayout.contiguous(DType.INT8, ones), me);
        String method = "DescriptorCodecFuzzTestInputs/decode";
        write(method, "host-raw", DescriptorCodec.encode(raw));
        write(method, "host-matrix", DescriptorCodec.encode(matrix));
        write(method, "host-transposed", DescriptorCodec.encode(transposed));
        write(method, "host-scalar", DescriptorCodec.encode(scalar));
        write(method, "cuda-event", DescriptorCodec.encode(cuda));
        write(method, "max-rank-long-names", DescriptorCodec.encode(deep));
        byte[] truncated = DescriptorCodec.encode(matrix);
        write(method, "truncated", Arrays.copyOf(truncated, truncated.length - 5));
    }

    private void queues(ShmDirectory dir) throws Exception {
        String method = "ShmQueueFuzzTestInputs/openFile";
        try (ShmQueue q = ShmQueue.create(dir, 4, 48, 2)) {
            write(method, "empty", read(dir, q.name()));
            q.offer(new byte[] {1, 2, 3});
            q.offer(new byte[48]);
            write(method, "two-messages", read(dir, q.name()));
            q.poll();
            write(method, "one-taken", read(dir, q.name()));
            q.markClosed();
            write(method, "closed", read(dir, q.name()));
        }
        try (ShmQueue q = ShmQueue.create(dir, 1, 1, 1)) {
            q.offer(new byte[] {9});
            write(method, "one-cell-full", read(dir, q.name()));
        }
    }

    private void counterFiles(ShmDirectory dir) throws Exception {
        String method = "FileHeaderFuzzTestInputs/counterFile";
        try (CounterFile f = CounterFile.create(dir, 8, 2)) {
            write(method, "fresh", read(dir, f.name()));
            f.handOut();
            int held = f.handOut();
            f.handOut();
            f.claim(held);
            write(method, "in-flight-and-held", read(dir, f.name()));
            f.release(held);
            f.retire();
            write(method, "retired", read(dir, f.name()));
            write("FileHeaderFuzzTestInputs/commonHeader", "counters", Arrays.copyOf(read(dir, f.name()), 32));
            dir.path().resolve(f.name()).toFile().delete();
        }
    }

    private void refshareFiles(TempShm shm) throws Exception {
        ShmDirectory dir = shm.directory();
        try (Refshare rs = Refshare.open(shm.config())) {
            try (Tensor t = rs.allocate(DType.UINT8, 64)) {
                rs.share(t);
                Internals.sharing(rs).stats();
            }
            try (SharedHolder h = rs.createHolder(4, 2)) {
                write("HolderFuzzTestInputs/openFile", "empty", read(dir, h.name()));
                try (Tensor t = rs.allocate(DType.FLOAT32, 4, 4)) {
                    h.publish(t);
                }
                write("HolderFuzzTestInputs/openFile", "one-version", read(dir, h.name()));
                try (Tensor t = rs.allocate(DType.INT64, 3)) {
                    h.publish(t);
                }
                try (Tensor held = h.acquire()) {
                    write("HolderFuzzTestInputs/openFile", "two-versions-one-held", read(dir, h.name()));
                }
            }
            for (String name : shm.files()) {
                byte[] bytes = read(dir, name);
                switch (dir.kindOf(name)) {
                    case STATUS -> {
                        write("FileHeaderFuzzTestInputs/statusFile", "published", bytes);
                        write("FileHeaderFuzzTestInputs/commonHeader", "status", bytes);
                    }
                    case SEGMENT -> {
                        write("FileHeaderFuzzTestInputs/hostSegmentHeader", "header-page",
                                Arrays.copyOf(bytes, HostBackend.HEADER_BYTES));
                        write("FileHeaderFuzzTestInputs/commonHeader", "segment", Arrays.copyOf(bytes, 64));
                    }
                    default -> {
                    }
                }
            }
        }
        HostBackend backend = new HostBackend(dir, false);
        Segment s = backend.create(64);
        try {
            write("FileHeaderFuzzTestInputs/hostSegmentHeader", "small-segment", read(dir, s.name()));
        } finally {
            backend.free(s);
        }
    }

    private static byte[] read(ShmDirectory dir, String name) throws IOException {
        return Files.readAllBytes(dir.path().resolve(name));
    }

    private void write(String method, String seed, byte[] bytes) throws IOException {
        Path d = root.resolve(method);
        Files.createDirectories(d);
        Files.write(d.resolve("seed-" + seed), bytes);
    }
}
