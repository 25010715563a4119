package io.refshare;

import io.refshare.tensor.DType;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A receiver that meets its process's limits (here its open files) while it maps a sender's
 * files: not the message's fault, so the message goes back to the queue and the call says which
 * limit was reached; once the limit is no longer reached the message is received, intact.
 * Before 2026-11-28 the message was rejected: dropped, and counted in {@code rejected()}.
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

    private static void put(Refshare rs, ShareQueue q, long value) throws InterruptedException {
        try (Tensor t = rs.allocate(DType.INT64, 4)) {
            t.data().set(ValueLayout.JAVA_LONG, 0, value);
            q.put(t);
        }
    }
}
