package io.refshare.channel;

import io.refshare.ShareQueue;
import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A consumer that meets a full peer table while receiving: the producer's counter files
 * have one peer entry, and another live consumer holds it. The message is not consumed:
 * the consumer gets a ResourceLimitException naming the limit, nothing is counted as
 * rejected, and once the entry is free the same message is delivered, intact, exactly once.
 */
class PeerLimitAcrossProcessesTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void aMessageMetByAFullPeerTableStaysForAConsumerThatCanTakeIt() throws Exception {
        try (Refshare producer = Refshare.open(shm.config().withPeersPerCounterFile(1));
             ShareQueue queue = producer.createQueue(8)) {
            for (long seed = 1; seed <= 2; seed++) {
                try (Tensor t = producer.allocateBytes(seed * 1024)) {
                    Patterns.fill(t.data(), seed);
                    queue.put(t);
                }
            }
            try (ChildJvm holder = ChildJvm.start(ChannelChildMain.class, "LimitedConsumerMain", shm.path().toString(), queue.name());
                 ChildJvm other = ChildJvm.start(ChannelChildMain.class, "LimitedConsumerMain", shm.path().toString(), queue.name())) {
                holder.expect("READY");
                other.expect("READY");
                holder.send("POLL 5000");
                assertEquals("GOT 1 ok", holder.read(), "the first consumer takes the only peer entry");

                other.send("POLL 500");
                assertEquals("LIMIT ResourceLimitException", other.read(), "the table is full");

                holder.send("EXIT"); // a clean leave frees its peer entry
                assertEquals("BYE 0", holder.read());
                assertEquals(0, holder.waitFor());

                other.send("POLL 5000");
                assertEquals("GOT 2 ok", other.read(), "the message given back is delivered, intact");
                other.send("POLL 200");
                assertEquals("NONE", other.read(), "and only once");
                other.send("EXIT");
                assertEquals("BYE 0", other.read(), "nothing was counted as rejected");
                assertEquals(0, other.waitFor());
            }
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference came back");
        }
    }
}
