package io.refshare.harness;


import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The producer's handle on the consumer process ({@link BenchPeer}; or the Python peer,
 * python/peers/bench_peer.py, which speaks the same commands): one child process for
 * the whole run, so every system is measured between the same two processes. Commands go
 * to its stdin one line each; replies come back on its stdout, read by a thread so that a
 * wait can notice the child dying instead of hanging. {@link #close()} always leaves no
 * child behind.
 */
final class PeerProcess implements AutoCloseable {
    private static final Duration REPLY_TIMEOUT = Duration.ofSeconds(120);

    private final Process process;
    private final Writer commands;
    private final BlockingQueue<String> replies = new LinkedBlockingQueue<>();

    private final String role;
    /** Whether the peer answers {@link BenchPeer#THREAD} (the Java consumer does). */
    private final boolean tellsItsThread;
    /** The stat file of the peer's measuring thread once asked; null before. */
    private Optional<Path> measuringThread;

    private PeerProcess(Process process, String role, boolean tellsItsThread) {
        this.process = process;
        this.role = role;
        this.tellsItsThread = tellsItsThread;
        this.commands = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        Thread.ofPlatform().daemon().name("bench-peer-replies").start(this::readReplies);
    }

    /** Starts the consumer with this JVM's java and class path, and waits until it is ready. */
    static PeerProcess start(Path directory, String prefix) throws IOException, InterruptedException {
        Process p = ChildJvms.start(BenchPeer.class, "256m", directory.toString(), prefix);
        return ready(new PeerProcess(p, "the consumer process", true));
    }

    /** Starts the Agrona ring peer ({@link AgronaPeer}) on the rings of {@code file}, and waits until it is ready. */
    static PeerProcess startAgrona(Path file) throws IOException, InterruptedException {
        Process p = ChildJvms.start(AgronaPeer.class, "256m", AgronaRings.JVM_OPTIONS, file.toString());
        return ready(new PeerProcess(p, "the Agrona peer", false));
    }

    /** Starts the Python peer (python/peers/bench_peer.py on /usr/bin/python3) and waits until it is ready. */
    static PeerProcess startPython(Path directory, String prefix) throws IOException, InterruptedException {
        Process p = PythonPeers.start("bench_peer.py", directory.toString(), prefix);
        return ready(new PeerProcess(p, "the Python process", false));
    }

    private static PeerProcess ready(PeerProcess peer) throws IOException, InterruptedException {
        try {
            peer.await(BenchPeer.READY);
            return peer;
        } catch (IOException | InterruptedException | RuntimeException e) {
            peer.close();
            throw e;
        }
    }

    long pid() {
        return process.pid();
    }

    /**
     * The stat file of the peer's thread that consumes the streams ({@link SharedCpu}), asked
     * once; empty for a peer that does not tell it, or where /proc cannot.
     */
    Optional<Path> measuringThread() throws IOException, InterruptedException {
        if (measuringThread == null) {
            measuringThread = Optional.empty();
            if (tellsItsThread) {
                send(BenchPeer.THREAD);
                String tid = await(BenchPeer.THREAD);
                if (!tid.equals("-")) {
                    measuringThread = Optional.of(SharedCpu.thread(pid(), Long.parseLong(tid)));
                }
            }
        }
        return measuringThread;
    }

    void send(String... words) throws IOException {
        commands.write(String.join(" ", words));
        commands.write('\n');
        commands.flush();
    }

    /** Waits for the reply starting with {@code keyword} and returns the rest of its line. */
    String await(String keyword) throws InterruptedException, IOException {
        long deadline = System.nanoTime() + REPLY_TIMEOUT.toNanos();
        while (true) {
            String line = replies.poll(100, TimeUnit.MILLISECONDS);
            if (line == null) {
                requireAlive();
                if (System.nanoTime() - deadline > 0) {
                    throw new IOException(role + " " + pid() + " sent no " + keyword + " within "
                            + REPLY_TIMEOUT.toSeconds() + " s");
                }
                continue;
            }
            if (line.startsWith(BenchPeer.ERROR + " ")) {
                throw new IOException(role + " failed: " + line.substring(BenchPeer.ERROR.length() + 1));
            }
            if (line.equals(keyword)) {
                return "";
            }
            if (line.startsWith(keyword + " ")) {
                return line.substring(keyword.length() + 1);
            }
            throw new IOException(role + " answered '" + abbreviate(line) + "', expected " + keyword);
        }
    }

    /** Throws when the consumer is gone, so a producer blocked on a full queue or a missing reply stops. */
    void requireAlive() throws IOException {
        if (!process.isAlive()) {
            throw new IOException(role + " " + pid() + " exited with code " + process.exitValue());
        }
    }

    /**
     * Asks the process to finish and waits for it; its exit code. One that is gone already
     * answers with its code; one stuck (say, on a queue whose other side died) is killed after
     * 30 s, and the kill's code is what the run reports: the table still comes out.
     */
    int finish(PrintStream log) throws InterruptedException {
        try {
            send(BenchPeer.EXIT);
        } catch (IOException gone) {
            // its stdin is closed: it has exited or is exiting
        }
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            log.println(role + " " + pid() + " did not exit within 30 s of being asked to; killed");
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
        return process.isAlive() ? -1 : process.exitValue();
    }

    /**
     * Ends the consumer however the run went. After a failure it is usually on its way out
     * already (its queues or socket were closed under it) or idle; ending its stdin lets it
     * close its refshare context and remove its files. Only a consumer that does not exit
     * within a few seconds is killed, which leaves its files for {@code refshare gc}.
     */
    @Override
    public void close() {
        if (!process.isAlive()) {
            return;
        }
        try {
            try {
                commands.close();
            } catch (IOException ignored) {
                // its stdin is gone already: it is exiting
            }
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }

    private void readReplies() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                replies.add(line);
            }
        } catch (IOException ignored) {
            // the consumer is gone; requireAlive reports its exit code
        }
    }

    private static String abbreviate(String s) {
        return s.length() <= 120 ? s : s.substring(0, 120) + "...";
    }
}
