package io.refshare.shm;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The few libc calls the JDK does not offer: exclusive creation with an exact mode, a
 * write through that descriptor, space reservation ({@code posix_fallocate}), and futex
 * wait/wake on shared memory.
 * Each call returns or throws; errno is captured through the linker so it is never
 * clobbered by the JVM between the call and the read.
 */
public final class Libc {
    public static final int O_RDONLY = 0;
    public static final int O_RDWR = 02;
    public static final int O_CREAT = 0100;
    public static final int O_EXCL = 0200;
    public static final int O_NONBLOCK = 04000;
    public static final int O_NOFOLLOW = 0400000;
    public static final int O_CLOEXEC = 02000000;

    public static final int EINTR = 4;
    public static final int EIO = 5;
    public static final int EAGAIN = 11;
    public static final int EACCES = 13;
    public static final int EEXIST = 17;
    public static final int ENOENT = 2;
    public static final int EWOULDBLOCK = EAGAIN;
    public static final int ELOOP = 40;
    public static final int ENOSPC = 28;
    public static final int ENOMEM = 12;
    public static final int ENFILE = 23;
    public static final int EMFILE = 24;
    public static final int ETIMEDOUT = 110;

    public static final int LOCK_SH = 1;
    public static final int LOCK_EX = 2;
    public static final int LOCK_NB = 4;

