package io.refshare.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The child processes of the CLI's multi-process commands ({@code demo}, {@code hotswap},
 * {@code bench}'s consumer):
 * real JVMs, started with this JVM's java and class path so that they run the same build,
 * and never left running when the command ends, however it ends.
 */
public final class ChildJvms {
    private ChildJvms() {
    }

    /**
     * Starts {@code main} in a new JVM. Its stderr goes to ours (a child's stack trace is
     * what a user needs to see when it fails); its stdout is for the parent to read.
     */
    public static Process start(Class<?> main, String maxHeap, String... args) throws IOException {
        return start(main, maxHeap, List.of(), args);
    }

    /** As {@link #start(Class, String, String...)}, with further JVM options (a benchmark peer's). */
    public static Process start(Class<?> main, String maxHeap, List<String> jvmOptions, String... args)
            throws IOException {
        String java = ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xmx" + maxHeap));
        command.addAll(jvmOptions);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        command.addAll(List.of(args));
        return new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    /** Throws when one of the children is gone, so that the parent stops instead of waiting on it. */
    public static void requireAlive(List<Process> children, String role) {
        for (Process p : children) {
            if (!p.isAlive()) {
                throw new IllegalStateException(role + " " + p.pid() + " exited early with code " + p.exitValue());
            }
        }
    }

    /**
     * Ends every child still running. A child that stops when its stdin ends gets up to
     * {@code grace} to close its refshare context and remove its files; after that it is
     * killed (leaving its files to {@code refshare gc}) and waited for, so that no child is
     * alive when this returns.
     */
    public static void end(List<Process> children, Duration grace) {
        long deadline = System.nanoTime() + grace.toNanos();
        boolean interrupted = false;
        for (Process p : children) {
            try {
                p.getOutputStream().close();
            } catch (IOException | UncheckedIOException alreadyGone) {
                // its stdin is closed already: it is on its way out
            }
        }
        for (Process p : children) {
            try {
                long left = deadline - System.nanoTime();
                if (interrupted || left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) {
                    p.destroyForcibly();
                }
            } catch (InterruptedException e) {
                interrupted = true;
                p.destroyForcibly();
            }
        }
        for (Process p : children) {
            try {
                p.onExit().get(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                interrupted = true;
            } catch (Exception stillExiting) {
                // SIGKILL was sent; the kernel ends it whatever we do
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
