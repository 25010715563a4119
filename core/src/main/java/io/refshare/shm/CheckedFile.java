package io.refshare.shm;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;

import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * A file of the shared directory opened by name and judged by what its open descriptor
 * is, never by a second look-up of the name: whatever is swapped in for the name after the
 * open (a FIFO, a link, another file) cannot block this process or redirect what it reads
 * or maps.
 *
 * <p>The open uses {@code O_NOFOLLOW} (a link is refused, {@code ELOOP}), {@code O_NONBLOCK}
 * (opening a FIFO or a device returns at once instead of waiting for a writer) and
 * {@code O_CLOEXEC}; {@link #stat()} is {@code fstat} of that descriptor. Nothing is read
 * or mapped before the caller has checked the kind, owner and size of exactly that file
 * ({@link #requireUsable}). A mapping goes through {@code /proc/self/fd/N}, which names the
 * open file itself.
 *
 * <p>Lifecycle: one owner; {@link #close()} closes the descriptor (idempotent). A mapping
 * made through {@link #map} stays valid after the close.
 */
public final class CheckedFile implements AutoCloseable {
    private final Path path;
    private final int fd;
    private final Libc.FileStat stat;
    private boolean closed;

    private CheckedFile(Path path, int fd, Libc.FileStat stat) {
        this.path = path;
        this.fd = fd;
        this.stat = stat;
    }

    /**
     * Opens {@code path} read-only (or read-write) without following a link or waiting, and
     * reads its status from the descriptor.
     *
     * @throws NoSuchFileException when there is no such name (any more)
     * @throws IOException         for any other failure of the open (a link: {@code ELOOP})
     */
    public static CheckedFile open(Path path, boolean writable) throws IOException {
        String where = path.toString();
        int fd;
        try {
            fd = Libc.open(where, (writable ? Libc.O_RDWR : Libc.O_RDONLY) | Libc.O_NOFOLLOW | Libc.O_NONBLOCK
                    | Libc.O_CLOEXEC, 0);
        } catch (Libc.ErrnoException e) {
            if (e.errno() == Libc.ENOENT) {
                NoSuchFileException gone = new NoSuchFileException(where);
                gone.initCause(e);
                throw gone;
            }
            throw e;
        }
        try {
            return new CheckedFile(path, fd, Libc.fstat(fd, where));
        } catch (Libc.ErrnoException | RuntimeException e) {
            Libc.close(fd);
            throw e;
        }
    }

    public Path path() {
        return path;
    }

    /** What the kernel says of the open file (not of whatever the name denotes now). */
    public Libc.FileStat stat() {
        return stat;
    }

    /** True when the open file is a regular file whose owner {@code dir} accepts (see {@link ShmDirectory#ownedByUs}). */
    public boolean isUsableIn(ShmDirectory dir) {
        return stat.isRegularFile() && dir.ownedByUs(stat.uid(), stat.gid());
    }

    /**
     * Refuses anything but a regular file of at least {@code minSize} bytes owned by us
     * (or by one of our groups, with group access in {@code dir}).
     */
    public void requireUsable(ShmDirectory dir, long minSize) {
        if (!stat.isRegularFile()) {
            throw new InvalidDataException("not a regular file: " + path);
        }
        dir.requireOwnedByUs(path, stat.uid(), stat.gid());
        if (stat.size() < minSize) {
            throw new InvalidDataException(path + " is truncated: " + stat.size() + " bytes, at least " + minSize
                    + " expected");
        }
    }

    /** Up to {@code length} bytes from {@code offset}; fewer at the end of the file. */
    public byte[] read(long offset, int length) throws IOException {
        requireOpen();
        return Libc.pread(fd, length, offset, path.toString());
    }

    /** True when the name still denotes the open file (nobody removed or replaced it meanwhile). */
    public boolean stillNamed() {
        try {
            return Libc.lstat(path.toString()).sameFile(stat);
        } catch (Libc.ErrnoException e) {
            return false;
        }
    }

    /**
     * Maps the first {@code size} bytes of the open file read-write through
     * {@code /proc/self/fd/N}, so the mapping is of the file checked, whatever the name
     * denotes by now. The file must have been opened writable.
     */
    ShmFile map(String name, long size, boolean created) {
        requireOpen();
        return ShmFile.map(name, path, Path.of("/proc/self/fd/" + fd), size, created);
    }

    private void requireOpen() {
        if (closed) {
            throw new RefshareException("checked file " + path + " is closed");
        }
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            Libc.close(fd);
        }
    }

    @Override
    public String toString() {
        return path.toString();
    }
}
