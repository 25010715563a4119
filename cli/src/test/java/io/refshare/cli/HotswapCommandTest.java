package io.refshare.cli;

import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Verdict;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code refshare hotswap} with real reader JVMs, in a temporary shared-memory directory:
 * a short run passes every check and leaves nothing, a reader that dies fails the run
 * without leaving the other running, and bad options are refused before anything starts.
 */
class HotswapCommandTest {
    private Path dir;

    @BeforeEach
    void createDirectory() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-hotswap-test-");
    }

    @AfterEach
    void removeDirectory() throws IOException {
        for (String f : files()) {
            Files.delete(dir.resolve(f));
        }
        Files.delete(dir);
    }

    @Test
    void aShortRunVerifiesEveryAcquisitionRetiresEachVersionOnceAndLeavesNothing() throws Exception {
        HotswapCommand command = new HotswapCommand();
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        int exit = captured(stdout, () -> new CommandLine(command).execute("--readers", "2", "--size", "64KiB",
                "--interval", "5", "--duration", "2", "--dir", dir.toString()));
        String output = stdout.toString(StandardCharsets.UTF_8);
        System.out.print(output); // what a user sees, in the test log

        assertEquals(0, exit, output);
        HotswapSummary s = command.summary();
        assertNotNull(s, "the run reached its summary");
        assertTrue(s.published() >= 20, "a version every 5 ms for 2 s: " + s.published());
        assertEquals(2, s.readers().size());
        for (HotswapSummary.Reader r : s.readers()) {
            assertTrue(r.acquisitions() > 0, "reader " + r.pid() + " acquired");
            assertEquals(0, r.corrupt(), "reader " + r.pid() + ": torn or corrupt versions");
            assertEquals(0, r.backwards(), "reader " + r.pid() + ": older versions after newer ones");
            assertTrue(r.distinct() >= 2, "reader " + r.pid() + " saw the holder re-pointed: " + r.distinct());
            assertTrue(r.latest() <= s.published(), "reader " + r.pid() + " saw only published versions");
            assertEquals(0, r.anomalies());
        }
        assertEquals(s.published() - 1, s.retiredBeforeClose(), "all but the current retired while it was current");
        assertEquals(1, s.liveBeforeClose());
        assertEquals(s.published(), s.retiredAfterClose());
        assertEquals(s.published(), s.retiredByPublisher() + s.retiredByReaders(),
                "each version retired in exactly one process");
        assertEquals(0, s.anomalies(), "no token returned twice");
        assertTrue(s.limboEmpty());
        assertEquals(0, s.blocksInUse());
        assertEquals(List.of(), List.copyOf(s.filesLeft()));
        assertTrue(output.contains("every byte of every acquisition verified: all "), output);
        assertTrue(output.contains("versions never went backwards: yes"), output);
        assertTrue(output.contains(": each exactly once"), output);
        assertTrue(output.contains("files left behind: none"), output);
        assertTrue(output.strip().endsWith("nothing leaked") && output.contains("\nOK: "), output);
        assertEquals(List.of(), files(), "files left in the shared-memory directory");
        assertEquals(0, aliveChildren(), "reader processes left running");
    }

    @Test
    void aReaderThatDiesFailsTheRunAndTheOtherReaderIsNotLeftRunning() throws Exception {
        CommandLine cl = Main.commandLine(); // with its handler: a failure is one line on stderr and exit code 1
        HotswapCommand command = cl.getSubcommands().get("hotswap").getCommand();
        StringWriter err = new StringWriter();
        cl.setErr(new PrintWriter(err, true));
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        PrintStream original = System.out;
        System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
        long victimPid;
        try {
            CompletableFuture<Integer> run = CompletableFuture.supplyAsync(() -> cl.execute("hotswap", "--readers", "2",
                    "--size", "64KiB", "--duration", "60", "--dir", dir.toString()));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            // the line naming the readers comes once both have the holder open: publishing has begun
            while (!stdout.toString(StandardCharsets.UTF_8).contains("; readers ")) {
                assertTrue(System.nanoTime() < deadline && !run.isDone(), () -> "no readers started: " + stdout);
                Thread.sleep(20);
            }
            ProcessHandle victim = ProcessHandle.current().children().findFirst().orElseThrow();
            victimPid = victim.pid();
            assertTrue(victim.destroyForcibly());
            assertEquals(1, run.get(30, TimeUnit.SECONDS), "exit code after a reader died");
        } finally {
            System.setOut(original);
        }
        System.out.print(stdout.toString(StandardCharsets.UTF_8));
        System.out.print(err);
        assertTrue(err.toString().startsWith("refshare hotswap: reader " + victimPid + " exited early with code "),
                err.toString());
        assertNull(command.summary(), "a failed run prints no summary");
        assertEquals(0, aliveChildren(), "reader processes left running");
        // the killed reader could not remove its own status file (refshare gc would); nothing else is left
        ShmDirectory shm = new ShmDirectory(dir, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        for (String f : files()) {
            ProcessIdentity owner = FileHeader.read(dir.resolve(f)).owner();
            if (!owner.equals(ProcessIdentity.current())) { // this process's own life file stays while it runs
                assertEquals(Verdict.DEAD, shm.verdict(owner), f + " belongs to a process that is not dead");
            }
        }
    }

    @Test
    void badOptionsAreRefusedWithAClearMessageBeforeAnythingStarts() throws Exception {
        assertRefused("--readers must be between 1 and 32, was 0", "--readers", "0");
        assertRefused("--size must be at least 8 bytes", "--size", "4");
        assertRefused("--interval must be 0 or more milliseconds, was -1", "--interval", "-1");
        assertRefused("--duration must be more than 0", "--duration", "0");
        assertEquals(List.of(), files());
        assertEquals(0, aliveChildren());
    }

    private void assertRefused(String message, String... options) {
        CommandLine cl = Main.commandLine();
        StringWriter err = new StringWriter();
        cl.setErr(new PrintWriter(err, true));
        String[] args = Stream.concat(Stream.of("hotswap", "--dir", dir.toString()), Stream.of(options))
                .toArray(String[]::new);
        assertEquals(1, captured(new ByteArrayOutputStream(), () -> cl.execute(args)), String.join(" ", options));
        assertTrue(err.toString().startsWith("refshare hotswap: " + message), err.toString());
    }

    private static int captured(ByteArrayOutputStream into, IntSupplier run) {
        PrintStream original = System.out;
        System.setOut(new PrintStream(into, true, StandardCharsets.UTF_8));
        try {
            return run.getAsInt();
        } finally {
            System.setOut(original);
        }
    }

    private List<String> files() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    private static long aliveChildren() {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count();
    }
}
