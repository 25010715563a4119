package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/** ShareQueue between real processes: exactly-once delivery, every byte, every count back, no files left. */
class ShareQueueAcrossProcessesTest {
    @TempDir
    Path tmp;

    @Test
    void twoProducersThreeConsumersAHundredThousandMessagesEach() throws Exception {
        int perProducer = 100_000;
        List<ChildJvm> children = new ArrayList<>();
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            ShareQueue queue = rs.createQueue(256);
            try {
                List<ChildJvm> consumers = new ArrayList<>();
                for (int c = 0; c < 3; c++) {
                    ChildJvm child = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), queue.name(),
                            tmp.resolve("ids" + c).toString(), "-", "-1");
                    children.add(child);
                    consumers.add(child);
                    child.expect("READY");
                }
                List<ChildJvm> producers = new ArrayList<>();
                for (int p = 0; p < 2; p++) {
                    ChildJvm child = ChildJvm.start(ChannelChildMain.class, "QueueProducerMain", shm.path().toString(), queue.name(),
                            Integer.toString(p), Integer.toString(perProducer));
                    children.add(child);
                    producers.add(child);
                }
                for (ChildJvm p : producers) {
                    assertEquals(perProducer + " true 0 0", p.expect("DONE"),
                            "sent all; limbo empty, no block in use, no live count");
                    assertEquals(0, p.waitFor());
                }
                queue.close(); // end of stream
                long taken = 0;
                for (ChildJvm c : consumers) {
                    String[] done = c.expect("DONE").split(" ");
                    taken += Long.parseLong(done[0]);
                    assertEquals("0", done[1], "no corrupt byte");
                    assertEquals("0", done[2], "nothing rejected");
                    assertEquals(0, c.waitFor());
                }
                assertEquals(2L * perProducer, taken);
                assertExactlyOnce(2, perProducer, tmp.resolve("ids0"), tmp.resolve("ids1"), tmp.resolve("ids2"));
            } finally {
                queue.close();
                children.forEach(ChildJvm::kill);
            }
        }
    }

    @Test
    void aForwardingChainAcrossThreeProcessesKeepsTheBlockAliveToTheEnd() throws Exception {
        int count = 20_000;
        List<ChildJvm> children = new ArrayList<>();
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            ShareQueue first = rs.createQueue(64);
            ShareQueue second = rs.createQueue(64);
            try {
                ChildJvm last = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), second.name(),
                        tmp.resolve("last").toString(), "-", "-1");
                children.add(last);
                last.expect("READY");
                ChildJvm middle = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), first.name(),
                        tmp.resolve("middle").toString(), second.name(), "-1");
                children.add(middle);
                middle.expect("READY");
                ChildJvm producer = ChildJvm.start(ChannelChildMain.class, "QueueProducerMain", shm.path().toString(), first.name(), "7",
                        Integer.toString(count));
                children.add(producer);
                assertEquals(count + " true 0 0", producer.expect("DONE"),
                        "the producer's memory came back only after the last process of the chain closed it");
                first.close();
                assertEquals(count + " 0 0 true", middle.expect("DONE"), "the forwarder verified and its limbo emptied");
                second.close();
                assertEquals(count + " 0 0 true", last.expect("DONE"));
                for (ChildJvm c : children) {
                    assertEquals(0, c.waitFor());
                }
                assertExactlyOnceFrom(7, count, tmp.resolve("middle"));
                assertExactlyOnceFrom(7, count, tmp.resolve("last"));
            } finally {
                first.close();
                second.close();
                children.forEach(ChildJvm::kill);
            }
        }
    }

    @Test
    void aConsumerLeavingMidStreamEndsNothingAndTheCreatorsCloseReturnsWhatIsQueued() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            ShareQueue queue = rs.createQueue(16);
            try (ChildJvm consumer = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), queue.name(),
                    tmp.resolve("ids").toString(), "-", "100")) {
                consumer.expect("READY");
                long put = 0;
                while (true) {
                    try (Tensor t = rs.allocateBytes(1024)) {
                        t.data().set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, put);
                        Patterns.fill(t.data().asSlice(8), put);
                        boolean sent;
                        while (!(sent = queue.offer(t, 500, TimeUnit.MILLISECONDS)) && consumerAttached(queue)) {
                            // full while the consumer is still there: it is slow (a loaded machine), not gone
                        }
                        if (!sent) {
                            break; // no consumer any more: the queue filled up, the offer timed out
                        }
                        put++;
                    }
                }
                assertEquals("100 0 0 true", consumer.expect("DONE"));
                assertEquals(0, consumer.waitFor());
                assertEquals(100 + 16, put, "the consumer took 100, then the queue filled; its close ended nothing");
                assertFalse(Internals.stats(queue).closed());
                assertEquals(16, rs.stats().limboBlocks(), "the queued messages wait for the next consumer");
            } finally {
                queue.close(); // the creator, no consumer attached: ends the stream, returns what is queued
            }
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "every undelivered message's count came back");
            assertEquals(0, rs.stats().allocator().blocksInUse());
            assertEquals(0, Internals.sharing(rs).liveCounts());
        }
    }

    private static boolean consumerAttached(ShareQueue queue) {
        return Internals.stats(queue).participants().stream().anyMatch(p -> !p.producer());
    }

    @Test
    void aRollingRestartOfTheOnlyConsumerLosesNothing() throws Exception {
        int count = 3_000;
        List<ChildJvm> children = new ArrayList<>();
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            ShareQueue queue = rs.createQueue(32);
            try {
                ChildJvm first = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), queue.name(),
                        tmp.resolve("first").toString(), "-", "1000");
                children.add(first);
                first.expect("READY");
                ChildJvm producer = ChildJvm.start(ChannelChildMain.class, "QueueProducerMain", shm.path().toString(), queue.name(), "0",
                        Integer.toString(count));
                children.add(producer);
                assertEquals("1000 0 0 true", first.expect("DONE"), "the first consumer left cleanly after 1000");
                assertEquals(0, first.waitFor());
                assertFalse(Internals.stats(queue).closed(), "its close did not end the stream");
                ChildJvm second = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), queue.name(),
                        tmp.resolve("second").toString(), "-", "-1");
                children.add(second);
                second.expect("READY");
                assertEquals(count + " true 0 0", producer.expect("DONE"), "every put went through, every count came back");
                assertEquals(0, producer.waitFor());
                queue.endOfStream();
                assertEquals((count - 1000) + " 0 0 true", second.expect("DONE"), "the new consumer took the rest");
                assertEquals(0, second.waitFor());
                assertExactlyOnce(1, count, tmp.resolve("first"), tmp.resolve("second"));
            } finally {
                queue.close();
                children.forEach(ChildJvm::kill);
            }
        }
    }

    @Test
    void hostilePeersAreRejectedAndTheQueueKeepsServing() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue queue = rs.createQueue(64);
             ChildJvm hostile = ChildJvm.start(ChannelChildMain.class, "HostileQueuePeer", shm.path().toString(), queue.name())) {
            assertEquals("true", hostile.expect("SENT"), "an oversized frame is refused at the sender");
            for (int i = 0; i < 10; i++) {
                try (Tensor t = rs.allocateBytes(100)) {
                    Patterns.fill(t.data(), i);
                    queue.put(t);
                }
            }
            for (int i = 0; i < 10; i++) {
                try (Tensor t = queue.poll(10, TimeUnit.SECONDS)) {
                    assertNotNull(t, "a well-behaved message after the hostile ones");
                    assertEquals(-1, Patterns.firstMismatch(t.data(), i));
                }
            }
            assertEquals(2, queue.rejected(), "the garbage and the descriptor lying about its sender");
            hostile.send("EXIT");
            assertEquals(0, hostile.waitFor());
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
        }
    }

    private static void assertExactlyOnce(int producers, int perProducer, Path... files) throws IOException {
        BitSet[] seen = new BitSet[producers];
        for (int p = 0; p < producers; p++) {
            seen[p] = new BitSet(perProducer);
        }
        for (Path f : files) {
            for (long id : ids(f)) {
                int p = (int) (id >>> 32);
                int seq = (int) id;
                assertTrue(p >= 0 && p < producers && seq >= 0 && seq < perProducer, "unknown id " + id);
                assertFalse(seen[p].get(seq), "message " + p + "/" + seq + " delivered twice");
                seen[p].set(seq);
            }
        }
        for (int p = 0; p < producers; p++) {
            assertEquals(perProducer, seen[p].cardinality(), "every message of producer " + p + " delivered");
        }
    }

    private static void assertExactlyOnceFrom(int producer, int count, Path file) throws IOException {
        BitSet seen = new BitSet(count);
        for (long id : ids(file)) {
            assertEquals(producer, (int) (id >>> 32));
            assertFalse(seen.get((int) id), "delivered twice: " + (int) id);
            seen.set((int) id);
        }
        assertEquals(count, seen.cardinality());
    }

    private static List<Long> ids(Path f) throws IOException {
        List<Long> ids = new ArrayList<>();
        try (DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(Files.newInputStream(f)))) {
            while (true) {
                ids.add(in.readLong());
            }
        } catch (EOFException end) {
            return ids;
        }
    }
}
