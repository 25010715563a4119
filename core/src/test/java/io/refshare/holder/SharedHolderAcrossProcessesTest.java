package io.refshare.holder;

import io.refshare.Internals;
import io.refshare.SharedHolder;
import io.refshare.Refshare;
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

/** A publisher (this JVM) re-pointing a shared holder while reader child JVMs acquire, verify and release. */
class SharedHolderAcrossProcessesTest {
    private static final int READERS = 4;
    private static final long ITERATIONS = 100_000;
    private static final long MIN_VERSIONS = 2_000;

    @Test
    void publisherRepointsContinuouslyUnderFourReaderProcesses() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            // few slots, reused (with new generations) all the time: each reader holds at most two
            // versions, plus the current one and the one being published
            SharedHolder holder = rs.createHolder(2 * READERS + 2, 8);
            List<ChildJvm> readers = new ArrayList<>();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong published = new AtomicLong();
            AtomicReference<Throwable> publisherFailure = new AtomicReference<>();
            Thread publisher = Thread.ofPlatform().name("publisher").start(() -> {
                try {
                    long id = 0;
                    while (!stop.get() || published.get() < MIN_VERSIONS) {
                        try (Tensor t = rs.allocateBytes(Versions.BYTES)) {
                            Versions.fill(t.data(), id++);
                            holder.publish(t);
                        }
                        published.incrementAndGet();
                    }
                } catch (Throwable e) {
                    publisherFailure.set(e);
                }
            });
            try {
                for (int i = 0; i < READERS; i++) {
                    readers.add(ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name()));
                }
                for (ChildJvm r : readers) {
                    assertEquals("READY", r.read());
                    r.send("READ " + ITERATIONS);
                }
                long retiredByReaders = 0;
                long distinct = 0;
                for (ChildJvm r : readers) {
                    String[] done = r.expect("DONE").split(" ");
                    assertTrue(Long.parseLong(done[0]) >= ITERATIONS);
                    assertEquals("0", done[1], "mismatches: a reader saw a freed or half-written version");
                    assertEquals("0", done[2], "a reader saw an older version after a newer one");
                    assertEquals("0", done[5], "anomalies: a version's token was returned twice");
                    distinct += Long.parseLong(done[3]);
                    r.send("EXIT");
                    String[] bye = r.expect("BYE").split(" ");
                    assertEquals("0", bye[1]);
                    retiredByReaders += Long.parseLong(bye[0]);
                    assertEquals(0, r.waitFor());
                }
                stop.set(true);
                publisher.join();
                assertNull(publisherFailure.get(), () -> "publisher failed: " + publisherFailure.get());

                SharedHolder.Stats before = holder.stats();
                assertEquals(published.get(), before.published());
                assertEquals(published.get() - 1, before.retired(), "all but the current version retired");
                assertEquals(1, before.liveVersions());
                holder.close();
                // exactly once: the retirements counted in each process add up to the versions published,
                // every token came back (none twice: no anomaly), and the shared count agrees
                SharedHolder.Stats after = holder.stats();
                assertEquals(published.get(), after.published());
                assertEquals(published.get(), after.retired());
                assertEquals(published.get(), retiredByReaders + after.retiredHere(),
                        "retirements by the readers (" + retiredByReaders + ") and the publisher ("
                                + after.retiredHere() + ")");
                assertEquals(0, after.anomalies());
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(20)), "every version's memory came back");
                assertEquals(0, Internals.sharing(rs).liveCounts());
                assertTrue(distinct >= 2 * READERS);
                System.out.printf("holder stress: %d versions published, readers saw %d distinct, retired %d by readers%n",
                        published.get(), distinct, retiredByReaders);
            } finally {
                stop.set(true);
                publisher.join();
                readers.forEach(ChildJvm::close);
                holder.close();
            }
        } // TempShm: the directory must be empty
    }

    /**
     * A reader killed while holding versions: the publisher publishes once more and then does
     * nothing at all, and its background collector finds the dead reader, gives back its
     * references, and so retires the versions it held, whose blocks leave the limbo.
     */
    @Test
    void theCollectorReclaimsAKilledReadersReferencesWithoutAnotherPublish() throws Exception {
        try (TempShm shm = new TempShm()) {
            try (Refshare rs = Refshare.open(shm.config());
                 SharedHolder holder = rs.createHolder(4, 4);
                 ChildJvm reader = ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name())) {
                Versions.publish(rs, holder, 1);
                assertEquals("READY", reader.read());
                reader.send("HOLD");
                assertEquals("HELD 1", reader.read());
                reader.send("HOLD");
                assertEquals("HELD 1", reader.read());
                Versions.publish(rs, holder, 2);
                assertEquals(0, holder.stats().retired(), "the live reader holds version 1");
                reader.send("HOLD");
                assertEquals("HELD 2", reader.read());
                assertEquals(2, holder.stats().readers().size(), "the publisher's row and the reader's");
                reader.kill(); // SIGKILL: its references are never released by it
                // once more: version 2 is no longer current; a slot is free, so the publish reclaims nothing.
                // Version 1 can now only be retired by the collector (the publish touches only version 2).
                Versions.publish(rs, holder, 3);
                // from here the publisher only watches: no publish, open or explicit reclaim
                Eventually.await(() -> holder.stats().retired() == 2, "versions 1 and 2 retired for the dead reader");
                Eventually.await(() -> rs.stats().collected() == 2 && rs.stats().limboBlocks() == 1,
                        "their blocks left the limbo (version 3's waits there while it is current)");
                SharedHolder.Stats s = holder.stats();
                // three tensors, but the reader process took one shared reference per version (its share), so its
                // row counted two: one on version 1, one on version 2
                assertEquals(2, s.reclaimed(), "the dead reader's references, one per version, each once");
                assertEquals(2, s.retiredHere(), "retired in this process");
                assertEquals(0, s.anomalies());
                assertEquals(1, s.liveVersions());
                assertEquals(1, s.readers().size(), "the dead reader's row is free; the publisher's remains");
                assertEquals(0, holder.reclaimDeadReaders(), "nothing is left to reclaim: it happened once");
                assertEquals(2, holder.stats().reclaimed());
                holder.close();
                assertEquals(3, holder.stats().retired());
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(20)));
                assertEquals(3, rs.stats().collected(), "each version's block freed once");
                assertEquals(0, Internals.sharing(rs).liveCounts());
            } finally {
                Versions.removeFilesOfDeadProcesses(shm);
            }
        }
    }
}
