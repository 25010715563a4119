package io.refshare.cli;

import io.refshare.harness.ShmOptions;
import io.refshare.harness.ChildJvms;
import io.refshare.harness.ByteSize;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.SharedHolder;
import io.refshare.inspect.Inventory;
import io.refshare.shm.ShmDirectory;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;

/**
 * {@code refshare hotswap}: this process publishes new versions of a "weights" buffer into a
 * {@link SharedHolder} while reader processes acquire whatever is current, verify every
 * byte and release it; live progress, and a summary that checks every acquisition saw one
 * whole version, never an older one, and that every old version was freed exactly once.
 */
@Command(name = "hotswap", mixinStandardHelpOptions = true,
        description = {"Hot-swap versions of shared 'weights' under live reader processes.",
                "",
                "This process publishes new versions of a 'weights' buffer into a shared holder while reader "
                        + "processes acquire the current version, verify every byte and release it. Shows live "
                        + "progress and ends with a summary that checks readers only saw whole versions, in order, and "
                        + "that each old version was freed exactly once, with nothing leaked."})
final class HotswapCommand implements Callable<Integer> {
    /** Each reader is a JVM; the holder's default 64 slots and rows leave ample room for this many. */
    private static final int MAX_READERS = 32;
    private static final long REPORT_NANOS = 500_000_000L;

    @Mixin
    ShmOptions shm;

    @Option(names = {"-r", "--readers"}, paramLabel = "N", defaultValue = "2",
            description = "reader processes (default: ${DEFAULT-VALUE})")
    int readerCount;

    @Option(names = {"-s", "--size"}, paramLabel = "SIZE", defaultValue = "4MiB", converter = ByteSize.class,
            description = "bytes per version, e.g. 64KiB, 16MiB (default: ${DEFAULT-VALUE})")
    long size;

    @Option(names = {"-i", "--interval"}, paramLabel = "MILLIS", defaultValue = "20",
            description = "pause between publishes in milliseconds, 0 for back to back (default: ${DEFAULT-VALUE})")
    long intervalMillis;

    @Option(names = {"-d", "--duration"}, paramLabel = "SECONDS", defaultValue = "8",
            description = "how long to publish (default: ${DEFAULT-VALUE})")
    double seconds;

    private HotswapSummary summary;

    /** The run's findings, once it got as far as the summary; null otherwise. */
    HotswapSummary summary() {
        return summary;
    }

