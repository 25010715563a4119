package io.refshare.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The lines a child process prints on stdout, read by a thread of their own, so a wait for a
 * line that never comes fails after {@link #TIMEOUT_SECONDS} instead of hanging the build.
 */
public final class Replies {
    /** Longest wait for one line; far above any child's answer time, well below JUnit's 5 minutes. */
    public static final long TIMEOUT_SECONDS = 60;
    private static final String EXITED = "\u0000exited";

    private final Process process;
    private final String name;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    public Replies(Process process, String name) {
        this.process = process;
        this.name = name;
        Thread.ofPlatform().daemon().name(name + "-stdout").start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.US_ASCII))) {
                String line;
                while ((line = r.readLine()) != null) {
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // the process is gone; its exit code tells
            }
            lines.add(EXITED);
        });
    }

    /** The next line; fails if the process exits first or prints nothing for {@link #TIMEOUT_SECONDS}. */
    public String read() {
        try {
            String line = lines.poll(TIMEOUT_SECONDS, TimeUnit.SECONDS);
            if (line == null) {
                throw new AssertionError(name + " printed nothing for " + TIMEOUT_SECONDS + " s");
            }
            if (line.equals(EXITED)) {
                lines.add(EXITED);
                throw new AssertionError(name + " exited (code " + ChildProcesses.waitFor(process, name)
                        + ") before answering");
            }
            return line;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Reads the next line and checks it starts with {@code prefix}; returns the rest. */
    public String expect(String prefix) {
        String line = read();
        if (!line.startsWith(prefix)) {
            throw new AssertionError(name + " answered '" + line + "', expected '" + prefix + "...'");
        }
        return line.substring(prefix.length()).trim();
    }
}
