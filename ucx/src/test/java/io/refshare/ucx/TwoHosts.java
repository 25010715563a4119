package io.refshare.ucx;

import io.refshare.ucx.bench.HostPair;
import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Two "hosts" for the tests: a {@link HostPair} (network namespaces joined by a veth pair)
 * with a shared-memory directory each, secret files, and the child processes started in
 * them. Needs root; the test is skipped with that reason otherwise (CI runs as root, so it
 * runs there). {@link #close()} ends the processes, deletes the namespaces, the directories
 * and the secret files.
 */
final class TwoHosts implements AutoCloseable {
    static final String IP_A = HostPair.IP_A;
    static final String IP_B = HostPair.IP_B;
    static final String VETH = HostPair.VETH;

    final String nsA;
    final String nsB;
    final Path shmA;
    final Path shmB;
    private final HostPair pair;
    private final List<BridgeChild> children = new ArrayList<>();
    private final List<Path> secrets = new ArrayList<>();

    private TwoHosts(HostPair pair) throws IOException {
        this.pair = pair;
        nsA = pair.nsA;
        nsB = pair.nsB;
        shmA = Files.createTempDirectory(Path.of("/dev/shm"), "rs-host-a-");
        shmB = Files.createTempDirectory(Path.of("/dev/shm"), "rs-host-b-");
    }

    static TwoHosts create() throws IOException {
        Assumptions.assumeTrue(HostPair.root(), "two-host tests need root for ip netns (CI runs as root)");
        HostPair pair = HostPair.create();
        try {
            return new TwoHosts(pair);
        } catch (IOException | RuntimeException e) {
            pair.close();
            throw e;
        }
    }

    /** Starts {@code main} in namespace {@code ns} (tracked: ended by {@link #close()}). */
    BridgeChild start(String ns, Class<?> main, String... args) {
        BridgeChild c = BridgeChild.start(HostPair.in(ns), main, args);
        children.add(c);
        return c;
    }

    /** Starts a program in namespace {@code ns} (tracked: ended by {@link #close()}). */
    BridgeChild startProgram(String ns, String name, List<String> command, java.util.Map<String, String> env) {
        List<String> cmd = new ArrayList<>(HostPair.in(ns));
        cmd.addAll(command);
        BridgeChild c = BridgeChild.startProgram(name, cmd, env);
        children.add(c);
        return c;
    }

    /** Cuts (false) or restores (true) the cable: host A's end of the veth pair. */
    void link(boolean up) throws IOException {
        pair.link(up);
    }

    /** A secret file (mode 0600) with {@code text}. */
    Path secret(String name, String text) throws IOException {
        Path file = Files.createTempFile(Path.of(System.getProperty("java.io.tmpdir")), "rs-secret-" + name, "");
        Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        Files.writeString(file, text);
        secrets.add(file);
        return file;
    }

    @Override
    public void close() throws IOException {
        for (BridgeChild c : children) {
            c.close();
        }
        pair.close();
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
