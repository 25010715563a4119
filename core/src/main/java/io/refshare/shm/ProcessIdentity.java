package io.refshare.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Optional;

/**
 * A process as the kernel knows it: its pid and its start time in clock ticks since boot
 * ({@code /proc/<pid>/stat}, field 22). The pair names one process for the lifetime of
 * the host: a pid may be reused, a (pid, start) pair is not. Every count refshare keeps
 * in shared memory is attributed to such a pair, so a dead holder can be told apart from
 * a new process that happens to have the same pid.
 */
public record ProcessIdentity(long pid, long startTicks) {

    private static final ProcessIdentity CURRENT =
            of(ProcessHandle.current().pid()).orElseThrow(
                    () -> new IllegalStateException("cannot read /proc/self/stat: refshare needs Linux /proc"));

    public ProcessIdentity {
        if (pid <= 0) {
            throw new IllegalArgumentException("pid must be positive: " + pid);
        }
    }

    /** This process. */
    public static ProcessIdentity current() {
        return CURRENT;
    }

    /** The live process with this pid, or empty when there is none. */
    public static Optional<ProcessIdentity> of(long pid) {
        if (pid <= 0) {
            return Optional.empty();
        }
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            return Optional.of(new ProcessIdentity(pid, parseStartTicks(stat)));
        } catch (NoSuchFileException e) {
            return Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** True while the process this identity names is running (a reused pid does not count). */
    public boolean isAlive() {
        return of(pid).map(this::equals).orElse(false);
    }

    /** Field 22 of /proc/pid/stat; the command name (field 2) may hold spaces and parentheses. */
    static long parseStartTicks(String stat) {
        int close = stat.lastIndexOf(')');
        if (close < 0) {
            throw new IllegalArgumentException("malformed /proc stat line");
        }
        String[] fields = stat.substring(close + 2).trim().split(" ");
        // fields[0] is field 3 (state); field 22 is fields[19]
        if (fields.length < 20) {
            throw new IllegalArgumentException("malformed /proc stat line: " + fields.length + " fields");
        }
        return Long.parseLong(fields[19]);
    }

    @Override
    public String toString() {
        return "pid " + pid + " (start " + startTicks + ")";
    }
}
