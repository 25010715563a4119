package io.refshare.inspect;

import io.refshare.exceptions.RefshareException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.*;

/**
 * FIFOs and links under refshare names, in place from the start or swapped in while a
 * sweep or an inspection runs: nothing blocks (a FIFO opened for reading without a writer
 * would wait forever), nothing follows a link, and the files around them are judged as usual.
 */
class HostileFilesTest {
    private static final Duration LIMIT = Duration.ofSeconds(20);

    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void fifosAndLinksUnderOurNamesBlockNothing() throws Exception {
        ShmDirectory dir = shm.directory();
        Path target = mkfifo(shm.path().resolve("target.fifo"));
        for (ShmKind kind : ShmKind.values()) {
            mkfifo(shm.path().resolve(dir.newName(kind)));
            Files.createSymbolicLink(shm.path().resolve(dir.newName(kind)), target);
        }
        List<String> before = shm.files();
        Janitor.Report report = assertTimeoutPreemptively(LIMIT, () -> Janitor.sweep(dir, false));
        assertEquals(List.of(), report.removed(), "nothing there is a file of ours");
        assertEquals(before, shm.files());
        assertTrue(report.kept().stream().anyMatch(k -> k.endsWith("(not a regular file, left alone)")), report.kept()
                .toString());
        assertTrue(report.kept().stream().anyMatch(k -> k.endsWith("(a symbolic link, left alone)")), report.kept()
                .toString());
        List<Inventory.Entry> listed = assertTimeoutPreemptively(LIMIT, () -> Inventory.list(dir));
        assertTrue(listed.stream().allMatch(e -> e.owner() == null), "no owner read through a FIFO or link: " + listed);
        for (String name : before) {
            ShmKind kind = dir.kindOf(name);
            if (kind == null) {
                continue;
            }
            Path p = shm.path().resolve(name);
            assertTimeoutPreemptively(LIMIT, () -> {
                assertThrows(RefshareException.class, () -> dir.open(name, kind, 0).close(), name);
                assertThrows(Exception.class, () -> FileHeader.read(p), name);
            });
        }
        for (String name : before) {
            Files.delete(shm.path().resolve(name));
        }
    }

    @Test
    void aFifoSwappedInDuringSweepsBlocksNothing() throws Exception {
        ShmDirectory dir = shm.directory();
        ShmFile live = dir.create(ShmKind.SEGMENT, 4096); // this process's: every sweep keeps it
        Path name = live.path();
        Path fifo = mkfifo(shm.path().resolve("swap.fifo"));
        Path aside = shm.path().resolve("aside.tmp");
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong swaps = new AtomicLong();
        Thread swapper = Thread.ofPlatform().name("swapper").start(() -> {
            try {
                while (!stop.get()) {
                    Files.move(name, aside, StandardCopyOption.ATOMIC_MOVE);
                    Files.move(fifo, name, StandardCopyOption.ATOMIC_MOVE);
                    Thread.onSpinWait();
                    Files.move(name, fifo, StandardCopyOption.ATOMIC_MOVE);
                    Files.move(aside, name, StandardCopyOption.ATOMIC_MOVE);
                    swaps.incrementAndGet();
                }
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        try {
            long end = System.nanoTime() + 2_000_000_000L;
            int sweeps = 0;
            while (System.nanoTime() < end) {
                Janitor.Report r = assertTimeoutPreemptively(LIMIT, () -> Janitor.sweep(dir, false));
                assertFalse(r.removed().contains(live.name()), "a live process's file is never removed: " + r);
                assertTimeoutPreemptively(LIMIT, () -> Inventory.list(dir));
                assertTimeoutPreemptively(LIMIT, () -> {
                    try {
                        dir.open(live.name(), ShmKind.SEGMENT, 4096).close();
                    } catch (RefshareException refusedOrGone) {
                        // the FIFO (refused) or nothing (gone) was there at that moment
                    }
                });
                sweeps++;
            }
            System.out.println(sweeps + " sweeps and inspections during " + swaps.get() + " swaps");
            assertTrue(sweeps > 0 && swaps.get() > 0);
        } finally {
            stop.set(true);
            swapper.join();
        }
        assertEquals(4096, Files.size(name), "the live file is back under its name, whole");
        live.unlink();
        live.close();
        Files.delete(fifo);
    }

    private static Path mkfifo(Path p) throws Exception {
        Process mk = new ProcessBuilder("mkfifo", p.toString()).inheritIO().start();
        assertEquals(0, mk.waitFor(), "mkfifo " + p);
        return p;
    }
}
