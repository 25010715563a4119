package io.refshare.share;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.LittleEndian;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * A process's published view of itself, so that {@code refshare inspect} can show what no
 * other file reveals: its limbo, its allocator, what it has mapped. Written by the owner a
 * few times a second; each field is an aligned 64-bit word, so a reader sees every field
 * whole, though not necessarily all from the same instant.
 *
 * <pre>
 *   0     8       12     16          24            32         40
 *   +-----+-------+------+-----------+-------------+----------+------ ... -------+
 *   |magic|version|hdrLen| owner pid | owner start | updated  | fields[0..11]    |
 *   +-----+-------+------+-----------+-------------+----------+------ ... -------+
 *   magic "RSSTATS1"; updated: epoch milliseconds; fields, 8 bytes each, in the
 *   order of {@link Field}
 * </pre>
 *
 * <p>The layout is specified in
 * {@code docs/protocol.md}, section 11: the reference for every implementation.
 */
public final class StatusFile implements AutoCloseable {
    public static final long MAGIC = 0x3153544154535352L; // "RSSTATS1"
    public static final int VERSION = 1;
    private static final long UPDATED_OFFSET = 32;
    private static final long FIELDS_OFFSET = 40;
    private static final VarHandle LONG = LittleEndian.ATOMIC_LONG;

    /** The published fields, in layout order. */
    public enum Field {
        LIMBO_BLOCKS, LIMBO_BYTES, SEGMENTS, SEGMENT_BYTES, BLOCKS_IN_USE, BYTES_IN_USE, OWN_COUNTER_FILES,
        MAPPED_SEGMENTS, MAPPED_COUNTER_FILES, SHARED, RECEIVED, COLLECTED
    }

    public static final long LENGTH = FIELDS_OFFSET + 8L * Field.values().length;

    private final ShmFile file;

    private StatusFile(ShmFile file) {
        this.file = file;
    }

    static StatusFile create(ShmDirectory dir) {
        ShmFile f = dir.create(ShmKind.STATUS, LENGTH);
        MemorySegment m = f.segment();
        ProcessIdentity me = ProcessIdentity.current();
        FileHeader.write(m, VERSION, (int) FIELDS_OFFSET, me);
        FileHeader.publish(m, MAGIC);
        return new StatusFile(f);
    }

    void publish(long... values) {
        MemorySegment m = file.segment();
        for (int i = 0; i < values.length; i++) {
            LONG.setOpaque(m, FIELDS_OFFSET + 8L * i, values[i]);
        }
        LONG.setRelease(m, UPDATED_OFFSET, System.currentTimeMillis());
    }

    /** Reads a status file by name: the time of its last update and its fields. */
    public static Snapshot read(ShmDirectory dir, String name) {
        return dir.open(name, ShmKind.STATUS, LENGTH).readAndClose(f -> {
            MemorySegment m = f.segment();
            FileHeader.check(m, MAGIC, VERSION, "status file", f.path());
            long[] values = new long[Field.values().length];
            for (int i = 0; i < values.length; i++) {
                values[i] = (long) LONG.getOpaque(m, FIELDS_OFFSET + 8L * i);
            }
            return new Snapshot((long) LONG.getAcquire(m, UPDATED_OFFSET), values);
        });
    }

    /** A status as read: {@code updatedMillis} is 0 until the first publication. */
    public record Snapshot(long updatedMillis, long[] values) {
        public long get(Field f) {
            return values[f.ordinal()];
        }
    }

    /** Removes the file and unmaps it: only its owner closes a status file. */
    @Override
    public void close() {
        file.unlink();
        file.close();
    }
}
