package io.refshare.shm;

import io.refshare.exceptions.RefshareException;

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
    /** The largest pid Linux hands out ({@code PID_MAX_LIMIT} - 1): 22 bits. */
    public static final long MAX_PID = (1L << 22) - 1;
    /** The largest start time a shared file records: 41 bits of ticks, about 697 years at 100 Hz. */
    public static final long MAX_START_TICKS = (1L << 41) - 1;
    private static final int PID_BITS = 22;

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

    /**
     * This identity in one word (bits 0..21 the pid, 22..62 the start ticks, bit 63 clear), so
     * a queue's participant entry or a holder's reader row is claimed with one CAS and read
     * whole: the packed form of {@code docs/protocol.md}, section 3.
     *
     * @throws RefshareException when the identity is outside what a file can record (pid above
     *         {@link #MAX_PID}, start ticks not in 1 .. {@link #MAX_START_TICKS})
     */
    public long packed() {
        if (!isRecordable()) {
            throw new RefshareException("cannot record " + this + " in a shared file: pids go up to " + MAX_PID
                    + " and start ticks from 1 to " + MAX_START_TICKS);
        }
        return pid | (startTicks << PID_BITS);
    }

    /** True when a shared file can record this identity (see {@link #packed()}). */
    public boolean isRecordable() {
        return pid <= MAX_PID && startTicks >= 1 && startTicks <= MAX_START_TICKS;
    }

    /** The identity a word made by {@link #packed()} names, bit 63 ignored; null when its pid is 0 (a free entry). */
    public static ProcessIdentity unpack(long word) {
        long pid = word & MAX_PID;
        return pid == 0 ? null : new ProcessIdentity(pid, (word >>> PID_BITS) & MAX_START_TICKS);
    }

    /**
     * True when a file header may name this owner: a recordable pid and any start ticks from 0
     * (a header reader is lenient there, {@code docs/protocol.md} section 4).
     */
    public static boolean isPossibleOwner(long pid, long startTicks) {
        return pid >= 1 && pid <= MAX_PID && startTicks >= 0;
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
