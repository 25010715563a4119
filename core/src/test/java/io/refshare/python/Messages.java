package io.refshare.python;

import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The messages of the cross-language tests, as the queue test mains and python/peers/xpeer.py
 * write them: the id in the first 8 bytes (little-endian), then {@link Patterns} of the id, so
 * every byte is checked wherever a message arrives.
 */
final class Messages {
    static final long KIB = 1024;
    static final long MIB = 1024 * KIB;
    /** 1 KiB ... 64 MiB: a page and less, several pages, and segments of their own. */
    static final long[] SIZES = {KIB, 4 * KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB};
    /** The producer number that xpeer.py puts in its ids. */
    static final long PYTHON_PRODUCER = 7;

    private Messages() {
    }

    static Tensor create(Refshare rs, long id, long size) {
        Tensor t = rs.allocateBytes(size);
        t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
        Patterns.fill(t.data().asSlice(8), id);
        return t;
    }

    /** The message's id after checking every byte; fails the test on the first wrong one. */
    static long verify(MemorySegment data) {
        long id = data.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        long bad = Patterns.firstMismatch(data.asSlice(8), id);
        if (bad >= 0) {
            throw new AssertionError("message " + Long.toHexString(id) + " of " + data.byteSize()
                    + " bytes: wrong byte at offset " + (8 + bad));
        }
        return id;
    }

    /** Ids written by a consumer (8 bytes big-endian each, as DataOutputStream writes them). */
    static List<Long> ids(Path file) throws IOException {
        List<Long> ids = new ArrayList<>();
        try (DataInputStream in = new DataInputStream(Files.newInputStream(file))) {
            while (true) {
                ids.add(in.readLong());
            }
        } catch (EOFException end) {
            return ids;
        }
    }
}
