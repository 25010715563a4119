package io.refshare.ucx.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * {@code refshare bench}'s cross-host rows: the UCX bridge against a plain TCP socket copy of
 * the same bytes, between two network namespaces joined by a veth pair (UCX over its TCP
 * transport). For each size, the bridge and then the socket: throughput (bytes per second
 * until the far side has the last message) and the CPU seconds per GiB of the sending and of
 * the receiving process over the same span; at
 * 1 KiB also the one-way p50 of probes sent 1 ms apart. Needs root (ip netns). Every process
 * runs in its own JVM.
 */
public final class CrossHostBench {
    public static final long LATENCY_SIZE = 1024;
    private static final int PORT = 13480;
    /**
     * Bytes each throughput row moves (at most 20,000 messages): about 3 s at 1 MiB and above
     * on this veth link, so that a shared machine's noise averages out (2 GiB, well under a
     * second there, let single rows swing by 15 % either way).
     */
    private static final long BYTES_PER_SIZE = 8L << 30;

    /**
     * One measured row: throughput in bytes/s, CPU seconds per GiB of the sending and of the
     * receiving process, p50 one-way latency in ns (or -1).
     */
    public record Row(String path, long size, double bytesPerSecond, double cpuSecondsPerGiB,
                      double receiverCpuSecondsPerGiB, long p50Nanos) {
    }

    private CrossHostBench() {
    }

    /**
     * {@code refshare bench --cross-host}: runs {@code sizes} (default 1 KiB, 64 KiB, 1 MiB,
     * 16 MiB), prints the rows and the targets' verdicts; 0 when every target is met, else 3.
     */
    public static int report(List<Long> sizes, PrintStream out) throws Exception {
        long[] s = sizes == null || sizes.isEmpty() ? DEFAULT_SIZES : sizes.stream().mapToLong(Long::longValue).toArray();
        List<Row> rows = run(s, out);
        List<String> verdicts = verdicts(rows);
        verdicts.forEach(out::println);
        return verdicts.stream().anyMatch(v -> v.endsWith("NOT met")) ? 3 : 0;
    }

    public static final long[] DEFAULT_SIZES = {1024, 64 << 10, 1 << 20, 16 << 20};

    /** Standalone: {@code java -cp ... io.refshare.ucx.bench.CrossHostBench [SIZE_BYTES...]}. */
    public static void main(String[] args) throws Exception {
        long[] sizes = args.length == 0 ? DEFAULT_SIZES
                : Arrays.stream(args).mapToLong(Long::parseLong).toArray();
        List<Row> rows = run(sizes, System.out);
        verdicts(rows).forEach(System.out::println);
    }

    /** Runs every size for both paths; progress lines go to {@code log}. */
    public static List<Row> run(long[] sizes, PrintStream log) throws Exception {
        if (!HostPair.root()) {
            throw new IllegalStateException("the cross-host rows need root (ip netns)");
        }
        List<Row> rows = new ArrayList<>();
        Path dirA = Files.createTempDirectory(Path.of("/dev/shm"), "rs-bench-a-");
        Path dirB = Files.createTempDirectory(Path.of("/dev/shm"), "rs-bench-b-");
        Path secret = Files.createTempFile("rs-bench-secret", "",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try (HostPair hosts = HostPair.create()) {
            Files.writeString(secret, "cross-host bench secret " + System.nanoTime());
            // both sinks wait side by side (an idle one costs nothing); each size runs the bridge and then
            // the socket, so that a machine shared with other work loads both rows of a size alike
            try (Child ucxSink = Child.start(hosts.nsB, BenchSink.class, "ucx", dirB.toString(), HostPair.IP_B,
                    Integer.toString(PORT), secret.toString());
                 Child socketSink = Child.start(hosts.nsB, BenchSink.class, "socket", HostPair.IP_B,
                         Integer.toString(PORT + 1))) {
                ucxSink.expect("ready");
                socketSink.expect("ready");
                for (long size : sizes) {
                    for (String path : List.of("ucx", "socket")) {
                        Child sink = path.equals("ucx") ? ucxSink : socketSink;
                        String port = Integer.toString(path.equals("ucx") ? PORT : PORT + 1);
                        int count = (int) Math.max(200, Math.min(20_000, BYTES_PER_SIZE / size));
                        try (Child src = Child.start(hosts.nsA, BenchSource.class, path, "throughput",
                                Long.toString(size), Integer.toString(count), dirA.toString(), HostPair.IP_B, port,
                                secret.toString())) {
                            src.expect("T0");
                            long sinkCpu0 = sink.cpuNanos();
                            String[] r = src.expect("R ").split(" ");
                            long sinkCpu = sink.cpuNanos() - sinkCpu0;
                            double seconds = Long.parseLong(r[1]) / 1e9;
                            double bytes = Long.parseLong(r[3]);
                            double gib = bytes / (1L << 30);
                            double cpuPerGiB = Long.parseLong(r[2]) / 1e9 / gib;
                            long p50 = -1;
                            if (size == LATENCY_SIZE) {
                                p50 = latency(hosts, sink, path, dirA, port, secret);
                            }
                            Row row = new Row(path.equals("ucx") ? "ucx-bridge" : "tcp-socket", size,
                                    bytes / seconds, cpuPerGiB, sinkCpu / 1e9 / gib, p50);
                            rows.add(row);
                            log.println(format(row));
                        }
                    }
                }
            }
        } finally {
            Files.deleteIfExists(secret);
            for (Path dir : List.of(dirA, dirB)) {
                try (Stream<Path> files = Files.walk(dir)) {
                    for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(f);
                    }
                }
            }
        }
        return rows;
    }

