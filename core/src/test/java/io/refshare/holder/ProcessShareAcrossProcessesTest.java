package io.refshare.holder;

import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.SharedHolder;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The process's share of a version (one shared reference per version for all the threads of a
 * reader process) with real reader processes: an idle reader lets a replaced version go on its
 * background round, a reader killed holding only its cached share is reclaimed, and many
 * threads in several processes under rapid publishing leave nothing behind.
 */
class ProcessShareAcrossProcessesTest {
    /** One housekeeping round is 100 ms; the rest is slack for a busy 2-CPU machine. */
    private static final Duration ROUND_BOUND = Duration.ofSeconds(2);

    @Test
    void anIdleReaderProcessLetsAReplacedVersionGoOnItsBackgroundRound() throws Exception {
        try (TempShm shm = new TempShm()) {
            try (Refshare rs = Refshare.open(shm.config());
                 SharedHolder holder = rs.createHolder(4, 4);
                 ChildJvm reader = ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name())) {
                Versions.publish(rs, holder, 1);
                assertEquals("READY", reader.read());
                reader.send("ACQ 1000");
                assertEquals("ACQ 1", reader.read());
                // the reader now holds no tensor, only its process's share of version 1
                assertEquals(1, holder.stats().liveVersions(), "version 1, current");
                Versions.publish(rs, holder, 2);
                long replaced = System.nanoTime();
                assertEquals(0, holder.stats().retired(), "the reader process's share still holds version 1");
                // from here the reader is idle: no acquire, no command; only its collector runs
                Eventually.await(ROUND_BOUND, () -> holder.stats().retired() == 1,
                        "the idle reader's background round gave back its share of version 1");
                long tookMillis = (System.nanoTime() - replaced) / 1_000_000;
                System.out.printf("idle reader: version 1 retired %d ms after it was replaced%n", tookMillis);
                reader.send("STATS");
                assertEquals("STATS 1 0", reader.read(), "retired in the reader process, by its round");
                Eventually.await(ROUND_BOUND, () -> rs.stats().collected() == 1,
                        "version 1's block left the publisher's limbo");
                reader.send("EXIT");
                assertEquals("BYE 1 0", reader.read());
                assertEquals(0, reader.waitFor());
                holder.close();
                assertEquals(2, holder.stats().retired());
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(20)));
                assertEquals(0, Internals.sharing(rs).liveCounts());
            }
        }
    }

    @Test
    void aReaderKilledHoldingOnlyItsCachedShareIsReclaimed() throws Exception {
        try (TempShm shm = new TempShm()) {
            try (Refshare rs = Refshare.open(shm.config());
                 SharedHolder holder = rs.createHolder(4, 4);
                 ChildJvm reader = ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name())) {
                Versions.publish(rs, holder, 1);
                assertEquals("READY", reader.read());
                reader.send("ACQ 1000");
                assertEquals("ACQ 1", reader.read());
                reader.kill(); // SIGKILL: no tensor open, but its share of version 1 is counted in its row
                Versions.publish(rs, holder, 2);
                Eventually.await(() -> holder.stats().retired() == 1, "version 1 retired for the dead reader");
                SharedHolder.Stats s = holder.stats();
                assertEquals(1, s.reclaimed(), "the dead reader's one shared reference, once");
                assertEquals(1, s.retiredHere());
                assertEquals(0, s.anomalies());
                assertEquals(1, s.readers().size(), "the dead reader's row is free");
                assertEquals(0, holder.reclaimDeadReaders());
                Eventually.await(() -> rs.stats().collected() == 1, "version 1's block left the limbo");
                holder.close();
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(20)));
                assertEquals(0, Internals.sharing(rs).liveCounts());
            } finally {
                Versions.removeFilesOfDeadProcesses(shm);
            }
        }
    }

    @Test
    void manyThreadsInTwoReaderProcessesWhileVersionsArePublishedRapidly() throws Exception {
        int readers = 2;
        int threads = 4;
        long iterations = 20_000;
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            // each reader thread holds at most two tensors; a process's share may lag one version
            SharedHolder holder = rs.createHolder(readers * (2 * threads + 1) + 2, 4);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong published = new AtomicLong();
            AtomicReference<Throwable> publisherFailure = new AtomicReference<>();
            Thread publisher = Thread.ofPlatform().name("publisher").start(() -> {
                try {
                    long id = 0;
                    while (!stop.get() || published.get() < 500) {
                        try (Tensor t = rs.allocateBytes(Versions.BYTES)) {
                            Versions.fill(t.data(), id++);
                            while (true) {
                                try {
                                    holder.publish(t);
                                    break;
                                } catch (IllegalStateException slotsFull) {
                                    Thread.sleep(1);
                                }
                            }
                        }
                        published.incrementAndGet();
                    }
                } catch (Throwable e) {
                    publisherFailure.set(e);
                }
            });
            List<ChildJvm> children = new ArrayList<>();
            try {
                for (int i = 0; i < readers; i++) {
                    children.add(ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name()));
                }
                for (ChildJvm r : children) {
                    assertEquals("READY", r.read());
                    r.send("READT " + threads + " " + iterations);
                }
                long retiredByReaders = 0;
                for (ChildJvm r : children) {
                    String[] done = r.expect("DONE").split(" ");
                    assertTrue(Long.parseLong(done[0]) >= threads * iterations, "iterations");
                    assertEquals("0", done[1], "mismatches: a reader saw a freed or half-written version");
                    assertEquals("0", done[2], "a reader thread saw an older version after a newer one");
                    assertEquals("0", done[5], "anomalies");
                    r.send("EXIT");
                    String[] bye = r.expect("BYE").split(" ");
                    assertEquals("0", bye[1]);
                    retiredByReaders += Long.parseLong(bye[0]);
                    assertEquals(0, r.waitFor());
                }
                stop.set(true);
                publisher.join();
                assertNull(publisherFailure.get(), () -> "publisher failed: " + publisherFailure.get());
                assertEquals(published.get() - 1, holder.stats().retired(),
                        "every version but the current one retired once the readers closed");
                holder.close();
                SharedHolder.Stats after = holder.stats();
                assertEquals(published.get(), after.retired());
                assertEquals(published.get(), retiredByReaders + after.retiredHere(),
                        "each version retired once, in one process");
                assertEquals(0, after.anomalies());
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(20)), "every version's memory came back");
                assertEquals(0, Internals.sharing(rs).liveCounts());
                System.out.printf("process shares: %d versions published, %d retired by readers%n", published.get(),
                        retiredByReaders);
            } finally {
                stop.set(true);
                publisher.join();
                children.forEach(ChildJvm::close);
                holder.close();
            }
        } // TempShm: the directory must be empty
    }
}
