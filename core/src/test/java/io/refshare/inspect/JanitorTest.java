package io.refshare.inspect;

import io.refshare.Refshare;
import io.refshare.share.ConsumerMain;
import io.refshare.share.ProducerMain;
import io.refshare.tensor.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

class JanitorTest {

    @Test
    void removesOnlyTheFilesOfDeadProcesses() throws Exception {
        try (TempShm shm = new TempShm(); Refshare live = Refshare.open(shm.config());
             Tensor mine = live.allocateBytes(1000)) {
            ChildJvm producer = ChildJvm.start(ProducerMain.class, shm.path().toString(), "5000", "1");
            String message;
            try {
                message = producer.read();
            } finally {
                producer.kill();
            }
            Files.writeString(shm.path().resolve("not-ours.txt"), "keep me");
            Files.writeString(shm.path().resolve("refshare-seg-0123456789abcdef0123456789abcdef"), "short"); // unreadable
            List<String> before = shm.files();

            Janitor.Report dry = Janitor.sweep(shm.directory(), true);
            assertEquals(before, shm.files(), "a dry run removes nothing");
            Janitor.Report report = Janitor.sweep(shm.directory(), false);
            assertEquals(dry.removed(), report.removed());
            assertEquals(3, report.removed().size(), "the dead producer's segment, counter file and status file: "
                    + report.removed());
            assertTrue(shm.files().contains("not-ours.txt"));
            assertTrue(shm.files().contains("refshare-seg-0123456789abcdef0123456789abcdef"),
                    "a file whose header cannot be read is left alone");
            assertTrue(report.kept().stream().anyMatch(k -> k.contains("alive")), "the live process's files stay");
            assertThrows(RuntimeException.class, () -> live.receive(HexFormat.of().parseHex(message)),
                    "the dead producer's message can no longer be received");
            Files.delete(shm.path().resolve("not-ours.txt"));
            Files.delete(shm.path().resolve("refshare-seg-0123456789abcdef0123456789abcdef"));
        }
    }

    @Test
    void aCounterFileStaysWhileALiveProcessHoldsItsTokens() throws Exception {
        try (TempShm shm = new TempShm(); Refshare consumer = Refshare.open(shm.config())) {
            ChildJvm producer = ChildJvm.start(ProducerMain.class, shm.path().toString(), "5000", "3");
            Tensor held;
            try {
                held = consumer.receive(HexFormat.of().parseHex(producer.read()));
            } finally {
                producer.kill();
            }
            Janitor.Report report = Janitor.sweep(shm.directory(), false);
            assertTrue(report.kept().stream().anyMatch(k -> k.contains("-cnt-") && k.contains("holder")),
                    "kept while we hold a token: " + report.kept());
            assertEquals(-1, Patterns.firstMismatch(held.data(), 3), "memory valid after the producer's death");
            held.close();
            Janitor.Report after = Janitor.sweep(shm.directory(), false);
            assertTrue(after.removed().stream().anyMatch(n -> n.contains("-cnt-")), "gone once nobody alive holds it");
        }
    }
}
