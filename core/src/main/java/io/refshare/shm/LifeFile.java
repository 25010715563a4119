package io.refshare.shm;

import io.refshare.exceptions.RefshareException;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The kernel's own evidence that a process is alive, valid across PID namespaces that
 * share one directory (containers of one pod share {@code /dev/shm} but not their pids).
 *
 * <p>Every process holds a shared {@code flock} on its life file in each directory where it
 * records its identity in a file, from before the first such record until it exits. The
 * kernel drops the lock when the process dies, however it dies. Another process asks for
 * the {@linkplain #verdict verdict} on an identity by trying an exclusive lock on that
 * identity's life file without waiting: granted means nobody with that identity runs
 * ({@link Verdict#DEAD}); refused means somebody does ({@link Verdict#ALIVE}). A pid alone
 * would not do: it names different processes in different namespaces, and a dead one's pid
 * is reused.
 *
 * <pre>
 *   name:    &lt;prefix&gt;-life-&lt;pid, 16 hex digits&gt;&lt;start ticks, 16 hex digits&gt;
 *   content: the 32-byte {@link FileHeader}, magic "RSLIFE01"
 * </pre>
 *
 * <h2>Implementation notes</h2>
 * Two processes of different namespaces may share an identity (same pid, same start
 * tick): both hold the same file shared, and it reads DEAD only once neither runs. That is
 * why the file is opened without {@code O_EXCL} and the lock is shared.
 * <p>
 * {@code flock}, not {@code fcntl} record locks: a record lock is dropped when its process
 * closes <i>any</i> descriptor of the file, which a janitor or {@code inspect} in the same
 * process would do while reading the directory.
 * <p>
 * A file is unlinked only by a process holding its exclusive lock (a janitor that found it
 * dead, see {@link #removeIfDead}) or by its holder on leaving ({@link #release}). A holder
 * that takes its shared lock re-checks that the name still denotes the file it locked, and
 * starts over if a janitor removed it in between; so a lock is never held on a nameless file.
 * <p>
 * Without a life file, the verdict falls back on {@code /proc}: the pid there with the same
 * start time is ALIVE; anything else is UNKNOWN, since a pid of another namespace names
 * nothing (or someone else) here. DEAD is never concluded from {@code /proc}.
 */
public final class LifeFile {
    public static final long MAGIC = 0x31304546494C5352L; // "RSLIFE01" read little-endian
    public static final int VERSION = 1;

    /** Life files this process holds, by path, with the descriptor that holds the lock. */
    private static final ConcurrentHashMap<Path, Integer> HELD = new ConcurrentHashMap<>();
    /** Per life file of ours: files that keep a record of this process until it exits. */
    private static final ConcurrentHashMap<Path, java.util.Set<Path>> RECORDS = new ConcurrentHashMap<>();
    private static final int MAX_ATTEMPTS = 100;

    private LifeFile() {
    }

    /** The name of {@code id}'s life file in {@code dir}. */
    public static String name(ShmDirectory dir, ProcessIdentity id) {
        return dir.prefix() + "-" + ShmKind.LIFE.tag() + "-" + HexFormat.of().toHexDigits(id.pid())
                + HexFormat.of().toHexDigits(id.startTicks());
    }

    /**
     * The identity a life file's name carries (its last 32 hex digits: pid, then start
     * ticks), or null when they cannot name a process.
     */
    static ProcessIdentity identityOf(String name) {
        if (name.length() < 32) {
            return null;
        }
        String hex = name.substring(name.length() - 32);
        long pid = Long.parseUnsignedLong(hex, 0, 16, 16);
        long start = Long.parseUnsignedLong(hex, 16, 32, 16);
        return pid > 0 && pid <= Integer.MAX_VALUE && start >= 0 ? new ProcessIdentity(pid, start) : null;
    }

    /** Takes this process's life lock in {@code dir}; idempotent and cheap once held. */
    static void hold(ShmDirectory dir) {
        Path path = dir.path().resolve(name(dir, ProcessIdentity.current()));
        if (!HELD.containsKey(path)) {
            HELD.computeIfAbsent(path, p -> take(dir, p));
        }
    }

    /**
     * Takes this process's life lock in {@code dir} and keeps it while the file {@code name}
     * exists there: for a record of this process that outlives every handle (a holder's
     * reader row), which others may reclaim only on the kernel's evidence once this process
     * is gone. {@link ShmDirectory#leave} then keeps the lock while that file is there.
     */
    static void holdWhileNamedIn(ShmDirectory dir, String name) {
        hold(dir);
        RECORDS.computeIfAbsent(dir.path().resolve(name(dir, ProcessIdentity.current())),
                p -> ConcurrentHashMap.newKeySet()).add(dir.path().resolve(name));
    }

    /** True when a file holding a lasting record of this process still exists in {@code dir}. */
    static boolean isNamedInLastingRecord(ShmDirectory dir) {
        var files = RECORDS.get(dir.path().resolve(name(dir, ProcessIdentity.current())));
        if (files == null) {
            return false;
        }
        files.removeIf(f -> !java.nio.file.Files.exists(f, java.nio.file.LinkOption.NOFOLLOW_LINKS));
        return !files.isEmpty();
    }

    /** True while this process holds its life lock in {@code dir}. */
    static boolean isHeld(ShmDirectory dir) {
        return HELD.containsKey(dir.path().resolve(name(dir, ProcessIdentity.current())));
    }

    private static int take(ShmDirectory dir, Path path) {
        String where = path.toString();
        for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
            int fd;
            try {
                fd = Libc.open(where, Libc.O_RDWR | Libc.O_CREAT | Libc.O_NOFOLLOW | Libc.O_CLOEXEC, dir.mode());
            } catch (Libc.ErrnoException e) {
                throw new RefshareException("cannot create the life file " + path + ": " + e.getMessage(), e);
            }
            boolean keep = false;
            try {
                Libc.FileStat locked = Libc.fstat(fd, where);
                if (!locked.isRegularFile() || locked.uid() != ShmDirectory.uid()) {
                    throw new RefshareException("refusing " + path + " as this process's life file: not a regular file"
                            + " of uid " + ShmDirectory.uid() + " (someone else created it)");
                }
                Libc.flock(fd, Libc.LOCK_SH, where);
                if (!sameFileStillNamed(where, locked)) {
                    continue; // a janitor removed the dead twin's file we opened: start over
                }
                if (locked.size() < FileHeader.LENGTH) {
                    Libc.pwrite(fd, header(), 0, where);
                }
                if (dir.mode() != ShmDirectory.OWNER_ONLY) {
                    Libc.fchmod(fd, dir.mode(), where);
                }
                keep = true;
                return fd;
            } catch (Libc.ErrnoException e) {
                throw new RefshareException("cannot hold the life file " + path + ": " + e.getMessage(), e);
            } finally {
                if (!keep) {
                    Libc.close(fd);
                }
            }
        }
        throw new RefshareException("cannot hold the life file " + path + ": removed " + MAX_ATTEMPTS
                + " times while being locked");
    }

    private static boolean sameFileStillNamed(String path, Libc.FileStat locked) throws Libc.ErrnoException {
        try {
            return Libc.lstat(path).sameFile(locked);
        } catch (Libc.ErrnoException e) {
            if (e.errno() == Libc.ENOENT) {
                return false;
            }
            throw e;
        }
    }

    private static byte[] header() {
        ProcessIdentity me = ProcessIdentity.current();
        return ByteBuffer.allocate(FileHeader.LENGTH).order(ByteOrder.LITTLE_ENDIAN)
                .putLong(MAGIC).putInt(VERSION).putInt(FileHeader.LENGTH).putLong(me.pid()).putLong(me.startTicks())
                .array();
    }

    /** Whether the process {@code id} names runs, as far as {@code dir}'s life files and /proc tell. */
    static Verdict verdict(ShmDirectory dir, ProcessIdentity id) {
        if (id.equals(ProcessIdentity.current())) {
            return Verdict.ALIVE;
        }
        String path = dir.path().resolve(name(dir, id)).toString();
        int fd;
        try {
            fd = Libc.open(path, Libc.O_RDONLY | Libc.O_NOFOLLOW | Libc.O_NONBLOCK | Libc.O_CLOEXEC, 0);
        } catch (Libc.ErrnoException e) {
            return e.errno() == Libc.ENOENT ? fromProc(id) : Verdict.UNKNOWN;
        }
        try {
            Libc.FileStat st = Libc.fstat(fd, path);
            if (!st.isRegularFile() || !dir.ownedByUs(st.uid(), st.gid())) {
                return Verdict.UNKNOWN; // not a life file we can trust: no evidence
            }
            return Libc.flock(fd, Libc.LOCK_EX | Libc.LOCK_NB, path) ? Verdict.DEAD : Verdict.ALIVE;
        } catch (Libc.ErrnoException e) {
            return Verdict.UNKNOWN;
        } finally {
            Libc.close(fd); // drops the exclusive lock if we got it
        }
    }

    private static Verdict fromProc(ProcessIdentity id) {
        return ProcessIdentity.of(id.pid()).filter(id::equals).isPresent() ? Verdict.ALIVE : Verdict.UNKNOWN;
    }

    /**
     * Removes {@code id}'s life file if nobody holds it (the janitor, once nothing names the
     * identity any more). True when this call removed it.
     */
    static boolean removeIfDead(ShmDirectory dir, ProcessIdentity id) {
        if (id.equals(ProcessIdentity.current())) {
            return false;
        }
        String path = dir.path().resolve(name(dir, id)).toString();
        int fd;
        try {
            fd = Libc.open(path, Libc.O_RDONLY | Libc.O_NOFOLLOW | Libc.O_NONBLOCK | Libc.O_CLOEXEC, 0);
        } catch (Libc.ErrnoException e) {
            return false;
        }
        try {
            Libc.FileStat st = Libc.fstat(fd, path);
            if (!st.isRegularFile() || !dir.ownedByUs(st.uid(), st.gid())
                    || !Libc.flock(fd, Libc.LOCK_EX | Libc.LOCK_NB, path) || !sameFileStillNamed(path, st)) {
                return false;
            }
            return ShmDirectory.deleteQuietly(Path.of(path));
        } catch (Libc.ErrnoException e) {
            return false;
        } finally {
            Libc.close(fd);
        }
    }

    /**
     * Gives up this process's life lock in {@code dir} and removes its file: for a process
     * that no longer appears in any file there (its last handle closed cleanly). Taken again
     * by the next {@link #hold}.
     */
    static void release(ShmDirectory dir) {
        Path path = dir.path().resolve(name(dir, ProcessIdentity.current()));
        HELD.computeIfPresent(path, (p, fd) -> {
            try {
                if (sameFileStillNamed(p.toString(), Libc.fstat(fd, p.toString()))) {
                    ShmDirectory.deleteQuietly(p);
                }
            } catch (Libc.ErrnoException e) {
                // the name is gone or unreadable: nothing of ours to remove
            } finally {
                Libc.close(fd);
            }
            return null;
        });
    }
}
