package io.refshare.ucx;

import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

/**
 * Two "hosts" on this machine: network namespaces joined by a veth pair (10.77.0.1 and
 * 10.77.0.2), each with its own shared-memory directory. Needs root ({@code ip netns}); the
 * test is skipped with that reason otherwise (CI runs as root, so it runs there). Names are
 * unique per instance; {@link #close()} ends the processes it started, deletes both
 * namespaces (which deletes the veth pair) and the directories.
 */
final class TwoHosts implements AutoCloseable {
    static final String IP_A = "10.77.0.1";
    static final String IP_B = "10.77.0.2";
    static final String VETH = "rsveth0";

    final String nsA;
    final String nsB;
    final Path shmA;
    final Path shmB;
    private final List<BridgeChild> children = new ArrayList<>();

    private TwoHosts(String tag) throws IOException {
        nsA = "rsa-" + tag;
        nsB = "rsb-" + tag;
        shmA = Files.createTempDirectory(Path.of("/dev/shm"), "rs-host-a-");
        shmB = Files.createTempDirectory(Path.of("/dev/shm"), "rs-host-b-");
    }

    static boolean root() {
        try {
            return ((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid")) == 0;
        } catch (IOException e) {
            return false;
        }
    }

    static TwoHosts create() throws IOException {
        Assumptions.assumeTrue(root(), "two-host tests need root for ip netns (CI runs as root)");
        String tag = ProcessHandle.current().pid() + "-" + Integer.toHexString(ThreadLocalRandom.current().nextInt(1 << 20));
        TwoHosts h = new TwoHosts(tag);
        try {
            ip("netns", "add", h.nsA);
            ip("netns", "add", h.nsB);
            ip("link", "add", VETH, "netns", h.nsA, "type", "veth", "peer", "name", VETH, "netns", h.nsB);
            ip("-n", h.nsA, "addr", "add", IP_A + "/24", "dev", VETH);
            ip("-n", h.nsB, "addr", "add", IP_B + "/24", "dev", VETH);
            for (String ns : List.of(h.nsA, h.nsB)) {
                ip("-n", ns, "link", "set", VETH, "up");
                ip("-n", ns, "link", "set", "lo", "up");
            }
            for (String ns : List.of(h.nsA, h.nsB)) {
                h.awaitCarrier(ns);
            }
        } catch (IOException | RuntimeException e) {
            h.close();
            throw e;
        }
        return h;
    }

    /** Waits until the veth end in {@code ns} has its carrier (UCX ignores a device without one). */
    private void awaitCarrier(String ns) throws IOException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!ipOut("-n", ns, "link", "show", VETH).contains("LOWER_UP")) {
            if (System.nanoTime() - deadline > 0) {
                throw new IOException("the veth pair in " + ns + " has no carrier after 10 s");
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted");
            }
        }
    }

    /** Starts {@code main} in namespace {@code ns} (tracked: ended by {@link #close()}). */
    BridgeChild start(String ns, Class<?> main, String... args) {
        BridgeChild c = BridgeChild.start(List.of("ip", "netns", "exec", ns), main, args);
        children.add(c);
        return c;
    }

    /** Cuts (false) or restores (true) the cable: host A's end of the veth pair. */
    void link(boolean up) throws IOException {
        ip("-n", nsA, "link", "set", VETH, up ? "up" : "down");
    }

    /** A secret file (mode 0600) with {@code text}. */
    Path secret(String name, String text) throws IOException {
        Path file = Files.createTempFile(Path.of(System.getProperty("java.io.tmpdir")), "rs-secret-" + name, "");
        Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        Files.writeString(file, text);
        secrets.add(file);
        return file;
    }

    private final List<Path> secrets = new ArrayList<>();

    static void ip(String... args) throws IOException {
        ipOut(args);
    }

    static String ipOut(String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add("ip");
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        try {
            if (p.waitFor() != 0) {
                throw new IOException(String.join(" ", cmd) + " failed: " + out.trim());
            }
            return out;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + cmd);
        }
    }

    @Override
    public void close() throws IOException {
        for (BridgeChild c : children) {
            c.close();
        }
        for (String ns : List.of(nsA, nsB)) {
            try {
                ip("netns", "del", ns);
            } catch (IOException ignored) {
                // not created
            }
        }
        for (Path s : secrets) {
            Files.deleteIfExists(s);
        }
        for (Path dir : List.of(shmA, shmB)) {
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(f);
                }
            }
        }
    }
}
