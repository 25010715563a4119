package io.refshare.harness;


import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The optional torch.multiprocessing comparison: runs {@link TorchScript} with
 * {@code /usr/bin/python3} when that python can import torch, and turns its output into
 * measurements like the others. Nothing is installed: without torch it is skipped, and a
 * failure of the script is reported without spoiling the rest of the run.
 */
final class TorchBench {
    static final Path PYTHON = Path.of("/usr/bin/python3");
    private static final int MAX_ROUNDS = 500;
    private static final int MAX_MESSAGES = 2_000;
    private static final long SCRIPT_TIMEOUT_MINUTES = 20;

    /**
     * @param skipped why nothing was measured (or what failed), null when it ran
     */
    record Outcome(List<Measurement> measurements, String skipped) {
    }

    private TorchBench() {
    }

    static Outcome run(List<SizePlan> plans, PrintStream log) throws InterruptedException {
        String missing = unavailable();
        if (missing != null) {
            log.println("torch.multiprocessing: skipped (" + missing + ")");
            return new Outcome(List.of(), missing);
        }
        log.println("torch.multiprocessing: measuring both sharing strategies with " + PYTHON);
        Path dir = null;
        Process p = null;
        Set<String> before = torchFiles();
        try {
            dir = Files.createTempDirectory("refshare-bench-torch-");
            Path script = dir.resolve("torch_bench.py");
            Files.writeString(script, TorchScript.source());
            List<String> command = new ArrayList<>(List.of(PYTHON.toString(), script.toString()));
            for (SizePlan plan : plans) {
                command.add(capped(plan));
            }
            p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            Process running = p;
            Thread.ofPlatform().daemon().start(() -> { // a hung script ends the reading below, not the run
                try {
                    if (!running.waitFor(SCRIPT_TIMEOUT_MINUTES, TimeUnit.MINUTES)) {
                        running.descendants().forEach(ProcessHandle::destroyForcibly);
                        running.destroyForcibly();
                    }
                } catch (InterruptedException ignored) {
                    // the run is over; the finally below ends the script
                }
            });
            List<Measurement> measured = parse(p, log);
            if (!p.waitFor(1, TimeUnit.MINUTES) || p.exitValue() != 0) {
                return failed("the script " + (p.isAlive() ? "did not finish" : "exited with code " + p.exitValue()), log);
            }
            Set<String> left = torchFiles();
            left.removeAll(before);
            if (!left.isEmpty()) {
                log.println("torch.multiprocessing left files in /dev/shm: " + left);
            }
            return new Outcome(measured, null);
        } catch (IOException | RuntimeException e) {
            return failed(e.getMessage(), log);
        } finally {
            if (p != null && p.isAlive()) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
            }
            deleteQuietly(dir);
        }
    }

    /** Why torch cannot be measured here, or null when it can. */
    static String unavailable() throws InterruptedException {
        if (!Files.isExecutable(PYTHON)) {
            return "no " + PYTHON;
        }
        try {
            Process p = new ProcessBuilder(PYTHON.toString(), "-c", "import torch")
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "python3 took over 2 minutes to import torch";
            }
            return p.exitValue() == 0 ? null : "python3 cannot import torch";
        } catch (IOException e) {
            return "cannot run " + PYTHON + ": " + e.getMessage();
        }
    }

    /** torch is far slower per message: fewer rounds keep its part of the run within minutes. */
    private static String capped(SizePlan p) {
        int rounds = Math.min(p.pingPongRounds(), MAX_ROUNDS);
        int messages = Math.min(p.streamMessages(), MAX_MESSAGES);
        return p.size() + ":" + Math.max(3, rounds / 10) + ":" + rounds + ":" + Math.max(p.window(), messages / 10)
                + ":" + messages + ":" + p.window();
    }

    private static List<Measurement> parse(Process p, PrintStream log) throws IOException {
        List<Measurement> out = new ArrayList<>();
        LatencyStats pending = null;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            boolean ended = false;
            while ((line = r.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "PINGPONG" -> {
                        check(w.length == 6 && Long.parseLong(w[5]) == 0, line);
                        long[] send = numbers(r.readLine(), "SEND");
                        long[] read = numbers(r.readLine(), "READ");
                        long[] ack = numbers(r.readLine(), "ACK");
                        pending = LatencyStats.of(send, read, ack, Integer.parseInt(w[4]));
                    }
                    case "STREAM" -> {
                        check(w.length == 7 && pending != null && Long.parseLong(w[5]) == 0, line);
                        long size = Long.parseLong(w[3]);
                        long messages = Long.parseLong(w[4]);
                        ThroughputStats t = new ThroughputStats(messages, messages * size, Long.parseLong(w[6]),
                                "multiprocessing.Queue");
                        Measurement m = new Measurement(size, "torch.mp " + w[1] + " " + w[2], false, pending, t);
                        pending = null;
                        out.add(m);
                        log.printf(Locale.ROOT, "  %-34s %s: p50 %10.1f us   %,12.0f tensors/s%n", m.system(),
                                ByteSize.label(size), m.latency().oneWayMicros(0.5), t.tensorsPerSecond());
                    }
                    case "END" -> ended = true;
                    default -> throw new IOException("unexpected output from the torch script: " + abbreviate(line));
                }
            }
            if (!ended) {
                throw new IOException("the torch script stopped before the end (see its error output above)");
            }
        } catch (NumberFormatException e) {
            throw new IOException("malformed output from the torch script: " + e.getMessage());
        }
        return out;
    }

    private static long[] numbers(String line, String keyword) throws IOException {
        if (line == null || !line.startsWith(keyword + " ")) {
            throw new IOException("the torch script sent no " + keyword + " line");
        }
        String[] w = line.substring(keyword.length() + 1).split(" ");
        long[] v = new long[w.length];
        for (int i = 0; i < w.length; i++) {
            v[i] = Long.parseLong(w[i]);
        }
        return v;
    }

    private static void check(boolean ok, String line) throws IOException {
        if (!ok) {
            throw new IOException("the torch script reported wrong content or a malformed line: " + abbreviate(line));
        }
    }

    private static Outcome failed(String why, PrintStream log) {
        log.println("torch.multiprocessing: failed (" + why + ")");
        return new Outcome(List.of(), "failed: " + why);
    }

    /** torch's file_system strategy leaves /dev/shm/torch_* files behind when something goes wrong: report them. */
    private static Set<String> torchFiles() {
        try (Stream<Path> s = Files.list(Path.of("/dev/shm"))) {
            Set<String> names = new HashSet<>();
            s.map(f -> f.getFileName().toString()).filter(n -> n.startsWith("torch_")).forEach(names::add);
            return names;
        } catch (IOException | RuntimeException e) {
            return new HashSet<>();
        }
    }

    private static void deleteQuietly(Path dir) {
        if (dir == null) {
            return;
        }
        try (Stream<Path> s = Files.list(dir)) {
            for (Path f : s.toList()) {
                Files.deleteIfExists(f);
            }
            Files.deleteIfExists(dir);
        } catch (IOException ignored) {
            // a temp directory we could not remove is not worth failing a finished run for
        }
    }

    private static String abbreviate(String s) {
        return s.length() <= 120 ? s : s.substring(0, 120) + "...";
    }
}
