package io.refshare.fuzz;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.counter.CounterFile;
import io.refshare.inspect.Inventory;
import io.refshare.memory.HostBackend;
import io.refshare.share.StatusFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every reader of a refshare file header, fed files of the fuzzer's making: truncated
 * (shorter than a header, or shorter than the header says), with wrong magic, versions,
 * sizes, owners, or valid images with a few bytes changed. A reader refuses with a
 * {@link RefshareException} that names the problem, or reads the file; it never throws
 * anything else and never faults the JVM (the readers check a file's size before they
 * map it, so a short file cannot raise SIGBUS).
 */
class FileHeaderFuzzTest {
    private static TempShm shm;
    private static ShmDirectory dir;

    @BeforeAll
    static void createDirectory() {
        shm = new TempShm();
        dir = shm.directory();
    }

    @AfterAll
    static void removeDirectory() {
        shm.close();
    }

    @FuzzTest(maxDuration = "2m")
    void counterFile(byte[] file) {
        String name = Hostile.plant(dir, ShmKind.COUNTERS, file);
        try {
            CounterFile f;
            try {
                f = CounterFile.open(dir, name);
            } catch (RefshareException e) {
                Hostile.refused(e);
                return;
            }
            try (f) {
                assertNotNull(f.owner());
                f.handedOut();
                f.isRetired();
                f.releases();
                try {
                    f.live();
                } catch (InvalidDataException e) {
                    Hostile.refused(e); // a handed-out count beyond the slots
                }
                for (int peer = 0; peer < Math.min(f.peerCapacity(), 256); peer++) {
                    f.peerOrNull(peer);
                }
                for (int slot = 0; slot < Math.min(f.slotCapacity(), 256); slot++) {
                    f.state(slot);
                    try {
                        f.holder(slot);
                    } catch (InvalidDataException e) {
                        Hostile.refused(e); // a holder index beyond the peer table
                    }
                }
                try {
                    // what a receiver does with a token of this file, and what reclaiming does
                    if (f.claim(0)) {
                        assertTrue(f.release(0), "a token just claimed is released");
                    }
                    f.cancel(0);
                    f.releaseAllHeldBy(ProcessIdentity.current());
                } catch (RefshareException e) {
                    Hostile.refused(e); // every peer entry taken
                }
            }
        } finally {
            Hostile.delete(dir.path().resolve(name));
        }
    }

    @FuzzTest(maxDuration = "2m")
    void statusFile(byte[] file) {
        String name = Hostile.plant(dir, ShmKind.STATUS, file);
        try {
            StatusFile.Snapshot s = StatusFile.read(dir, name);
            assertEquals(StatusFile.Field.values().length, s.values().length);
        } catch (RefshareException e) {
            Hostile.refused(e);
        } finally {
            Hostile.delete(dir.path().resolve(name));
        }
    }

    /** The common header, read without mapping, of a file of any kind. */
    @FuzzTest(maxDuration = "2m")
    void commonHeader(byte[] file) {
        String name = Hostile.plant(dir, ShmKind.HOLDER, file);
        Path path = dir.path().resolve(name);
        try {
            FileHeader h = FileHeader.read(path);
            assertTrue(file.length >= FileHeader.LENGTH, "a header read from " + file.length + " bytes");
            assertTrue(h.owner().pid() > 0);
            FileHeader.magicText(h.magic());
        } catch (RefshareException e) {
            Hostile.refused(e);
        } catch (IOException e) {
            throw new AssertionError("a readable file of ours gave an I/O error", e);
        } finally {
            Hostile.delete(path);
        }
    }

    /** A segment's header page, as a receiver checks it: in memory, and mapped from a file. */
    @FuzzTest(maxDuration = "2m")
    void hostSegmentHeader(byte[] file) {
        try (Arena arena = Arena.ofConfined()) {
            // page-aligned native memory, like a mapping (the check reads aligned words)
            MemorySegment copy = arena.allocate(Math.max(1, file.length), 4096);
            MemorySegment.copy(file, 0, copy, ValueLayout.JAVA_BYTE, 0, file.length);
            HostBackend.checkHeader(copy.asSlice(0, file.length), "fuzzed");
            assertTrue(file.length >= HostBackend.HEADER_BYTES);
        } catch (InvalidDataException e) {
            Hostile.refused(e);
        }
        String name = Hostile.plant(dir, ShmKind.SEGMENT, file);
        try (ShmFile f = dir.open(name, ShmKind.SEGMENT, 1)) {
            HostBackend.checkHeader(f.segment(), name);
        } catch (RefshareException e) {
            Hostile.refused(e);
        } finally {
            Hostile.delete(dir.path().resolve(name));
        }
    }

