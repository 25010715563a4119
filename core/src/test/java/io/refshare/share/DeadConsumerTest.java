package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.Reclaimed;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import io.refshare.shm.FileHeader;

import java.nio.file.Files;
import java.util.HexFormat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A consumer killed with SIGKILL while it holds blocks: the producer reclaims them, exactly, by itself. */
class DeadConsumerTest {

    @Test
    void theReferencesOfAKilledConsumerComeBackExactlyOnce() throws Exception {
        try (TempShm shm = new TempShm()) {
            try {
                dieAndReclaim(shm);
            } finally {
                removeFilesOfDeadProcesses(shm);
            }
        }
    }

    private static void dieAndReclaim(TempShm shm) throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            try {
                for (int i = 0; i < 3; i++) {
                    try (Tensor t = producer.allocateBytes(100_000)) {
                        Patterns.fill(t.data(), i);
                        consumer.send("RECV t" + i + " " + i + " " + HexFormat.of().formatHex(producer.share(t)));
                        assertEquals("OK t" + i, consumer.read());
                    }
                }
                assertEquals(3, producer.stats().limboBlocks());
            } finally {
                consumer.kill(); // SIGKILL: no close, no shutdown hook
            }
            long millis = Reclaimed.await(producer, 3, 10_000_000_000L);
            System.out.println("references of the killed consumer reclaimed " + millis + " ms after its death");
            var stats = producer.stats();
            assertEquals(0, stats.limboBlocks(), "reclaimed without any allocation or explicit collect");
            assertEquals(3, stats.reclaimed(), "each reference once");
            assertEquals(3, stats.collected());
            assertEquals(0, stats.allocator().blocksInUse());
            assertTrue(millis < 5_000, "reclaimed in " + millis + " ms");
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