    @Override
    public Integer call() throws Exception {
        if (readerCount < 1 || readerCount > MAX_READERS) {
            throw new IllegalArgumentException("--readers must be between 1 and " + MAX_READERS + ", was "
                    + readerCount);
        }
        if (size < 8) {
            throw new IllegalArgumentException("--size must be at least 8 bytes (a version starts with its number), "
                    + "was " + size);
        }
        if (intervalMillis < 0) {
            throw new IllegalArgumentException("--interval must be 0 or more milliseconds, was " + intervalMillis);
        }
        if (!(seconds > 0) || seconds > 86_400) {
            throw new IllegalArgumentException("--duration must be more than 0 and at most 86400 seconds, was "
                    + seconds);
        }
        RefshareConfig config = shm.config();
        ShmDirectory shmDir = ShmOptions.directory(config);
        Set<String> before = LeftBehind.refshareFiles(shmDir);
        System.out.printf(Locale.ROOT, "refshare hotswap: 1 publisher (pid %d), %d reader processes, %s versions "
                        + "every %d ms for %s s, files in %s%n", ProcessHandle.current().pid(), readerCount,
                Inventory.bytes(size), intervalMillis, seconds, config.directory());

        List<HotswapReaderProcess> readers = new ArrayList<>();
        List<Process> children = new ArrayList<>();
        Refshare rs = Refshare.open(config);
        try {
            long published = 0;
            long publishedNanos;
            List<HotswapSummary.Reader> finals = new ArrayList<>();
            SharedHolder.Stats open;
            SharedHolder weights = rs.createHolder();
            try {
                // a version before any reader starts, so a reader's acquire never finds the holder empty
                published = publish(rs, weights, published);
                for (int i = 0; i < readerCount; i++) {
                    HotswapReaderProcess r = HotswapReaderProcess.start(config.directory(), config.prefix(),
                            weights.name());
                    readers.add(r);
                    children.add(r.process());
                }
                awaitReady(readers, children);
                System.out.println("holder " + weights.name() + "; readers " + readers.stream()
                        .map(r -> Long.toString(r.pid())).collect(Collectors.joining(", ")));

                long started = System.nanoTime();
                long end = started + (long) (seconds * 1e9);
                long interval = TimeUnit.MILLISECONDS.toNanos(intervalMillis);
                long nextPublish = started;
                long nextReport = started + REPORT_NANOS;
                long[] lastAcquisitions = new long[readerCount]; // for rates over each report's window
                for (int i = 0; i < readerCount; i++) {
                    lastAcquisitions[i] = readers.get(i).progress(HotswapReaderProcess.ACQUISITIONS);
                }
                long lastReport = started;
                while (true) {
                    long now = System.nanoTime();
                    if (now - end >= 0) {
                        break;
                    }
                    if (now - nextPublish >= 0) {
                        published = publish(rs, weights, published);
                        nextPublish += interval;
                        if (System.nanoTime() - nextPublish > interval) {
                            nextPublish = System.nanoTime(); // behind (a slow fill): go on from now, not in a burst
                        }
                    }
                    if (now - nextReport >= 0) {
                        ChildJvms.requireAlive(children, "reader");
                        report(now - started, now - lastReport, weights.stats(), readers, lastAcquisitions);
                        lastReport = now;
                        nextReport += REPORT_NANOS;
                    }
                    long wake = Math.min(Math.min(nextPublish - now, nextReport - now), end - now);
                    if (wake > 0) {
                        LockSupport.parkNanos(wake);
                    }
                }
                publishedNanos = System.nanoTime() - started;
                System.out.println();
                // the readers stop at the end of their stdin, close the holder and their refshare context
                for (Process p : children) {
                    p.getOutputStream().close();
                }
                for (HotswapReaderProcess r : readers) {
                    finals.add(r.finish(60, TimeUnit.SECONDS));
                }
                open = weights.stats(); // no reader is left: only the current version may be alive
            } finally {
                weights.close(); // empties the holder: the current version is retired too
            }
            SharedHolder.Stats closed = weights.stats();
            boolean limboEmpty = rs.awaitLimboEmpty(Duration.ofSeconds(10));
            var allocator = rs.stats().allocator();
            rs.close();
            Set<Long> pids = new HashSet<>();
            pids.add(ProcessHandle.current().pid());
            children.forEach(p -> pids.add(p.pid()));
            Set<String> left = LeftBehind.ownedBy(shmDir, before, LeftBehind.refshareFiles(shmDir), pids);
            summary = new HotswapSummary(published, publishedNanos / 1e9, intervalMillis, size, finals,
                    open.retired(), open.liveVersions(), closed.retired(), closed.retiredHere(), closed.anomalies(),
                    limboEmpty, allocator.blocksInUse(), allocator.segmentCreations(), left);
            summary.print(System.out);
            return summary.ok() ? 0 : 1;
        } finally {
            // after a failure the readers are still acquiring: the end of their stdin lets them close cleanly
            ChildJvms.end(children, Duration.ofSeconds(5));
            rs.close();
        }
    }

    /**
     * Publishes the next version, filled completely with a pattern of its number, and
     * closes this process's handle on it: the holder keeps it alive from here.
     */
    private long publish(Refshare rs, SharedHolder weights, long published) {
        long version = published + 1;
        try (Tensor w = rs.allocate(DType.UINT8, size)) {
            DemoPattern.fill(w.data(), version);
            long sequence = weights.publish(w);
            if (sequence != version) {
                // readers compare the number in the bytes: it must be the holder's order of publishes
                throw new IllegalStateException("the holder numbered version " + version + " as " + sequence
                        + ": another process publishes to it");
            }
        }
        return version;
    }

    private static void awaitReady(List<HotswapReaderProcess> readers, List<Process> children)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        for (HotswapReaderProcess r : readers) {
            while (!r.awaitReady(100, TimeUnit.MILLISECONDS)) {
                ChildJvms.requireAlive(children, "reader");
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException("reader " + r.pid() + " did not open the holder within 60 s");
                }
            }
        }
    }

    private static void report(long elapsedNanos, long windowNanos, SharedHolder.Stats s,
                               List<HotswapReaderProcess> readers, long[] lastAcquisitions) {
        StringBuilder rates = new StringBuilder();
        StringBuilder latest = new StringBuilder();
        for (int i = 0; i < readers.size(); i++) {
            long a = readers.get(i).progress(HotswapReaderProcess.ACQUISITIONS);
            rates.append(i == 0 ? "" : " ").append(String.format(Locale.ROOT, "%,.0f",
                    (a - lastAcquisitions[i]) / (windowNanos / 1e9)));
            latest.append(i == 0 ? "" : " ").append(readers.get(i).progress(HotswapReaderProcess.LATEST));
            lastAcquisitions[i] = a;
        }
        String line = String.format(Locale.ROOT, "%5.1f s  published %,7d  retired %,7d  live versions %2d  "
                        + "acquisitions/s per reader %s  readers at version %s", elapsedNanos / 1e9, s.published(),
                s.retired(), s.liveVersions(), rates, latest);
        if (System.console() != null) {
            System.out.print("\r" + line);
        } else {
            System.out.println(line);
        }
        System.out.flush();
    }
}
