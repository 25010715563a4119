package io.refshare.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * How often two threads of two processes were found on one CPU while a row ran (a ping-pong, or a
 * stream): the producer's measuring thread and the consumer's. On a machine with few CPUs the default
 * strategy's sleeps can bring the two onto one CPU, which halves what they move while the
 * other CPU idles (breakdown.md: "Two processes on one CPU"); a row's rate then says more about
 * the scheduler than about refshare, and this tells the reader which rows it was.
 *
 * <p>A daemon thread reads, at the end of every {@value #INTERVAL_MILLIS} ms, the CPU each thread last ran on
 * (field 39 of {@code /proc/PID/task/TID/stat}) and its state (field 3). A sleeping thread counts
 * with the CPU it slept on, as the kernel will most likely wake it there; two runnable threads on
 * one CPU are the harm itself, one of them waiting for the other. Linux only: elsewhere, or when a thread
 * cannot be found, nothing is sampled and the row reports no samples.
 */
final class SharedCpu {
    static final long INTERVAL_MILLIS = 10;
    private static final Path THREAD_SELF = Path.of("/proc/thread-self");

    /**
     * What a row's sampling found: {@code onOneCpu} of {@code samples} had both threads on one
     * CPU, and in {@code bothRunnable} of those both were runnable (state R), so one of them
     * waited for the other to leave the CPU.
     */
    record Result(int samples, int onOneCpu, int bothRunnable) {
        static final Result NONE = new Result(0, 0, 0);

        /** The samples of several samplings together. */
        static Result sum(List<Result> results) {
            return new Result(results.stream().mapToInt(Result::samples).sum(),
                    results.stream().mapToInt(Result::onOneCpu).sum(),
                    results.stream().mapToInt(Result::bothRunnable).sum());
        }

        /** "12 % of 40 samples, both runnable in 5 %", or "not sampled". */
        String label() {
            return samples == 0 ? "not sampled"
                    : percent(onOneCpu) + " of " + samples + " samples, both runnable in " + percent(bothRunnable);
        }

        private String percent(int n) {
            return Math.round(100.0 * n / samples) + " %";
        }
    }

    /** One look at a thread: the CPU it last ran on, and whether it is runnable (running or waiting for a CPU). */
    record Look(int cpu, boolean runnable) {
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
        int[] counts = new int[3];
        AtomicBoolean running = new AtomicBoolean(true);
        Thread sampler = Thread.ofPlatform().daemon().name("bench-shared-cpu").start(() -> {
            while (true) {
                // a look at once would see the pair as the command that started the row left it: a
                // consumer woken by a pipe is put on the CPU of the thread that wrote to it
                LockSupport.parkNanos(INTERVAL_MILLIS * 1_000_000L);
                if (!running.get()) {
                    break;
                }
                Look x = look(first);
                Look y = look(second);
                if (x != null && y != null) {
                    counts[0]++;
                    if (x.cpu() == y.cpu()) {
                        counts[1]++;
                        if (x.runnable() && y.runnable()) {
                            counts[2]++;
                        }
                    }
                }
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
            return new Result(counts[0], counts[1], counts[2]);
        };
    }

    /** A look at a thread, or null when its stat file is gone or unreadable. */
    static Look look(Path stat) {
        try {
            return lookOf(Files.readString(stat));
        } catch (IOException e) {
            return null;
        }
    }

    /**
     * {@link #look} of a stat line already read; null when it is not one. The command name
     * (field 2, in parentheses) may hold spaces and parentheses itself, so the fields are counted
     * from the last ')'.
     */
    static Look lookOf(String statLine) {
        int end = statLine.lastIndexOf(')');
        if (end < 0) {
            return null;
        }
        String[] fields = statLine.substring(end + 1).trim().split(" +");
        // fields[0] is field 3 (state), so field 39 (processor) is fields[36]
        if (fields.length < 37) {
            return null;
        }
        try {
            return new Look(Integer.parseInt(fields[36]), fields[0].equals("R"));
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
