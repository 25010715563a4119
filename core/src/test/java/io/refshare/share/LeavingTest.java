package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.counter.CounterFile;
import io.refshare.shm.LifeFile;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.HexFormat;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A consumer that closes cleanly leaves no trace: the references it still held come back,
 * its peer entry in the producer's counter file is free for the next process, and it gives
 * up its life file, since no file in the directory names it any more.
 */
class LeavingTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void aCleanCloseGivesBackItsReferencesItsPeerEntryAndItsLifeFile() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            String counterFile = null;
            try {
                for (int i = 0; i < 2; i++) {
                    try (Tensor t = producer.allocateBytes(10_000)) {
                        Patterns.fill(t.data(), i);
                        byte[] m = producer.share(t);
                        counterFile = DescriptorCodec.decode(m).counterFileName();
                        consumer.send("RECV t" + i + " " + i + " " + HexFormat.of().formatHex(m));
                        assertEquals("OK t" + i, consumer.read());
                    }
                }
                ProcessIdentity child = ProcessIdentity.of(consumer.pid()).orElseThrow();
                assertEquals(1, peersInUse(counterFile));
                assertTrue(hasLifeFile(child), "it holds its life lock while it is registered");
                consumer.send("EXIT"); // closes refshare with both tensors still open
                assertEquals("BYE", consumer.read());
                assertEquals(0, peersInUse(counterFile), "its entry is free before it exits");
                assertFalse(hasLifeFile(child), "and its life file is gone");
                assertEquals(0, consumer.waitFor());
            } finally {
                consumer.kill();
            }
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, producer.stats().reclaimed(), "given back, not reclaimed");
        }
        assertEquals(0, shm.count(ShmKind.STATUS.tag()), "nothing for a janitor to do");
    }

    private int peersInUse(String counterFile) {
        try (CounterFile f = CounterFile.open(shm.directory(), counterFile)) {
            return f.peersInUse();
        }
    }

    private boolean hasLifeFile(ProcessIdentity id) {
        return shm.files().contains(LifeFile.name(shm.directory(), id));
    }
}
