package io.refshare.channel;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.exceptions.RefshareException;
import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.TempShm;
import io.refshare.testing.TestThreads;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ExecutionException;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShmQueueTest {
    @RegisterExtension
    @Order(1)
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();
    @RegisterExtension
    @Order(2) // stopped before the directory is checked: JUnit runs afterEach in reverse order
    final TestThreads threads = new TestThreads();

    @Test
    void messagesComeOutInOrderAcrossManyLaps() {
        try (ShmQueue q = ShmQueue.create(dir, 4, 64)) {
            long next = 0;
            for (long sent = 0; sent < 300; ) {
                for (int i = 0; i < 3; i++) {
                    assertTrue(q.offer(TestMessages.encode(1, sent++)));
                }
                for (int i = 0; i < 3; i++) {
                    byte[] m = TestMessages.check(q.poll());
                    assertEquals(next++, TestMessages.sequence(m));
                }
            }
            assertNull(q.poll());
        }
    }

    @Test
    void emptyAndLargestMessagesPassAndLargerOnesAreRefused() {
        try (ShmQueue q = ShmQueue.create(dir, 2, 100)) {
            byte[] largest = new byte[100];
            largest[99] = 42;
            assertTrue(q.offer(new byte[0]));
            assertTrue(q.offer(largest));
            assertArrayEquals(new byte[0], q.poll());
            assertArrayEquals(largest, q.poll());
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> q.offer(new byte[101]));
            assertTrue(e.getMessage().contains("101 bytes exceeds"), e.getMessage());
            assertThrows(NullPointerException.class, () -> q.offer(null));
        }
    }

    @Test
    void aBatchEndsBeforeAnOversizedMessageAndTheNextCallRefusesIt() {
        try (ShmQueue q = ShmQueue.create(dir, 4, 100)) {
            List<Outgoing> batch = List.of(Outgoing.of(new byte[] {1}), Outgoing.of(new byte[] {2}),
                    Outgoing.of(new byte[101]), Outgoing.of(new byte[] {4}));
            assertEquals(2, q.offerAvailable(batch, 0), "the two before it published, and counted by the caller");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> q.offerAvailable(batch, 2));
            assertTrue(e.getMessage().contains("101 bytes exceeds"), e.getMessage());
            assertEquals(2, q.stats().size(), "nothing published by the refused call");
            assertArrayEquals(new byte[] {1}, q.poll());
            assertArrayEquals(new byte[] {2}, q.poll());
            assertNull(q.poll());
        }
    }

    @Test
    void aFullQueueRefusesUntilAConsumerMakesRoom() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 2, 32)) {
            assertTrue(q.offer(new byte[] {1}));
            assertTrue(q.offer(new byte[] {2}));
            assertFalse(q.offer(new byte[] {3}));
            assertFalse(q.offer(new byte[] {3}, 20, MILLISECONDS), "still full after the timeout");
            assertEquals(2, q.stats().size());
            assertArrayEquals(new byte[] {1}, q.poll());
            assertTrue(q.offer(new byte[] {3}, 0, SECONDS));
            assertArrayEquals(new byte[] {2}, q.poll());
            assertArrayEquals(new byte[] {3}, q.poll());
        }
    }

    @Test
    void pollOnAnEmptyQueueReturnsNullAfterItsTimeout() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 2)) {
            assertNull(q.poll());
            assertNull(q.poll(0, SECONDS));
            assertNull(q.poll(20, MILLISECONDS));
        }
    }

    @Test
    void aSleepingConsumerIsWokenByAnOffer() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            Future<byte[]> taken = threads.submit(() -> q.poll(30, SECONDS));
            view.awaitSleepingConsumer();
            assertTrue(q.offer(new byte[] {9}));
            assertArrayEquals(new byte[] {9}, taken.get());
            assertEquals(0, view.consumersSleeping());
        }
    }

    /**
     * The skip is checked with a spinner count set through the file, as if a consumer in another
     * process spun: a real spinner may see the message and stop counting itself before the
     * signaller reads the count, and then the signaller rightly wakes the sleeper (a wasted
     * wake-up, never a lost one), so a real one cannot make this deterministic.
     */
    @Test
    void aSignallerSkipsItsWakeUpWhileAConsumerSpinsAndMakesItWhenNoneDoes() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            Future<byte[]> first = threads.submit(() -> q.poll(30, SECONDS));
            view.awaitSleepingConsumer();
            view.setConsumersSpinning(1);
            int wakeUps = view.consumerWakeUps();
            assertTrue(q.offer(new byte[] {1}));
            assertEquals(wakeUps, view.consumerWakeUps(), "a spinner would find it: nobody was woken");
            view.setConsumersSpinning(0);
            assertArrayEquals(new byte[] {1}, first.get(), "the sleeper still finds it when its slice ends");

            Future<byte[]> second = threads.submit(() -> q.poll(30, SECONDS));
            view.awaitSleepingConsumer();
            wakeUps = view.consumerWakeUps();
            assertTrue(q.offer(new byte[] {2}));
            assertNotEquals(wakeUps, view.consumerWakeUps(), "with no spinner the sleeper is woken");
            assertArrayEquals(new byte[] {2}, second.get());
        }
    }

    @Test
    void aWaiterThatFindsEnoughSpinnersSleepsAtOnce() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            view.setConsumersSpinning(Spinning.SPINNERS); // as if that many spun in other processes
            Future<byte[]> taken = threads.submit(() -> q.poll(30, SECONDS));
            view.awaitSleepingConsumer();
            assertEquals(Spinning.SPINNERS, view.consumersSpinning(), "it did not spin: its count was undone");
            view.setConsumersSpinning(0);
            assertTrue(q.offer(new byte[] {3}));
            assertArrayEquals(new byte[] {3}, taken.get());
        }
    }

    @Test
    void withAsManyConsumersAsCpusASleepingProducerIsWokenOnceHalfTheCellsAreFree() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            List<ShmQueue> consumers = new ArrayList<>();
            try {
                for (int i = 0; i < Spinning.CPUS; i++) {
                    consumers.add(ShmQueue.open(dir, q.name()));
                    assertNull(consumers.getLast().poll()); // its first poll records it as a consumer
                }
                ShmQueue consumer = consumers.getFirst();
                Future<Boolean> offered = producerAsleepOnAFullQueue(q, consumer, view);
                int wakeUps = view.producerWakeUps();
                assertArrayEquals(new byte[] {1}, consumer.poll());
                assertEquals(wakeUps, view.producerWakeUps(), "three of four cells taken: no wake-up yet");
                assertArrayEquals(new byte[] {2}, consumer.poll());
                assertTrue(offered.get(), "woken with half the cells free");
                assertNotEquals(wakeUps, view.producerWakeUps());
                for (byte b = 3; b <= 5; b++) {
                    assertArrayEquals(new byte[] {b}, consumer.poll());
                }
            } finally {
                consumers.forEach(ShmQueue::close);
            }
        }
    }

    @Test
    void withFewerConsumersThanCpusEveryFreedCellWakesASleepingProducer() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); ShmQueue consumer = ShmQueue.open(dir, q.name());
                QueueFileView view = new QueueFileView(dir, q.name())) {
            assumeTrue(Spinning.CPUS > 1, "one CPU: a single consumer already crowds it");
            Future<Boolean> offered = producerAsleepOnAFullQueue(q, consumer, view);
            int wakeUps = view.producerWakeUps();
            assertArrayEquals(new byte[] {1}, consumer.poll());
            assertTrue(offered.get());
            assertNotEquals(wakeUps, view.producerWakeUps(), "woken by the first freed cell");
        }
    }

    /**
     * Passes {@link CrowdedConsumers#TAKES_PER_COUNT} messages through {@code consumer} (so it
     * has counted the consumers), fills {@code q} (capacity 4) with 1 to 4, and starts an offer of
     * 5 that sleeps for room.
     */
    private Future<Boolean> producerAsleepOnAFullQueue(ShmQueue q, ShmQueue consumer, QueueFileView view)
            throws InterruptedException {
        for (int i = 0; i < CrowdedConsumers.TAKES_PER_COUNT; i++) {
            assertTrue(q.offer(new byte[] {0}));
            assertNotNull(consumer.poll());
        }
        for (byte b = 1; b <= 4; b++) {
            assertTrue(q.offer(new byte[] {b}));
        }
        Future<Boolean> offered = threads.submit(() -> q.offer(new byte[] {5}, 30, SECONDS));
        view.awaitSleepingProducer();
        return offered;
    }

    @Test
    void aSignallerSkipsItsWakeUpWhileOneIsPendingAndTheSleeperClearsTheFlag() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 1, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            assertTrue(q.offer(new byte[] {1}));
            Future<Boolean> offered = threads.submit(() -> q.offer(new byte[] {2}, 30, SECONDS));
            view.awaitSleepingProducer();
            view.setProducerWakePending(1); // as if another consumer's wake-up were on its way
            int wakeUps = view.producerWakeUps();
            assertArrayEquals(new byte[] {1}, q.poll());
            assertEquals(wakeUps, view.producerWakeUps(), "no second wake-up while one is pending");
            assertTrue(offered.get(), "the sleeper still finds the room when its sleep slice ends");
            assertEquals(0, view.producerWakePending(), "cleared by the sleeper, before it looked again");
            assertArrayEquals(new byte[] {2}, q.poll());
        }
    }

    @Test
    void aSleeperClearsAWakeUpPendingForNobodyBeforeItSleeps() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            view.setConsumerWakePending(1); // a wake-up that reached nobody: its sleeper had left on its own
            Future<byte[]> taken = threads.submit(() -> q.poll(30, SECONDS));
            view.awaitSleepingConsumer();
            assertEquals(0, view.consumerWakePending());
            int wakeUps = view.consumerWakeUps();
            assertTrue(q.offer(new byte[] {4}));
            assertArrayEquals(new byte[] {4}, taken.get());
            assertNotEquals(wakeUps, view.consumerWakeUps(), "woken, not left to its sleep slice");
        }
    }

    @Test
    void aSleepingProducerIsWokenByAPoll() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 1, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            assertTrue(q.offer(new byte[] {1}));
            Future<Boolean> offered = threads.submit(() -> q.offer(new byte[] {2}, 30, SECONDS));
            view.awaitSleepingProducer();
            assertArrayEquals(new byte[] {1}, q.poll());
            assertTrue(offered.get());
            assertArrayEquals(new byte[] {2}, q.poll());
            assertEquals(0, view.producersSleeping());
        }
    }

    @Test
    void anInterruptedWaiterLeavesWithInterruptedException() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 2); QueueFileView view = new QueueFileView(dir, q.name())) {
            Future<byte[]> taken = threads.submit(() -> q.poll(30, SECONDS));
            view.awaitSleepingConsumer();
            taken.cancel(true);
            while (view.consumersSleeping() != 0) {
                Thread.sleep(1);
            }
            Thread.currentThread().interrupt();
            assertThrows(InterruptedException.class, () -> q.poll(1, SECONDS));
            assertFalse(Thread.interrupted());
        }
    }

    @Test
    void markClosedStopsOffersLetsConsumersDrainThenReportsClosed() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32)) {
            assertTrue(q.offer(new byte[] {1}));
            assertTrue(q.offer(new byte[] {2}));
            assertFalse(q.isClosed());
            q.markClosed();
            q.markClosed();
            assertTrue(q.isClosed());
            QueueClosedException e = assertThrows(QueueClosedException.class, () -> q.offer(new byte[] {3}));
            assertTrue(e.getMessage().contains("accepts no more"), e.getMessage());
            assertThrows(QueueClosedException.class, () -> q.offer(new byte[] {3}, 1, SECONDS));
            assertArrayEquals(new byte[] {1}, q.poll(1, SECONDS));
            assertArrayEquals(new byte[] {2}, q.poll());
            e = assertThrows(QueueClosedException.class, () -> q.poll(1, SECONDS));
            assertTrue(e.getMessage().contains("closed and empty"), e.getMessage());
            assertThrows(QueueClosedException.class, q::poll);
            assertTrue(q.stats().closed());
        }
    }

    @Test
    void markClosedWakesSleepingConsumersAndProducers() throws Exception {
        try (ShmQueue consumerSide = ShmQueue.create(dir, 1, 32);
                ShmQueue producerSide = ShmQueue.open(dir, consumerSide.name());
                QueueFileView view = new QueueFileView(dir, consumerSide.name())) {
            Future<byte[]> taken = threads.submit(() -> consumerSide.poll(60, SECONDS));
            view.awaitSleepingConsumer();
            assertTrue(producerSide.offer(new byte[] {1}));
            assertArrayEquals(new byte[] {1}, taken.get());

            assertTrue(producerSide.offer(new byte[] {2}));
            Future<Boolean> blockedOffer = threads.submit(() -> producerSide.offer(new byte[] {3}, 60, SECONDS));
            view.awaitSleepingProducer();
            consumerSide.markClosed();
            ExecutionException e = assertThrows(ExecutionException.class, blockedOffer::get);
            assertInstanceOf(QueueClosedException.class, e.getCause());

            assertArrayEquals(new byte[] {2}, consumerSide.poll());
            Future<byte[]> afterClose = threads.submit(() -> consumerSide.poll(60, SECONDS));
            e = assertThrows(ExecutionException.class, afterClose::get);
            assertInstanceOf(QueueClosedException.class, e.getCause());
        }
    }

    @Test
    void drainRemovesWhatIsLeftInOrder() {
        try (ShmQueue q = ShmQueue.create(dir, 8, 32)) {
            for (int i = 0; i < 5; i++) {
                assertTrue(q.offer(new byte[] {(byte) i}));
            }
            assertArrayEquals(new byte[] {0}, q.poll());
            List<byte[]> drained = new ArrayList<>();
            assertEquals(4, q.drain(drained::add));
            for (int i = 0; i < 4; i++) {
                assertArrayEquals(new byte[] {(byte) (i + 1)}, drained.get(i));
            }
            assertEquals(0, q.drain(drained::add));
            assertNull(q.poll());

            assertTrue(q.offer(new byte[] {7}));
            q.markClosed();
            drained.clear();
            assertEquals(1, q.drain(drained::add));
            assertArrayEquals(new byte[] {7}, drained.get(0));
            assertThrows(QueueClosedException.class, q::poll);
            QueueStats stats = q.stats();
            assertEquals(6, stats.offered());
            assertEquals(6, stats.taken());
            assertEquals(0, stats.size());
        }
    }

    @Test
    void closingAHandleFailsItsOwnWaitersAndLaterCalls() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 2, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            ShmQueue other = ShmQueue.open(dir, q.name());
            Future<byte[]> taken = threads.submit(() -> other.poll(60, SECONDS));
            view.awaitSleepingConsumer();
            other.close();
            ExecutionException e = assertThrows(ExecutionException.class, taken::get);
            assertInstanceOf(QueueClosedException.class, e.getCause());
            assertTrue(e.getCause().getMessage().contains("closed its handle"), e.getCause().getMessage());
            assertThrows(QueueClosedException.class, () -> other.offer(new byte[1]));
            assertThrows(QueueClosedException.class, other::stats);
            other.close(); // idempotent
            assertFalse(q.isClosed(), "an attached handle's close does not close the queue");
            assertEquals(1, q.stats().participants().size());
            assertTrue(q.offer(new byte[] {5}));
            assertArrayEquals(new byte[] {5}, q.poll());
        }
    }

    @Test
    void theCreatorsCloseMarksClosedAndUnlinksWhileAttachedHandlesDrain() throws Exception {
        ShmQueue creator = ShmQueue.create(dir, 4, 32);
        String name = creator.name();
        try (ShmQueue attached = ShmQueue.open(dir, name)) {
            assertTrue(creator.offer(new byte[] {1}));
            creator.close();
            assertFalse(Files.exists(shm.path().resolve(name)));
            assertTrue(attached.isClosed());
            assertArrayEquals(new byte[] {1}, attached.poll(1, SECONDS));
            assertThrows(QueueClosedException.class, () -> attached.poll(1, SECONDS));
            RefshareException e = assertThrows(RefshareException.class, () -> ShmQueue.open(dir, name));
            assertTrue(e.getMessage().contains("no longer exists"), e.getMessage());
        }
    }

    @Test
    void statsCountPerParticipantAndKeepTheCountsOfDepartedOnes() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 8, 32)) {
            ProcessIdentity me = ProcessIdentity.current();
            assertEquals(me, q.owner());
            try (ShmQueue producer = ShmQueue.open(dir, q.name())) {
                for (int i = 0; i < 3; i++) {
                    assertTrue(producer.offer(new byte[] {(byte) i}));
                }
                assertNotNull(q.poll());
                QueueStats stats = q.stats();
                assertEquals(8, stats.capacity());
                assertEquals(32, stats.maxMessageBytes());
                assertEquals(2, stats.size());
                assertEquals(3, stats.offered());
                assertEquals(1, stats.taken());
                assertEquals(0, stats.rejected());
                assertFalse(stats.closed());
                assertEquals(me, stats.owner());
                assertEquals(2, stats.participants().size());
                QueueParticipant consumer = stats.participants().get(0);
                QueueParticipant producing = stats.participants().get(1);
                assertEquals(me, consumer.process());
                assertTrue(consumer.consumer());
                assertFalse(consumer.producer());
                assertEquals(1, consumer.taken());
                assertTrue(producing.producer());
                assertFalse(producing.consumer());
                assertEquals(3, producing.offered());
            }
            QueueStats after = ShmQueue.inspect(dir, q.name());
            assertEquals(1, after.participants().size(), "inspect does not attach, the producer detached");
            assertEquals(3, after.offered(), "a departed participant's counts stay in the totals");
            assertEquals(1, after.taken());
        }
    }

    @Test
    void theParticipantTableBoundsTheNumberOfOpenHandles() {
        try (ShmQueue q = ShmQueue.create(dir, 2, 16, 2)) {
            ShmQueue second = ShmQueue.open(dir, q.name());
            RefshareException e = assertThrows(RefshareException.class, () -> ShmQueue.open(dir, q.name()));
            assertTrue(e.getMessage().contains("all 2 participant entries"), e.getMessage());
            second.close();
            ShmQueue.open(dir, q.name()).close();
        }
    }

    @Test
    void positionsWrapAroundTheCellWordRangeWithAnyCapacity() {
        long nearWrap = ShmQueueLayout.POSITION_MASK - 10;
        try (ShmQueue q = ShmQueue.createStartingAt(dir, Geometry.of(3, 64, 4), nearWrap)) {
            long next = 0;
            for (long sent = 0; sent < 60; ) {
                for (int i = 0; i < 3; i++) {
                    assertTrue(q.offer(TestMessages.encode(2, sent++)));
                }
                assertFalse(q.offer(new byte[1]), "three of three cells are full");
                assertEquals(next++, TestMessages.sequence(q.poll()));
                assertTrue(q.offer(TestMessages.encode(2, sent++)));
                for (int i = 0; i < 3; i++) {
                    assertEquals(next++, TestMessages.sequence(q.poll()));
                }
            }
            assertNull(q.poll());
            assertEquals(60, q.stats().taken());
        }
    }

    /** A receiver that fails on every message (its cell is freed all the same). */
    private static final Incoming<byte[]> FAILING_RECEIVER = (cell, offset, length) -> {
        throw new IllegalArgumentException("the receiver failed (test)");
    };

    @Test
    void aDeliveryThatFailsStillWakesTheProducerSleepingForRoom() throws Exception {
        wakesTheSleepingProducer(q -> q.poll(0, SECONDS, FAILING_RECEIVER));
    }

    /** Before, a batch woke sleeping producers only for the messages it counted as taken. */
    @Test
    void aBatchWhoseOnlyDeliveryFailedStillWakesTheProducerSleepingForRoom() throws Exception {
        wakesTheSleepingProducer(q -> q.pollAvailable(1, FAILING_RECEIVER, taken -> { }));
    }

    /**
     * protocol.md 9.4: a consumer that finds a message behind the one it polled wakes a sleeper,
     * also when its own delivery failed (before, a failed delivery skipped that pass-on, and a
     * sleeper woken for the failed message slept on). A sleeper is counted in the file here, so
     * that the pass-on's wake-up shows in the futex word without a thread asleep.
     */
    @Test
    void aDeliveryThatFailsPassesTheWakeUpOnToTheMessageBehindIt() throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            assertTrue(q.offer(new byte[] {1}));
            assertTrue(q.offer(new byte[] {2}));
            view.setConsumersSleeping(1);
            try {
                int wakeUps = view.consumerWakeUps();
                assertThrows(IllegalArgumentException.class, () -> q.poll(0, SECONDS, FAILING_RECEIVER));
                assertNotEquals(wakeUps, view.consumerWakeUps(), "a sleeper is woken for the message behind");
            } finally {
                view.setConsumersSleeping(0);
            }
            assertArrayEquals(new byte[] {2}, q.poll(0, SECONDS));
        }
    }

    private interface FailingTake {
        void run(ShmQueue q) throws Exception;
    }

    private void wakesTheSleepingProducer(FailingTake take) throws Exception {
        try (ShmQueue q = ShmQueue.create(dir, 1, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            assertTrue(q.offer(new byte[] {1}));
            Future<Boolean> offered = threads.submit(() -> q.offer(new byte[] {2}, 30, SECONDS));
            view.awaitSleepingProducer();
            int wakeUps = view.producerWakeUps();
            assertThrows(IllegalArgumentException.class, () -> take.run(q));
            assertNotEquals(wakeUps, view.producerWakeUps(), "the sleeping producer is woken for the freed cell");
            assertTrue(offered.get());
        }
    }

}
