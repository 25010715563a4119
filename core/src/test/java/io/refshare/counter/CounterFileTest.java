package io.refshare.counter;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

class CounterFileTest {

    @Test
    void tokenLifecycleIsOneWayAndExactlyOnce() {
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), 4, 2)) {
            int a = f.handOut();
            int b = f.handOut();
            assertEquals(0, a, "slots are handed out by increasing offset");
            assertEquals(1, b);
            assertEquals(CounterFileLayout.IN_FLIGHT, f.state(a));
            assertFalse(f.release(a), "a token nobody holds cannot be released");
            assertTrue(f.claim(a));
            assertFalse(f.claim(a), "a token is taken once");
            assertEquals(ProcessIdentity.current(), f.holder(a));
            assertFalse(f.cancel(a), "a held token is not returned as undelivered");
            assertTrue(f.release(a));
            assertFalse(f.release(a), "a token is released once: no count can go below zero");
            assertTrue(f.cancel(b), "an undelivered token comes back");
            assertFalse(f.claim(b), "and can no longer be taken");
            assertEquals(2, f.releases());
            assertEquals(0, f.live());
            assertEquals(2, f.handOut());
            assertEquals(3, f.handOut());
            assertTrue(f.isRetired(), "the file retires when its last slot is handed out");
            assertEquals(-1, f.handOut());
            f.unlink();
        }
    }

    /**
     * A claim its holder cannot finish goes back in flight: only the holder's, keeping the tag,
     * not counted as a release, and claimable again by the next receiver (here another instance,
     * another peer entry, as another process would be).
     */
    @Test
    void aClaimItsHolderCannotFinishGoesBackInFlight() {
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), 4, 2);
             CounterFile other = CounterFile.open(shm.directory(), f.name())) {
            int tag = 0x5EED_0001;
            int s = f.handOut(tag);
            assertFalse(f.unclaim(s), "a token in flight has no claim to give back");
            assertTrue(f.claim(s, tag));
            assertFalse(other.unclaim(s), "only its holder gives a claim back");
            assertTrue(f.unclaim(s));
            assertFalse(f.unclaim(s), "once");
            assertEquals(CounterFileLayout.IN_FLIGHT, f.state(s));
            assertEquals(tag, f.tag(s), "the tag is kept");
            assertEquals(0, f.releases(), "nothing was released");
            assertFalse(f.isReturned(s, tag), "the owner sees a token still out");
            assertEquals(1, f.live());
            assertFalse(other.claim(s, tag + 1), "the next claim still presents the range");
            assertTrue(other.claim(s, tag), "the next receiver takes it");
            assertEquals(1, f.heldBy(ProcessIdentity.current()), "held once, through the other instance");
            assertTrue(other.release(s));
            assertFalse(other.unclaim(s), "a released token stays released");
            assertEquals(CounterFileLayout.RELEASED, f.state(s));
            assertEquals(1, f.releases());
            f.unlink();
        }
    }

    @Test
    void outOfRangeSlotsAreRejected() {
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), 8, 1)) {
            assertThrows(InvalidDataException.class, () -> f.claim(-1));
            assertThrows(InvalidDataException.class, () -> f.claim(8));
            assertThrows(InvalidDataException.class, () -> f.release(Integer.MAX_VALUE));
            InvalidDataException e = assertThrows(InvalidDataException.class, () -> f.cancel(1 << 30));
            assertTrue(e.getMessage().contains("out of range"), e.getMessage());
            f.unlink();
        }
    }

    @Test
    void aProcessRegistersOnceAndPeersRunOut() {
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), 8, 1)) {
            f.handOut();
            f.handOut();
            assertTrue(f.claim(0));
            assertTrue(f.claim(1));
            assertEquals(ProcessIdentity.current(), f.peerOrNull(0));
            f.unlink();
        }
    }

    @Test
    void onlyTheOwnerHandsOut() {
        try (TempShm shm = new TempShm(); CounterFile owner = CounterFile.create(shm.directory(), 8, 1);
             CounterFile other = CounterFile.open(shm.directory(), owner.name())) {
            assertThrows(IllegalStateException.class, other::handOut);
            assertEquals(ProcessIdentity.current(), other.owner());
            owner.unlink();
        }
    }

    @Test
    void releaseAllHeldByGivesBackExactlyWhatOneProcessHeld() {
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), 8, 2)) {
            for (int i = 0; i < 5; i++) {
                f.handOut();
            }
            f.claim(0);
            f.claim(1);
            f.claim(2);
            f.release(1);
            assertEquals(2, f.releaseAllHeldBy(ProcessIdentity.current()));
            assertEquals(0, f.releaseAllHeldBy(ProcessIdentity.current()), "never twice");
            assertEquals(CounterFileLayout.IN_FLIGHT, f.state(3), "in-flight tokens are not the holder's");
            assertEquals(3, f.releases());
            f.unlink();
        }
    }

    @Test
    void fourProcessesRacingOverAMillionTokensCountExactly() throws Exception {
        int slots = 1 << 20; // 1,048,576 tokens: each process makes a million claim attempts
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), slots, 8)) {
            for (int i = 0; i < slots; i++) {
                f.handOut();
            }
            List<ChildJvm> racers = new ArrayList<>();
            try {
                for (int i = 0; i < 4; i++) {
                    racers.add(ChildJvm.start(CounterChildMain.class, "CounterRaceMain", shm.path().toString(), f.name()));
                }
                for (ChildJvm r : racers) {
                    r.expect("READY");
                }
                racers.forEach(r -> r.send("GO"));
                long claimed = 0;
                long released = 0;
                long attempts = 0;
                for (ChildJvm r : racers) {
                    String[] w = r.read().split(" ");
                    claimed += Long.parseLong(w[0]);
                    released += Long.parseLong(w[1]);
                    attempts += Long.parseLong(w[0]) + Long.parseLong(w[2]);
                    assertEquals(0, r.waitFor());
                }
                assertEquals(4L * slots, attempts);
                assertEquals(slots, claimed, "every token claimed by exactly one process");
                assertEquals(slots, released, "and released exactly once");
                assertEquals(slots, f.releases(), "the shared release counter, bumped by four processes, sums exactly");
                assertEquals(0, f.live());
            } finally {
                racers.forEach(ChildJvm::kill);
            }
            f.unlink();
        }
    }

    @Test
    void malformedFilesAreRejectedWithAClearMessage() throws Exception {
        try (TempShm shm = new TempShm()) {
            ShmDirectory dir = shm.directory();
            String valid;
            try (CounterFile f = CounterFile.create(dir, 16, 2)) {
                valid = f.name();
            }
            assertRejected(dir, valid, f -> f.segment().set(ValueLayout.JAVA_LONG, CounterFileLayout.MAGIC_OFFSET, 42L),
                    "not a refshare counter file");
            assertRejected(dir, valid, f -> f.segment().set(ValueLayout.JAVA_INT, CounterFileLayout.VERSION_OFFSET, 99),
                    "version 99");
            assertRejected(dir, valid, f -> f.segment().set(ValueLayout.JAVA_INT, CounterFileLayout.SLOT_CAPACITY_OFFSET,
                    Integer.MAX_VALUE), "corrupt header");
            assertRejected(dir, valid, f -> f.segment().set(ValueLayout.JAVA_INT, CounterFileLayout.SLOT_CAPACITY_OFFSET,
                    17), "truncated or corrupt");
            assertRejected(dir, valid, f -> f.segment().set(ValueLayout.JAVA_LONG, CounterFileLayout.OWNER_PID_OFFSET,
                    -5L), "impossible owner pid");
            // truncated files
            Files.write(shm.path().resolve(valid), new byte[10]);
            assertThrows(InvalidDataException.class, () -> CounterFile.open(dir, valid));
            Files.write(shm.path().resolve(valid), new byte[100]);
            assertThrows(InvalidDataException.class, () -> CounterFile.open(dir, valid));
            Files.delete(shm.path().resolve(valid));
            // names from outside
            for (String hostile : new String[]{"../../etc/passwd", "refshare-cnt-../x", "a/b", "",
                    "refshare-seg-00000000000000000000000000000000", "/etc/passwd",
                    "refshare-cnt-0000000000000000000000000000000g"}) {
                assertThrows(InvalidDataException.class, () -> CounterFile.open(dir, hostile), hostile);
            }
            RefshareException gone = assertThrows(RefshareException.class,
                    () -> CounterFile.open(dir, "refshare-cnt-00000000000000000000000000000000"));
            assertTrue(gone.getMessage().contains("no longer exists"), gone.getMessage());
        }
    }

    private interface Corruption {
        void apply(ShmFile f);
    }

    private static void assertRejected(ShmDirectory dir, String name, Corruption corruption, String expected)
            throws Exception {
        var path = dir.path().resolve(name);
        byte[] original = Files.readAllBytes(path);
        try (ShmFile f = dir.open(name, ShmKind.COUNTERS, 1)) {
            corruption.apply(f);
        }
        InvalidDataException e = assertThrows(InvalidDataException.class, () -> CounterFile.open(dir, name));
        assertTrue(e.getMessage().contains(expected), "'" + e.getMessage() + "' should mention '" + expected + "'");
        Files.write(path, original);
    }
}