    private static final long SYS_FUTEX = 202; // x86_64
    private static final int AT_FDCWD = -100;
    private static final int AT_EMPTY_PATH = 0x1000;
    private static final int AT_SYMLINK_NOFOLLOW = 0x100;
    private static final int STATX_BASIC_STATS = 0x7ff;
    private static final int STATX_SIZE = 256;
    private static final int FUTEX_WAIT = 0;
    private static final int FUTEX_WAKE = 1;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final Linker.Option ERRNO = Linker.Option.captureCallState("errno");
    private static final VarHandle ERRNO_HANDLE = Linker.Option.captureStateLayout()
            .varHandle(java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));

    private static final MethodHandle OPEN = LINKER.downcallHandle(LIBC.findOrThrow("open"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
            ERRNO, Linker.Option.firstVariadicArg(2));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LIBC.findOrThrow("close"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle POSIX_FALLOCATE = LINKER.downcallHandle(LIBC.findOrThrow("posix_fallocate"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
    private static final MethodHandle PWRITE = LINKER.downcallHandle(LIBC.findOrThrow("pwrite"),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                    ValueLayout.JAVA_LONG), ERRNO);
    private static final MethodHandle PREAD = LINKER.downcallHandle(LIBC.findOrThrow("pread"),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                    ValueLayout.JAVA_LONG), ERRNO);
    private static final MethodHandle FCHMOD = LINKER.downcallHandle(LIBC.findOrThrow("fchmod"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), ERRNO);
    private static final MethodHandle ABS = LINKER.downcallHandle(LIBC.findOrThrow("abs"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle GETUID = LINKER.downcallHandle(LIBC.findOrThrow("getuid"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT));
    private static final MethodHandle GETGID = LINKER.downcallHandle(LIBC.findOrThrow("getgid"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT));
    private static final MethodHandle FLOCK = LINKER.downcallHandle(LIBC.findOrThrow("flock"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), ERRNO);
    private static final MethodHandle STATX = LINKER.downcallHandle(LIBC.findOrThrow("statx"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                    ValueLayout.JAVA_INT, ValueLayout.ADDRESS), ERRNO);
    private static final MethodHandle GETGROUPS = LINKER.downcallHandle(LIBC.findOrThrow("getgroups"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS), ERRNO);
    private static final MethodHandle STRERROR = LINKER.downcallHandle(LIBC.findOrThrow("strerror"),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    private static final MethodHandle SYSCALL6 = LINKER.downcallHandle(LIBC.findOrThrow("syscall"),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS,
                    ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS,
                    ValueLayout.JAVA_INT),
            ERRNO, Linker.Option.firstVariadicArg(1));

    private Libc() {
    }

    /** A failed libc call: the call, the errno and its text. */
    public static final class ErrnoException extends java.io.IOException {
        private final int errno;

        ErrnoException(String call, int errno) {
            super(call + " failed: " + strerror(errno) + " (errno " + errno + ")");
            this.errno = errno;
        }

        public int errno() {
            return errno;
        }
    }

    /** {@code open(path, flags, mode)}; returns the file descriptor. */
    public static int open(String path, int flags, int mode) throws ErrnoException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path), flags, mode);
            if (fd < 0) {
                throw new ErrnoException("open(" + path + ")", (int) ERRNO_HANDLE.get(state, 0L));
            }
            return fd;
        } catch (ErrnoException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void close(int fd) {
        try {
            int ignored = (int) CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Sets a file's mode exactly, whatever the umask took away at creation. */
    public static void fchmod(int fd, int mode, String what) throws ErrnoException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            if ((int) FCHMOD.invokeExact(state, fd, mode) != 0) {
                throw new ErrnoException("fchmod(" + what + ")", (int) ERRNO_HANDLE.get(state, 0L));
            }
        } catch (ErrnoException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Writes all of {@code bytes} at {@code offset} of the file (a short write is continued; EINTR retried). */
    public static void pwrite(int fd, byte[] bytes, long offset, String what) throws ErrnoException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            MemorySegment buffer = arena.allocateFrom(ValueLayout.JAVA_BYTE, bytes);
            long done = 0;
            while (done < bytes.length) {
                long n = (long) PWRITE.invokeExact(state, fd, buffer.asSlice(done), bytes.length - done, offset + done);
                if (n < 0) {
                    int errno = (int) ERRNO_HANDLE.get(state, 0L);
                    if (errno == EINTR) {
                        continue;
                    }
                    throw new ErrnoException("pwrite(" + what + ")", errno);
                }
                if (n == 0) {
                    throw new ErrnoException("pwrite(" + what + ") wrote nothing", EIO); // never loop on it
                }
                done += n;
            }
        } catch (ErrnoException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Reads up to {@code length} bytes at {@code offset} of the file (EINTR retried, a short
     * read continued); fewer only at the end of the file.
     */
    public static byte[] pread(int fd, int length, long offset, String what) throws ErrnoException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            MemorySegment buffer = arena.allocate(Math.max(1, length));
            long done = 0;
            while (done < length) {
                long n = (long) PREAD.invokeExact(state, fd, buffer.asSlice(done), length - done, offset + done);
                if (n < 0) {
                    int errno = (int) ERRNO_HANDLE.get(state, 0L);
                    if (errno == EINTR) {
                        continue;
                    }
                    throw new ErrnoException("pread(" + what + ")", errno);
                }
                if (n == 0) {
                    break; // end of file
                }
                done += n;
            }
            return buffer.asSlice(0, done).toArray(ValueLayout.JAVA_BYTE);
        } catch (ErrnoException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Reserves {@code length} bytes so later writes through a mapping cannot fault (SIGBUS) for lack of space. */
    public static void posixFallocate(int fd, long length, String what) throws ErrnoException {
        int rc;
        try {
            rc = (int) POSIX_FALLOCATE.invokeExact(fd, 0L, length);
        } catch (Throwable t) {
            throw rethrow(t);
        }
        if (rc != 0) {
            throw new ErrnoException("posix_fallocate(" + what + ", " + length + " bytes)", rc);
        }
    }

    /**
     * Sleeps while the 32-bit word at {@code address} equals {@code expected}, for at most
     * {@code timeoutNanos} (or forever when negative). A shared (not private) futex: it
     * works across processes that map the same file. Spurious returns are allowed; callers
     * re-check their condition.
     */
    public static void futexWait(MemorySegment address, int expected, long timeoutNanos) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            MemorySegment timeout = MemorySegment.NULL;
            if (timeoutNanos >= 0) {
                timeout = arena.allocate(16, 8);
                timeout.set(ValueLayout.JAVA_LONG, 0, timeoutNanos / 1_000_000_000L);
                timeout.set(ValueLayout.JAVA_LONG, 8, timeoutNanos % 1_000_000_000L);
            }
            long ignored = (long) SYSCALL6.invokeExact(state, SYS_FUTEX, address, FUTEX_WAIT, expected, timeout,
                    MemorySegment.NULL, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Wakes up to {@code count} waiters on the word at {@code address}; returns how many woke. */
    public static int futexWake(MemorySegment address, int count) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            return (int) (long) SYSCALL6.invokeExact(state, SYS_FUTEX, address, FUTEX_WAKE, count,
                    MemorySegment.NULL, MemorySegment.NULL, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code flock(fd, operation)}, retried on EINTR. True when the lock was taken; false
     * when {@link #LOCK_NB} was given and another open file holds a conflicting lock.
     */
    public static boolean flock(int fd, int operation, String what) throws ErrnoException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            while (true) {
                if ((int) FLOCK.invokeExact(state, fd, operation) == 0) {
                    return true;
                }
                int errno = (int) ERRNO_HANDLE.get(state, 0L);
                if (errno == EWOULDBLOCK && (operation & LOCK_NB) != 0) {
                    return false;
                }
                if (errno != EINTR) {
                    throw new ErrnoException("flock(" + what + ")", errno);
                }
            }
        } catch (ErrnoException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** What the kernel says of an open file or a path: the fields refshare checks. */
    public record FileStat(long device, long inode, int mode, int uid, int gid, long size, long modifiedEpochSeconds) {
        private static final int S_IFMT = 0170000;
        private static final int S_IFREG = 0100000;

        public boolean isRegularFile() {
            return (mode & S_IFMT) == S_IFREG;
        }

        /** True when both name the same file (same device and inode). */
        public boolean sameFile(FileStat other) {
            return device == other.device && inode == other.inode;
        }
    }

    /** The status of the file open as {@code fd} ({@code statx} with an empty path: no name is looked up again). */
    public static FileStat fstat(int fd, String what) throws ErrnoException {
        return statx(fd, "", AT_EMPTY_PATH, what);
    }

    /** The status of {@code path} itself, never following a final symbolic link. */
    public static FileStat lstat(String path) throws ErrnoException {
        return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, path);
    }

    private static FileStat statx(int dirFd, String path, int flags, String what) throws ErrnoException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            MemorySegment buf = arena.allocate(STATX_SIZE, 8);
            if ((int) STATX.invokeExact(state, dirFd, arena.allocateFrom(path), flags, STATX_BASIC_STATS, buf) != 0) {
                throw new ErrnoException("statx(" + what + ")", (int) ERRNO_HANDLE.get(state, 0L));
            }
            // struct statx is the same on every architecture (linux/stat.h)
            long device = ((long) buf.get(ValueLayout.JAVA_INT, 136) << 32) | (buf.get(ValueLayout.JAVA_INT, 140) & 0xFFFF_FFFFL);
            return new FileStat(device, buf.get(ValueLayout.JAVA_LONG, 32), buf.get(ValueLayout.JAVA_SHORT, 28) & 0xFFFF,
                    buf.get(ValueLayout.JAVA_INT, 20), buf.get(ValueLayout.JAVA_INT, 24), buf.get(ValueLayout.JAVA_LONG, 40),
                    buf.get(ValueLayout.JAVA_LONG, 112));
        } catch (ErrnoException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The supplementary group ids of this process (the kernel grants file access by any of them). */
    public static int[] getgroups() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            int n = (int) GETGROUPS.invokeExact(state, 0, MemorySegment.NULL);
            if (n <= 0) {
                return new int[0];
            }
            MemorySegment list = arena.allocate(ValueLayout.JAVA_INT, n);
            n = (int) GETGROUPS.invokeExact(state, n, list);
            return n <= 0 ? new int[0] : list.asSlice(0, 4L * n).toArray(ValueLayout.JAVA_INT);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * For a downcall's {@code catch (Throwable)}: an unchecked throwable goes on as it is, above
     * all the {@link InternalError} of a fault on a cut mapping that the JVM delivers at a
     * downcall's return (see {@link #deliverPendingFault}), which the handlers of damaged files
     * catch; a checked one cannot come from a downcall.
     */
    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new AssertionError(t);
    }

    /**
     * Throws here, as the JVM's {@link InternalError}, a fault that compiled code met earlier on
     * a page of a mapped file that another process truncated. Compiled code does not throw at
     * the read that faulted (the read goes on, with a wrong value) but at its next safepoint
     * check, which may lie frames above the code that handles damaged files, even in the
     * caller's code; the return from a native call is such a check (this one calls
     * {@code abs(3)}, a few nanoseconds). Call it where a read of another process's file came
     * out wrong, inside the {@code try} that handles the fault; it does nothing when no fault
     * is pending.
     */
    public static void deliverPendingFault() {
        try {
            int ignored = (int) ABS.invokeExact(0);
        } catch (Throwable t) {
            throw rethrow(t); // the pending fault's InternalError
        }
    }

    /** The real user id of this process. */
    public static int getuid() {
        try {
            return (int) GETUID.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The real group id of this process. */
    public static int getgid() {
        try {
            return (int) GETGID.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static String strerror(int errno) {
        try {
            MemorySegment s = (MemorySegment) STRERROR.invokeExact(errno);
            return s.reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }
}
