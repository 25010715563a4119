package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.Refshare;
import io.refshare.inspect.Janitor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The producer is killed with SIGKILL mid-stream: consumers go on reading valid data (what
 * they hold, and what is still queued) to the end, their closes succeed quietly, and the
 * janitor leaves the directory empty.
 */
class ProducerDeathTest {

    @Test
    void consumersReadValidDataToTheEndAndTheJanitorCleansUp() throws Exception {
        try (TempShm shm = new TempShm()) {
            List<ChildJvm> consumers = new ArrayList<>();
            try (Refshare coordinator = Refshare.open(shm.config())) {
                ShareQueue queue = coordinator.createQueue(64);
                try {
                    for (int i = 0; i < 3; i++) {
                        ChildJvm c = ChildJvm.start(ChannelChildMain.class, "ChaosConsumerMain", shm.path().toString(), queue.name());
                        c.expect("READY");
                        consumers.add(c);
                    }
                    ChildJvm producer = ChildJvm.start(ChannelChildMain.class, "QueueProducerMain", shm.path().toString(), queue.name(),
                            "1", "100000000");
                    try {
                        while (Internals.stats(queue).taken() < 20_000) {
                            Thread.sleep(10);
                        }
                    } finally {
                        producer.kill(); // mid-stream, with tensors queued and held by every consumer
                    }
                    queue.endOfStream();
                    long taken = 0;
                    for (ChildJvm c : consumers) {
                        String[] done = c.expect("DONE").split(" ");
                        taken += Long.parseLong(done[0]);
                        assertEquals("0", done[1], "every byte a consumer read after the death was valid");
                        assertEquals(0, c.waitFor(), "and its closes succeeded quietly");
                    }
                    assertTrue(taken >= 20_000);
                } finally {
                    queue.close();
                    consumers.forEach(ChildJvm::kill);
                }
            }
            assertFalse(shm.files().isEmpty(), "the dead producer's files are still there");
            // this process left cleanly (what its last Refshare's close does): no file names it, its life file goes
            assertTrue(shm.directory().leave(), "no file names the closed coordinator any more: " + shm.files());
            Janitor.Report report = Janitor.sweep(shm.directory(), false);
            assertTrue(shm.files().isEmpty(), "refshare gc leaves the directory empty: " + shm.files());
            assertTrue(report.removed().stream().anyMatch(n -> n.contains("-seg-")));
        }
    }
}
