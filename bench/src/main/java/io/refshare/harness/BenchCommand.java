package io.refshare.harness;


import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code refshare bench}: refshare against a copy through a Unix domain socket (and
 * torch.multiprocessing when python3 has torch), side by side, between the same two
 * processes, in one run.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Measure refshare against a socket copy, Agrona and torch, side by side.",
                "",
                "Between this process (producer) and one consumer process, for each size: one-way latency of a "
                        + "ping-pong (p50/p90/p99) and streaming throughput of refshare (default and busy-spin "
                        + "waiting), of the same bytes copied through a Unix domain socket and through an Agrona ring "
                        + "(up to 1 MiB), and of torch.multiprocessing when /usr/bin/python3 can import torch; "
                        + "refshare from Java to a Python process (numpy) and back, when /usr/bin/python3 imports the "
                        + "refshare package (python/); and refshare's reclamation latency (a consumer's close to the "
                        + "producer's block being reusable). The table goes to standard output, progress to standard "
                        + "error."})
public final class BenchCommand implements Callable<Integer> {
    static final List<Long> FULL_SIZES = List.of(1L << 10, 64L << 10, 1L << 20, 16L << 20, 256L << 20);
    static final String JSON = "results.json";
    static final String TABLE = "table.txt";
    static final String MARKDOWN = "table.md";
    static final String CHART = "latency.svg";
    static final List<Long> QUICK_SIZES = List.of(1L << 10, 64L << 10, 1L << 20);

    @Option(names = "--quick", description = "sizes 1KiB,64KiB,1MiB and fewer rounds: well under a minute")
    boolean quick;

    @Option(names = "--sizes", split = ",", paramLabel = "SIZE,...", hideParamSyntax = true, converter = ByteSize.class,
            description = "payload sizes, e.g. 1KiB,64KiB,1MiB (default: 1KiB,64KiB,1MiB,16MiB,256MiB; with --quick"
                    + " 1KiB,64KiB,1MiB)")
    List<Long> sizes;

    @Option(names = "--iterations", paramLabel = "N", defaultValue = "0",
            description = "measured ping-pong rounds and streamed messages per size and system "
                    + "(default: from the size, fewer for large ones)")
    int iterations;

    @Option(names = "--window", paramLabel = "N", defaultValue = "0",
            description = "capacity of the streaming queues (and the other systems' windows) at every size "
                    + "(default: 64 messages, up to 1 MiB of small ones, at most 1 GiB: 1,024 at 1 KiB; "
                    + "with --scaling: its one queue, 64 by default)")
    int window;

    @Option(names = "--warmup", paramLabel = "N", description = "ping-pong rounds of each kind in a warm-up pass "
            + "(streams: five times as many), so both JVMs have compiled their hot paths (default: 20000, with --quick 5000)")
    Integer warmup;

    @Option(names = "--warmup-seconds", paramLabel = "S", description = "repeat the warm-up passes (refshare and "
            + "socket kinds, then the Agrona ring's) until S seconds have passed; 0 runs one pass (default: 10, "
            + "with --quick 3)")
    Integer warmupSeconds;

    @Option(names = "--out", paramLabel = "DIR", description = "also write DIR/results.json (raw numbers), "
            + "DIR/table.txt (the table), DIR/table.md (the table as Markdown) and DIR/latency.svg (p50 latency "
            + "against size, log-log, one line per system; SVG, drawn without fonts or a display)")
    Path out;

    @Option(names = "--no-torch", description = "do not look for torch")
    boolean noTorch;

    @Option(names = "--no-python", description = "no Java->Python and Python->Java rows (python/peers/bench_peer.py)")
    boolean noPython;

    @Option(names = "--dir", paramLabel = "DIR", defaultValue = "/dev/shm",
            description = "shared-memory directory (default: ${DEFAULT-VALUE})")
    Path directory;

    @Option(names = "--prefix", paramLabel = "PREFIX", defaultValue = "refshare",
            description = "file name prefix (default: ${DEFAULT-VALUE})")
    String prefix;

    @Option(names = "--cross-host", description = "instead: the cross-host rows, UCX bridge against a plain TCP socket "
            + "between two network namespaces (needs root; docs/hosts.md)")
    boolean crossHost;

    @Option(names = "--scaling", description = "instead: fan-out (1 producer -> 1, 2, 4, 8 consumer processes) and "
            + "fan-in (1, 2, 4 producer processes -> 1 consumer) on one queue, aggregate tensors/s and "
            + "p50 (default sizes 1KiB,1MiB); with --out, scaling.txt and a chart per curve")
    boolean scaling;

    private BenchResults results;

    @Override
    public Integer call() throws Exception {
        if (crossHost) {
            return io.refshare.ucx.bench.CrossHostBench.report(sizes, System.out);
        }
        if (scaling) {
            Settings s = new Settings(sizes != null ? sizes : List.of(1L << 10, 1L << 20), false, 0, 0, 0, window, directory,
                    prefix, false, false);
            if (out != null) {
                Files.createDirectories(out);
            }
            System.out.print(ScalingBench.run(s, out, System.err));
            System.out.flush();
            return 0;
        }
        Settings settings = new Settings(sizes != null ? sizes : quick ? QUICK_SIZES : FULL_SIZES, quick, iterations,
                warmup != null ? warmup : quick ? 5_000 : 20_000,
                warmupSeconds != null ? warmupSeconds : quick ? 3 : 10, window, directory, prefix, !noTorch, !noPython);
        if (out != null) {
            Files.createDirectories(out); // fail before a run of minutes, not after
        }
        results = Benchmark.run(settings, System.err);
        String table = Report.table(results);
        System.out.print(table);
        if (out != null) {
            Files.writeString(out.resolve(TABLE), table);
            Files.writeString(out.resolve(MARKDOWN), Report.markdown(results));
            Files.writeString(out.resolve(JSON), Report.json(results));
            boolean charted = ChartFile.write(out.resolve(CHART), file -> LatencyChart.write(results, file), System.err);
            System.out.println("written: " + String.join(", ", out.resolve(JSON).toString(), out.resolve(TABLE).toString(),
                    out.resolve(MARKDOWN).toString()) + (charted ? ", " + out.resolve(CHART) : ""));
        }
        System.out.flush();
        return results.cleanup().clean() ? 0 : 1;
    }

    /** What the last {@link #call()} measured (for tests). */
    BenchResults results() {
        return results;
    }
}