    /**
     * A directory of files of every kind with hostile contents, links, subdirectories and
     * foreign names: the inventory lists each file of ours (with the reason when it cannot
     * be read), ignores the rest, throws nothing, and changes no byte of any file.
     */
    @FuzzTest(maxDuration = "2m")
    void inventory(FuzzedDataProvider data) throws IOException {
        Path root = dir.path();
        Map<Path, byte[]> planted = new HashMap<>();
        try {
            int n = data.consumeInt(0, 6);
            for (int i = 0; i < n; i++) {
                ShmKind kind = data.pickValue(ShmKind.values());
                switch (data.consumeInt(0, 5)) {
                    case 0 -> { // a name of ours that is a symbolic link (to a file of ours, or nowhere)
                        Path link = root.resolve(dir.newName(kind));
                        Path target = planted.isEmpty() ? root.resolve("nowhere")
                                : planted.keySet().iterator().next();
                        Files.createSymbolicLink(link, target);
                    }
                    case 1 -> Files.createDirectory(root.resolve(dir.newName(kind)));
                    case 2 -> { // a foreign name
                        Path p = root.resolve("other-" + HexFormat.of().formatHex(data.consumeBytes(8)));
                        if (!Files.exists(p)) {
                            Files.write(p, data.consumeBytes(64));
                            planted.put(p, Files.readAllBytes(p));
                        }
                    }
                    default -> {
                        byte[] content = data.consumeBytes(data.consumeInt(0, 1200));
                        String name = Hostile.plant(dir, kind, content);
                        planted.put(root.resolve(name), content);
                    }
                }
            }
            List<Inventory.Entry> entries = Inventory.list(dir);
            for (Inventory.Entry e : entries) {
                assertNotNull(e.details(), "an entry says what it is or why it is unreadable");
                assertTrue(dir.isOurs(e.name()), "listed a file that is not ours: " + e.name());
            }
            for (Map.Entry<Path, byte[]> p : planted.entrySet()) {
                String name = p.getKey().getFileName().toString();
                if (dir.isOurs(name)) {
                    assertTrue(entries.stream().anyMatch(e -> e.name().equals(name)), "listed " + name);
                }
                assertArrayEquals(p.getValue(), Files.readAllBytes(p.getKey()), "inventory changed " + name);
            }
        } finally {
            Hostile.empty(root);
        }
    }
    /**
     * The janitor reads every header in the directory to decide what is dead. Whatever the
     * files hold, it throws nothing, removes nothing that is not a regular file of ours,
     * never removes a file whose header names this (live) process as its owner, and leaves
     * alone a file too short for a header (planted just now: young, it may be being created).
     */
    @FuzzTest(maxDuration = "2m")
    void janitor(FuzzedDataProvider data) throws IOException {
        Path root = dir.path();
        ProcessIdentity me = ProcessIdentity.current();
        Map<Path, String> mustStay = new HashMap<>(); // path -> why
        try {
            int n = data.consumeInt(0, 6);
            for (int i = 0; i < n; i++) {
                ShmKind kind = data.pickValue(ShmKind.values());
                switch (data.consumeInt(0, 4)) {
                    case 0 -> {
                        Path link = root.resolve(dir.newName(kind));
                        Files.createSymbolicLink(link, root.resolve("nowhere"));
                        mustStay.put(link, "a link");
                    }
                    case 1 -> {
                        Path p = root.resolve("other-" + HexFormat.of().formatHex(data.consumeBytes(8)));
                        if (!Files.exists(p)) {
                            Files.write(p, data.consumeBytes(64));
                            mustStay.put(p, "not ours");
                        }
                    }
                    default -> {
                        byte[] content = data.consumeBytes(data.consumeInt(0, 1200));
                        boolean live = content.length >= FileHeader.LENGTH && data.consumeBoolean();
                        if (live) { // owned by this process, whatever else the file says
                            java.nio.ByteBuffer.wrap(content).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                                    .putLong((int) FileHeader.OWNER_PID_OFFSET, me.pid())
                                    .putLong((int) FileHeader.OWNER_START_OFFSET, me.startTicks());
                        }
                        Path p = root.resolve(Hostile.plant(dir, kind, content));
                        if (live) {
                            mustStay.put(p, "owned by a live process");
                        } else if (content.length < FileHeader.LENGTH) {
                            mustStay.put(p, "a young file that names no owner");
                        }
                    }
                }
            }
            io.refshare.inspect.Janitor.Report report = io.refshare.inspect.Janitor.sweep(dir, false);
            for (String removed : report.removed()) {
                assertTrue(dir.isOurs(removed), "removed a name that is not ours: " + removed);
            }
            for (Map.Entry<Path, String> p : mustStay.entrySet()) {
                assertTrue(Files.exists(p.getKey(), java.nio.file.LinkOption.NOFOLLOW_LINKS),
                        "the janitor removed " + p.getKey().getFileName() + ", " + p.getValue());
            }
        } finally {
            Hostile.empty(root);
        }
    }
}
