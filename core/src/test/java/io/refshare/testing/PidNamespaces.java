package io.refshare.testing;

import java.util.List;

/**
 * Starting a process in its own PID namespace, as a container sharing this host's
 * {@code /dev/shm} would run: {@code unshare --pid --fork --kill-child --mount-proc}. Needs
 * root (or user namespaces) and util-linux's unshare; tests skip with that reason otherwise.
 */
public final class PidNamespaces {
    /** The wrapper for {@link ChildJvm#startUnder}; killing it kills the process inside. */
    public static final List<String> OWN_NAMESPACE = List.of("unshare", "--pid", "--fork", "--kill-child",
            "--mount-proc");
    /** Why a test that needs one is skipped where none can be made. */
    public static final String NEEDS = "needs root and unshare(1) to start a process in its own PID namespace";

    private PidNamespaces() {
    }

    /** True when a process can be started in its own PID namespace here. */
    public static boolean available() {
        try {
            Process p = new ProcessBuilder("unshare", "--pid", "--fork", "--mount-proc", "true")
                    .redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor() == 0;
        } catch (Exception e) {
            return false;
        }
    }
}
