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
     * Reads the header of a file without mapping it (a read, not a mapping: a truncated
     * file cannot fault). Never follows a link.
     */
    public static FileHeader read(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            ByteBuffer b = ByteBuffer.allocate(LENGTH).order(ByteOrder.LITTLE_ENDIAN);
            while (b.hasRemaining() && ch.read(b) > 0) {
                // keep reading
            }
            if (b.hasRemaining()) {
                throw new InvalidDataException(path + " is truncated: " + b.position() + " bytes, a refshare header is "
                        + LENGTH);
            }
            long pid = b.getLong((int) OWNER_PID_OFFSET);
            long start = b.getLong((int) OWNER_START_OFFSET);
            if (pid <= 0 || pid > Integer.MAX_VALUE || start < 0) {
                throw new InvalidDataException(path + " names an impossible owner pid " + pid);
            }
            return new FileHeader(b.getLong((int) MAGIC_OFFSET), b.getInt((int) VERSION_OFFSET),
                    b.getInt((int) HEADER_LENGTH_OFFSET), new ProcessIdentity(pid, start));
        }
    }
}
