package io.refshare.shm;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * The first 32 bytes every refshare file starts with, whatever its kind, so that tools
 * (inspect, the janitor) can tell who owns any file without knowing its layout:
 *
 * <pre>
 *   0                   8         12        16                  24                  32
 *   +-------------------+---------+---------+-------------------+-------------------+
 *   | magic (per kind)  | version | hdrLen  |     owner pid     | owner start ticks |
 *   +-------------------+---------+---------+-------------------+-------------------+
 * </pre>
 * Little-endian. The owner writes the magic last, so a header with a valid magic is complete.
 *
 * <p>{@link ShmDirectory#create} writes the owner fields (magic, version and length still
 * zero) through the new file's descriptor right after creating it, before it reserves
 * space or maps it, so a file names its owner from its first moment on: a creator killed
 * later leaves a file the janitor can judge. Only a creator killed between the create and
 * that write leaves a file with no owner (shorter than a header, empty in practice):
 * {@link #readOrNull} tells such a file from a damaged one.
 *
 * <p>The header, with the magic of every kind, is specified in
 * {@code docs/protocol.md}, section 4: the reference for every implementation.
 */
public record FileHeader(long magic, int version, int headerLength, ProcessIdentity owner) {
    public static final int LENGTH = 32;
    public static final long MAGIC_OFFSET = 0;
    public static final long VERSION_OFFSET = 8;
    public static final long HEADER_LENGTH_OFFSET = 12;
    public static final long OWNER_PID_OFFSET = 16;
    public static final long OWNER_START_OFFSET = 24;

    /** The 8 ASCII characters of a magic number, for messages. */
    public static String magicText(long magic) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            char c = (char) ((magic >>> (8 * i)) & 0xFF);
            b.append(c >= 0x20 && c < 0x7f ? c : '?');
        }
        return b.toString();
    }

    /**
     * Writes the version, header length and owner of a new file's header, the magic still
     * zero: the kind writes its own fields next, then {@link #publish} makes the file valid.
     */
    public static void write(MemorySegment m, int version, int headerLength, ProcessIdentity owner) {
        m.set(LittleEndian.INT, VERSION_OFFSET, version);
        m.set(LittleEndian.INT, HEADER_LENGTH_OFFSET, headerLength);
        m.set(LittleEndian.LONG, OWNER_PID_OFFSET, owner.pid());
        m.set(LittleEndian.LONG, OWNER_START_OFFSET, owner.startTicks());
    }

    /**
     * Writes the magic, last and with release ordering: a reader that sees the magic (with
     * {@link #check}'s acquiring load) sees every field written before it.
     */
    public static void publish(MemorySegment m, long magic) {
        LittleEndian.ATOMIC_LONG.setRelease(m, MAGIC_OFFSET, magic);
    }

    /**
     * Checks the header of a mapped file of {@code kind} (its name in messages: "queue",
     * "counter file", ...) before any other field is used: long enough, the kind's magic
     * (read with acquire ordering, pairing with {@link #publish}), the version this code
     * reads, a possible owner. The kind checks its header length and its own fields after.
     *
     * @return the header
     * @throws InvalidDataException naming {@code where} and what is wrong
     */
    public static FileHeader check(MemorySegment m, long magic, int version, String kind, Object where) {
        if (m.byteSize() < LENGTH) {
            throw new InvalidDataException(where + " is truncated: " + m.byteSize() + " bytes, a refshare header is "
                    + LENGTH);
        }
        long found = (long) LittleEndian.ATOMIC_LONG.getAcquire(m, MAGIC_OFFSET);
        if (found != magic) {
            throw new InvalidDataException(where + " is not a refshare " + kind + " (magic 0x" + Long.toHexString(found)
                    + ", expected 0x" + Long.toHexString(magic) + ")");
        }
        int v = m.get(LittleEndian.INT, VERSION_OFFSET);
        if (v != version) {
            throw new InvalidDataException(where + " has " + kind + " layout version " + v + "; this refshare reads "
                    + "version " + version);
        }
        long pid = m.get(LittleEndian.LONG, OWNER_PID_OFFSET);
        long start = m.get(LittleEndian.LONG, OWNER_START_OFFSET);
        if (!ProcessIdentity.isPossibleOwner(pid, start)) {
            throw new InvalidDataException(where + " names an impossible owner pid " + pid + " (start ticks " + start + ")");
        }
        return new FileHeader(magic, v, m.get(LittleEndian.INT, HEADER_LENGTH_OFFSET), new ProcessIdentity(pid, start));
    }

    /** The header a file has before its layout is written: only the owner, magic still zero. */
    static byte[] ownerOnly(ProcessIdentity owner) {
        ByteBuffer b = ByteBuffer.allocate(LENGTH).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong((int) OWNER_PID_OFFSET, owner.pid());
        b.putLong((int) OWNER_START_OFFSET, owner.startTicks());
        return b.array();
    }

    /**
     * Reads the header of a file of this user without mapping it (a read, not a mapping: a
     * truncated file cannot fault). The file is opened without following a link or waiting
     * and must be a regular file owned by this process's user (see {@link CheckedFile}).
     *
     * @throws InvalidDataException when the file is shorter than a header or names no
     *         possible owner
     * @throws RefshareException    when the name denotes anything but a regular file of ours
     * @throws NoSuchFileException  when the file is gone
     */
    public static FileHeader read(Path path) throws IOException {
        try (CheckedFile f = CheckedFile.open(path, false)) {
            requireOurs(f, null);
            return read(f);
        }
    }

    /** As {@link #read(Path)}, accepting the files {@code dir} accepts (its group's, with group access). */
    public static FileHeader read(ShmDirectory dir, Path path) throws IOException {
        try (CheckedFile f = CheckedFile.open(path, false)) {
            requireOurs(f, dir);
            return read(f);
        }
    }

    /** The header of a file already opened and checked by the caller. */
    public static FileHeader read(CheckedFile f) throws IOException {
        byte[] bytes = f.read(0, LENGTH);
        if (bytes.length < LENGTH) {
            throw new InvalidDataException(f.path() + " is truncated: " + bytes.length + " bytes, a refshare header is "
                    + LENGTH);
        }
        return parse(f.path(), ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN));
    }

    /**
     * As {@link #read(ShmDirectory, Path)}, but null for a file whose owner was never written:
     * shorter than a header, or zero where the owner's pid goes (what a creator killed before
     * its first write leaves, or a file of an older refshare that wrote the owner later). Such
     * a file may also be one being created this very moment; the caller decides by its age.
     *
     * @throws InvalidDataException when the header names an impossible owner (damage, not
     *         an interrupted creation)
     */
    public static FileHeader readOrNull(ShmDirectory dir, Path path) throws IOException {
        try (CheckedFile f = CheckedFile.open(path, false)) {
            requireOurs(f, dir);
            return readOrNull(f);
        }
    }

    /** As {@link #readOrNull(ShmDirectory, Path)}, of a file already opened and checked by the caller. */
    public static FileHeader readOrNull(CheckedFile f) throws IOException {
        byte[] bytes = f.read(0, LENGTH);
        if (bytes.length < LENGTH) {
            return null;
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        if (b.getLong((int) OWNER_PID_OFFSET) == 0) {
            return null;
        }
        return parse(f.path(), b);
    }

    /** Refuses anything but a regular file of ours: {@code dir}'s rule, or this user's alone without one. */
    private static void requireOurs(CheckedFile f, ShmDirectory dir) {
        Libc.FileStat st = f.stat();
        if (!st.isRegularFile()) {
            throw new InvalidDataException("not a regular file: " + f.path());
        }
        if (dir != null) {
            dir.requireOwnedByUs(f.path(), st.uid(), st.gid());
        } else if (st.uid() != ShmDirectory.uid()) {
            throw new RefshareException("refusing " + f.path() + ": it belongs to uid " + st.uid()
                    + " and this process runs as uid " + ShmDirectory.uid());
        }
    }

    private static FileHeader parse(Path path, ByteBuffer b) {
        long pid = b.getLong((int) OWNER_PID_OFFSET);
        long start = b.getLong((int) OWNER_START_OFFSET);
        if (!ProcessIdentity.isPossibleOwner(pid, start)) {
            throw new InvalidDataException(path + " names an impossible owner pid " + pid + " (start ticks " + start + ")");
        }
        return new FileHeader(b.getLong((int) MAGIC_OFFSET), b.getInt((int) VERSION_OFFSET),
                b.getInt((int) HEADER_LENGTH_OFFSET), new ProcessIdentity(pid, start));
    }
}
