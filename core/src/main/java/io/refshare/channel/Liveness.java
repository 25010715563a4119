package io.refshare.channel;

import io.refshare.shm.ProcessIdentity;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Decides whether a participant is dead, for recovery only. A wrong "dead" would hand a
 * live claimant's cell to someone else, so death needs positive evidence: the pid's
 * /proc entry confirmed absent, or present with another start time (a reused pid). A
 * process we merely cannot read counts as alive, and so does one in another PID
 * namespace (a container sharing /dev/shm but not its pids: its pid names nothing here).
 * "Alive" answers are cached briefly, so a stream of waiters polling for recovery does
 * not read /proc for every attempt.
 */
final class Liveness {
    static final long ALIVE_CACHE_NANOS = 100_000_000L;
    private static final int MAX_CACHED = 1024;
    private static final long OWN_PID_NAMESPACE = readPidNamespace();

    private final ConcurrentHashMap<Long, Long> aliveUntil = new ConcurrentHashMap<>();

    /** The inode of this process's PID namespace, or 0 when it cannot be read. */
    static long ownPidNamespace() {
        return OWN_PID_NAMESPACE;
    }

    /** True when a participant's recorded namespace is ours, so its pid can be looked up here. */
    static boolean sameNamespace(long pidNamespace) {
        return pidNamespace != 0 && pidNamespace == OWN_PID_NAMESPACE;
    }

    /** {@code fresh}: ignore a cached "alive", for a verdict that must be up to date. */
    boolean isDead(long packedIdentity, boolean fresh) {
        long now = System.nanoTime();
        Long until = aliveUntil.get(packedIdentity);
        if (!fresh && until != null && now - until < 0) {
            return false;
        }
        if (ShmQueueLayout.namesNoProcess(packedIdentity)) {
            return true; // garbage in the table: no process has pid 0, so nobody can be harmed
        }
        ProcessIdentity id = ShmQueueLayout.unpackIdentity(packedIdentity);
        boolean dead = ProcessIdentity.of(id.pid())
                .map(current -> !current.equals(id))
                .orElseGet(() -> Files.notExists(Path.of("/proc", Long.toString(id.pid()))));
        if (dead) {
            aliveUntil.remove(packedIdentity);
        } else {
            if (aliveUntil.size() >= MAX_CACHED) {
                aliveUntil.clear();
            }
            aliveUntil.put(packedIdentity, now + ALIVE_CACHE_NANOS);
        }
        return dead;
    }

    private static long readPidNamespace() {
        try {
            String link = Files.readSymbolicLink(Path.of("/proc/self/ns/pid")).toString(); // "pid:[4026531836]"
            int open = link.indexOf('[');
            int close = link.indexOf(']');
            return open >= 0 && close > open ? Long.parseLong(link.substring(open + 1, close)) : 0;
        } catch (IOException | UnsupportedOperationException | NumberFormatException | SecurityException e) {
            return 0; // recovery then judges nobody dead: safe, if less helpful
        }
    }
}
