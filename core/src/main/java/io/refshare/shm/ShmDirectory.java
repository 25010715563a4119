package io.refshare.shm;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.OutOfSharedMemoryException;
import io.refshare.exceptions.RefshareException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The directory refshare keeps its files in (default {@code /dev/shm}) and the one gate
 * through which every such file is named, created and opened.
 *
 * <p>Names are {@code <prefix>-<kind>-<32 hex digits>}: 128 random bits, so no other
 * process can guess or pre-create them. A name that comes from outside (a descriptor, a
 * frame) is checked against that shape before it is resolved, so a hostile name such as
 * {@code ../../etc/passwd} or {@code a/b} is refused and nothing outside the directory is
 * ever opened. Files are created exclusively ({@code O_EXCL}, never following a link)
 * with mode 0600 by default, and their space is reserved at creation. A file is opened only
 * if this process's user owns it (or, with group access configured, its group does):
 * the kernel's permission check alone would let root, or a process that loosened a mode,
 * reach into another user's memory.
 */
public final class ShmDirectory {
    public static final Path DEFAULT_DIRECTORY = Path.of("/dev/shm");
    public static final String DEFAULT_PREFIX = "refshare";
    public static final int OWNER_ONLY = 0600;
    public static final int OWNER_AND_GROUP = 0660;

    private static final Pattern PREFIX = Pattern.compile("[A-Za-z0-9_]{1,32}");
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Path directory;
    private final String prefix;
    private final int mode;
    private final Pattern names;
    private static final int UID = Libc.getuid();
    private static final int GID = Libc.getgid();
    private static final int[] GROUPS = Libc.getgroups();

    /**
     * The directory as a {@code RefshareConfig} names it: files readable by the owner, or also
     * by its group when {@code groupAccess}.
     */
    public static ShmDirectory of(Path directory, String prefix, boolean groupAccess) {
        return new ShmDirectory(directory, prefix, groupAccess ? OWNER_AND_GROUP : OWNER_ONLY);
    }

    public ShmDirectory(Path directory, String prefix, int mode) {
        if (!PREFIX.matcher(prefix).matches()) {
            throw new IllegalArgumentException("prefix must be 1-32 letters, digits or '_': '" + prefix + "'");
        }
        if ((mode & ~0660) != 0 || (mode & 0600) != 0600) {
            throw new IllegalArgumentException("mode must be 0600 or 0660, was 0" + Integer.toOctalString(mode));
        }
        this.directory = directory.toAbsolutePath().normalize();
        this.prefix = prefix;
        this.mode = mode;
        this.names = Pattern.compile(Pattern.quote(prefix) + "-([a-z]{1,8})-[0-9a-f]{32}");
        if (!Files.isDirectory(this.directory)) {
            throw new RefshareException("shared memory directory does not exist: " + this.directory);
        }
    }

    public static ShmDirectory defaults() {
        return new ShmDirectory(DEFAULT_DIRECTORY, DEFAULT_PREFIX, OWNER_ONLY);
    }

    public Path path() {
        return directory;
    }

    public String prefix() {
        return prefix;
    }

    /** The mode new files get: {@link #OWNER_ONLY} or {@link #OWNER_AND_GROUP}. */
    public int mode() {
        return mode;
    }

    /** The real user id of this process, which owns every file it creates. */
    static int uid() {
        return UID;
    }

    /**
     * True when a file of owner {@code uid} and group {@code gid} may be used: our user's,
     * or with group access one of our groups' (primary or supplementary, as the kernel grants).
     */
    public boolean ownedByUs(int uid, int gid) {
        if (uid == UID) {
            return true;
        }
        if (mode != OWNER_AND_GROUP) {
            return false;
        }
        if (gid == GID) {
            return true;
        }
        for (int g : GROUPS) {
            if (g == gid) {
                return true;
            }
        }
        return false;
    }

    /**
     * Takes this process's life lock here (see {@link LifeFile}); must precede every record
     * of this process's identity in a file of this directory. Idempotent and cheap once held.
     */
    public void holdLifeLock() {
        LifeFile.hold(this);
    }

    /**
     * Like {@link #holdLifeLock()}, and {@link #leave()} keeps the lock while the file
     * {@code name} exists here: for a record of this process that stays in that file until
     * it exits (a holder's reader row), so that it is reclaimed on the kernel's evidence
     * once this process is gone.
     */
    public void holdLifeLockWhileNamedIn(String name) {
        LifeFile.holdWhileNamedIn(this, name);
    }

    /** Whether the process {@code id} names is alive, dead or unknown, as this directory's life files tell. */
    public Verdict verdict(ProcessIdentity id) {
        return LifeFile.verdict(this, id);
    }

