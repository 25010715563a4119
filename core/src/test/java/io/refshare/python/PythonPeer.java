package io.refshare.python;

import io.refshare.testing.ChildProcesses;
import io.refshare.testing.Replies;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A real Python process running one of the peer scripts in {@code python/peers} with Debian's
 * {@code /usr/bin/python3} and {@code PYTHONPATH=python}, spoken to in lines like
 * {@link io.refshare.testing.ChildJvm}. Its replies are read by a thread, so a wait for a line
 * that never comes fails after a timeout instead of hanging the build. {@link #close()} always
 * leaves no process behind.
 */
final class PythonPeer implements AutoCloseable {
    static final Path PYTHON = Path.of("/usr/bin/python3");

    private final Process process;
    private final PrintWriter in;
    private final Replies out;
    private final String name;

    private PythonPeer(String name, Process process) {
        this.name = name;
        this.process = process;
        this.in = new PrintWriter(process.outputWriter(StandardCharsets.US_ASCII), false);
        this.out = new Replies(process, name);
    }

    /** The checkout's {@code python} folder: the package and its peers (tests run in a module folder below it). */
    static Path packageRoot() {
        Path dir = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        for (Path d = dir; d != null; d = d.getParent()) {
            if (Files.isRegularFile(d.resolve("python/peers/xpeer.py"))) {
                return d.resolve("python");
            }
        }
        throw new IllegalStateException("no python/peers/xpeer.py above " + dir);
    }

    /** Starts {@code python/peers/<script>} with {@code args}; its stderr goes to the test output. */
    static PythonPeer start(String script, String... args) {
        Path root = packageRoot();
        List<String> cmd = new ArrayList<>(List.of(PYTHON.toString(), root.resolve("peers").resolve(script).toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().put("PYTHONPATH", root.toString());
        pb.environment().put("PYTHONDONTWRITEBYTECODE", "1");
        try {
            Process p = pb.start();
            return new PythonPeer(script + " " + (args.length > 0 ? args[0] : "") + "#" + p.pid(), p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Runs {@code code} ({@code python3 -c}); {@code args} are its {@code sys.argv[1:]}. */
    static PythonPeer code(String code, String... args) {
        List<String> cmd = new ArrayList<>(List.of(PYTHON.toString(), "-c", code));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().put("PYTHONPATH", packageRoot().toString());
        pb.environment().put("PYTHONDONTWRITEBYTECODE", "1");
        try {
            Process p = pb.start();
            return new PythonPeer("python -c#" + p.pid(), p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static PythonPeer xpeer(String... args) {
        return start("xpeer.py", args);
    }

    long pid() {
        return process.pid();
    }

    void send(String line) {
        in.println(line);
        in.flush();
    }

    /** The next line the process prints; fails if it exits first or says nothing for a minute. */
    String read() {
        return out.read();
    }

    /** Reads the next line and checks it starts with {@code prefix}; returns the rest. */
    String expect(String prefix) {
        return out.expect(prefix);
    }

    /** Ends its stdin (the peers' signal to finish) and waits for its exit code. */
    int finish() {
        in.close();
        return waitFor();
    }

    int waitFor() {
        return ChildProcesses.waitFor(process, name);
    }

    /** SIGKILL: no cleanup of any kind in the process. */
    void kill() {
        ChildProcesses.kill(process);
    }

    @Override
    public void close() {
        ChildProcesses.close(process, in);
    }
}
