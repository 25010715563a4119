package io.refshare.inspect;

import io.refshare.Refshare;
import io.refshare.holder.HolderReaderMain;
import io.refshare.SharedHolder;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmKind;
import io.refshare.shm.Verdict;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.ValueLayout;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What {@code refshare inspect} lists for a holder file, with real reader processes. */
class InventoryTest {

    @Test
    void theRunningCountsOfALiveViewAreTheQueuesTakesAndAProcesssSharesAndReceives() throws Exception {
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Refshare consumer = Refshare.open(shm.config());
             io.refshare.ShareQueue q = producer.createQueue(8);
             io.refshare.ShareQueue in = consumer.openQueue(q.name())) {
            try (Tensor t = producer.allocateBytes(64)) {
                for (int i = 0; i < 3; i++) {
                    q.put(t);
                }
            }
            for (int i = 0; i < 2; i++) {
                in.take().close();
            }
            Eventually.await(() -> counts(shm, ShmKind.STATUS).stream().anyMatch(c -> c[0] == 3),
                    "the producer's status file shows 3 shared (published by its collector)");
            assertEquals(List.of(2L), counts(shm, ShmKind.QUEUE).stream().map(c -> c[0]).toList(), "2 taken");
            for (Inventory.Entry e : Inventory.list(shm.directory())) {
                if (e.kind() != ShmKind.QUEUE && e.kind() != ShmKind.STATUS) {
                    assertEquals(0, Inventory.runningCounts(shm.directory(), e).length, e.name());
                }
            }
        }
    }

    private static List<long[]> counts(TempShm shm, ShmKind kind) {
        try {
            return Inventory.list(shm.directory()).stream().filter(e -> e.kind() == kind)
                    .map(e -> Inventory.runningCounts(shm.directory(), e)).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Test
    void aHolderFileShowsItsFiguresAsReadersComeAndGo() throws Exception {
        try (TempShm shm = new TempShm()) {
            try (Refshare rs = Refshare.open(shm.config());
                 SharedHolder holder = rs.createHolder(4, 4);
                 ChildJvm stays = ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name());
                 ChildJvm killed = ChildJvm.start(HolderReaderMain.class, shm.path().toString(), holder.name())) {
                publish(rs, holder, 1);
                for (ChildJvm reader : List.of(stays, killed)) {
                    assertEquals("READY", reader.read());
                    reader.send("HOLD");
                    assertEquals("HELD 1", reader.read());
                }
                publish(rs, holder, 2);

                Inventory.Entry e = holderEntry(shm, holder.name());
                assertEquals(ProcessIdentity.current(), e.owner());
                assertEquals(Verdict.ALIVE, e.ownerVerdict());
                assertEquals("2 published, 0 retired, 0 reclaimed, 2 live versions, 3 reader processes", e.details());

                // one reader dies holding version 1, the other leaves releasing it: the creator's collector
                // reclaims the dead one's reference and both rows, and version 1 is retired
                // (the one leaving goes first: were the dead one reclaimed first, the leaving one's release
                // would retire version 1 in its own process, a race this test is not about)
                stays.send("EXIT");
                assertEquals("BYE 0 0", stays.read());
                assertEquals(0, stays.waitFor());
                killed.kill();
                Eventually.await(() -> holderEntry(shm, holder.name()).details()
                                .equals("2 published, 1 retired, 1 reclaimed, 1 live version, 1 reader process"),
                        "the figures once the readers left and the dead one was reclaimed");

                holder.close();
                assertTrue(Inventory.list(shm.directory()).stream().noneMatch(x -> x.kind() == ShmKind.HOLDER),
                        "the creator's close removes the holder's name");
            } finally {
                Janitor.sweep(shm.directory(), false); // the killed reader's status file
            }
        }
    }

    /**
     * Dead readers show until someone reclaims them; with the creator dead too, nobody's
     * collector does, and its death shows as well.
     */
    @Test
    void deadReadersAndADeadCreatorAreShownAsSuch() throws Exception {
        try (TempShm shm = new TempShm()) {
            try (Refshare rs = Refshare.open(shm.config());
                 ChildJvm creator = ChildJvm.start(InspectChildMain.class, "HolderCreatorMain", shm.path().toString())) {
                String name = creator.read();
                try (SharedHolder opened = rs.openHolder(name);
                     ChildJvm reader = ChildJvm.start(HolderReaderMain.class, shm.path().toString(), name)) {
                    assertEquals("READY", reader.read());
                    reader.send("HOLD");
                    assertTrue(reader.read().startsWith("HELD "));
                    assertEquals("1 published, 0 retired, 0 reclaimed, 1 live version, 3 reader processes",
                            holderEntry(shm, name).details());
                    // the creator first: alive, its housekeeping (every 100 ms) would reclaim the dead reader
                    creator.kill();
                    reader.kill();
                    Inventory.Entry e = holderEntry(shm, name);
                    assertEquals(creator.pid(), e.owner().pid());
                    assertEquals(Verdict.DEAD, e.ownerVerdict(), "the creator is dead, on its life lock's evidence");
                    Inventory.Entry life = Inventory.list(shm.directory()).stream()
                            .filter(x -> x.kind() == ShmKind.LIFE && creator.pid() == x.owner().pid()).findFirst()
                            .orElseThrow(() -> new AssertionError("the dead creator's life file is listed"));
                    assertEquals(Verdict.DEAD, life.ownerVerdict());
                    assertTrue(life.details().startsWith("life lock free"), life.details());
                    assertEquals("1 published, 0 retired, 0 reclaimed, 1 live version, 3 reader processes (2 dead)",
                            e.details(), "only this process is alive; nobody reclaimed yet");

                    assertEquals(1, opened.reclaimDeadReaders(), "the dead reader's reference");
                    assertEquals("1 published, 0 retired, 1 reclaimed, 1 live version, 1 reader process",
                            holderEntry(shm, name).details(), "the creator's row too is free (it held nothing)");
                }
            } finally {
                // the dead processes' files; the holder stays while a live process (this one: a reader row
                // outlives its handle until the process exits) has a row in it
                Janitor.Report report = Janitor.sweep(shm.directory(), false);
                String holder = shm.files().stream().filter(n -> n.contains("-hold-")).findFirst().orElseThrow();
                assertTrue(report.kept().contains(holder + " (reader " + ProcessHandle.current().pid() + " alive)"),
                        report.kept().toString());
                java.nio.file.Files.delete(shm.path().resolve(holder));
            }
        }
    }

    private static void publish(Refshare rs, SharedHolder holder, long id) {
        try (Tensor t = rs.allocateBytes(4096)) {
            t.data().fill((byte) id);
            t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
            t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 4096 - 8, id);
            holder.publish(t);
        }
    }

    private static Inventory.Entry holderEntry(TempShm shm, String name) {
        try {
            return Inventory.list(shm.directory()).stream().filter(x -> x.name().equals(name)).findFirst()
                    .orElseThrow(() -> new AssertionError("no entry for " + name));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
