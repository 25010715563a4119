package io.refshare.channel;

import io.refshare.exceptions.RefshareException;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import io.refshare.testing.TruncatingOpener;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;

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

    /**
     * The same once the queue's paths are compiled (compiled code gets a fault on the cut
     * mapping late, at its next safepoint check), in this process: a producer's and a
     * consumer's handle of one queue, warmed up, then the cells cut away; every call returns
     * (empty-handed) or throws a RefshareException, never the JVM's InternalError.
     */
    @Test
    void compiledCallsOnACutQueueFileNeverThrowTheJvmsInternalError() throws Exception {
        ShmDirectory dir = new ShmDirectory(shm.path(), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        ShmQueueLayout.Geometry g = ShmQueueLayout.Geometry.of(64, 32, ShmQueueLayout.DEFAULT_PARTICIPANTS);
        for (int round = 0; round < 10; round++) { // the compiled paths are reached in the later rounds
            ShmQueue producer = ShmQueue.create(dir, 64, 32);
            ShmQueue consumer = ShmQueue.open(dir, producer.name());
            byte[] message = {1, 2, 3};
            for (int i = 0; i < 20_000; i++) {
                producer.offer(message);
                consumer.poll();
            }
            producer.offer(message);
            try (FileChannel ch = FileChannel.open(shm.path().resolve(producer.name()), StandardOpenOption.WRITE)) {
                ch.truncate(g.cellsOffset()); // header and participants stay, every cell goes
            }
            int r = round;
            for (ShmQueue q : new ShmQueue[] {consumer, producer}) {
                for (int i = 0; i < 3; i++) {
                    try {
                        if (q == consumer) {
                            q.poll(20, TimeUnit.MILLISECONDS);
                        } else {
                            q.offer(message, 20, TimeUnit.MILLISECONDS);
                        }
                    } catch (RefshareException expected) {
                        // the cut file, reported (returning empty-handed is fine too)
                    } catch (Throwable t) {
                        throw new AssertionError((q == consumer ? "poll" : "offer") + ", round " + r + ": " + t, t);
                    }
                }
            }
            closeQuietly(consumer);
            closeQuietly(producer);
        }
    }

    /**
     * A queue file cut short after another process opened and sized it, before or while it read
     * the file: that process's {@link ShmQueue#inspect} (or {@link QueuedMessages#payloads})
     * throws a RefshareException, never the JVM's fault raw, and leaves the file unmapped. The
     * window is microseconds wide, so the child cuts and restores the file on one thread while
     * it opens the queue afresh on another ({@link TruncatingQueueOpenerMain}, which says why
     * {@link ShmQueue#open} is not among them). The queue is this JVM's, which leaves it alone
     * meanwhile.
     */
    @ParameterizedTest
    @ValueSource(strings = {"inspect", "payloads"})
    void aQueueTruncatedWhileAnotherProcessReadsItIsARefshareException(String how) {
        try (ShmQueue queue = ShmQueue.create(shm.directory(), 4, 32)) {
            queue.offer(new byte[] {1, 2, 3}); // a message for payloads to read
            try (ChildJvm opener = ChildJvm.start(ChannelChildMain.class, "TruncatingQueueOpenerMain",
                    shm.path().toString(), queue.name(), how, "20", "3")) {
                TruncatingOpener.assertMetAndNothingLeft(opener);
            }
        }
    }

    /**
     * A queue file cut to nothing under a process that holds a producer's and a consumer's
     * handle of it: each close detaches and reports the damage as an InvalidDataException, and
     * the process lives on. Before, the closes let the JVM's InternalError through raw (the wake-up
     * of the handle's waiters was the first access to the cut page), and the producer's
     * close ended the stream with a compare-and-set it had not read first.
     */
    @Test
    void closingHandlesOfAQueueFileCutToNothingReportsItAndTheProcessLives() throws Exception {
        try (ChildJvm child = ChildJvm.start(ChannelChildMain.class, "CutQueueCloseMain", shm.path().toString())) {
            String name = child.expect("NAME");
            try (FileChannel ch = FileChannel.open(shm.path().resolve(name), StandardOpenOption.WRITE)) {
                ch.truncate(0);
            }
            child.send("GO");
            for (String handle : new String[] {"CONSUMER", "PRODUCER"}) {
                String outcome = child.expect(handle);
                System.out.println(handle + " close on the cut file: " + outcome);
                assertTrue(outcome.startsWith("refshare InvalidDataException") && outcome.contains("cut short"),
                        handle + ": " + outcome);
            }
            assertEquals("ok", child.expect("REFSHARE"), "refshare closes");
            assertEquals(0, child.waitFor(), "the process lives on");
        }
        assertEquals(0, shm.count("q"), "the creator's close unlinked the queue");
    }

    private static void closeQuietly(ShmQueue q) {
        try {
            q.close();
        } catch (RefshareException damaged) {
            // closing a cut file may report it
        }
    }
}
