package io.refshare.shm;

import io.refshare.InvalidDataException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

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

    /** The header a file has before its layout is written: only the owner, magic still zero. */
    static byte[] ownerOnly(ProcessIdentity owner) {
        ByteBuffer b = ByteBuffer.allocate(LENGTH).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong((int) OWNER_PID_OFFSET, owner.pid());
        b.putLong((int) OWNER_START_OFFSET, owner.startTicks());
        return b.array();
    }

    /**
     * Reads the header of a file without mapping it (a read, not a mapping: a truncated
     * file cannot fault). Never follows a link.
     *
     * @throws InvalidDataException when the file is shorter than a header or names no
     *         possible owner
     */
    public static FileHeader read(Path path) throws IOException {
        ByteBuffer b = readBytes(path);
        if (b.hasRemaining()) {
            throw new InvalidDataException(path + " is truncated: " + b.position() + " bytes, a refshare header is "
                    + LENGTH);
        }
        return parse(path, b);
    }

    /**
     * As {@link #read}, but null for a file whose owner was never written: shorter than a
     * header, or zero where the owner's pid goes (what a creator killed before its first
     * write leaves, or a file of an older refshare that wrote the owner later). Such a file
     * may also be one being created this very moment; the caller decides by its age.
     *
     * @throws InvalidDataException when the header names an impossible owner (damage, not
     *         an interrupted creation)
     */
    public static FileHeader readOrNull(Path path) throws IOException {
        ByteBuffer b = readBytes(path);
        if (b.hasRemaining() || b.getLong((int) OWNER_PID_OFFSET) == 0) {
            return null;
        }
        return parse(path, b);
    }

    private static ByteBuffer readBytes(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            ByteBuffer b = ByteBuffer.allocate(LENGTH).order(ByteOrder.LITTLE_ENDIAN);
            while (b.hasRemaining() && ch.read(b) > 0) {
                // keep reading
            }
            return b;
        }
    }

    private static FileHeader parse(Path path, ByteBuffer b) {
        long pid = b.getLong((int) OWNER_PID_OFFSET);
        long start = b.getLong((int) OWNER_START_OFFSET);
        if (pid <= 0 || pid > Integer.MAX_VALUE || start < 0) {
            throw new InvalidDataException(path + " names an impossible owner pid " + pid);
        }
        return new FileHeader(b.getLong((int) MAGIC_OFFSET), b.getInt((int) VERSION_OFFSET),
                b.getInt((int) HEADER_LENGTH_OFFSET), new ProcessIdentity(pid, start));
    }
}