    /** Removes a dead process's life file (the janitor's job); true when this call removed it. */
    public boolean removeLifeFileIfDead(ProcessIdentity id) {
        return LifeFile.removeIfDead(this, id);
    }

    /**
     * Gives up this process's life lock here and removes its file, unconditionally: for a
     * caller that knows no file here names this process any more (tests, tools). Prefer
     * {@link #leave()}.
     */
    public void releaseLifeLock() {
        LifeFile.release(this);
    }

    /**
     * A clean departure from this directory: gives up this process's life lock (and removes
     * its life file) unless a file here still names this process as its owner. Called when
     * this process's last handle of the directory closed, after it released its tokens,
     * peer entries, queue participations and holder reader rows, so that a process that
     * leaves cleanly leaves no life file. Idempotent; a later {@link #holdLifeLock()} takes
     * the lock again.
     *
     * <p>Only owners in headers are looked at (a read of 32 bytes per file): a record of
     * this process in another process's file that outlives this call (a handle not closed)
     * is judged without a life file, by /proc in this PID namespace (ALIVE) and UNKNOWN in
     * another, which may leak but never harms. A file of ours that cannot be read does not
     * keep the lock: it cannot be told to name us. A file this process creates here while
     * this call runs may be missed (its creator took the lock before this call released
     * it); such a file is then judged by /proc as above, so call it once this process's
     * last handle of the directory is closed, not while another thread still creates files.
     *
     * @return true when this process holds no life lock here any more; false when a file
     *         still names it (as owner, or in a lasting record: {@link #holdLifeLockWhileNamedIn})
     *         or the directory could not be listed, and the lock is kept
     */
    public boolean leave() {
        if (!LifeFile.isHeld(this)) {
            return true;
        }
        if (LifeFile.isNamedInLastingRecord(this)) {
            return false;
        }
        ProcessIdentity me = ProcessIdentity.current();
        try (Stream<Path> files = Files.list(directory)) {
            for (Path p : (Iterable<Path>) files::iterator) {
                ShmKind kind = kindOf(p.getFileName().toString());
                if (kind == null || kind == ShmKind.LIFE) {
                    continue;
                }
                try {
                    FileHeader h = FileHeader.readOrNull(this, p);
                    if (h != null && h.owner().equals(me)) {
                        return false;
                    }
                } catch (IOException | RuntimeException unreadable) {
                    // gone, damaged or not ours: it does not name this process
                }
            }
        } catch (IOException | java.io.UncheckedIOException e) {
            return false; // cannot tell: keeping the lock costs nothing
        }
        LifeFile.release(this);
        return true;
    }

    /**
     * The identity a life file's name carries, or null when {@code name} is not the name of
     * a life file of this directory that could name a process.
     */
    public ProcessIdentity lifeFileIdentity(String name) {
        return kindOf(name) == ShmKind.LIFE ? LifeFile.identityOf(name) : null;
    }

    /** A fresh unguessable name for a file of this kind. */
    public String newName(ShmKind kind) {
        byte[] bits = new byte[16];
        RANDOM.nextBytes(bits);
        return prefix + "-" + kind.tag() + "-" + HexFormat.of().formatHex(bits);
    }

    /** True when {@code name} has the shape of one of our file names (any kind). */
    public boolean isOurs(String name) {
        var m = names.matcher(name);
        return m.matches() && ShmKind.ofTag(m.group(1)) != null;
    }

    /** The kind a well-formed name of ours carries, or null when the name is not ours. */
    public ShmKind kindOf(String name) {
        var m = names.matcher(name);
        return m.matches() ? ShmKind.ofTag(m.group(1)) : null;
    }

    /**
     * Resolves a name received from outside, refusing anything that is not exactly one of
     * our names of the expected kind.
     */
    public Path resolve(String name, ShmKind kind) {
        if (name == null || name.length() > 128 || kindOf(name) != kind) {
            throw new InvalidDataException("not a refshare " + kind.tag() + " file name under prefix '" + prefix
                    + "': '" + printable(name) + "'");
        }
        Path p = directory.resolve(name).normalize();
        if (!directory.equals(p.getParent())) {
            throw new InvalidDataException("name escapes the shared memory directory: '" + printable(name) + "'");
        }
        return p;
    }

