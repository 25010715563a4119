package io.refshare.holder;

import io.refshare.testing.Patterns;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** How the holder tests write a version: its id in the first and last 8 bytes, the id's pattern between. */
final class Versions {
    private static final ValueLayout.OfLong ID = ValueLayout.JAVA_LONG_UNALIGNED;

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
}
