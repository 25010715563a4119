package io.refshare.memory;

import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Segments in host shared memory: each one is a {@link ShmKind#SEGMENT} file created through
 * {@link ShmDirectory#create} (unguessable name, mode 0600 by default, space reserved so a
 * full directory is an exception at creation and never a SIGBUS later) and mapped
 * read-write into this process.
 *
 * <p>By default a new segment is also pre-faulted ({@link MemorySegment#load()}): the page
 * faults are paid once here, when the allocator grows, instead of on the first write of
 * every block later carved from it. Since the allocator caches segments, that cost is not
 * paid again on reuse.
 */
public final class HostBackend implements SegmentBackend {
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
        ShmFile file = directory.create(ShmKind.SEGMENT, bytes);
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
            return file.size();
        }

        @Override
        public MemorySegment memory() {
            return file.segment();
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
