package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.exceptions.ProducersGoneException;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ShmDirectory;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.testing.TestThreads;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;

/**
 * The queue as a long-lived service sees it: consumers come and go without ending the
 * stream, a message a consumer cannot take for a resource limit goes back to the queue,
 * and timeouts hold whatever a hostile writer does to the file.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class QueueServiceSemanticsTest {
    @RegisterExtension
    final TempShm shm = new TempShm();
    @RegisterExtension
    final TestThreads threads = new TestThreads();
    private final ShmDirectory dir = shm.directory();

    private static ResourceLimitException limit(MemorySegment cell, long offset, int length) {
        throw new ResourceLimitException("test: every peer entry held");
    }

    @Test
    void aConsumersCloseEndsNothingAndTheQueuedMessagesWaitForTheNextConsumer() throws Exception {
        try (Refshare rs = Refshare.open(shm.config()); ShareQueue producer = rs.createQueue(4)) {
            for (int i = 0; i < 3; i++) {
                try (Tensor t = rs.allocateBytes(256)) {
                    Patterns.fill(t.data(), i);
                    producer.put(t);
                }
            }
            try (ShareQueue leaving = rs.openQueue(producer.name()); Tensor t = leaving.take()) {
                assertEquals(-1, Patterns.firstMismatch(t.data(), 0));
            }
            assertFalse(Internals.stats(producer).closed(), "a consumer's close does not end the stream");
            try (Tensor t = rs.allocateBytes(256)) {
                Patterns.fill(t.data(), 3);
                assertTrue(producer.offer(t, 1, SECONDS), "and the producer goes on");
            }
            try (ShareQueue next = rs.openQueue(producer.name())) {
                for (int i = 1; i < 4; i++) {
                    try (Tensor t = next.poll(1, SECONDS)) {
                        assertNotNull(t, "message " + i + " waited for the next consumer");
                        assertEquals(-1, Patterns.firstMismatch(t.data(), i));
                    }
                }
                producer.endOfStream();
                QueueClosedException end = assertThrows(QueueClosedException.class, next::take);
                assertFalse(end instanceof ProducersGoneException, "ended by a producer, not by its death");
            }
        }
    }

    @Test
    void aMessageGivenBackForAResourceLimitIsDeliveredOnceToAnotherConsumer() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); ShmQueue other = ShmQueue.open(dir, q.name())) {
            assertTrue(q.offer(new byte[] {1}));
            assertTrue(q.offer(new byte[] {2}));
            assertThrows(ResourceLimitException.class, () -> q.poll(1, SECONDS, QueueServiceSemanticsTest::limit),
                    "the limit reaches the caller of poll");
            assertEquals(0, q.stats().taken(), "nothing was consumed");
            assertArrayEquals(new byte[] {2}, other.poll(1, SECONDS));
            assertArrayEquals(new byte[] {1}, other.poll(1, SECONDS), "the given-back message, adopted");
            assertNull(other.poll());
            assertNull(q.poll(50, MILLISECONDS), "delivered exactly once");
            assertEquals(2, q.stats().taken());
        }
    }

    @Test
    void aGivenBackMessageInTheProducersWayIsRepublishedAndDeliveredOnce() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 1, 32); ShmQueue consumer = ShmQueue.open(dir, q.name())) {
            assertTrue(q.offer(new byte[] {1}));
            assertThrows(ResourceLimitException.class,
                    () -> consumer.poll(1, SECONDS, QueueServiceSemanticsTest::limit));
            // the only cell is held "given back"; the producer waiting for it republishes it in place
            Future<Boolean> second = threads.submit(() -> q.offer(new byte[] {2}, 10, SECONDS));
            assertArrayEquals(new byte[] {1}, consumer.poll(10, SECONDS));
            assertTrue(second.get(10, SECONDS));
            assertArrayEquals(new byte[] {2}, consumer.poll(10, SECONDS));
            assertNull(consumer.poll(50, MILLISECONDS), "nothing twice");
        }
    }

    @Test
    void theGivenBackMarkIsAReservedClaimantSoATableHoldsAtMost65535Entries() {
        assertEquals(65_535, Geometry.of(1, 32, 65_535).participantCapacity());
        assertThrows(IllegalArgumentException.class, () -> Geometry.of(1, 32, 65_536));
        assertEquals(ShmQueueLayout.MAX_PARTICIPANTS, ShmQueueLayout.RETURNED);
    }

    @Test
    void timedCallsReturnByTheirDeadlineWhileAHostileWriterScribblesOnTheQueue() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 8, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            Geometry g = Geometry.of(8, 32, ShmQueueLayout.DEFAULT_PARTICIPANTS);
            AtomicBoolean stop = new AtomicBoolean();
            Future<?> hostile = threads.submit(() -> scribble(view.segment(), g, stop));
            try {
                long worst = 0;
                for (int i = 0; i < 20; i++) {
                    long start = System.nanoTime();
                    try {
                        if (i % 2 == 0) {
                            q.poll(200, MILLISECONDS);
                        } else {
                            q.offer(new byte[] {1}, 200, MILLISECONDS);
                        }
                    } catch (RefshareException damaged) {
                        // a corrupt-file verdict is a fine answer: it came in time
                    }
                    worst = Math.max(worst, (System.nanoTime() - start) / 1_000_000);
                }
                assertTrue(worst < 700, "a 200 ms poll/offer returned within 700 ms on a scribbled file: " + worst);
            } finally {
                stop.set(true);
                hostile.get(10, SECONDS);
            }
        }
    }

    @Test
    void aShareQueuePollReturnsByItsDeadlineWhenEveryMessageIsGarbage() throws Exception {
        try (Refshare rs = Refshare.open(shm.config()); ShareQueue queue = rs.createQueue(8);
             QueueFileView view = new QueueFileView(dir, queue.name())) {
            Geometry g = Geometry.of(8, io.refshare.wire.DescriptorCodec.MAX_ENCODED_BYTES,
                    ShmQueueLayout.DEFAULT_PARTICIPANTS);
            AtomicBoolean stop = new AtomicBoolean();
            Future<?> hostile = threads.submit(() -> publishGarbage(view.segment(), g, stop));
            try {
                for (int i = 0; i < 5; i++) {
                    long start = System.nanoTime();
                    assertNull(queue.poll(200, MILLISECONDS), "garbage is never a tensor");
                    long millis = (System.nanoTime() - start) / 1_000_000;
                    assertTrue(millis < 700, "returned within 700 ms: " + millis);
                }
                assertTrue(queue.rejected() > 5, "the garbage kept coming and was rejected: " + queue.rejected());
            } finally {
                stop.set(true);
                hostile.get(10, SECONDS);
            }
        }
    }

    @Test
    void aRepeatedWarningIsLoggedOncePerInterval() {
        RepeatedWarning warning = new RepeatedWarning(System.getLogger("test.repeated"), 60_000_000_000L);
        assertTrue(warning.warn("first"));
        for (int i = 0; i < 10_000; i++) {
            assertFalse(warning.warn("again"), "within the interval only counted");
        }
        RepeatedWarning often = new RepeatedWarning(System.getLogger("test.repeated"), 0);
        assertTrue(often.warn("a"));
        assertTrue(often.warn("b"), "a zero interval logs every one");
    }

    /** Random words into the hints, cell words and lengths, as fast as it can. */
    private static void scribble(MemorySegment m, Geometry g, AtomicBoolean stop) {
        SplittableRandom random = new SplittableRandom(7);
        while (!stop.get()) {
            long[] targets = {ShmQueueLayout.HEAD_OFFSET, ShmQueueLayout.TAIL_OFFSET,
                    g.cellOffset(random.nextInt(g.capacity())) + ShmQueueLayout.CELL_WORD};
            long at = targets[random.nextInt(targets.length)];
            m.set(ShmQueueLayout.LE_LONG, at, random.nextInt(4) == 0 ? random.nextLong(16) : random.nextLong());
            m.set(ShmQueueLayout.LE_INT, g.cellOffset(random.nextInt(g.capacity())) + ShmQueueLayout.CELL_LENGTH_FIELD,
                    random.nextInt(64) - 8);
        }
    }

    /** Keeps the head cell FULL with bytes that are no message. */
    private static void publishGarbage(MemorySegment m, Geometry g, AtomicBoolean stop) {
        SplittableRandom random = new SplittableRandom(11);
        while (!stop.get()) {
            long h = m.get(ShmQueueLayout.LE_LONG, ShmQueueLayout.HEAD_OFFSET);
            long cell = g.cellOffset((int) Long.remainderUnsigned(h, g.capacity()));
            long word = m.get(ShmQueueLayout.LE_LONG, cell + ShmQueueLayout.CELL_WORD);
            if (ShmQueueLayout.state(word) == ShmQueueLayout.FREE && ShmQueueLayout.position(word) == h) {
                for (int i = 0; i < 40; i++) {
                    m.set(java.lang.foreign.ValueLayout.JAVA_BYTE, cell + ShmQueueLayout.CELL_PAYLOAD + i,
                            (byte) random.nextInt());
                }
                m.set(ShmQueueLayout.LE_INT, cell + ShmQueueLayout.CELL_LENGTH_FIELD, 40);
                ShmQueueLayout.LONG.setVolatile(m, cell + ShmQueueLayout.CELL_WORD, ShmQueueLayout.full(h));
            }
            Thread.onSpinWait();
        }
    }
}
