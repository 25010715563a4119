package io.refshare.shm;

import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.PidNamespaces;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class LifeFileTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    private static ProcessIdentity identity(ChildJvm child) {
        String[] f = child.expect("IDENTITY").split(" ");
        return new ProcessIdentity(Long.parseLong(f[0]), Long.parseLong(f[1]));
    }

    @Test
    void thisProcessIsAliveAndHoldsOneFile() {
        ShmDirectory dir = shm.directory();
        dir.holdLifeLock();
        dir.holdLifeLock();
        assertEquals(Verdict.ALIVE, dir.verdict(ProcessIdentity.current()));
        String name = LifeFile.name(dir, ProcessIdentity.current());
        assertEquals(List.of(name), shm.files());
        assertEquals(ShmKind.LIFE, dir.kindOf(name));
        dir.releaseLifeLock();
        assertEquals(List.of(), shm.files());
    }

    @Test
    void leavingGivesTheLockUpOnlyOnceNoFileNamesThisProcess() {
        ShmDirectory dir = shm.directory();
        String life = LifeFile.name(dir, ProcessIdentity.current());
        assertTrue(dir.leave(), "nothing held: nothing to give up");
        ShmFile mine = dir.create(ShmKind.SEGMENT, 4096); // takes the lock first
        assertEquals(List.of(life, mine.name()).stream().sorted().toList(), shm.files());
        assertFalse(dir.leave(), "a file here still names this process as its owner");
        assertEquals(Verdict.ALIVE, dir.verdict(ProcessIdentity.current()));
        assertTrue(shm.files().contains(life), "the lock is kept");
        mine.unlink();
        mine.close();
        assertTrue(dir.leave());
        assertEquals(List.of(), shm.files(), "a process that left cleanly leaves no life file");
        assertTrue(dir.leave(), "idempotent");
        dir.holdLifeLock();
        assertEquals(List.of(life), shm.files(), "taken again by the next record");
        dir.releaseLifeLock();
    }

    @Test
    void aKilledHolderIsDeadAndItsFileCanThenBeRemoved() {
        ShmDirectory dir = shm.directory();
        try (ChildJvm child = ChildJvm.start(ShmChildMain.class, "LifeHolderMain", shm.path().toString())) {
            ProcessIdentity id = identity(child);
            assertEquals(Verdict.ALIVE, dir.verdict(id));
            assertFalse(dir.removeLifeFileIfDead(id), "a live process's life file must stay");
            child.kill();
            assertEquals(Verdict.DEAD, dir.verdict(id));
            assertTrue(dir.removeLifeFileIfDead(id));
            assertFalse(dir.removeLifeFileIfDead(id), "a second removal counts nothing");
            assertEquals(List.of(), shm.files());
        }
    }

    @Test
    void aHolderThatLeftCleanlyLeavesNoFile() {
        try (ChildJvm child = ChildJvm.start(ShmChildMain.class, "LifeHolderMain", shm.path().toString())) {
            identity(child);
            child.send("LEAVE");
            child.expect("LEFT");
            assertEquals(List.of(), shm.files());
        }
    }

    @Test
    void withoutEvidenceTheVerdictIsUnknownNeverDead() throws Exception {
        ShmDirectory dir = shm.directory();
        // a pid no process here has (above the kernel's limit) and no life file: nobody can tell
        assertEquals(Verdict.UNKNOWN, dir.verdict(new ProcessIdentity(4_194_304 + 17, 12345)));
        // a live pid of this namespace with the wrong start time, no life file: not evidence of death
        ProcessIdentity me = ProcessIdentity.current();
        assertEquals(Verdict.UNKNOWN, dir.verdict(new ProcessIdentity(me.pid(), me.startTicks() + 1)));
        // a live process of this namespace that never took a life lock here: /proc says alive
        ProcessIdentity parent = ProcessIdentity.of(ProcessHandle.current().parent().orElseThrow().pid()).orElseThrow();
        assertEquals(Verdict.ALIVE, dir.verdict(parent));
        // something that is not a regular file where a life file goes: no evidence
        ProcessIdentity ghost = new ProcessIdentity(4_194_304 + 18, 1);
        Path fifo = shm.path().resolve(LifeFile.name(dir, ghost));
        Process mk = new ProcessBuilder("mkfifo", fifo.toString()).start();
        assertEquals(0, mk.waitFor());
        assertEquals(Verdict.UNKNOWN, dir.verdict(ghost));
        assertFalse(dir.removeLifeFileIfDead(ghost));
        Files.delete(fifo);
    }

    @Test
    void aHolderInItsOwnPidNamespaceIsAliveUntilKilled() throws Exception {
        assumeTrue(PidNamespaces.available(), PidNamespaces.NEEDS);
        ShmDirectory dir = shm.directory();
        try (ChildJvm child = ChildJvm.startUnder(PidNamespaces.OWN_NAMESPACE, new String[0], ShmChildMain.class, "LifeHolderMain",
                shm.path().toString())) {
            ProcessIdentity id = identity(child);
            assertNotEquals(child.pid(), id.pid(), "the child should see its own pid namespace");
            assertEquals(Verdict.ALIVE, dir.verdict(id));
            child.kill();
            // the namespace's init goes with unshare; its lock a moment later
            Eventually.await(() -> dir.verdict(id) == Verdict.DEAD, "the life lock of a killed namespace's process freed");
            assertTrue(dir.removeLifeFileIfDead(id));
        }
    }
}
