package io.refshare.python;

import io.refshare.Refshare;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.inspect.Janitor;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Reclaimed;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * SIGKILL across languages: a process dies holding references, or a producer dies under its
 * consumers, and the survivors of the other language carry on exactly. What the killed process
 * leaves in the directory is swept with the janitor, the way {@code refshare gc} does it.
 */
class CrossLanguageCrashTest {
    private static final long RECLAIM_WITHIN_NANOS = 5_000_000_000L;

    @RegisterExtension
    final TempShm shm = new TempShm();

    @TempDir
    Path tmp;

    @Test
    void aKilledPythonConsumersReferencesComeBackToTheJavaProducerExactlyOnce() throws Exception {
        try {
            try (Refshare rs = Refshare.open(shm.config()); ShareQueue queue = rs.createQueue(8)) {
                PythonPeer py = PythonPeer.xpeer("consume", shm.path().toString(), queue.name(),
                        tmp.resolve("ids").toString(), "-", "3");
                try {
                    py.expect("READY");
                    for (long id = 0; id < 3; id++) {
                        try (Tensor t = Messages.create(rs, id, 100_000 + id * 4096)) {
                            queue.put(t);
                        }
                    }
                    assertEquals("3 0", py.expect("HELD"), "the Python consumer holds 3 intact messages");
                    assertEquals(3, rs.stats().limboBlocks());
                } finally {
                    py.kill(); // SIGKILL while it holds all three
                }
                System.out.printf("references of the killed Python consumer reclaimed %d ms after its death%n",
                        Reclaimed.await(rs, 3, RECLAIM_WITHIN_NANOS));
                var stats = rs.stats();
                assertEquals(0, stats.limboBlocks(), "reclaimed by the producer's collector alone");
                assertEquals(3, stats.reclaimed(), "each reference once");
                assertEquals(3, stats.collected());
                assertEquals(0, stats.allocator().blocksInUse());
            }
        } finally {
            Janitor.sweep(shm.directory(), false);
        }
    }

    @Test
    void aKilledJavaConsumersReferencesComeBackToThePythonProducerExactlyOnce() throws Exception {
        String dir = shm.path().toString();
        try (PythonPeer py = PythonPeer.xpeer("produce", dir, "8")) {
            String queue = py.expect("QUEUE");
            ChildJvm java = ChildJvm.start(HoldingConsumerMain.class, dir, queue, "3");
            try {
                py.send("PUT 100000 3");
                assertEquals("3", py.expect("PUT"));
                assertEquals("3", java.expect("HELD"), "the Java consumer holds 3 intact messages");
                py.send("LIMBO 0");
                assertEquals("3 0", py.expect("LIMBO"), "3 blocks wait for the Java consumer, none reclaimed yet");
            } finally {
                java.kill(); // SIGKILL while it holds all three
            }
            py.send("LIMBO " + RECLAIM_WITHIN_NANOS / 1e9);
            assertEquals("0 3", py.expect("LIMBO"), "the Python producer reclaimed each reference once, by itself");
            py.send("END");
            py.expect("ENDED");
            assertEquals(0, py.finish());
        } finally {
            Janitor.sweep(shm.directory(), false);
        }
    }

    @Test
    void javaConsumersKeepValidBytesWhenThePythonProducerIsKilled() throws Exception {
        List<Tensor> held = new ArrayList<>();
        try {
            try (Refshare rs = Refshare.open(shm.config())) {
                PythonPeer py = PythonPeer.xpeer("produce", shm.path().toString(), "16");
                try (ShareQueue queue = rs.openQueue(py.expect("QUEUE"))) {
                    try {
                        py.send("PUT 65536 6");
                        py.send("PUT " + Messages.MIB + " 2");
                        assertEquals("6", py.expect("PUT"));
                        assertEquals("8", py.expect("PUT"));
                        for (int i = 0; i < 3; i++) {
                            Tensor t = queue.poll(10, TimeUnit.SECONDS);
                            assertNotNull(t);
                            Messages.verify(t.data());
                            held.add(t);
                        }
                    } finally {
                        py.kill(); // SIGKILL: the producer's memory lives on in the consumers' mappings
                    }
                    for (Tensor t : held) {
                        Messages.verify(t.data()); // still intact after the producer's death
                    }
                    for (int i = 3; i < 8; i++) { // and what it had queued before dying can still be taken
                        Tensor t = queue.poll(10, TimeUnit.SECONDS);
                        assertNotNull(t, "message " + i + " queued before the producer died");
                        assertEquals(Messages.PYTHON_PRODUCER << 32 | i, Messages.verify(t.data()));
                        held.add(t);
                    }
                    for (Tensor t : held) {
                        Messages.verify(t.data());
                        t.close(); // closes quietly although the producer is gone
                    }
                    held.clear();
                }
            }
        } finally {
            held.forEach(Tensor::close);
            Janitor.sweep(shm.directory(), false);
        }
    }

    /** A producer's death ends the stream for its consumers once they drained the queue. */
    @Test
    void theStreamEndsForAJavaConsumerWhenThePythonProducerIsKilled() throws Exception {
        try {
            try (Refshare rs = Refshare.open(shm.config())) {
                PythonPeer py = PythonPeer.xpeer("produce", shm.path().toString(), "4");
                try (ShareQueue queue = rs.openQueue(py.expect("QUEUE"))) {
                    py.send("PUT 4096 2");
                    assertEquals("2", py.expect("PUT"));
                    py.kill();
                    for (int i = 0; i < 2; i++) {
                        try (Tensor t = queue.poll(10, TimeUnit.SECONDS)) {
                            assertNotNull(t, "message " + i + " queued before the producer died");
                            Messages.verify(t.data());
                        }
                    }
                    long drained = System.nanoTime();
                    assertThrows(QueueClosedException.class, () -> queue.poll(10, TimeUnit.SECONDS),
                            "the stream ends once the queue is drained and every producer is dead");
                    long millis = (System.nanoTime() - drained) / 1_000_000;
                    assertTrue(millis < 2_000, "ended " + millis + " ms after the queue was drained");
                } finally {
                    py.kill();
                }
            }
        } finally {
            Janitor.sweep(shm.directory(), false);
        }
    }
}
