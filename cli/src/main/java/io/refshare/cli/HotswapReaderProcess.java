package io.refshare.cli;

import io.refshare.harness.ChildJvms;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The parent's view of one {@link HotswapReader} child: its latest progress figures and,
 * once it closed the holder, its final ones, read from its stdout by a thread so that the
 * publisher never blocks on a reader.
 */
final class HotswapReaderProcess {
    /** Positions in a PROGRESS line, and the start of a DONE line. */
    static final int ACQUISITIONS = 0;
    static final int DISTINCT = 1;
    static final int CORRUPT = 2;
    static final int BACKWARDS = 3;
    static final int LATEST = 4;

    private final Process process;
    private final CountDownLatch ready = new CountDownLatch(1);
    private final AtomicLongArray progress = new AtomicLongArray(5);
    private final Thread reports;
    private volatile HotswapSummary.Reader done;

    private HotswapReaderProcess(Process process) {
        this.process = process;
        this.reports = Thread.ofPlatform().daemon().name("hotswap-reader-" + process.pid()).start(this::readReports);
    }

    static HotswapReaderProcess start(Path directory, String prefix, String holder) throws IOException {
        return new HotswapReaderProcess(ChildJvms.start(HotswapReader.class, "128m", directory.toString(), prefix,
                holder));
    }

    Process process() {
        return process;
    }

    long pid() {
        return process.pid();
    }

    /** True once the reader has the holder open; false when it is not so within the timeout. */
    boolean awaitReady(long timeout, TimeUnit unit) throws InterruptedException {
        return ready.await(timeout, unit);
    }

    long progress(int field) {
        return progress.get(field);
    }

    /**
     * Waits for the reader to exit after its stdin was closed, and returns what it reported
     * last; throws when it failed or reported nothing.
     */
    HotswapSummary.Reader finish(long timeout, TimeUnit unit) throws InterruptedException {
        if (!process.waitFor(timeout, unit)) {
            throw new IllegalStateException("reader " + pid() + " did not finish within " + unit.toSeconds(timeout)
                    + " s");
        }
        reports.join(unit.toMillis(timeout)); // its stdout is at its end: the thread has the last line
        if (process.exitValue() != 0) {
            throw new IllegalStateException("reader " + pid() + " failed with exit code " + process.exitValue());
        }
        HotswapSummary.Reader d = done;
        if (d == null) {
            throw new IllegalStateException("reader " + pid() + " exited without reporting its figures");
        }
        return d;
    }

    private void readReports() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "READY" -> ready.countDown();
                    case "PROGRESS" -> {
                        for (int k = 0; k < progress.length(); k++) {
                            progress.set(k, Long.parseLong(w[k + 1]));
                        }
                    }
                    case "DONE" -> {
                        for (int k = 0; k < progress.length(); k++) {
                            progress.set(k, Long.parseLong(w[k + 1]));
                        }
                        done = new HotswapSummary.Reader(pid(), Long.parseLong(w[1]), Long.parseLong(w[2]),
                                Long.parseLong(w[3]), Long.parseLong(w[4]), Long.parseLong(w[5]),
                                Long.parseLong(w[6]), Long.parseLong(w[7]));
                    }
                    default -> System.err.println("reader " + pid() + ": " + line); // not ours: show it
                }
            }
        } catch (IOException | RuntimeException ignored) {
            // the reader is gone or wrote garbage: its exit code, or the missing DONE, reports it
        }
    }
}
