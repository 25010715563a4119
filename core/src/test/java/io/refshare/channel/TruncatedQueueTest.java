package io.refshare.channel;

import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A queue file cut short by another process while this one has it mapped: the cells are
 * gone from under the mapping. Calls must return or throw a RefshareException by their
 * timeout, and the process must not crash (a fault on a cut mapping is a SIGBUS the JVM turns
 * into an InternalError on reads, and a crash on a compare-and-set it did not read first).
 */
class TruncatedQueueTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void callsOnACutQueueFileFailWithRefshareExceptionsInTime() throws Exception {
        try (ChildJvm child = ChildJvm.start(ChannelChildMain.class, "TruncatedQueueMain", shm.path().toString())) {
            String name = child.expect("NAME");
            ShmQueueLayout.Geometry g = ShmQueueLayout.Geometry.of(64, 32, ShmQueueLayout.DEFAULT_PARTICIPANTS);
            try (FileChannel ch = FileChannel.open(shm.path().resolve(name), StandardOpenOption.WRITE)) {
                ch.truncate(g.cellsOffset()); // header and participants stay, every cell goes
            }
            child.send("GO");
            for (String call : new String[] {"POLL", "OFFER"}) {
                String outcome = child.expect(call);
                System.out.println(call + " on the cut file: " + outcome);
                assertTrue(outcome.startsWith("refshare ") || outcome.startsWith("returned "), call + ": " + outcome);
                long millis = Long.parseLong(outcome.substring(outcome.lastIndexOf(' ') + 1, outcome.length() - 2));
                assertTrue(millis < 2_000, call + " returned after " + millis + " ms");
            }
            String stats = child.expect("STATS");
            assertTrue(stats.startsWith("refshare ") || stats.startsWith("returned "), "STATS: " + stats);
            String last = child.read();
            assertTrue(last.equals("END") || last.startsWith("CLOSE Refshare") || last.startsWith("CLOSE Invalid"), last);
            assertEquals(0, child.waitFor(), "the process lives on");
        }
    }
}
