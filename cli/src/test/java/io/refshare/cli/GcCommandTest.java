package io.refshare.cli;

import io.refshare.shm.LifeFile;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code refshare gc --group-access}: files another user of our group left (mode 0660, as
 * processes sharing with group access create them) are judged, and removed once their
 * process is dead; without the option they are another user's and left alone.
 */
class GcCommandTest {
    /**
     * A process that is not running (the largest pid a file can record, with a start time long
     * past): nobody holds its life file's lock, so it is judged dead.
     */
    private static final ProcessIdentity GONE = new ProcessIdentity(ProcessIdentity.MAX_PID, 1234);
    private static final int OTHER_USER = 65534;

    @Test
    void groupAccessJudgesTheFilesOfAnotherUserOfOurGroup() throws Exception {
        assumeTrue(Files.getAttribute(Path.of("/proc/self"), "unix:uid").equals(0),
                "needs root to give a file to another user");
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-gc-test-");
        try {
            ShmDirectory shm = new ShmDirectory(dir, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_AND_GROUP);
            String segment = shm.newName(ShmKind.SEGMENT);
            String life = LifeFile.name(shm, GONE);
            leftByAnotherUserOfOurGroup(dir.resolve(segment), 0); // a creator that died before writing its layout
            leftByAnotherUserOfOurGroup(dir.resolve(life), LifeFile.MAGIC);

            String without = gc(dir, "-v");
            assertTrue(without.contains("removed 0 files"), without);
            assertTrue(without.contains("kept " + segment + " (another user's)"), without);

            String dry = gc(dir, "--group-access", "--dry-run");
            assertTrue(dry.contains("would remove 2 files"), dry);
            String with = gc(dir, "--group-access");
            assertTrue(with.contains("removed " + segment), with);
            assertTrue(with.contains("removed " + life), with);
            assertTrue(with.contains("removed 2 files"), with);
            try (Stream<Path> left = Files.list(dir)) {
                assertEquals(0, left.count());
            }
        } finally {
            try (Stream<Path> left = Files.list(dir)) {
                for (Path p : left.toList()) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
    }

    /** A file whose header names {@link #GONE}, owned by another user and our primary group, mode 0660. */
    private static void leftByAnotherUserOfOurGroup(Path p, long magic) throws Exception {
        byte[] header = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN).putLong(magic).putInt(1).putInt(32)
                .putLong(GONE.pid()).putLong(GONE.startTicks()).array();
        Files.write(p, header);
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rw-rw----"));
        Files.setAttribute(p, "unix:uid", OTHER_USER);
        Files.setAttribute(p, "unix:gid", (int) Files.getAttribute(Path.of("/proc/self"), "unix:gid"));
        assertEquals(OTHER_USER, Files.getAttribute(p, "unix:uid"));
    }

    private static String gc(Path dir, String... options) {
        PrintStream stdout = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            String[] args = Stream.concat(Stream.of("--dir", dir.toString()), Stream.of(options)).toArray(String[]::new);
            assertEquals(0, new CommandLine(new GcCommand()).execute(args));
        } finally {
            System.setOut(stdout);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        System.out.print(out);
        return out;
    }
}
