package io.refshare.inspect;

import io.refshare.counter.CounterChildMain;
import io.refshare.counter.CounterFile;
import io.refshare.share.ShareChildMain;
import io.refshare.Refshare;
import io.refshare.shm.FileHeader;
import io.refshare.shm.LifeFile;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

class JanitorTest {

    @Test
    void removesOnlyTheFilesOfDeadProcesses() throws Exception {
        try (TempShm shm = new TempShm(); Refshare live = Refshare.open(shm.config());
             Tensor mine = live.allocateBytes(1000)) {
            ChildJvm producer = ChildJvm.start(ShareChildMain.class, "ProducerMain", shm.path().toString(), "5000", "1");
            ProcessIdentity producerId = identity(producer);
            String message;
            try {
                message = producer.read();
            } finally {
                producer.kill();
            }
            Files.writeString(shm.path().resolve("not-ours.txt"), "keep me");
            Files.writeString(shm.path().resolve("refshare-seg-0123456789abcdef0123456789abcdef"), "short"); // no owner, young
            List<String> before = shm.files();

            Janitor.Report dry = Janitor.sweep(shm.directory(), true);
            assertEquals(before, shm.files(), "a dry run removes nothing");
            Janitor.Report report = Janitor.sweep(shm.directory(), false);
            assertEquals(dry.removed(), report.removed());
            assertEquals(List.of("cnt", "life", "proc", "seg"), report.removed().stream().map(n -> n.split("-")[1])
                    .sorted().toList(), "the dead producer's segment, counter file, status file and life file: "
                    + report.removed());
            assertTrue(report.removed().contains(lifeFileOf(producerId)), report.removed().toString());
            assertTrue(report.kept().contains(lifeFileOf(ProcessIdentity.current()) + " (process "
                    + ProcessHandle.current().pid() + " alive)"), "this process's life file stays: " + report.kept());
            assertTrue(shm.files().contains("not-ours.txt"));
            assertTrue(shm.files().contains("refshare-seg-0123456789abcdef0123456789abcdef"),
                    "a young file that names no owner is left alone: it may be being created");
            assertTrue(report.kept().stream().anyMatch(k -> k.contains("alive")), "the live process's files stay");
            assertThrows(RuntimeException.class, () -> live.receive(HexFormat.of().parseHex(message)),
                    "the dead producer's message can no longer be received");
            Files.delete(shm.path().resolve("not-ours.txt"));
            Files.delete(shm.path().resolve("refshare-seg-0123456789abcdef0123456789abcdef"));
        }
    }

    /** The name of the life file of {@code id} (under the default prefix). */
    static String lifeFileOf(ProcessIdentity id) {
        return LifeFile.name(new ShmDirectory(Path.of("/"), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY), id);
    }

    /** The identity of a child process, read while it runs. */
    static ProcessIdentity identity(ChildJvm child) {
        return ProcessIdentity.of(child.pid()).orElseThrow(() -> new AssertionError(child.pid() + " is not running"));
    }

    @Test
    void aFileNamesItsOwnerBeforeItsLayoutIsWritten() throws Exception {
        try (TempShm shm = new TempShm(); ShmFile f = shm.directory().create(ShmKind.SEGMENT, 1 << 20)) {
            try {
                FileHeader h = FileHeader.read(f.path());
                assertEquals(ProcessIdentity.current(), h.owner(), "the owner, written through the descriptor");
                assertEquals(0, h.magic(), "no magic yet: the layout is not written");
                assertEquals(1 << 20, Files.size(f.path()), "and the space is reserved");
            } finally {
                f.unlink();
            }
        }
    }

    @Test
    void aProcessKilledBeforeWritingItsLayoutLeavesAFileTheJanitorRemoves() throws Exception {
        try (TempShm shm = new TempShm()) {
            String name;
            ProcessIdentity creatorId;
            try (ChildJvm creator = ChildJvm.start(InspectChildMain.class, "CreateOnlyMain", shm.path().toString(), "1048576")) {
                creatorId = identity(creator);
                try {
                    name = creator.expect("CREATED");
                } finally {
                    creator.kill();
                }
            }
            String life = lifeFileOf(creatorId);
            assertEquals(List.of(life, name), shm.files(), "the file and the life lock its creator took first");
            Janitor.Report report = Janitor.sweep(shm.directory(), false);
            assertEquals(List.of(name, life), report.removed(), "its owner is dead: " + report.kept());
            assertTrue(shm.files().isEmpty());
        }
    }

