package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.Refshare;
import io.refshare.inspect.Janitor;
import io.refshare.shm.ProcessIdentity;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Chaos: a producer streams to three consumer processes while, round after round, a random
 * consumer is killed with SIGKILL (holding references, maybe in the middle of a take) and
 * replaced. After each death every reference it held must come back, exactly (the times
 * it took are reported as p50, p99 and max rather than asserted: a wall-clock bound says
 * more about a loaded 2-core CI machine than about the code); at the end the producer's memory is back to its baseline and, after the
 * janitor, the directory is empty.
 *
 * <p>CI runs {@value #DEFAULT_ROUNDS} rounds; the full 200: {@code ./run-tests -Dtest=ChaosTest
 * -Drefshare.chaos.rounds=200}.
 */
class ChaosTest {
    static final int DEFAULT_ROUNDS = 12;

    @Test
    void killingRandomConsumersMidStreamLeaksNothing() throws Exception {
        int rounds = Integer.getInteger("refshare.chaos.rounds", DEFAULT_ROUNDS);
        Random random = new Random(42);
        try (TempShm shm = new TempShm()) {
            try (Refshare producer = Refshare.open(shm.config())) {
                ShareQueue queue = producer.createQueue(32);
                List<ChildJvm> consumers = new ArrayList<>();
                AtomicBoolean stop = new AtomicBoolean();
                AtomicLong sent = new AtomicLong();
                Thread stream = Thread.ofPlatform().name("chaos-producer").start(() -> {
                    try {
                        while (!stop.get()) {
                            long id = sent.get();
                            try (Tensor t = producer.allocateBytes(4096)) {
                                t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
                                Patterns.fill(t.data().asSlice(8), id);
                                if (queue.offer(t, 100, TimeUnit.MILLISECONDS)) {
                                    sent.incrementAndGet();
                                }
                            }
                        }
                    } catch (InterruptedException | QueueClosedException e) {
                        // stopping
                    }
                });
                try {
                    for (int i = 0; i < 3; i++) {
                        consumers.add(startConsumer(shm, queue));
                    }
                    List<Long> reclaimMillis = new ArrayList<>();
                    for (int round = 0; round < rounds; round++) {
                        Thread.sleep(50 + random.nextInt(100)); // let it run mid-stream
                        int victim = random.nextInt(consumers.size());
                        ChildJvm dead = consumers.get(victim);
                        ProcessIdentity identity = ProcessIdentity.of(dead.pid()).orElseThrow();
                        dead.kill();
                        long died = System.nanoTime();
                        while (Internals.sharing(producer).heldBy(identity) > 0
                                && System.nanoTime() - died < 5_000_000_000L) {
                            Thread.sleep(5);
                        }
                        long millis = (System.nanoTime() - died) / 1_000_000;
                        reclaimMillis.add(millis);
                        assertEquals(0, Internals.sharing(producer).heldBy(identity), "round " + round + ": the dead consumer "
                                + identity + " still holds references after " + millis + " ms");
                        consumers.set(victim, startConsumer(shm, queue));
                    }
                    List<Long> sorted = reclaimMillis.stream().sorted().toList();
                    System.out.println(rounds + " consumers killed; time to reclaim all of one's references: p50 "
                            + percentile(sorted, 50) + " ms, p99 " + percentile(sorted, 99) + " ms, max "
                            + sorted.getLast() + " ms; " + sent.get() + " tensors sent; "
                            + producer.stats().reclaimed() + " references reclaimed");
                    stop.set(true);
                    stream.join();
                    queue.endOfStream();
                    for (ChildJvm c : consumers) {
                        String[] done = c.expect("DONE").split(" ");
                        assertEquals("0", done[1], "no consumer saw a corrupt byte");
                        assertEquals(0, c.waitFor());
                    }
                    assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference came back");
                    assertEquals(0, producer.stats().allocator().blocksInUse(), "allocator back to its baseline");
                    assertEquals(0, Internals.sharing(producer).liveCounts());
                } finally {
                    stop.set(true);
                    stream.join();
                    queue.close();
                    consumers.forEach(ChildJvm::kill);
                }
            }
            // this process left cleanly (what its last Refshare's close does): no file names it, its life file goes
            assertTrue(shm.directory().leave(), "no file names the closed producer any more: " + shm.files());
            var report = Janitor.sweep(shm.directory(), false);
            assertTrue(shm.files().isEmpty(), "after the janitor: " + shm.files() + " (removed " + report.removed() + ")");
        }
    }

    /** The nearest-rank percentile of sorted figures. */
    static long percentile(List<Long> sorted, int p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.size());
        return sorted.get(Math.max(0, rank - 1));
    }

    private static ChildJvm startConsumer(TempShm shm, ShareQueue queue) {
        ChildJvm c = ChildJvm.start(ChannelChildMain.class, "ChaosConsumerMain", shm.path().toString(), queue.name());
        c.expect("READY");
        return c;
    }
}
