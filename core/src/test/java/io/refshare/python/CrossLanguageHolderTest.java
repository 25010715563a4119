package io.refshare.python;

import io.refshare.Refshare;
import io.refshare.SharedHolder;
import io.refshare.Tensor;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A {@link SharedHolder} between Java and Python: versions of 1 KiB to 64 MiB published on one
 * side and acquired, verified byte by byte and released on the other; every replaced version
 * comes back to its publisher.
 */
class CrossLanguageHolderTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void publishedInJavaReadInPython() throws Exception {
        try (Refshare rs = Refshare.open(shm.config())) {
            try (SharedHolder holder = rs.createHolder();
                 PythonPeer py = PythonPeer.xpeer("holder-read", shm.path().toString(), holder.name())) {
                py.expect("READY");
                long version = 1;
                for (long size : Messages.SIZES) {
                    try (Tensor t = Messages.create(rs, version, size)) {
                        holder.publish(t);
                    }
                    py.send("ACQUIRE");
                    assertEquals(version + " " + size + " 0", py.expect("VERSION"), "the current version, intact");
                    py.send("ACQUIRE"); // again: the same version, still intact
                    assertEquals(version + " " + size + " 0", py.expect("VERSION"));
                    version++;
                }
                assertEquals(0, py.finish());
            }
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "every version came back");
            assertEquals(0, rs.stats().allocator().blocksInUse());
        }
    }

    @Test
    void publishedInPythonReadInJava() throws Exception {
        try (PythonPeer py = PythonPeer.xpeer("holder-publish", shm.path().toString());
             Refshare rs = Refshare.open(shm.config())) {
            try (SharedHolder holder = rs.openHolder(py.expect("HOLDER"))) {
                long version = 1;
                for (long size : Messages.SIZES) {
                    py.send("PUBLISH " + version + " " + size);
                    assertEquals(Long.toString(version), py.expect("PUBLISHED"));
                    try (Tensor t = holder.acquire()) {
                        assertEquals(size, t.data().byteSize());
                        assertEquals(version, Messages.verify(t.data()), "the current version, intact");
                    }
                    version++;
                }
                // a reader holding an old version across a publish: the bytes stay valid until it lets go
                try (Tensor old = holder.acquire()) {
                    py.send("PUBLISH " + version + " 4096");
                    assertEquals(Long.toString(version), py.expect("PUBLISHED"));
                    assertEquals(version - 1, Messages.verify(old.data()));
                    try (Tensor current = holder.acquire()) {
                        assertEquals(version, Messages.verify(current.data()));
                    }
                }
            }
            py.send("CLOSE");
            py.expect("CLOSED");
            py.send("LIMBO 10");
            assertEquals("0", py.expect("LIMBO").split(" ")[0], "every version came back to the Python publisher");
            assertEquals(0, py.finish());
        }
    }
}
