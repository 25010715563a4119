package io.refshare.fuzz;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * File names arrive from other processes (in descriptors, in queue messages), so the
 * directory resolves and opens them as hostile: whatever the name, nothing outside the
 * directory is ever opened, nothing but a regular file of ours of the expected kind is
 * mapped, and a refusal is an {@link InvalidDataException} or another
 * {@link RefshareException} with a reason.
 *
 * <p>The directory holds traps with names of the right shape: a symbolic link to a file
 * outside it, a link to a file inside it, a subdirectory and a FIFO (opening which would
 * block); beside it lies a file that must never be touched.
 */
class ShmNamesFuzzTest {
    private static final byte[] OUTSIDE_CONTENT = "outside the shared memory directory".getBytes();

    private static TempShm shm;
    private static TempShm beside;
    private static ShmDirectory dir;
    private static Path outside;
    private static final List<String> fixtures = new ArrayList<>();
    private static String regular;

    @BeforeAll
    static void createTraps() throws IOException, InterruptedException {
        shm = new TempShm();
        dir = shm.directory();
        beside = new TempShm();
        outside = beside.path().resolve("outside");
        Files.write(outside, OUTSIDE_CONTENT);
        try (ShmFile f = dir.create(ShmKind.COUNTERS, 4096)) {
            regular = f.name();
        }
        fixtures.add(regular);
        String linkOut = dir.newName(ShmKind.COUNTERS);
        Files.createSymbolicLink(dir.path().resolve(linkOut), outside);
        fixtures.add(linkOut);
        String linkIn = dir.newName(ShmKind.SEGMENT);
        Files.createSymbolicLink(dir.path().resolve(linkIn), dir.path().resolve(regular));
        fixtures.add(linkIn);
        String subdirectory = dir.newName(ShmKind.QUEUE);
        Files.createDirectory(dir.path().resolve(subdirectory));
        fixtures.add(subdirectory);
        String fifo = dir.newName(ShmKind.STATUS);
        Process mkfifo = new ProcessBuilder("mkfifo", dir.path().resolve(fifo).toString()).inheritIO().start();
        if (mkfifo.waitFor() == 0) {
            fixtures.add(fifo);
        }
        fixtures.add("../" + beside.path().getFileName() + "/outside");
        fixtures.add(outside.toString());
    }

    @AfterAll
    static void removeTraps() throws IOException {
        try {
            Hostile.empty(dir.path());
            shm.close();
        } finally {
            Files.deleteIfExists(outside);
            beside.close();
        }
    }

    @FuzzTest(maxDuration = "2m")
    void resolveAndOpen(FuzzedDataProvider data) throws IOException {
        ShmKind kind = data.pickValue(ShmKind.values());
        String name = switch (data.consumeInt(0, 3)) {
            case 0 -> data.consumeString(300);
            case 1 -> data.consumeAsciiString(300);
            // a trap's name with something before or after it: "../", "/.", "\0", a suffix
            default -> data.consumeString(8) + data.pickValue(fixtures) + data.consumeRemainingAsString();
        };

        try {
            Path p = dir.resolve(name, kind);
            assertEquals(dir.path(), p.getParent(), "resolved " + name + " outside the directory: " + p);
            assertEquals(name, p.getFileName().toString(), "resolved " + name + " to another name");
            assertEquals(kind, dir.kindOf(name));
        } catch (InvalidDataException e) {
            Hostile.refused(e);
        }

        try (ShmFile f = dir.open(name, kind, 0)) {
            assertEquals(dir.path(), f.path().getParent(), "opened " + f.path() + " for " + name);
            assertTrue(Files.isRegularFile(f.path(), LinkOption.NOFOLLOW_LINKS), "mapped " + f.path());
            assertEquals(regular, f.name(), "the only regular file of ours here");
            assertEquals(ShmKind.COUNTERS, kind);
        } catch (RefshareException e) {
            Hostile.refused(e);
        }
        assertArrayEquals(OUTSIDE_CONTENT, Files.readAllBytes(outside), "the file outside was changed");
    }
}
