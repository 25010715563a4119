package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.exceptions.ProducersGoneException;
import io.refshare.Refshare;
import io.refshare.inspect.Janitor;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The only producer (the queue's creator) is SIGKILLed with messages queued: a consumer
 * takes every one of them, every byte as sent, and then learns that the stream ended by
 * the producers' death ({@link ProducersGoneException}) within 2 s instead of waiting
 * forever; also when a janitor sweep ran between the death and the drain.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ProducersGoneTest {
    private static final int COUNT = 40;

    @Test
    void consumersDrainWhatADeadProducerQueuedThenLearnTheStreamEnded() throws Exception {
        drainAfterTheProducersDeath(false);
    }

    @Test
    void alsoWhenTheJanitorSweptBetweenTheDeathAndTheDrain() throws Exception {
        drainAfterTheProducersDeath(true);
    }

    @Test
    void aTakeWaitingOnAnEmptyQueueEndsWithinTwoSecondsOfTheDeath() throws Exception {
        try (TempShm shm = new TempShm()) {
            ChildJvm producer = ChildJvm.start(ChannelChildMain.class, "QueueCreatorMain", shm.path().toString(), "8", "3");
            try (producer; Refshare rs = Refshare.open(shm.config())) {
                String name = producer.expect("QUEUE");
                producer.expect("SENT");
                try (ShareQueue consumer = rs.openQueue(name)) {
                    for (int i = 0; i < 3; i++) {
                        consumer.take().close();
                    }
                    assertNull(consumer.poll(300, TimeUnit.MILLISECONDS), "drained; the producer lives: nothing ends");
                    CompletableFuture<String> waiting = CompletableFuture.supplyAsync(() -> {
                        try {
                            consumer.take().close();
                            return "a message";
                        } catch (ProducersGoneException gone) {
                            return "gone";
                        } catch (Exception other) {
                            return other.toString();
                        }
                    });
                    Thread.sleep(300); // asleep in take()
                    producer.kill();
                    long killed = System.nanoTime();
                    assertEquals("gone", waiting.get(10, TimeUnit.SECONDS));
                    long millis = (System.nanoTime() - killed) / 1_000_000;
                    System.out.println("a waiting take() ended " + millis + " ms after the producer's SIGKILL");
                    assertTrue(millis < 2_000, "within 2 s: " + millis + " ms");
                }
            }
            Janitor.sweep(shm.directory(), false);
        }
    }

    @Test
    void aProducerOutlivingItsDeadCreatorKeepsTheStreamAndItsLastCloseReturnsWhatIsQueued() throws Exception {
        try (TempShm shm = new TempShm()) {
            ChildJvm creator = ChildJvm.start(ChannelChildMain.class, "QueueCreatorMain", shm.path().toString(), "8", "0");
            try (creator; Refshare rs = Refshare.open(shm.config())) {
                String name = creator.expect("QUEUE");
                creator.expect("SENT");
                ShareQueue producer = rs.openQueue(name);
                creator.kill();
                try (ShareQueue consumer = rs.openQueue(name)) {
                    for (int i = 0; i < 5; i++) {
                        try (Tensor t = rs.allocateBytes(1024)) {
                            producer.put(t);
                        }
                    }
                    for (int i = 0; i < 3; i++) {
                        consumer.take().close();
                    }
                }
                // the creator is dead but a producer lives: a consumer drains and waits, nothing ends
                try (ShareQueue consumer = rs.openQueue(name)) {
                    consumer.take().close();
                    consumer.take().close();
                    assertNull(consumer.poll(600, TimeUnit.MILLISECONDS), "a live producer keeps the stream open");
                }
                for (int i = 0; i < 2; i++) {
                    try (Tensor t = rs.allocateBytes(1024)) {
                        assertTrue(producer.offer(t, 1, TimeUnit.SECONDS), "no consumer: the queue fills, no error");
                    }
                }
                assertEquals(2, rs.stats().limboBlocks());
                producer.close(); // the producer side's last close, no consumer attached
                assertTrue(rs.awaitLimboEmpty(java.time.Duration.ofSeconds(10)), "the queued messages came back");
                try (ShareQueue late = rs.openQueue(name)) {
                    QueueClosedException end = assertThrows(QueueClosedException.class, late::take);
                    assertFalse(end instanceof ProducersGoneException, "ended by its last producer's decision");
                }
            }
            Janitor.sweep(shm.directory(), false);
            assertEquals(java.util.List.of(), shm.files().stream().filter(n -> !n.contains("-life-")).toList());
        }
    }

    private static void drainAfterTheProducersDeath(boolean sweepInBetween) throws Exception {
        try (TempShm shm = new TempShm()) {
            ChildJvm producer = ChildJvm.start(ChannelChildMain.class, "QueueCreatorMain", shm.path().toString(), "64",
                    Integer.toString(COUNT));
            try (producer; Refshare rs = Refshare.open(shm.config())) {
                String name = producer.expect("QUEUE");
                producer.expect("SENT");
                try (ShareQueue first = rs.openQueue(name); ShareQueue second = rs.openQueue(name)) {
                    producer.kill();
                    if (sweepInBetween) {
                        Janitor.sweep(shm.directory(), false);
                    }
                    boolean[] seen = new boolean[COUNT];
                    for (int i = 0; i < COUNT; i++) {
                        ShareQueue consumer = i % 2 == 0 ? first : second;
                        try (Tensor t = consumer.poll(10, TimeUnit.SECONDS)) {
                            assertNotNull(t, "message " + i + " of " + COUNT + " queued by the dead producer");
                            long id = t.data().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                            assertTrue(id >= 0 && id < COUNT && !seen[(int) id], "id " + id + " once");
                            seen[(int) id] = true;
                            assertEquals(64 + (id % 16) * 512, t.data().byteSize());
                            assertEquals(-1, Patterns.firstMismatch(t.data().asSlice(8), id), "every byte of " + id);
                        }
                    }
                    assertEquals(0, first.rejected() + second.rejected());
                    long drained = System.nanoTime();
                    assertThrows(ProducersGoneException.class, first::take);
                    long millis = (System.nanoTime() - drained) / 1_000_000;
                    System.out.println("take() ended by the producers' death " + millis + " ms after the drain");
                    assertTrue(millis < 2_000, "take() ended within 2 s: " + millis + " ms");
                    assertThrows(ProducersGoneException.class, second::take, "every consumer sees it");
                    assertThrows(ProducersGoneException.class, () -> first.poll(1, TimeUnit.MILLISECONDS));
                    assertTrue(Internals.stats(first).closed());
                }
            }
            Janitor.sweep(shm.directory(), false);
            assertEquals(java.util.List.of(), shm.files().stream().filter(n -> !n.contains("-life-")).toList(),
                    "after the janitor only life files (TempShm checks those) may be left");
        }
    }
}
