package io.refshare.cli;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code refshare bridge receive} and {@code bridge send} as processes on loopback: what this
 * test puts on a queue in one directory arrives on the receiver's queue in another; the sender
 * ends with the stream and reports every tensor delivered; the receiver ends on SIGTERM and
 * leaves nothing behind. (The two-host tests of the ucx module cover the rest.)
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BridgeCommandTest {
    private static Process cli(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                Main.class.getName()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    @Test
    void sendAndReceiveMoveAStreamAndEndCleanly() throws Exception {
        Path a = Files.createTempDirectory(Path.of("/dev/shm"), "rs-bridge-cli-a-");
        Path b = Files.createTempDirectory(Path.of("/dev/shm"), "rs-bridge-cli-b-");
        Path secret = Files.createTempFile("rs-bridge-cli", "",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(secret, "the command line test's secret");
        Process receive = null;
        Process send = null;
        try {
            receive = cli("bridge", "receive", "--dir", b.toString(), "--listen", "127.0.0.1:13460", "--secret",
                    secret.toString(), "--capacity", "8");
            BufferedReader rout = new BufferedReader(new InputStreamReader(receive.getInputStream(),
                    StandardCharsets.US_ASCII));
            String first = rout.readLine();
            assertNotNull(first, "bridge receive printed nothing");
            assertTrue(first.contains(" into queue "), first);
            String queueB = first.substring(first.indexOf(" into queue ") + 12).trim();
            try (Refshare rsA = Refshare.open(RefshareConfig.defaults().withDirectory(a));
                 Refshare rsB = Refshare.open(RefshareConfig.defaults().withDirectory(b));
                 ShareQueue qb = rsB.openQueue(queueB)) {
                ShareQueue qa = rsA.createQueue(8);
                send = cli("bridge", "send", "--dir", a.toString(), qa.name(), "--to", "127.0.0.1:13460", "--secret",
                        secret.toString());
                for (int i = 0; i < 5; i++) {
                    try (Tensor t = rsA.allocate(DType.INT32, 256)) {
                        t.data().fill((byte) (i + 1));
                        qa.put(t);
                    }
                }
                for (int i = 0; i < 5; i++) {
                    try (Tensor t = qb.poll(30, TimeUnit.SECONDS)) {
                        assertNotNull(t, "tensor " + i + " did not arrive");
                        assertEquals((byte) (i + 1), t.data().get(ValueLayout.JAVA_BYTE, 1000));
                    }
                }
                qa.close(); // the creator's close ends the stream: bridge send finishes
                String out = new String(send.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertTrue(send.waitFor(30, TimeUnit.SECONDS));
                assertEquals(0, send.exitValue(), out);
                assertTrue(out.contains("forwarded 5: delivered 5, unconfirmed 0"), out);
                assertTrue(rsA.awaitLimboEmpty(java.time.Duration.ofSeconds(10)));
            }
            receive.destroy(); // SIGTERM: closes and removes its files
            assertTrue(receive.waitFor(30, TimeUnit.SECONDS));
            try (Stream<Path> left = Files.list(b)) {
                assertEquals(List.of(), left.toList(), "bridge receive left files");
            }
        } finally {
            for (Process p : new Process[]{send, receive}) {
                if (p != null && p.isAlive()) {
                    p.destroyForcibly();
                    p.waitFor(10, TimeUnit.SECONDS);
                }
            }
            Files.deleteIfExists(secret);
            for (Path dir : List.of(a, b)) {
                try (Stream<Path> files = Files.walk(dir)) {
                    for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(f);
                    }
                }
            }
        }
    }
}
