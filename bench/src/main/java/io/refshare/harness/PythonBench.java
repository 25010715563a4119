package io.refshare.harness;


import io.refshare.Refshare;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The rows between Java and Python: refshare from this JVM to the Python peer, which reads
 * through numpy ({@value #JAVA_TO_PYTHON}), and from the Python peer to the Java consumer
 * process ({@value #PYTHON_TO_JAVA}), each in both modes, at every size of the run, with the
 * payloads, reads and timestamps of the Java rows. Runs when {@code /usr/bin/python3} imports the
 * refshare package and numpy; otherwise it says why and the rest of the run stands.
 */
final class PythonBench {
    static final String JAVA_TO_PYTHON = "refshare java->python numpy ";
    static final String PYTHON_TO_JAVA = "refshare python->java ";

    /**
     * @param skipped why nothing was measured (or what failed), null when it ran
     * @param pid     the Python process, or 0 when none was started
     * @param exit    its exit code (0 when none was started)
     */
    record Outcome(List<Measurement> measurements, String skipped, long pid, int exit) {
    }

    /**
     * Messages a Python row streams at most: the Python peer moves about 100,000 a second, so
     * the two million a Java row streams at small sizes would take twenty seconds a row.
     */
    private static final int MAX_MESSAGES = 200_000;

    private PythonBench() {
    }

    private static int messages(SizePlan p) {
        return Math.min(p.streamMessages(), MAX_MESSAGES);
    }

    private static int warmup(SizePlan p) {
        return Math.min(p.streamWarmup(), Math.max(p.window(), messages(p) / 10));
    }

    static Outcome run(Refshare rs, PeerProcess java, Settings settings, List<SizePlan> plans, PrintStream log)
            throws InterruptedException {
        String missing = PythonPeers.unavailable("numpy");
        if (missing != null) {
            log.println("java<->python: skipped (" + missing + ")");
            return new Outcome(List.of(), missing, 0, 0);
        }
        List<Measurement> out = new ArrayList<>();
        PeerProcess python = null;
        try {
            python = PeerProcess.startPython(settings.directory(), settings.prefix());
            log.printf(Locale.ROOT, "java<->python: Python process pid %d (%s)%n", python.pid(), PythonPeers.PYTHON);
            RefshareBench toPython = new RefshareBench(rs, python);
            PythonProducerBench fromPython = new PythonProducerBench(python, java);
            for (SizePlan p : plans) {
                for (Mode mode : Mode.values()) {
                    LatencyStats latency = toPython.pingPong(p.size(), mode, p.pingPongWarmup(), p.pingPongRounds());
                    ThroughputStats throughput = toPython.stream(p.size(), mode, warmup(p), messages(p), p.window());
                    out.add(logged(log, new Measurement(p.size(), JAVA_TO_PYTHON + mode.label(), false, latency,
                            throughput)));
                }
                for (Mode mode : Mode.values()) {
                    LatencyStats latency = fromPython.pingPong(p.size(), mode, p.pingPongWarmup(), p.pingPongRounds());
                    ThroughputStats throughput = fromPython.stream(p.size(), mode, warmup(p), messages(p),
                            p.window());
                    out.add(logged(log, new Measurement(p.size(), PYTHON_TO_JAVA + mode.label(), false, latency,
                            throughput)));
                }
                rs.trim();
            }
            long pid = python.pid();
            int exit = python.finish(log);
            return new Outcome(out, exit == 0 ? null : "the Python process exited with code " + exit, pid, exit);
        } catch (IOException | RuntimeException e) {
            log.println("java<->python: failed (" + e.getMessage() + ")");
            return new Outcome(out, "failed: " + e.getMessage(), python == null ? 0 : python.pid(), -1);
        } finally {
            if (python != null) {
                python.close();
            }
        }
    }

    private static Measurement logged(PrintStream log, Measurement m) {
        log.printf(Locale.ROOT, "  %-34s %s: p50 %10.1f us   %,12.0f tensors/s%n", m.system(), ByteSize.label(m.size()),
                m.latency().oneWayMicros(0.5), m.throughput().tensorsPerSecond());
        return m;
    }
}