    private static long latency(HostPair hosts, Child sink, String path, Path dirA, String port, Path secret)
            throws Exception {
        int probes = 1000;
        try (Child _ = Child.start(hosts.nsA, BenchSource.class, path, "latency", Long.toString(LATENCY_SIZE),
                Integer.toString(probes), dirA.toString(), HostPair.IP_B, port, secret.toString())) {
            long[] samples = new long[probes];
            for (int i = 0; i < probes; i++) {
                samples[i] = Long.parseLong(sink.expect("L ").substring(2));
            }
            Arrays.sort(samples);
            return samples[probes / 2];
        }
    }

    public static String format(Row r) {
        return String.format(Locale.ROOT, "cross-host %-10s %9s  %8.1f MiB/s  cpu %6.3f s/GiB  receiver cpu %6.3f s/GiB%s",
                r.path(), size(r.size()), r.bytesPerSecond() / (1 << 20), r.cpuSecondsPerGiB(),
                r.receiverCpuSecondsPerGiB(),
                r.p50Nanos() < 0 ? "" : String.format(Locale.ROOT, "  p50 %.1f us", r.p50Nanos() / 1e3));
    }

    /**
     * The targets: throughput at least 0.9x the socket's from 1 MiB on, p50 within 2x of it at
     * 1 KiB; and, reported without a target, each side's CPU per GiB beside the socket's.
     */
    public static List<String> verdicts(List<Row> rows) {
        List<String> out = new ArrayList<>();
        for (Row u : rows) {
            if (!u.path().equals("ucx-bridge")) {
                continue;
            }
            for (Row s : rows) {
                if (s.path().equals("tcp-socket") && s.size() == u.size()) {
                    if (u.size() >= (1 << 20)) {
                        double ratio = u.bytesPerSecond() / s.bytesPerSecond();
                        out.add(String.format(Locale.ROOT, "%s: throughput %.2fx the socket's (target >= 0.9x): %s",
                                size(u.size()), ratio, ratio >= 0.9 ? "met" : "NOT met"));
                    }
                    out.add(String.format(Locale.ROOT, "%s: sender CPU %.3f s/GiB, the socket's %.3f s/GiB (%.2fx); "
                                    + "receiver CPU %.3f s/GiB, the socket's %.3f s/GiB (%.2fx)",
                            size(u.size()), u.cpuSecondsPerGiB(), s.cpuSecondsPerGiB(),
                            u.cpuSecondsPerGiB() / s.cpuSecondsPerGiB(), u.receiverCpuSecondsPerGiB(),
                            s.receiverCpuSecondsPerGiB(), u.receiverCpuSecondsPerGiB() / s.receiverCpuSecondsPerGiB()));
                    if (u.p50Nanos() > 0 && s.p50Nanos() > 0) {
                        double ratio = (double) u.p50Nanos() / s.p50Nanos();
                        out.add(String.format(Locale.ROOT, "%s: p50 %.2fx the socket's (target <= 2x): %s",
                                size(u.size()), ratio, ratio <= 2 ? "met" : "NOT met"));
                    }
                }
            }
        }
        return out;
    }

    private static String size(long b) {
        return b >= (1 << 20) ? (b >> 20) + " MiB" : (b >> 10) + " KiB";
    }

    /** A child JVM in a namespace, read by lines; closing ends it. */
    private static final class Child implements AutoCloseable {
        private final Process process;
        private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();

        private Child(Process p) {
            this.process = p;
            Thread.ofPlatform().daemon(true).start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                        StandardCharsets.US_ASCII))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        lines.add(line);
                    }
                } catch (IOException ignored) {
                    // ended
                }
                lines.add("<eof>");
            });
        }

        static Child start(String ns, Class<?> main, String... args) throws IOException {
            List<String> cmd = new ArrayList<>(HostPair.in(ns));
            cmd.add(ProcessHandle.current().info().command().orElseThrow());
            cmd.add("--enable-native-access=ALL-UNNAMED");
            cmd.add("-cp");
            cmd.add(System.getProperty("java.class.path"));
            cmd.add(main.getName());
            cmd.addAll(List.of(args));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
            HostPair.ucxEnvironment(pb.environment());
            return new Child(pb.start());
        }

        /**
         * The CPU time of the process and all its threads so far ({@code ip netns exec} execs the
         * JVM, so this is its pid), from {@code /proc/PID/stat} in clock ticks of 10 ms (Linux's
         * fixed user-visible tick).
         */
        long cpuNanos() throws IOException {
            String stat = Files.readString(Path.of("/proc", Long.toString(process.pid()), "stat"));
            // fields after the command name, which is in parentheses and may hold spaces
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10_000_000L; // utime, stime
        }

        String expect(String prefix) throws InterruptedException {
            while (true) {
                String l = lines.poll(120, TimeUnit.SECONDS);
                if (l == null || l.equals("<eof>")) {
                    throw new IllegalStateException("bench process ended or went silent before printing '" + prefix + "'");
                }
                if (l.startsWith(prefix)) {
                    return l;
                }
            }
        }

        /** Closes its stdin (the sink's signal to end), waits a moment, then ends it for sure. */
        @Override
        public void close() {
            try {
                process.getOutputStream().close();
            } catch (IOException ignored) {
                // already gone
            }
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    process.waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                process.destroyForcibly(); // leave no child behind, and keep the interrupt for the caller
                Thread.currentThread().interrupt();
            }
        }
    }
}
