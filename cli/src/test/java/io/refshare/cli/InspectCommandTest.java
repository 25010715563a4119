package io.refshare.cli;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.SharedHolder;
import io.refshare.shm.ShmDirectory;
import io.refshare.Tensor;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code refshare inspect} on a directory with a live holder: its line carries the holder's figures. */
class InspectCommandTest {

    @Test
    void aHolderLineShowsItsFigures() throws Exception {
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-inspect-test-");
        try {
            String output;
            String name;
            try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(dir));
                 SharedHolder holder = rs.createHolder(4, 4)) {
                name = holder.name();
                Tensor held;
                try (Tensor t = rs.allocateBytes(4096)) {
                    holder.publish(t);
                }
                held = holder.acquire(); // keeps version 1 alive across the next publish
                try (Tensor t = rs.allocateBytes(4096)) {
                    holder.publish(t);
                }
                try {
                    output = inspect(dir);
                    System.out.print(output); // what a user sees, in the test log
                } finally {
                    held.close();
                }
            }
            // what the last Refshare's close does (the lock is taken again by the next record here)
            assertTrue(new ShmDirectory(dir, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY).leave());
            String life = output.lines().filter(l -> l.startsWith("life ")).findFirst()
                    .orElseThrow(() -> new AssertionError("no life file line in:\n" + output));
            assertTrue(life.contains(ProcessHandle.current().pid() + " alive"), life);
            assertTrue(life.endsWith("life lock held: the process runs"), life);
            String line = output.lines().filter(l -> l.contains(name)).findFirst()
                    .orElseThrow(() -> new AssertionError("no line for " + name + " in:\n" + output));
            assertTrue(line.startsWith("hold "), line);
            assertTrue(line.contains(ProcessHandle.current().pid() + " alive"), line);
            assertTrue(line.endsWith("2 published, 0 retired, 0 reclaimed, 2 live versions, 1 reader process"), line);
            try (Stream<Path> left = Files.list(dir)) {
                assertEquals(0, left.count(), "closing the holder and refshare leaves nothing");
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

    private static String inspect(Path dir) {
        PrintStream stdout = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            assertEquals(0, new CommandLine(new InspectCommand()).execute("--dir", dir.toString()));
        } finally {
            System.setOut(stdout);
        }
        return captured.toString(StandardCharsets.UTF_8);
    }
}