    @Test
    void aFileThatNamesNoOwnerIsRemovedOnceOlderThanTheGracePeriod() throws Exception {
        try (TempShm shm = new TempShm()) {
            ShmDirectory dir = shm.directory();
            // what a creator killed between its create and its first write leaves: an empty file
            Path empty = Files.createFile(shm.path().resolve(dir.newName(ShmKind.COUNTERS)));
            // what an older refshare killed after reserving space leaves: zeros, no owner
            Path zeros = Files.write(shm.path().resolve(dir.newName(ShmKind.SEGMENT)), new byte[4096]);
            // a live process's file, owner written, just created: never removed
            ShmFile live = dir.create(ShmKind.QUEUE, 4096);
            try {
                Janitor.Report young = Janitor.sweep(dir, false);
                assertEquals(List.of(), young.removed(), "young files without an owner may be being created");
                assertEquals(2, young.kept().stream().filter(k -> k.contains("no owner recorded")).count(),
                        young.kept().toString());

                FileTime abandoned = FileTime.from(Instant.now().minus(Janitor.UNOWNED_GRACE).minusSeconds(1));
                Files.setLastModifiedTime(empty, abandoned);
                Files.setLastModifiedTime(zeros, abandoned);
                Files.setLastModifiedTime(live.path(), abandoned);
                Janitor.Report dry = Janitor.sweep(dir, true);
                assertTrue(Files.exists(empty) && Files.exists(zeros), "a dry run removes nothing");
                Janitor.Report old = Janitor.sweep(dir, false);
                assertEquals(dry.removed(), old.removed());
                assertEquals(List.of(empty.getFileName().toString(), zeros.getFileName().toString()).stream().sorted()
                        .toList(), old.removed(), "abandoned creations are removed");
                assertTrue(Files.exists(live.path()), "an old file of a live owner stays: " + old.kept());
            } finally {
                live.unlink();
                live.close();
            }
        }
    }

    @Test
    void aCounterFileStaysWhileALiveProcessHoldsItsTokens() throws Exception {
        try (TempShm shm = new TempShm(); Refshare consumer = Refshare.open(shm.config())) {
            ChildJvm producer = ChildJvm.start(ShareChildMain.class, "ProducerMain", shm.path().toString(), "5000", "3");
            Tensor held;
            try {
                held = consumer.receive(HexFormat.of().parseHex(producer.read()));
            } finally {
                producer.kill();
            }
            Janitor.Report report = Janitor.sweep(shm.directory(), false);
            assertTrue(report.kept().stream().anyMatch(k -> k.contains("-cnt-") && k.contains("holder")),
                    "kept while we hold a token: " + report.kept());
            assertEquals(-1, Patterns.firstMismatch(held.data(), 3), "memory valid after the producer's death");
            held.close();
            Janitor.Report after = Janitor.sweep(shm.directory(), false);
            assertTrue(after.removed().stream().anyMatch(n -> n.contains("-cnt-")), "gone once nobody alive holds it");
        }
    }

    /**
     * A consumer that holds its life lock registers in a counter file after the sweep read
     * it, takes a token and is killed before the sweep judges the life files: its life file
     * must stay, or the file's owner could never learn of its death and reclaim the token.
     */
    @Test
    void aProcessThatRegistersAndDiesDuringASweepKeepsItsLifeFileForItsOwner() throws Exception {
        try (TempShm shm = new TempShm(); CounterFile counters = CounterFile.create(shm.directory(), 4, 2);
             ChildJvm consumer = ChildJvm.start(CounterChildMain.class, "PeerMain", shm.path().toString(),
                     counters.name())) {
            consumer.expect("READY");
            ProcessIdentity consumerId = identity(consumer);
            int first = counters.handOut(7);
            int second = counters.handOut(7);
            consumer.send("CLAIM " + first + " 7");
            assertEquals("CLAIMED true", consumer.read());
            consumer.send("LEAVE"); // holds its life lock on, no longer named by the counter file
            assertEquals("LEFT 1", consumer.read());

            Janitor.Report report = Janitor.sweep(shm.directory(), false, () -> {
                consumer.send("CLAIM " + second + " 7");
                assertEquals("CLAIMED true", consumer.read());
                consumer.kill();
            });
            String lifeFile = lifeFileOf(consumerId);
            assertTrue(report.kept().contains(lifeFile + " (process " + consumerId.pid()
                    + " died during this sweep, judged by the next)"), report.kept().toString());
            assertEquals(1, counters.reclaimDeadPeers((holder, n) -> { }), "the owner learns of the death");
            assertTrue(counters.isReturned(second, 7));
            counters.unlink();
            assertEquals(List.of(lifeFile), Janitor.sweep(shm.directory(), false).removed(), "the next sweep removes it");
        }
    }
}
