package io.refshare.harness;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code refshare bench}'s Java -> Python and Python -> Java rows with the real Python peer
 * (python/peers/bench_peer.py on /usr/bin/python3): measured like the Java rows, targets
 * evaluated, and nothing left behind by any of the three processes.
 */
class BenchPythonTest {
    private static final int ITERATIONS = 200;

    @Test
    void javaToPythonAndPythonToJavaRowsAreMeasuredAndLeaveNothing() throws Exception {
        Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-bench-python-test-");
        try {
            BenchCommand command = new BenchCommand();
            int exit = new CommandLine(command).execute("--sizes", "1KiB,64KiB", "--iterations",
                    Integer.toString(ITERATIONS), "--warmup", "200", "--warmup-seconds", "0", "--no-torch", "--dir", shm.toString());
            BenchResults r = command.results();
            assertNull(r.python(), "the Python rows ran");
            assertEquals(0, exit, "bench exit code");
            for (long size : new long[]{1024, 64 * 1024}) {
                List<String> systems = r.measurements().stream().filter(m -> m.size() == size)
                        .map(Measurement::system).toList();
                assertEquals(List.of("refshare reuse", "refshare reuse, batches of 32",
                        "refshare batches of 32 different", "refshare fresh",
                        "refshare busy-spin reuse", AgronaBench.SYSTEM, "unix socket copy", "refshare java->python numpy reuse",
                        "refshare java->python numpy fresh", "refshare python->java reuse", "refshare python->java fresh"), systems);
            }
            for (Measurement m : r.measurements()) {
                LatencyStats l = m.latency();
                assertEquals(ITERATIONS, l.rounds(), m.system());
                assertEquals(0, l.clockViolations(), m.system() + ": Python's monotonic_ns and Java's nanoTime agree");
                for (int i = 0; i < l.rounds(); i++) {
                    assertTrue(l.oneWayNanos()[i] > 0 && l.roundTripNanos()[i] >= l.oneWayNanos()[i], m.system());
                }
                assertEquals(ITERATIONS, m.throughput().messages(), m.system());
                assertTrue(m.throughput().tensorsPerSecond() > 0, m.system());
            }
            List<Targets> python = Targets.of(r).stream().filter(t -> t.name().contains("java->python")).toList();
            assertEquals(4, python.size(), "vs torch and 50,000/s, each mode");
            for (Targets t : python) {
                if (t.name().contains("torch")) {
                    assertNull(t.met(), "no torch rows in this run: " + t);
                } else {
                    assertTrue(t.met() != null, "1 KiB was measured: " + t);
                }
            }
            assertTrue(r.cleanup().clean(), "cleanup: " + r.cleanup());
            assertEquals(List.of(), list(shm), "files left in the shared-memory directory");
            assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count(),
                    "child processes left running");
            String table = Report.table(r);
            assertTrue(table.contains("refshare java->python numpy fresh") && table.contains("Python process with code 0"),
                    table);
            System.out.print(table);
        } finally {
            try (Stream<Path> s = Files.list(shm)) {
                for (Path p : s.toList()) {
                    Files.deleteIfExists(p);
                }
            }
            Files.deleteIfExists(shm);
        }
    }

    private static List<String> list(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).toList();
        }
    }
}
