package io.refshare.harness;


import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Runs {@code refshare bench} for a few seconds on one small size, with a real consumer
 * process, and checks that what it reports is well-formed. No assertion is about speed:
 * only that every system was measured, every number is a real positive one, and the run
 * left nothing behind.
 */
class BenchSmokeTest {
    private static final int ITERATIONS = 300;

    @Test
    void aSmokeRunMeasuresEverySystemAndLeavesNothingBehind(@TempDir Path out) throws Exception {
        Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-bench-test-");
        try {
            BenchCommand command = new BenchCommand();
            int exit = new CommandLine(command).execute("--sizes", "1KiB", "--iterations", Integer.toString(ITERATIONS),
                    "--warmup", "300", "--warmup-seconds", "0", "--no-torch", "--no-python", "--dir", shm.toString(), "--out", out.toString());
            assertEquals(0, exit, "bench exit code");
            BenchResults r = command.results();

            List<String> systems = r.measurements().stream().map(Measurement::system).toList();
            assertEquals(List.of("refshare reuse", "refshare reuse, batches of 32",
                    "refshare batches of 32 different", "refshare fresh",
                    "refshare busy-spin reuse", AgronaBench.SYSTEM, "unix socket copy"), systems);
            assertEquals(1, r.measurements().stream().filter(Measurement::baseline).count());
            for (Measurement m : r.measurements()) {
                assertEquals(1024, m.size());
                LatencyStats l = m.latency();
                assertEquals(ITERATIONS, l.rounds(), m.system());
                for (int i = 0; i < l.rounds(); i++) {
                    assertTrue(l.oneWayNanos()[i] > 0, m.system() + ": one-way sample " + i);
                    assertTrue(l.roundTripNanos()[i] >= l.oneWayNanos()[i], m.system() + ": round trip " + i);
                }
                assertEquals(0, l.clockViolations(), m.system());
                assertTrue(l.sharedCpu().onOneCpu() <= l.sharedCpu().samples()
                        && (m.system().startsWith(Measurement.REFSHARE) || l.sharedCpu().samples() == 0),
                        m.system() + ": samples of one CPU in the ping-pong, for refshare's only: " + l.sharedCpu());
                assertTrue(l.oneWayMicros(0.5) <= l.oneWayMicros(0.9) && l.oneWayMicros(0.9) <= l.oneWayMicros(0.99),
                        m.system() + ": percentiles in order");
                ThroughputStats t = m.throughput();
                assertEquals(ITERATIONS, t.messages(), m.system());
                assertEquals(ITERATIONS * 1024L, t.bytes(), m.system());
                assertTrue(t.nanos() > 0 && Double.isFinite(t.tensorsPerSecond()) && t.tensorsPerSecond() > 0
                        && t.gigabytesPerSecond() > 0, m.system() + ": throughput");
                assertTrue(t.sharedCpu().onOneCpu() <= t.sharedCpu().samples()
                        && (m.system().startsWith(Measurement.REFSHARE) || t.sharedCpu().samples() == 0),
                        m.system() + ": samples of one CPU, for refshare's rows only: " + t.sharedCpu());
            }
            assertEquals(List.of(Reclamation.AT_ONCE_NANOS, Reclamation.HELD_NANOS),
                    r.reclamations().stream().map(Reclamation::holdNanos).toList(), "reclamation variants");
            for (Reclamation x : r.reclamations()) {
                assertEquals(1024, x.size());
                assertTrue(x.rounds() > 0, "reclamation rounds measured: " + x.rounds() + " (" + x.excluded()
                        + " excluded)");
                for (long ns : x.latencyNanos()) {
                    assertTrue(ns >= 0, "a block cannot be back before the consumer's close: " + ns + " ns");
                }
            }
            assertTrue(r.clock().holds(), "the consumer's nanoTime fell inside the producer's windows: " + r.clock());
            assertTrue(r.cleanup().clean(), "cleanup: " + r.cleanup());
            assertEquals(List.of(), list(shm), "files left in the shared-memory directory");
            assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count(),
                    "child processes left running");

            String table = Report.table(r);
            assertTrue(table.contains("refshare reuse") && table.contains("unix socket copy") && table.contains("baseline"),
                    table);
            // the notes speak of the machine measured, not of the one the text was written on
            assertTrue(table.contains("this machine has " + r.machine().cores() + " cores"), table);
            assertTrue(table.contains("in up to 10 slices of 50,000 messages or more"), table);
            String json = Files.readString(out.resolve("results.json"));
            assertTrue(json.startsWith("{") && json.strip().endsWith("}"), "results.json is one object");
            assertTrue(json.contains("\"system\":\"refshare fresh\"") && json.contains("\"system\":\"unix socket copy\""),
                    "results.json names the systems");
            assertFalse(json.contains("NaN") || json.contains("Infinity"), "results.json holds only JSON numbers");
            assertTrue(json.contains("\"reclamation\":[") && json.contains("\"targets\":["), "results.json has "
                    + "reclamation and targets");
            assertTrue(json.contains("\"shared_cpu_samples\":"), "results.json has the samples of one CPU");
            assertTrue(table.contains("stolen      ") && json.contains("\"cpu_time_stolen\":\"" + r.stolen() + "\""),
                    "the stolen CPU time is in the table and results.json: " + r.stolen());
            assertEquals(table, Files.readString(out.resolve("table.txt")), "table.txt is the printed table");
            assertTrue(Files.readString(out.resolve("table.md")).contains("| 1 KiB | refshare reuse |"), "table.md");
            String svg = Files.readString(out.resolve("latency.svg"));
            assertTrue(svg.startsWith("<svg") && svg.strip().endsWith("</svg>") && svg.contains("<polyline"),
                    "latency.svg is a chart with lines");
        } finally {
            deleteTree(shm);
        }
    }

    @Test
    void sizesParseInBinaryUnitsAndLabelBackExactly() {
        assertEquals(1024, ByteSize.parse("1KiB"));
        assertEquals(64L << 10, ByteSize.parse("64kb"));
        assertEquals(256L << 20, ByteSize.parse("256MiB"));
        assertEquals(4096, ByteSize.parse("4096"));
        assertEquals("1 KiB", ByteSize.label(1024));
        assertEquals("1.5 KiB", ByteSize.label(1536));
        assertEquals("256 MiB", ByteSize.label(256L << 20));
        assertEquals("1000 B", ByteSize.label(1000));
    }

    @Test
    void plansShrinkWithSizeAndHonourIterations() {
        SizePlan small = SizePlan.of(1024, false, 0, 0);
        SizePlan large = SizePlan.of(256L << 20, false, 0, 0);
        assertTrue(large.pingPongRounds() < small.pingPongRounds() && large.streamMessages() < small.streamMessages());
        assertTrue(large.pingPongRounds() >= 30 && large.window() >= 4 && large.streamWarmup() >= large.window());
        SizePlan fixed = SizePlan.of(1L << 20, true, 123, 16);
        assertEquals(123, fixed.pingPongRounds());
        assertEquals(123, fixed.streamMessages());
        assertEquals(16, fixed.window());
    }

    @Test
    void smallMessagesStreamInLongInterleavedSlicesThatAddUp() {
        for (SizePlan p : List.of(SizePlan.of(1024, false, 0, 0), SizePlan.of(1024, true, 0, 0),
                SizePlan.of(64 << 10, false, 0, 0), SizePlan.of(256L << 20, false, 0, 0),
                SizePlan.of(1024, false, 123_457, 0))) {
            int sum = 0;
            for (int i = 0; i < p.streamSlices(); i++) {
                assertTrue(p.sliceMessages(i) >= SizePlan.MESSAGES_PER_SLICE || p.streamSlices() == 1,
                        p + ": slice " + i);
                sum += p.sliceMessages(i);
            }
            assertEquals(p.streamMessages(), sum, p + ": the slices add up");
            assertTrue(p.sliceWarmup() >= p.window(), p + ": a slice warms up with a window at least");
        }
        assertEquals(10, SizePlan.of(1024, false, 0, 0).streamSlices());
        assertEquals(2, SizePlan.of(1024, false, 123_457, 0).streamSlices());
        assertEquals(1, SizePlan.of(64 << 10, false, 0, 0).streamSlices());
        assertEquals(1, SizePlan.of(256L << 20, false, 0, 0).streamSlices());
    }

    @Test
    void theDefaultWindowHoldsAMebibyteOfSmallMessagesAndAtMostAGibibyte() {
        assertEquals(1024, SizePlan.defaultWindow(1));
        assertEquals(1024, SizePlan.defaultWindow(1024));
        assertEquals(256, SizePlan.defaultWindow(4096));
        assertEquals(64, SizePlan.defaultWindow(64 << 10));
        assertEquals(64, SizePlan.defaultWindow(16L << 20));
        assertEquals(4, SizePlan.defaultWindow(256L << 20));
        assertEquals(4, SizePlan.defaultWindow(Integer.MAX_VALUE));
    }

    private static List<String> list(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).toList();
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
