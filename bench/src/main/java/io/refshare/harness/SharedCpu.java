package io.refshare.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * How often two threads of two processes were found on one CPU while a row streamed: the
 * producer's measuring thread and the consumer's. On a machine with few CPUs the default
 * strategy's sleeps can bring the two onto one CPU, which halves what they move while the
 * other CPU idles (breakdown.md: "Two processes on one CPU"); a row's rate then says more about
 * the scheduler than about refshare, and this tells the reader which rows it was.
 *
 * <p>A daemon thread reads, every {@value #INTERVAL_MILLIS} ms, the CPU each thread last ran on
 * (field 39 of {@code /proc/PID/task/TID/stat}). A sleeping thread counts with the CPU it slept
 * on, as the kernel will most likely wake it there. Linux only: elsewhere, or when a thread
 * cannot be found, nothing is sampled and the row reports no samples.
 */
final class SharedCpu {
    static final long INTERVAL_MILLIS = 10;
    private static final Path THREAD_SELF = Path.of("/proc/thread-self");

    /** What a row's sampling found: {@code onOneCpu} of {@code samples} had both threads on one CPU. */
    record Result(int samples, int onOneCpu) {
        static final Result NONE = new Result(0, 0);

        /** "12 % of 40 samples", or "not sampled". */
        String label() {
            return samples == 0 ? "not sampled"
                    : Math.round(100.0 * onOneCpu / samples) + " % of " + samples + " samples";
        }
    }

    /** A sampling in progress; {@link #stop} ends it. */
    interface Sampling {
        Sampling NONE = () -> Result.NONE;

        Result stop();
    }

    private SharedCpu() {
    }

    /** The stat file of the calling thread, when /proc has one. */
    static Optional<Path> currentThread() {
        try {
            return Optional.of(Path.of("/proc").resolve(Files.readSymbolicLink(THREAD_SELF)).resolve("stat"));
        } catch (IOException | UnsupportedOperationException e) {
            return Optional.empty();
        }
    }

    /** The stat file of thread {@code tid} of process {@code pid}. */
    static Path thread(long pid, long tid) {
        return Path.of("/proc", Long.toString(pid), "task", Long.toString(tid), "stat");
    }

    /** The thread id in a stat file's path from {@link #currentThread}. */
    static long threadId(Path stat) {
        return Long.parseLong(stat.getParent().getFileName().toString());
    }

    /** Starts sampling {@code a} against {@code b}; {@link Sampling#NONE} when either is unknown. */
    static Sampling start(Optional<Path> a, Optional<Path> b) {
        if (a.isEmpty() || b.isEmpty()) {
            return Sampling.NONE;
        }
        Path first = a.get();
        Path second = b.get();
        int[] counts = new int[2];
        AtomicBoolean running = new AtomicBoolean(true);
        Thread sampler = Thread.ofPlatform().daemon().name("bench-shared-cpu").start(() -> {
            while (running.get()) {
                int x = lastCpu(first);
                int y = lastCpu(second);
                if (x >= 0 && y >= 0) {
                    counts[0]++;
                    if (x == y) {
                        counts[1]++;
                    }
                }
                LockSupport.parkNanos(INTERVAL_MILLIS * 1_000_000L);
            }
        });
        return () -> {
            running.set(false);
            LockSupport.unpark(sampler);
            try {
                sampler.join(); // the counts are read after the sampler's last write (join's happens-before)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return Result.NONE;
            }
            return new Result(counts[0], counts[1]);
        };
    }

    /**
     * The CPU a thread last ran on, or -1 when its stat file is gone or unreadable. The command
     * name (field 2, in parentheses) may hold spaces and parentheses itself, so the fields are
     * counted from the last ')'.
     */
    static int lastCpu(Path stat) {
        String s;
        try {
            s = Files.readString(stat);
        } catch (IOException e) {
            return -1;
        }
        return lastCpuOf(s);
    }

    /** {@link #lastCpu} of a stat line already read; -1 when it is not one. */
    static int lastCpuOf(String statLine) {
        int end = statLine.lastIndexOf(')');
        if (end < 0) {
            return -1;
        }
        String[] fields = statLine.substring(end + 1).trim().split(" +");
        // fields[0] is field 3 (state), so field 39 (processor) is fields[36]
        if (fields.length < 37) {
            return -1;
        }
        try {
            return Integer.parseInt(fields[36]);
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
