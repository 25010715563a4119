package io.refshare.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.SharedHolder;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertNotNull;

/**
 * A shared holder's file (its header, the holder word, reader rows, version slots with
 * their descriptors) is written by every process that uses it, so a reader opens it as
 * hostile: a holder file of the fuzzer's making is refused with a {@link RefshareException}
 * that says why, or serves acquire, stats, reclamation and close without any other
 * exception, fault or hang.
 */
class HolderFuzzTest {
    private static TempShm shm;
    private static ShmDirectory dir;
    private static Refshare reader;

    @BeforeAll
    static void open() {
        shm = new TempShm();
        dir = shm.directory();
        reader = Refshare.open(shm.config());
    }

    @AfterAll
    static void close() {
        try {
            reader.close(); // its own files go with it; planted ones are removed after each input
        } finally {
            shm.close();
        }
    }

    @FuzzTest(maxDuration = "2m")
    void openFile(byte[] file) {
        String name = Hostile.plant(dir, ShmKind.HOLDER, file);
        try {
            SharedHolder h;
            try {
                h = reader.openHolder(name);
            } catch (RefshareException e) {
                Hostile.refused(e);
                return;
            }
            try (h) {
                try (Tensor t = h.acquire()) {
                    if (t != null) {
                        MemorySegment m = t.data();
                        if (m.byteSize() > 0) {
                            m.get(ValueLayout.JAVA_BYTE, 0);
                            m.get(ValueLayout.JAVA_BYTE, m.byteSize() - 1);
                        }
                    }
                } catch (RefshareException e) {
                    Hostile.refused(e);
                }
                assertNotNull(h.stats());
                try {
                    h.reclaimDeadReaders();
                } catch (RefshareException e) {
                    Hostile.refused(e);
                }
            }
        } finally {
            Hostile.delete(dir.path().resolve(name));
        }
    }
}
