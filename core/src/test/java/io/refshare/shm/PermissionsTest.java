package io.refshare.shm;

import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.counter.CounterFile;
import io.refshare.Tensor;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Files are 0600 and a process opens only files its user owns (or its group, when configured). */
class PermissionsTest {
    private static final int NOBODY = 65534;

    @Test
    void filesAreCreatedOwnerOnlyOrGroupWhenAsked() throws Exception {
        try (TempShm shm = new TempShm()) {
            try (CounterFile f = CounterFile.create(shm.directory(), 4, 1)) {
                assertEquals("rw-------", mode(shm.path().resolve(f.name())));
                f.unlink();
            }
            ShmDirectory group = new ShmDirectory(shm.path(), "refshare", ShmDirectory.OWNER_AND_GROUP);
            try (CounterFile f = CounterFile.create(group, 4, 1)) {
                assertEquals("rw-rw----", mode(shm.path().resolve(f.name())));
                f.unlink();
            }
        }
    }

    @Test
    void aFileOfAnotherUserIsRefusedEvenToRoot() throws Exception {
        assumeTrue(isRoot(), "needs root to give a file to another user (chown)");
        try (TempShm shm = new TempShm(); CounterFile f = CounterFile.create(shm.directory(), 4, 1)) {
            Path path = shm.path().resolve(f.name());
            Files.setAttribute(path, "unix:uid", NOBODY);
            RefshareException e = assertThrows(RefshareException.class, () -> CounterFile.open(shm.directory(), f.name()));
            assertTrue(e.getMessage().contains("belongs to uid " + NOBODY), e.getMessage());
            ShmDirectory group = new ShmDirectory(shm.path(), "refshare", ShmDirectory.OWNER_AND_GROUP);
            CounterFile.open(group, f.name()).close(); // same group, group access enabled: allowed
            f.unlink();
        }
    }

    @Test
    void aConsumerRunningAsAnotherUserIsRefused() throws Exception {
        assumeTrue(isRoot() && Files.isExecutable(Path.of("/usr/bin/setpriv")),
                "needs root and setpriv to run a process as another user");
        try (TempShm shm = new TempShm(); Refshare producer = Refshare.open(shm.config());
             Tensor t = producer.allocateBytes(1000)) {
            Files.setPosixFilePermissions(shm.path(), PosixFilePermissions.fromString("rwxrwxrwx")); // like /dev/shm
            byte[] message = producer.share(t);
            Process p = new ProcessBuilder(List.of("/usr/bin/setpriv", "--reuid=" + NOBODY, "--regid=" + NOBODY,
                    "--clear-groups", ProcessHandle.current().info().command().orElseThrow(),
                    "--enable-native-access=ALL-UNNAMED", "-cp", readableClassPath(),
                    ShmChildMain.class.getName(), "ReceiveAsAnotherUserMain", shm.path().toString(), HexFormat.of().formatHex(message)))
                    .redirectErrorStream(true).start();
            String out;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                out = String.join("\n", r.lines().toList());
            } finally {
                if (!p.waitFor(60, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                }
            }
            assertTrue(out.contains("REFUSED refusing") && out.contains("belongs to uid 0")
                    && out.contains("runs as uid " + NOBODY), "the other user's process was refused clearly:\n" + out);
            assertTrue(producer.cancel(message), "nothing was taken: the message was still in flight, untouched");
            // the other user's own status file
            for (String f : shm.files()) {
                Path file = shm.path().resolve(f);
                if ((int) Files.getAttribute(file, "unix:uid") == NOBODY) {
                    Files.delete(file);
                }
            }
        }
    }

    /** Our classes only: the other user cannot read the test libraries under /root. */
    private static String readableClassPath() {
        return String.join(":", List.of(System.getProperty("java.class.path").split(":")).stream()
                .filter(e -> e.contains("/target/")).toList());
    }

    private static boolean isRoot() {
        return Libc.getuid() == 0;
    }

    private static String mode(Path p) throws Exception {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
    }
}
