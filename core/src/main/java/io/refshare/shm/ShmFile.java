package io.refshare.shm;

import io.refshare.exceptions.InvalidDataException;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.Function;

/**
 * One refshare file mapped into this process. The mapping lives in a shared arena, so any
 * thread may use it; {@link #close()} unmaps it (later accesses through {@link #segment()}
 * throw {@link IllegalStateException}, they never touch unmapped memory). {@link #unlink()}
 * removes the name; the memory stays valid for every process that still maps it.
 */
public final class ShmFile implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(ShmFile.class.getName());

    private final String name;
    private final Path path;
    private final boolean created;
    private final Arena arena;
    private final MemorySegment segment;

    private ShmFile(String name, Path path, boolean created, Arena arena, MemorySegment segment) {
        this.name = name;
        this.path = path;
        this.created = created;
        this.arena = arena;
        this.segment = segment;
    }

    /**
     * Maps {@code size} bytes of the file open as {@code source} (a {@code /proc/self/fd/N}
     * name of a descriptor that was checked, see {@link CheckedFile}); {@code path} is the
     * file's name in the directory, for messages and {@link #unlink()}.
     *
     * <p>Mapping is not a wait, so a thread's interrupt is not its business: the channel it
     * maps through is interruptible, and an interrupt pending or arriving meanwhile would close
     * it, failing an {@code allocate} or a receive (whose message is then rejected, lost). The
     * map is tried again with the flag cleared, and the flag is set again on the way out, for
     * the caller's next wait to answer.
     */
    static ShmFile map(String name, Path path, Path source, long size, boolean created) {
        boolean interrupted = Thread.interrupted();
        try {
            while (true) {
                Arena arena = Arena.ofShared();
                try (FileChannel ch = FileChannel.open(source, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                    MemorySegment seg = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
                    return new ShmFile(name, path, created, arena, seg);
                } catch (ClosedByInterruptException e) {
                    arena.close();
                    interrupted |= Thread.interrupted();
                } catch (IOException e) {
                    arena.close();
                    throw FileFailure.of("map", path, e);
                } catch (RuntimeException e) {
                    arena.close();
                    throw e;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    public String name() {
        return name;
    }

    public Path path() {
        return path;
    }

    /** True when this process created the file (it is the owner). */
    public boolean created() {
        return created;
    }

    public MemorySegment segment() {
        return segment;
    }

    public long size() {
        return segment.byteSize();
    }

    /** Removes the file's name; idempotent. */
    public void unlink() {
        ShmDirectory.deleteQuietly(path);
    }

    /** Unmaps the file in this process. Not idempotent on purpose: callers own exactly one close. */
    @Override
    public void close() {
        arena.close();
    }

    /**
     * {@link #close()}, unless a thread of this process is inside a system call on the mapping
     * (a release's futex wake-up holds it while the call runs): then false, and nothing changed.
     *
     * @throws IllegalStateException when the file was closed before
     */
    public boolean closeUnlessInUse() {
        try {
            arena.close();
            return true;
        } catch (IllegalStateException e) {
            if (!isMapped()) {
                throw e;
            }
            return false;
        }
    }

    /**
     * Runs {@code check} on this fresh mapping (its header, mostly) and returns what it returns;
     * when the check fails, unmaps the file first. A fault on the mapping is answered as
     * {@link #truncatedWhileOpened}: compiled code reports it late, at its next safepoint check,
     * so a native call's return ({@link Libc#deliverPendingFault}) has it surface here, not in
     * the caller's code with the file still mapped.
     */
    public <T> T checkOrClose(Function<ShmFile, T> check) {
        try {
            T checked = check.apply(this);
            Libc.deliverPendingFault();
            return checked;
        } catch (RuntimeException | InternalError e) {
            close();
            if (e instanceof InternalError fault) {
                throw truncatedWhileOpened(path, fault);
            }
            throw e;
        }
    }

    /**
     * Runs {@code read} on this fresh mapping and unmaps it, whatever happens: for a look at a
     * file without keeping it. A fault on the mapping is answered as {@link #truncatedWhileOpened},
     * as in {@link #checkOrClose}.
     */
    public <T> T readAndClose(Function<ShmFile, T> read) {
        T result = checkOrClose(read);
        close();
        return result;
    }

    /**
     * The JVM's answer to a fault on a file's fresh mapping (an {@link InternalError}), as a caller
     * sees it: another process cut the file short after it was opened and sized.
     */
    private static InvalidDataException truncatedWhileOpened(Object file, InternalError fault) {
        return new InvalidDataException(file + " was truncated while it was being opened: " + fault, fault);
    }

    /**
     * {@link #close()} once no thread of this process is inside a system call on the mapping
     * (they take microseconds: a release's futex wake-up), waiting for that at most a second;
     * past that the file stays mapped, and a warning says so.
     *
     * @throws IllegalStateException when the file was closed before
     */
    public void closeAfterCalls() {
        long deadline = System.nanoTime() + 1_000_000_000L;
        while (!closeUnlessInUse()) {
            if (System.nanoTime() - deadline > 0) {
                LOG.log(System.Logger.Level.WARNING, path + " stays mapped in this process: a system call on it has"
                        + " not returned for a second");
                return;
            }
            Thread.yield();
        }
    }

    /** False once the file is unmapped in this process. */
    public boolean isMapped() {
        return arena.scope().isAlive();
    }

    @Override
    public String toString() {
        return path.toString();
    }
}
