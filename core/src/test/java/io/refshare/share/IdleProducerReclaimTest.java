package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.counter.CounterFileLayout;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.HexFormat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    /**
     * A counter file retires with its last token, and the next file starts only with the next
     * share. Until then the collector sleeps on the retired file's release word, where the
     * tokens handed out last are: a release into it wakes the collector (before, it napped
     * {@value Collector#SLEEP_MILLIS} ms at a time with no file to sleep on).
     */
    @Test
    void theCollectorSleepsOnTheFileThatRetiredWithTheLastToken() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config().withSlotsPerCounterFile(2));
             Refshare consumer = Refshare.open(shm.config())) {
            byte[] first;
            byte[] last;
            try (Tensor a = producer.allocate(DType.UINT8, 64); Tensor b = producer.allocate(DType.UINT8, 64)) {
                first = producer.share(a);
                last = producer.share(b); // the file's last slot: it retires, and no file is current
            }
            String file = DescriptorCodec.decode(last).counterFileName();
            assertEquals(file, DescriptorCodec.decode(first).counterFileName());
            Tensor held = consumer.receive(last);
            consumer.receive(first).close();
            Eventually.await(() -> producer.stats().limboBlocks() == 1, "the block released first is collected");
            Eventually.await(() -> collectorWaiting(shm, file),
                    "the collector sleeps on the retired file while a block of it waits");
            held.close();
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)), "the last block comes back too");
        }
    }

    private static boolean collectorWaiting(TempShm shm, String counterFile) {
        try (ShmFile f = shm.directory().open(counterFile, ShmKind.COUNTERS, CounterFileLayout.HEADER_LENGTH)) {
            return f.segment().get(ValueLayout.JAVA_LONG, CounterFileLayout.COLLECTOR_WAITING_OFFSET) != 0;
        }
    }
}
