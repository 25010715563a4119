package io.refshare;

import io.refshare.tensor.DType;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.LongStream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A receiver that meets its process's limits (its open files, its heap) while it takes a
 * message: not the message's fault, so the message goes back to the queue and the call says
 * which limit was reached; once the limit is no longer reached the message is received,
 * intact. Before 2026-11-28 a consumer out of open files rejected the message (dropped, and
 * counted in {@code rejected()}), and one out of heap after the token's claim lost it, its
 * reference held until the consumer's close.
 */
class ProcessLimitsTest {

    @Test
    void aConsumerOutOfOpenFilesGivesTheMessageBackAndTakesItLater() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare second = Refshare.open(shm.config())) {
            ShareQueue q = producer.createQueue(4);
            put(producer, q, 1L);
            // at most 256 open files, for good: the shell lowers both limits, the JVM cannot raise them
            List<String> ulimit = List.of("bash", "-c", "ulimit -n 256 && exec \"$@\"", "bash");
            try (ChildJvm child = ChildJvm.startUnder(ulimit, new String[0],
                    OutOfFilesConsumerMain.class, shm.path().toString(), q.name())) {
                assertEquals("VALUE 1", child.read());
                put(second, q, 2L); // another sender: a segment and a counter file the consumer has not opened
                child.send("FILL");
                String limited = child.read();
                assertTrue(limited.startsWith("LIMIT ") && limited.contains("EMFILE"), limited);
                assertEquals("REJECTED 0", child.read());
                child.send("FREE");
                assertEquals("VALUE 2", child.read(), "the message waited in the queue");
                assertEquals("REJECTED 0", child.read());
                assertEquals(0, child.waitFor());
            }
            q.close();
            assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)));
            assertTrue(second.awaitLimboEmpty(Duration.ofSeconds(5)));
        }
    }

    /**
     * A consumer whose heap is full at every take, given a few small objects more after each
     * {@link OutOfMemoryError} ({@link OutOfHeapConsumerMain}): each take fails at each allocation
     * of its path in turn, before and after the claim of the message's token, until it has room.
     * Every message arrives once, none is rejected, every reference is back at the producer
     * while the consumer still runs (so no failed take kept one), and the consumer's background
     * threads are still running.
     */
    @Test
    void aConsumerOutOfHeapGivesEachMessageBackUntilItCanTakeIt() throws Exception {
        int count = 8;
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             ShareQueue q = producer.createQueue(count + 1)) {
            for (long v = 0; v <= count; v++) {
                put(producer, q, v);
            }
            String[] smallHeap = {"-Xms24m", "-Xmx24m", "-XX:+UseSerialGC", "-XX:-UseTLAB"};
            try (ChildJvm child = ChildJvm.startWith(smallHeap, OutOfHeapConsumerMain.class, shm.path().toString(),
                    q.name(), String.valueOf(count - 1))) { // the first two are taken with room
                Set<Long> values = new TreeSet<>();
                List<String> lines = new ArrayList<>();
                int failures = 0;
                for (int i = 0; i <= count; i++) {
                    lines.add(child.read());
                    String[] w = lines.getLast().split(" ");
                    assertEquals("VALUE", w[0], lines.toString());
                    assertTrue(values.add(Long.parseLong(w[1])), "received once: " + lines);
                    failures += Integer.parseInt(w[3]);
                }
                assertEquals(LongStream.rangeClosed(0, count).boxed().toList(), List.copyOf(values));
                assertEquals("BACKGROUND 2", child.read(), "the collector and the housekeeper outlived the full heap");
                assertEquals("REJECTED 0", child.read());
                assertTrue(failures >= count - 1, "each take after the first two met a full heap: " + lines);
                assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)),
                        "every reference is back while the consumer runs: " + producer.stats());
                child.send("EXIT");
                assertEquals(0, child.waitFor());
            }
        }
    }

    private static void put(Refshare rs, ShareQueue q, long value) throws InterruptedException {
        try (Tensor t = rs.allocate(DType.INT64, 4)) {
            t.data().set(ValueLayout.JAVA_LONG, 0, value);
            q.put(t);
        }
    }
}
