package io.refshare.ucx;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM (here: in a network namespace) spoken to by lines; {@link #close()} always
 * leaves no process behind. UCX is limited to its TCP transport (the veth link).
 */
final class BridgeChild implements AutoCloseable {
    private final Process process;
    private final PrintWriter in;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    final String name;

    private BridgeChild(String name, Process process) {
        this.name = name;
        this.process = process;
        this.in = new PrintWriter(process.outputWriter(StandardCharsets.US_ASCII), true);
        Thread.ofPlatform().daemon(true).start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.US_ASCII))) {
                String line;
                while ((line = r.readLine()) != null) {
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // the process ended
            }
            lines.add("<eof>");
        });
    }

    static BridgeChild start(List<String> wrapper, Class<?> main, String... args) {
        List<String> cmd = new ArrayList<>(wrapper);
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Xmx128m");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
        io.refshare.ucx.bench.HostPair.ucxEnvironment(pb.environment());
        try {
            Process p = pb.start();
            return new BridgeChild(main.getSimpleName() + "#" + p.pid(), p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Any program (a Python consumer, say) with UCX's environment for the two hosts. */
    static BridgeChild startProgram(String name, List<String> command, java.util.Map<String, String> env) {
        ProcessBuilder pb = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().putAll(env);
        try {
            Process p = pb.start();
            return new BridgeChild(name + "#" + p.pid(), p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    void send(String line) {
        in.println(line);
    }

    /** The next line, failing after {@code seconds}. */
    String line(long seconds) throws InterruptedException {
        String l = lines.poll(seconds, TimeUnit.SECONDS);
        if (l == null) {
            throw new AssertionError(name + " printed nothing within " + seconds + " s");
        }
        return l;
    }

    /** The next line starting with {@code prefix} (others skipped). */
    String expect(String prefix, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            long left = deadline - System.nanoTime();
            String l = lines.poll(Math.max(0, left), TimeUnit.NANOSECONDS);
            if (l == null) {
                throw new AssertionError(name + ": no line starting with '" + prefix + "' within " + seconds + " s");
            }
            if (l.startsWith(prefix)) {
                return l;
            }
            if (l.equals("<eof>")) {
                throw new AssertionError(name + " ended before printing '" + prefix + "'");
            }
        }
    }

    /** Asks for {@code stats} and returns the value of {@code key} in the answer. */
    String stat(String key) throws InterruptedException {
        send("stats");
        String l = expect("stats ", 10);
        if (key.equals("error")) {
            return l.substring(l.indexOf(" error=") + 7); // the last field; its text has spaces
        }
        for (String kv : l.substring(6).split(" ")) {
            if (kv.startsWith(key + "=")) {
                return kv.substring(key.length() + 1);
            }
        }
        int at = l.indexOf(" " + key + "=");
        if (at >= 0) {
            return l.substring(at + key.length() + 2);
        }
        throw new AssertionError("no " + key + " in " + l);
    }

    long statLong(String key) throws InterruptedException {
        return Long.parseLong(stat(key));
    }

    /** SIGKILL and wait for the end. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /** Asks the child to quit and waits for its exit status. */
    int quit(long seconds) throws InterruptedException {
        send("quit");
        in.close();
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
            throw new AssertionError(name + " did not end within " + seconds + " s after quit");
        }
        return process.exitValue();
    }

    @Override
    public void close() {
        if (process.isAlive()) {
            process.destroyForcibly();
            try {
                process.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
