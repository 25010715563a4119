package io.refshare.channel;

import io.refshare.shm.ProcessIdentity;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Decides whether a participant is dead, for recovery only. A wrong "dead" would hand a
 * live claimant's cell to someone else, so death needs positive evidence: the pid's
 * /proc entry confirmed absent, or present with another start time (a reused pid). A
 * process we merely cannot read counts as alive. "Alive" answers are cached briefly, so
 * a stream of waiters polling for recovery does not read /proc for every attempt.
 */
final class Liveness {
    static final long ALIVE_CACHE_NANOS = 100_000_000L;
    private static final int MAX_CACHED = 1024;

    private final ConcurrentHashMap<Long, Long> aliveUntil = new ConcurrentHashMap<>();

    /** {@code fresh}: ignore a cached "alive", for a verdict that must be up to date. */
    boolean isDead(long packedIdentity, boolean fresh) {
        long now = System.nanoTime();
        Long until = aliveUntil.get(packedIdentity);
        if (!fresh && until != null && now - until < 0) {
            return false;
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
}
