package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.util.HexFormat;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * A producer that only watches (it never allocates, drops or collects again) still gets
 * its memory back: each block enters an empty limbo while a consumer process holds it, the
 * consumer lets go later, and the background collector frees it. Each round takes the
 * limbo from empty to one block, the step that wakes a collector parked on an empty limbo.
 * How soon that happens is measured by the benchmarks, not here.
 */
class IdleProducerReclaimTest {
    private static final HexFormat HEX = HexFormat.of();

    @Test
    void aBlockReleasedAfterItEnteredTheLimboIsFreedWithoutTheProducerCollecting() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString())) {
            for (int round = 1; round <= 3; round++) {
                String id = "r" + round;
                try (Tensor t = producer.allocate(DType.UINT8, 64 << 10)) {
                    Patterns.fill(t.data(), round);
                    consumer.send("RECV " + id + " " + round + " " + HEX.formatHex(producer.share(t)));
                    assertEquals("OK " + id, consumer.read());
                }
                assertEquals(1, producer.stats().limboBlocks(), "dropped while the consumer holds it: in the limbo");
                assertEquals(round - 1, producer.stats().collected());

                consumer.send("CLOSE " + id);
                assertEquals("CLOSED " + id, consumer.read());
                int expected = round;
                Eventually.await(() -> producer.stats().collected() == expected, "the collector freed block " + id);
                assertEquals(0, producer.stats().limboBlocks(), "the limbo is empty again");
                assertEquals(0, producer.stats().allocator().blocksInUse(), "the block is back in the allocator");
            }
            consumer.send("EXIT");
            assertEquals("BYE", consumer.read());
            assertEquals(0, consumer.waitFor());
        }
    }
}
