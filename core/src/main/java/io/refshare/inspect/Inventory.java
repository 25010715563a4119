package io.refshare.inspect;

import io.refshare.channel.QueueStats;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.holder.HolderFile;
import io.refshare.shm.CheckedFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.shm.Verdict;
import io.refshare.share.StatusFile;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Every refshare file in a directory, with its owner and what it holds. Read-only: files
 * are read or mapped to look, never changed. Files whose names are not ours are ignored;
 * a file of ours that cannot be read is listed with the reason.
 */
public final class Inventory {

    /**
     * One file: {@code owner} is null when its header could not be read (for a life file,
     * the identity its name carries); {@code ownerVerdict} is null with it.
     */
    public record Entry(String name, ShmKind kind, long size, ProcessIdentity owner, Verdict ownerVerdict,
                        String details) {
    }

    private Inventory() {
    }

    public static List<Entry> list(ShmDirectory dir) throws IOException {
        List<Entry> entries = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir.path())) {
            for (Path p : files.sorted().toList()) {
                String name = p.getFileName().toString();
                ShmKind kind = dir.kindOf(name);
                if (kind == null) {
                    continue;
                }
                Entry e = describe(dir, p, name, kind);
                if (e != null) {
                    entries.add(e);
                }
            }
        }
        return entries;
    }

    /** The entry of one file, or null when it vanished or is not a file of ours to look into. */
    private static Entry describe(ShmDirectory dir, Path p, String name, ShmKind kind) {
        try (CheckedFile f = CheckedFile.open(p, false)) {
            if (!f.stat().isRegularFile()) {
                return null; // a FIFO, device or directory under one of our names: nothing of ours
            }
            long size = f.stat().size();
            if (!dir.ownedByUs(f.stat().uid(), f.stat().gid())) {
                return new Entry(name, kind, size, null, null, "another user's (uid " + f.stat().uid() + ")");
            }
            if (kind == ShmKind.LIFE) {
                return lifeFile(dir, name, size);
            }
            FileHeader header = FileHeader.readOrNull(f);
            if (header == null) {
                return new Entry(name, kind, size, null, null,
                        "no owner recorded: being created, or its creator died before writing it");
            }
            ProcessIdentity owner = header.owner();
            String details;
            try {
                details = switch (kind) {
                    case COUNTERS -> counters(dir, name);
                    case QUEUE -> queue(dir, name);
                    case STATUS -> status(dir, name);
                    case SEGMENT -> "shared memory";
                    case HOLDER -> holder(dir, name);
                    case LIFE -> throw new AssertionError("described above");
                };
            } catch (RuntimeException | InternalError e) { // InternalError: cut short under our look
                details = "unreadable: " + e.getMessage();
            }
            return new Entry(name, kind, size, owner, dir.verdict(owner), details);
        } catch (java.nio.file.NoSuchFileException gone) {
            return null;
        } catch (IOException | RuntimeException e) {
            return new Entry(name, kind, -1, null, null, "unreadable: " + e.getMessage());
        }
    }

    /** A life file: its process (from the name) and whether it holds the lock. */
    private static Entry lifeFile(ShmDirectory dir, String name, long size) {
        ProcessIdentity id = dir.lifeFileIdentity(name);
        if (id == null) {
            return new Entry(name, ShmKind.LIFE, size, null, null, "life file whose name names no process");
        }
        Verdict v = dir.verdict(id);
        String details = switch (v) {
            case ALIVE -> "life lock held: the process runs";
            case DEAD -> "life lock free: the process is gone (gc removes it once no file names it)";
            case UNKNOWN -> "life lock state unreadable";
        };
        return new Entry(name, ShmKind.LIFE, size, id, v, details);
    }

    private static String counters(ShmDirectory dir, String name) {
        try (CounterFile f = CounterFile.open(dir, name)) {
            int holders = 0;
            for (int i = 0; i < f.peerCapacity(); i++) {
                if (f.peerOrNull(i) != null) {
                    holders++;
                }
            }
            return f.live() + " live counts, " + f.handedOut() + "/" + f.slotCapacity() + " handed out"
                    + (f.isRetired() ? " (retired)" : "") + ", " + f.releases() + " released, " + holders
                    + " holder process" + (holders == 1 ? "" : "es");
        }
    }

    /**
     * The running counts whose rates a live view shows for {@code e}: messages taken from a
     * queue; tensors shared and received by a process (its status file). Empty for other kinds
     * or an unreadable file.
     */
    public static long[] runningCounts(ShmDirectory dir, Entry e) {
        try {
            return switch (e.kind()) {
                case QUEUE -> new long[]{ShmQueue.inspect(dir, e.name()).taken()};
                case STATUS -> {
                    StatusFile.Snapshot s = StatusFile.read(dir, e.name());
                    yield new long[]{s.get(StatusFile.Field.SHARED), s.get(StatusFile.Field.RECEIVED)};
                }
                default -> new long[0];
            };
        } catch (RuntimeException | InternalError unreadable) {
            return new long[0];
        }
    }

    private static String queue(ShmDirectory dir, String name) {
        QueueStats s = ShmQueue.inspect(dir, name);
        return s.size() + "/" + s.capacity() + " queued, " + s.offered() + " put, " + s.taken() + " taken, "
                + s.participants().size() + " participants" + (s.closed() ? ", closed" : "");
    }

    /**
     * A holder's figures as every process sees them (read without attaching: no reader row is
     * taken). Reader processes are those with a row; a dead one's row stays until the holder's
     * creator (or a publish or open that needs room) reclaims it.
     */
    private static String holder(ShmDirectory dir, String name) {
        HolderFile.Figures s = HolderFile.peek(dir, name);
        long dead = s.readers().stream().filter(p -> dir.verdict(p) == Verdict.DEAD).count();
        int readers = s.readers().size();
        return s.published() + " published, " + s.retired() + " retired, " + s.reclaimed() + " reclaimed, "
                + s.liveVersions() + " live version" + (s.liveVersions() == 1 ? "" : "s") + ", " + readers
                + " reader process" + (readers == 1 ? "" : "es") + (dead > 0 ? " (" + dead + " dead)" : "");
    }

    private static String status(ShmDirectory dir, String name) {
        StatusFile.Snapshot s = StatusFile.read(dir, name);
        return "limbo " + s.get(StatusFile.Field.LIMBO_BLOCKS) + " blocks / " + bytes(s.get(StatusFile.Field.LIMBO_BYTES))
                + ", " + s.get(StatusFile.Field.BLOCKS_IN_USE) + " blocks in use in " + s.get(StatusFile.Field.SEGMENTS)
                + " segments (" + bytes(s.get(StatusFile.Field.SEGMENT_BYTES)) + "), shared "
                + s.get(StatusFile.Field.SHARED) + ", received " + s.get(StatusFile.Field.RECEIVED) + ", mapped "
                + s.get(StatusFile.Field.MAPPED_SEGMENTS) + " segments of others";
    }

    /** 1536 -> "1.5 KiB". */
    public static String bytes(long n) {
        if (n < 1024) {
            return n + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double v = n;
        int u = -1;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(java.util.Locale.ROOT, "%.1f %s", v, units[u]);
    }
}
