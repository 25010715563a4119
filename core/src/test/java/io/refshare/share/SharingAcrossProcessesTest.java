package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A producer (this JVM) and consumers in child JVMs, passing descriptors over their stdin. */
class SharingAcrossProcessesTest {
    private static final HexFormat HEX = HexFormat.of();

    @ParameterizedTest(name = "{0} consumers, tensors of 1 KiB .. {1} MiB")
    @CsvSource({"1, 64", "2, 16", "4, 64"})
    void consumersReadEveryByteAndTheProducersMemoryOutlivesItsHandles(int consumerCount, int maxMiB)
            throws Exception {
        long[] sizes = {1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            List<ChildJvm> consumers = new ArrayList<>();
            try {
                for (int c = 0; c < consumerCount; c++) {
                    consumers.add(ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString()));
                }
                int sent = 0;
                for (long size : sizes) {
                    if (size > (long) maxMiB << 20) {
                        continue;
                    }
                    long seed = size * 7 + consumerCount;
                    String id = "t" + size;
                    try (Tensor t = rs.allocate(DType.FLOAT32, size / 4)) {
                        Patterns.fill(t.data(), seed);
                        for (ChildJvm c : consumers) {
                            c.send("RECV " + id + " " + seed + " " + HEX.formatHex(rs.share(t)));
                        }
                        for (ChildJvm c : consumers) {
                            assertEquals("OK " + id, c.read());
                        }
                    } // the producer drops its handle while every consumer still holds the block
                    sent++;
                    assertEquals(sent, rs.stats().limboBlocks(), "dropped shared blocks wait in the limbo");
                }
                // the producer keeps allocating and writing: the limbo's blocks must not be handed out again
                for (long size : sizes) {
                    if (size <= (long) maxMiB << 20) {
                        try (Tensor t = rs.allocate(DType.UINT8, size)) {
                            Patterns.fill(t.data(), -1);
                        }
                    }
                }
                for (ChildJvm c : consumers) {
                    for (long size : sizes) {
                        if (size <= (long) maxMiB << 20) {
                            c.send("VERIFY t" + size + " " + (size * 7 + consumerCount));
                            assertEquals("OK t" + size, c.read(), "data stays valid after the producer dropped it");
                        }
                    }
                }
                assertEquals(sent, rs.stats().limboBlocks());
                for (ChildJvm c : consumers) {
                    for (long size : sizes) {
                        if (size <= (long) maxMiB << 20) {
                            c.send("CLOSE t" + size);
                            assertEquals("CLOSED t" + size, c.read());
                        }
                    }
                }
                rs.collect();
                var stats = rs.stats();
                assertEquals(0, stats.limboBlocks(), "every consumer closed: the limbo is empty");
                assertEquals(0, stats.limboBytes());
                assertEquals(0, stats.allocator().blocksInUse(), "every block is back in the allocator");
                rs.trim(); // the producer removes its free segments: consumers drop their idle mappings of them
                for (ChildJvm c : consumers) {
                    Eventually.await(() -> {
                        c.send("STATS");
                        return c.read().equals("STATS 0 1");
                    }, "no segment stays mapped; one counter file is kept for more");
                    c.send("EXIT");
                    assertEquals("BYE", c.read());
                    assertEquals(0, c.waitFor());
                }
            } finally {
                consumers.forEach(ChildJvm::close);
            }
        }
    }

    @Test
    void hundredThousandCyclesLeaveNoFileMappingOrCounterBehind() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString())) {
            cycles(rs, consumer, 0, 2_000);
            int[] baseline = footprint(shm, rs, consumer);
            cycles(rs, consumer, 2_000, 102_000);
            consumer.send("SYNC");
            assertEquals("SYNCED 102000 0", consumer.read(), "every cycle received and verified");
            assertEquals(java.util.Arrays.toString(baseline), java.util.Arrays.toString(footprint(shm, rs, consumer)),
                    "files, segments, counter files and mappings back to the baseline");
            consumer.send("EXIT");
            assertEquals("BYE", consumer.read());
        }
    }

    private static void cycles(Refshare rs, ChildJvm consumer, int from, int to) {
        for (int i = from; i < to; i++) {
            long size = 1024 + (i % 3) * 4096;
            try (Tensor t = rs.allocate(DType.UINT8, size)) {
                Patterns.fill(t.data(), i);
                consumer.send("CYCLE " + i + " " + HEX.formatHex(rs.share(t)));
            }
        }
        consumer.send("SYNC");
        consumer.expect("SYNCED");
    }

    /** after trimming cached memory: files in the directory, allocator segments, own counter files, consumer's mappings; limbo must be empty. */
    private static int[] footprint(TempShm shm, Refshare rs, ChildJvm consumer) {
        rs.collect();
        rs.trim();
        var s = rs.stats();
        assertEquals(0, s.limboBlocks(), "consumer closed everything, limbo empty");
        assertEquals(0, s.allocator().blocksInUse());
        // the trim removed the producer's free segments; the consumer drops its idle mappings of
        // them at its next housekeeping round (100 ms), so its count settles rather than drops at once
        String[][] c = new String[1][];
        Eventually.await(() -> {
            consumer.send("STATS");
            c[0] = consumer.expect("STATS").split(" ");
            return c[0][0].equals("0");
        }, "the consumer keeps no segment mapped once the producer removed them");
        assertTrue(s.ownCounterFiles() <= 2, "counter files are unlinked once all their tokens return");
        return new int[]{shm.files().size(), (int) s.allocator().segments(), s.ownCounterFiles(),
                Integer.parseInt(c[0][0]), Integer.parseInt(c[0][1])};
    }
}
