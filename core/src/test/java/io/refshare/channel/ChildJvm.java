package io.refshare.channel;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Starts a main class of the test sources in a fresh JVM, the way a second process would use refshare. */
final class ChildJvm implements AutoCloseable {
    private final Process process;
    private final Path output;

    private ChildJvm(Process process, Path output) {
        this.process = process;
        this.output = output;
    }

    /** Starts {@code mainClass} with {@code args}; its stdout and stderr go to {@code output}. */
    static ChildJvm start(Class<?> mainClass, Path output, String... args) throws IOException {
        String java = ProcessHandle.current().info().command().orElseThrow();
        // the serial collector: fewer JVM threads competing for a small machine's cores
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC",
                "-cp", System.getProperty("java.class.path"), mainClass.getName()));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(output.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .start();
        return new ChildJvm(p, output);
    }

    Process process() {
        return process;
    }

    Path output() {
        return output;
    }

    /** Waits for a normal exit and returns the exit code (-1 if it did not exit in time). */
    int awaitExit(long timeout, TimeUnit unit) throws InterruptedException {
        return process.waitFor(timeout, unit) ? process.exitValue() : -1;
    }

    /** SIGKILL, then reap, so the pid is gone from /proc as a crash would leave it. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor();
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
