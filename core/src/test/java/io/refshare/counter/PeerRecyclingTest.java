package io.refshare.counter;

import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Peer entries of a counter file are recycled (docs/protocol.md 8.5), with real peer processes and
 * tables of one or two entries: a peer leaving cleanly frees its own entry, the owner frees a
 * DEAD peer's entry after reclaiming its tokens, nobody else frees another's entry, and an
 * UNKNOWN peer keeps both its tokens and its entry.
 */
class PeerRecyclingTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void aPeerLeavingCleanlyFreesItsEntryForTheNext() {
        try (CounterFile f = CounterFile.create(shm.directory(), 16, 2)) {
            handOut(f, 6);
            List<ChildJvm> peers = new ArrayList<>();
            try {
                ChildJvm a = peer(peers, f);
                ChildJvm b = peer(peers, f);
                claim(a, 0, "CLAIMED true");
                claim(b, 1, "CLAIMED true");
                assertEquals(2, f.peersInUse());
                ChildJvm c = peer(peers, f);
                c.send("CLAIM 2 0");
                String limit = c.expect("LIMIT");
                assertTrue(limit.contains("all 2 peer entries") && limit.contains("withPeersPerCounterFile"), limit);
                assertEquals(CounterFileLayout.IN_FLIGHT, f.state(2), "a refused claim takes nothing");
                a.send("LEAVE");
                assertEquals("LEFT 1", a.read(), "leaving gives back what it held");
                assertEquals(CounterFileLayout.RELEASED, f.state(0));
                assertEquals(1, f.peersInUse(), "and frees the entry");
                claim(c, 2, "CLAIMED true");
                assertEquals(ProcessIdentity.of(c.pid()).orElseThrow(), f.holder(2), "the next process took it");
                // b and c exit without leaving: their entries wait for the owner
                b.send("EXIT");
                c.send("EXIT");
                assertEquals(0, b.waitFor());
                assertEquals(0, c.waitFor());
                assertEquals(2, f.peersInUse());
                assertEquals(2, f.reclaimDeadPeers((id, n) -> { }), "the owner reclaims the dead peers' tokens");
                assertEquals(0, f.peersInUse(), "and frees their entries");
                assertEquals(3, f.live(), "slots 3..5 are still in flight, nothing else is counted");
            } finally {
                peers.forEach(ChildJvm::kill);
            }
            f.unlink();
        }
    }

    @Test
    void aDeadPeersTokensAndEntryAreReclaimedOnceWithTheirTags() {
        try (CounterFile f = CounterFile.create(shm.directory(), 16, 1)) {
            int tag = RangeTag.of(4096, 1000, "refshare-seg-00000000000000000000000000000001");
            for (int i = 0; i < 4; i++) {
                f.handOut(tag);
            }
            List<ChildJvm> peers = new ArrayList<>();
            ProcessIdentity dead;
            try {
                ChildJvm a = peer(peers, f);
                for (int s = 0; s < 3; s++) {
                    a.send("CLAIM " + s + " " + tag);
                    assertEquals("CLAIMED true", a.read());
                }
                dead = ProcessIdentity.of(a.pid()).orElseThrow();
                a.kill();
            } finally {
                peers.forEach(ChildJvm::kill);
            }
            List<String> reported = new ArrayList<>();
            assertEquals(3, f.reclaimDeadPeers((id, n) -> reported.add(id + ":" + n)));
            assertEquals(List.of(dead + ":3"), reported);
            assertEquals(0, f.reclaimDeadPeers((id, n) -> fail("reclaimed twice")), "never twice");
            assertEquals(0, f.peersInUse());
            for (int s = 0; s < 3; s++) {
                assertTrue(f.isReturned(s, tag));
                assertEquals(tag, f.tag(s), "every transition keeps the range tag");
            }
            assertFalse(f.isReturned(3, tag), "the token nobody claimed is still in flight");
            f.unlink();
        }
    }

    @Test
    void onlyTheOwnerFreesAnotherProcesssEntry() {
        try (CounterFile f = CounterFile.create(shm.directory(), 16, 2);
             CounterFile other = CounterFile.open(shm.directory(), f.name())) {
            handOut(f, 4);
            List<ChildJvm> peers = new ArrayList<>();
            try {
                ChildJvm a = peer(peers, f);
                claim(a, 0, "CLAIMED true");
                a.kill();
                assertThrows(IllegalStateException.class, () -> other.reclaimDeadPeers((id, n) -> { }),
                        "a process that is not the owner never frees an entry");
                assertTrue(other.claim(1), "a second process takes the other entry");
                ChildJvm b = peer(peers, f);
                b.send("CLAIM 2 0");
                b.expect("LIMIT"); // the dead peer's entry is not recycled by anyone but the owner
                assertEquals(1, f.reclaimDeadPeers((id, n) -> { }));
                claim(b, 2, "CLAIMED true");
                assertEquals(CounterFileLayout.HELD, f.state(1), "the live peer's token is untouched");
            } finally {
                peers.forEach(ChildJvm::kill);
            }
            assertEquals(1, other.leave());
            f.unlink();
        }
    }

    @Test
    void anUnknownPeerKeepsItsTokensAndItsEntry() {
        try (CounterFile f = CounterFile.create(shm.directory(), 8, 2)) {
            int slot = f.handOut(7);
            // a pid above the kernel's limit, no life file: no evidence either way
            ProcessIdentity unknown = new ProcessIdentity(4_000_000_000L, 12345);
            writePeer(f, 0, unknown.pid(), unknown.startTicks());
            writeSlot(f, slot, CounterFileLayout.word(CounterFileLayout.held(0), 7));
            assertEquals(0, f.reclaimDeadPeers((id, n) -> fail("an unknown process is not dead")));
            assertEquals(unknown, f.peerOrNull(0));
            assertEquals(CounterFileLayout.HELD, f.state(slot));
            f.unlink();
        }
    }

    @Test
    void anEntryLeftRegisteringIsFreedOnlyOnceNoLifeFileOfItsPidIsHeld() {
        try (CounterFile f = CounterFile.create(shm.directory(), 8, 3)) {
            handOut(f, 1);
            long deadPid;
            List<ChildJvm> peers = new ArrayList<>();
            try {
                ChildJvm a = peer(peers, f);
                claim(a, 0, "CLAIMED true"); // holds its life lock here
                deadPid = a.pid();
                a.kill();
            } finally {
                peers.forEach(ChildJvm::kill);
            }
            assertEquals(1, f.reclaimDeadPeers((id, n) -> { }));
            assertFalse(f.anyPeerRegistering());
            // as if it had died between writing its pid and its start ticks, and this process too
            writePeer(f, 0, deadPid, 0);
            writePeer(f, 1, ProcessIdentity.current().pid(), 0);
            writePeer(f, 2, 4_000_000_001L, 0); // no life file of that pid at all
            assertTrue(f.anyPeerRegistering());
            f.reclaimDeadPeers((id, n) -> { });
            assertEquals(1, f.peersInUse(), "only the entry of a pid whose life lock is held stays");
            assertTrue(f.anyPeerRegistering(), "this process's entry is still registering");
            assertEquals(ProcessIdentity.current().pid(), peerPid(f, 1));
            f.unlink();
        }
    }

    private ChildJvm peer(List<ChildJvm> peers, CounterFile f) {
        ChildJvm p = ChildJvm.start(CounterChildMain.class, "PeerMain", shm.path().toString(), f.name());
        peers.add(p);
        p.expect("READY");
        return p;
    }

    private static void claim(ChildJvm p, int slot, String expected) {
        p.send("CLAIM " + slot + " 0");
        assertEquals(expected, p.read());
    }

    private static void handOut(CounterFile f, int n) {
        for (int i = 0; i < n; i++) {
            f.handOut();
        }
    }

    private void writePeer(CounterFile f, int peer, long pid, long start) {
        try (ShmFile raw = shm.directory().open(f.name(), ShmKind.COUNTERS, 1)) {
            raw.segment().set(ValueLayout.JAVA_LONG, CounterFileLayout.peerOffset(peer), pid);
            raw.segment().set(ValueLayout.JAVA_LONG, CounterFileLayout.peerOffset(peer) + 8, start);
        }
    }

    private long peerPid(CounterFile f, int peer) {
        try (ShmFile raw = shm.directory().open(f.name(), ShmKind.COUNTERS, 1)) {
            return raw.segment().get(ValueLayout.JAVA_LONG, CounterFileLayout.peerOffset(peer));
        }
    }

    private void writeSlot(CounterFile f, int slot, long word) {
        try (ShmFile raw = shm.directory().open(f.name(), ShmKind.COUNTERS, 1)) {
            raw.segment().set(ValueLayout.JAVA_LONG,
                    CounterFileLayout.slotsOffset(f.peerCapacity()) + (long) CounterFileLayout.SLOT_LENGTH * slot, word);
        }
    }
}
