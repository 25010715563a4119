package io.refshare.shm;

import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.ResourceLimitException;

import java.io.IOException;
import java.nio.file.FileSystemException;
import java.nio.file.Path;

/**
 * A failure to create, open or map one of refshare's files, as the exception its caller can act
 * on. Running out of open files or of memory for mappings is this process's or this machine's
 * limit, not the file's fault: a {@link ResourceLimitException}, for which a queue gives the
 * message it was receiving back for later (protocol §9.8) where any other failure of a receive
 * rejects the message. Anything else is a {@link RefshareException}.
 */
final class FileFailure {
    private FileFailure() {
    }

    /** The exception for {@code e}, met while doing {@code doing} ("open", "map", ...) to {@code path}. */
    static RefshareException of(String doing, Path path, IOException e) {
        String limit = limitReached(e);
        String what = "cannot " + doing + " " + path + ": ";
        return limit == null
                ? new RefshareException(what + e.getMessage(), e)
                : new ResourceLimitException(what + limit, e);
    }

    /** What limit {@code e} reports, said for a person who can raise it; null when it is no limit. */
    private static String limitReached(IOException e) {
        int errno = switch (e) {
            case Libc.ErrnoException n -> n.errno();
            // the JDK's own opens (the channel that maps) report the C library's text only
            case FileSystemException f when Libc.strerror(Libc.EMFILE).equals(f.getReason()) -> Libc.EMFILE;
            case FileSystemException f when Libc.strerror(Libc.ENFILE).equals(f.getReason()) -> Libc.ENFILE;
            // FileChannel.map reports the kernel's ENOMEM as "Map failed", caused by an OutOfMemoryError
            default -> e.getCause() instanceof OutOfMemoryError ? Libc.ENOMEM : 0;
        };
        return switch (errno) {
            case Libc.EMFILE -> "this process has as many files open as it may (EMFILE): raise its limit"
                    + " (ulimit -n, systemd's LimitNOFILE) or let it close some";
            case Libc.ENFILE -> "the system has as many files open as it may (ENFILE): raise fs.file-max";
            case Libc.ENOMEM -> "the kernel refused the memory for it (ENOMEM): the machine is out of memory,"
                    + " or this process has as many mappings as it may (sysctl vm.max_map_count)";
            default -> null;
        };
    }
}
