package io.refshare.holder;

import io.refshare.Refshare;
import io.refshare.SharedHolder;
import io.refshare.Tensor;
import io.refshare.shm.FileHeader;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;

/** How the holder tests write a version: its id in the first and last 8 bytes, the id's pattern between. */
final class Versions {
    private static final ValueLayout.OfLong ID = ValueLayout.JAVA_LONG_UNALIGNED;
    /** The size of the versions the cross-process tests publish. */
    static final long BYTES = 16 << 10;

    private Versions() {
    }

    static void fill(MemorySegment m, long id) {
        m.set(ID, 0, id);
        Patterns.fill(m.asSlice(8, m.byteSize() - 16), id);
        m.set(ID, m.byteSize() - 8, id);
    }

    static long id(MemorySegment m) {
        return m.get(ID, 0);
    }

    /** True when the whole version is as {@link #fill} wrote it, and it did not change while being checked. */
    static boolean intact(MemorySegment m) {
        long id = m.get(ID, 0);
        return m.get(ID, m.byteSize() - 8) == id
                && Patterns.firstMismatch(m.asSlice(8, m.byteSize() - 16), id) == -1
                && m.get(ID, 0) == id;
    }

    /** A new version with {@code id}, published; the publisher's own tensor is closed at once. */
    static void publish(Refshare rs, SharedHolder holder, long id) {
        try (Tensor t = rs.allocateBytes(BYTES)) {
            fill(t.data(), id);
            holder.publish(t);
        }
    }

    /** What the janitor does: a killed process leaves its status file behind. */
    static void removeFilesOfDeadProcesses(TempShm shm) throws Exception {
        for (String f : shm.files()) {
            if (!FileHeader.read(shm.path().resolve(f)).owner().isAlive()) {
                Files.delete(shm.path().resolve(f));
            }
        }
    }
}
