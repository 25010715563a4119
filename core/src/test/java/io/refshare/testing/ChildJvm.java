package io.refshare.testing;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A real child JVM running a main class from the test classpath, spoken to by lines on its
 * stdin and stdout (stderr is passed through to the test output), each read bounded by
 * {@link Replies#TIMEOUT_SECONDS}. {@link #close()} always
 * leaves no process behind.
 */
public final class ChildJvm implements AutoCloseable {
    private final Process process;
    private final PrintWriter in;
    private final Replies out;
    private final String name;

    private ChildJvm(String name, Process process) {
        this.name = name;
        this.process = process;
        this.in = new PrintWriter(process.outputWriter(StandardCharsets.US_ASCII), false);
        this.out = new Replies(process, name);
    }

    public static ChildJvm start(Class<?> main, String... args) {
        return startWith(new String[0], main, args);
    }

    /** Like {@link #start}, with extra JVM options (system properties, flags) before the main class. */
    public static ChildJvm startWith(String[] jvmOptions, Class<?> main, String... args) {
        return startUnder(List.of(), jvmOptions, main, args);
    }

    /**
     * Like {@link #startWith}, with the JVM started by a wrapper command ({@code unshare ...}
     * to run it in its own PID namespace, say). The wrapper must end with the JVM: killing
     * it must kill the JVM.
     */
    public static ChildJvm startUnder(List<String> wrapper, String[] jvmOptions, Class<?> main, String... args) {
        List<String> cmd = new ArrayList<>(wrapper);
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.addAll(List.of(jvmOptions));
        cmd.add("-Xmx256m");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        try {
            Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            return new ChildJvm(main.getSimpleName() + "#" + p.pid(), p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public long pid() {
        return process.pid();
    }

    public void send(String line) {
        in.println(line);
        in.flush();
    }

    /** The next line the child prints; fails if it exits first or prints nothing for a minute. */
    public String read() {
        return out.read();
    }

    /** Reads the next line and checks it starts with {@code prefix}; returns the rest. */
    public String expect(String prefix) {
        return out.expect(prefix);
    }

    public int waitFor() {
        return ChildProcesses.waitFor(process, name);
    }

    public void kill() {
        ChildProcesses.kill(process);
    }

    @Override
    public void close() {
        ChildProcesses.close(process, in);
    }
}
