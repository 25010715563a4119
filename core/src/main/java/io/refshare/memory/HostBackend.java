package io.refshare.memory;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Segments in host shared memory: each one is a {@link ShmKind#SEGMENT} file created through
 * {@link ShmDirectory#create} (unguessable name, mode 0600 by default, space reserved so a
 * full directory is an exception at creation and never a SIGBUS later) and mapped
 * read-write into this process.
 *
 * <p>Each file starts with a header page, so that tools can tell its owner like any other
 * refshare file; the memory handed to the allocator follows it:
 * <pre>
 *   0                   8         12        16                  24                  32     4096
 *   +-------------------+---------+---------+-------------------+-------------------+- ... -+----------- ... --+
 *   | magic "RSSEGMT1"  | version | hdrLen  |     owner pid     | owner start ticks | (0)   | memory (size)    |
 *   +-------------------+---------+---------+-------------------+-------------------+- ... -+----------- ... --+
 * </pre>
 * (the common {@link io.refshare.shm.FileHeader}); a page keeps the memory page-aligned.
 *
 * <p>By default a new segment is also pre-faulted ({@link MemorySegment#load()}): the page
 * faults are paid once here, when the allocator grows, instead of on the first write of
 * every block later carved from it. Since the allocator caches segments, that cost is not
 * paid again on reuse.
 */
public final class HostBackend implements SegmentBackend {
    public static final long MAGIC = 0x31544D4745535352L; // "RSSEGMT1"
    public static final int VERSION = 1;
    public static final int HEADER_BYTES = 4096;

    private final ShmDirectory directory;
    private final boolean prefault;

    /** A backend over {@code directory} that pre-faults new segments. */
    public HostBackend(ShmDirectory directory) {
        this(directory, true);
    }

    public HostBackend(ShmDirectory directory, boolean prefault) {
        this.directory = Objects.requireNonNull(directory, "directory");
        this.prefault = prefault;
    }

    public ShmDirectory directory() {
        return directory;
    }

    @Override
    public Segment create(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("segment size must be positive: " + bytes);
        }
        ShmFile file = directory.create(ShmKind.SEGMENT, Math.addExact(HEADER_BYTES, bytes));
        writeHeader(file.segment());
        if (prefault) {
            try {
                file.segment().load();
            } catch (RuntimeException | Error e) {
                file.unlink();
                file.close();
                throw e;
            }
        }
        return new HostSegment(this, file);
    }

    private static void writeHeader(MemorySegment m) {
        ProcessIdentity me = ProcessIdentity.current();
        FileHeader.write(m, VERSION, HEADER_BYTES, me);
        FileHeader.publish(m, MAGIC);
    }

    /** Checks the header of a segment file a consumer mapped by a name from outside. */
    public static void checkHeader(MemorySegment file, String name) {
        FileHeader.check(file, MAGIC, VERSION, "host segment", "segment " + name);
        if (file.byteSize() < HEADER_BYTES) {
            throw new InvalidDataException("segment " + name + " is truncated: " + file.byteSize() + " bytes, its header"
                    + " alone is " + HEADER_BYTES);
        }
    }

    @Override
    public void free(Segment segment) {
        Objects.requireNonNull(segment, "segment");
        if (!(segment instanceof HostSegment host) || host.backend != this) {
            throw new IllegalArgumentException("segment " + segment.name() + " was not created by this host backend ("
                    + directory + ")");
        }
        host.release();
    }

    @Override
    public String toString() {
        return "host segments in " + directory;
    }

    /** A mapped segment file; remembers its backend so a foreign segment is refused on free. */
    private static final class HostSegment implements Segment {
        private final HostBackend backend;
        private final ShmFile file;
        private final AtomicBoolean freed = new AtomicBoolean();

        HostSegment(HostBackend backend, ShmFile file) {
            this.backend = backend;
            this.file = file;
        }

        @Override
        public String name() {
            return file.name();
        }

        @Override
        public long size() {
            return file.size() - HEADER_BYTES;
        }

        @Override
        public long exportOffset() {
            return HEADER_BYTES;
        }

        @Override
        public MemorySegment memory() {
            return file.segment().asSlice(HEADER_BYTES);
        }

        void release() {
            if (!freed.compareAndSet(false, true)) {
                throw new IllegalStateException("segment " + file.name() + " was already freed");
            }
            // the name goes first: even if unmapping fails, no consumer can open it any more
            file.unlink();
            file.close();
        }

        @Override
        public String toString() {
            return file.toString();
        }
    }
}