    /**
     * Creates a new file of exactly {@code size} bytes, space reserved, and maps it
     * read-write. Its first {@value FileHeader#LENGTH} bytes already hold the
     * {@link FileHeader} owner fields naming this process (magic still zero): the caller
     * writes its layout's header over them, the magic last.
     */
    public ShmFile create(ShmKind kind, long size) {
        if (size < FileHeader.LENGTH) {
            throw new IllegalArgumentException("size must hold at least the " + FileHeader.LENGTH
                    + "-byte common header: " + size);
        }
        holdLifeLock();
        String name = newName(kind);
        Path path = directory.resolve(name);
        int fd;
        try {
            fd = Libc.open(path.toString(), Libc.O_RDWR | Libc.O_CREAT | Libc.O_EXCL | Libc.O_NOFOLLOW | Libc.O_CLOEXEC,
                    mode);
        } catch (Libc.ErrnoException e) {
            throw FileFailure.of("create", path, e);
        }
        try {
            // First, before anything slow or anything that can fail for lack of space: from
            // here on the file names its owner, so if this process is killed anywhere below,
            // the janitor can tell the file is a dead process's. Killed before this write, it
            // leaves an empty file with no owner, which the janitor removes after a grace period.
            Libc.pwrite(fd, FileHeader.ownerOnly(ProcessIdentity.current()), 0, path.toString());
            if (mode != OWNER_ONLY) {
                Libc.fchmod(fd, mode, path.toString()); // the umask may have taken the group's write bit
            }
            Libc.posixFallocate(fd, size, path.toString());
            // mapped through the descriptor: the mapping is of the file created, whatever the name denotes now
            return ShmFile.map(name, path, Path.of("/proc/self/fd/" + fd), size, true);
        } catch (Libc.ErrnoException e) {
            deleteQuietly(path);
            if (e.errno() == Libc.ENOSPC) { // from posix_fallocate, or the header's write on a full tmpfs
                throw new OutOfSharedMemoryException("no space left in " + directory + " for a " + size
                        + "-byte " + kind.tag() + " file (" + e.getMessage() + "); free space or raise the tmpfs size", e);
            }
            throw FileFailure.of("create " + size + "-byte", path, e);
        } catch (RuntimeException e) {
            deleteQuietly(path);
            throw e;
        } finally {
            Libc.close(fd);
        }
    }

    /**
     * Opens and maps an existing file of ours by a name from outside. The open file itself
     * must be a regular file (not a link, FIFO or device: opened without following links or
     * waiting, checked on its descriptor, see {@link CheckedFile}) of at least
     * {@code minSize} bytes, owned by us; what is mapped is exactly that file.
     */
    public ShmFile open(String name, ShmKind kind, long minSize) {
        Path path = resolve(name, kind);
        try (CheckedFile f = CheckedFile.open(path, true)) {
            f.requireUsable(this, minSize);
            return f.map(name, f.stat().size(), false);
        } catch (NoSuchFileException e) {
            throw new RefshareException("refshare file no longer exists (its owner released or lost it): " + path, e);
        } catch (IOException e) {
            if (e instanceof Libc.ErrnoException errno && errno.errno() == Libc.ELOOP) {
                throw new InvalidDataException("not a regular file (a symbolic link): " + path);
            }
            if (e instanceof Libc.ErrnoException errno && errno.errno() == Libc.EACCES) {
                explainRefusal(path); // the kernel refused first: say whose file it is, if that is why
            }
            throw FileFailure.of("open", path, e);
        }
    }

    /** Throws the ownership refusal when the name denotes another user's file (an lstat: it never blocks). */
    private void explainRefusal(Path path) {
        Libc.FileStat st;
        try {
            st = Libc.lstat(path.toString());
        } catch (Libc.ErrnoException e) {
            return;
        }
        requireOwnedByUs(path, st.uid(), st.gid());
    }

    /** Refuses a file of owner {@code uid} and group {@code gid} unless {@link #ownedByUs} accepts it. */
    void requireOwnedByUs(Path path, int uid, int gid) {
        if (!ownedByUs(uid, gid)) {
            throw new RefshareException("refusing " + path + ": it belongs to uid " + uid + " (gid " + gid
                    + ") and this process runs as uid " + UID + " (gid " + GID + ")"
                    + (mode == OWNER_AND_GROUP ? "" : "; processes of one group can share with group access enabled"));
        }
    }

    /** Removes a name, best effort (the janitor removes what is left); true when this call removed it. */
    static boolean deleteQuietly(Path path) {
        try {
            return Files.deleteIfExists(path);
        } catch (IOException ignored) {
            return false;
        }
    }

    private static String printable(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < Math.min(s.length(), 80); i++) {
            char c = s.charAt(i);
            b.append(c >= 0x20 && c < 0x7f ? c : '?');
        }
        return s.length() > 80 ? b + "..." : b.toString();
    }

    @Override
    public String toString() {
        return directory + "/" + prefix + "-*";
    }
}
