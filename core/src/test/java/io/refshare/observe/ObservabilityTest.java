package io.refshare.observe;

import io.refshare.Refshare;
import io.refshare.SharedHolder;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.*;

class ObservabilityTest {
    @TempDir
    Path tmp;

    @Test
    void jfrRecordsSendReceiveReleaseAndTheLimbo() throws Exception {
        Path file = tmp.resolve("refshare.jfr");
        try (TempShm shm = new TempShm(); Recording recording = new Recording()) {
            recording.enable("io.refshare.Send");
            recording.enable("io.refshare.Receive");
            recording.enable("io.refshare.Release");
            recording.enable("io.refshare.LimboEnter");
            recording.enable("io.refshare.LimboCollect");
            recording.start();
            try (Refshare producer = Refshare.open(shm.config()); Refshare consumer = Refshare.open(shm.config())) {
                Tensor received;
                try (Tensor t = producer.allocateBytes(4096)) {
                    received = consumer.receive(producer.share(t));
                }
                received.close();
                assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)));
            }
            recording.stop();
            recording.dump(file);
        }
        Set<String> seen = new TreeSet<>();
        for (RecordedEvent e : RecordingFile.readAllEvents(file)) {
            seen.add(e.getEventType().getName());
        }
        assertTrue(seen.containsAll(Set.of("io.refshare.Send", "io.refshare.Receive", "io.refshare.Release",
                "io.refshare.LimboEnter", "io.refshare.LimboCollect")), "recorded: " + seen);
    }

    @Test
    void tensorsOverAnotherProcesssMemoryCollectedWithoutCloseAreReportedAndReleased() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             SharedHolder holder = producer.createHolder()) {
            ChildJvm consumer = ChildJvm.startWith(new String[]{"-Drefshare.leakDetection=paranoid"},
                    LeakingConsumerMain.class, shm.path().toString());
            try (consumer) {
                try (Tensor t = producer.allocateBytes(10_000); Tensor w = producer.allocateBytes(20_000)) {
                    consumer.send(HexFormat.of().formatHex(producer.share(t)));
                    holder.publish(w);
                    consumer.send(holder.name());
                }
                assertEquals("2", consumer.expect("LEAKS"), "a leaked view and a leaked acquisition, both found");
                holder.clear();
                assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)),
                        "their references were released while the consumer still runs");
                assertEquals(0, producer.stats().reclaimed(), "released, not reclaimed after a death");
                consumer.send("EXIT");
            }
        }
    }
}
