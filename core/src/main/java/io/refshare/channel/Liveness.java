package io.refshare.channel;

import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Verdict;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Decides whether a participant is dead, for recovery and for "every producer is gone".
 * A wrong "dead" would hand a live claimant's cell to someone else, so only the
 * directory's {@link Verdict#DEAD} counts: the kernel's evidence that nobody holds the
 * life lock of that identity, valid across PID namespaces sharing the directory (a
 * container's process is judged through its life file like any other). {@link
 * Verdict#UNKNOWN} counts as alive. Answers other than "dead" are cached briefly, so a
 * stream of waiters polling for recovery does not open life files for every attempt.
 */
final class Liveness {
    static final long ALIVE_CACHE_NANOS = 100_000_000L;
    private static final int MAX_CACHED = 1024;
    private static final long OWN_PID_NAMESPACE = readPidNamespace();

    private final ShmDirectory dir;
    private final ConcurrentHashMap<Long, Long> aliveUntil = new ConcurrentHashMap<>();

    Liveness(ShmDirectory dir) {
        this.dir = dir;
    }

    /**
     * The inode of this process's PID namespace, or 0 when it cannot be read: recorded in
     * the participant table for inspection only (liveness no longer depends on it).
     */
    static long ownPidNamespace() {
        return OWN_PID_NAMESPACE;
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
        boolean dead = dir.verdict(ProcessIdentity.unpack(packedIdentity)) == Verdict.DEAD;
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
            return 0;
        }
    }
}
