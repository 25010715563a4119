package io.refshare.ucx.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Two "hosts" on one machine: network namespaces joined by a veth pair ({@value #IP_A} and
 * {@value #IP_B}), for the two-host tests and the cross-host bench. Needs root. Names are
 * unique per instance; {@link #close()} deletes both namespaces (and so the veth pair).
 */
public final class HostPair implements AutoCloseable {
    public static final String IP_A = "10.77.0.1";
    public static final String IP_B = "10.77.0.2";
    /** The veth end's name in each namespace (the same in both: they are separate). */
    public static final String VETH = "rsveth0";

    public final String nsA;
    public final String nsB;

    private HostPair(String tag) {
        nsA = "rsa-" + tag;
        nsB = "rsb-" + tag;
    }

    public static boolean root() {
        try {
            return ((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid")) == 0;
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /** Creates both namespaces, the veth pair and the addresses, and waits for the carrier. */
    public static HostPair create() throws IOException {
        String tag = ProcessHandle.current().pid() + "-"
                + Integer.toHexString(ThreadLocalRandom.current().nextInt(1 << 20));
        HostPair h = new HostPair(tag);
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
                awaitCarrier(ns);
            }
        } catch (IOException | RuntimeException e) {
            h.close();
            throw e;
        }
        return h;
    }

    /** The command prefix that runs a program in namespace {@code ns}. */
    public static List<String> in(String ns) {
        return List.of("ip", "netns", "exec", ns);
    }

    /**
     * Environment for UCX in these namespaces: TCP over the veth device only. Both "hosts"
     * share one kernel, so UCX would take their loopback interfaces for reachable from each
     * other; on real hosts the default device list is right.
     */
    public static void ucxEnvironment(java.util.Map<String, String> env) {
        env.put("UCX_TLS", "tcp");
        env.put("UCX_NET_DEVICES", VETH);
        env.put("UCX_WARN_UNUSED_ENV_VARS", "n");
    }

    /** Cuts (false) or restores (true) the cable at host A's end. */
    public void link(boolean up) throws IOException {
        ip("-n", nsA, "link", "set", VETH, up ? "up" : "down");
    }

    private static void awaitCarrier(String ns) throws IOException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!ip("-n", ns, "link", "show", VETH).contains("LOWER_UP")) {
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

    static String ip(String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add("ip");
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        try {
            if (p.waitFor() != 0) {
                throw new IOException(String.join(" ", cmd) + " failed: " + out.trim());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + cmd);
        }
        return out;
    }

    /** Deletes both namespaces (the processes in them must have ended). */
    @Override
    public void close() throws IOException {
        IOException first = null;
        for (String ns : List.of(nsA, nsB)) {
            try {
                ip("netns", "del", ns);
            } catch (IOException e) {
                if (first == null && e.getMessage() != null && !e.getMessage().contains("No such file")) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
