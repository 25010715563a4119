package io.refshare.share;

import io.refshare.counter.CounterFile;
import io.refshare.shm.ProcessIdentity;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * The background thread of a {@link Sharing}: it gives memory back without waiting for
 * allocator pressure.
 * <ul>
 * <li>While the limbo is not empty it sleeps on the current counter file's release word;
 * a consumer's release wakes it, and it collects the limbo at once. A block entering an
 * empty limbo unparks it. Releases into an older counter file wake nobody: those blocks wait
 * for the sleep to end ({@value #SLEEP_MILLIS} ms at most). Polling faster while an old file
 * has tokens out was considered and left out: a consumer may hold such a token for hours.</li>
 * <li>Every {@value #HOUSEKEEPING_MILLIS} ms it looks for holders of its tokens that have
 * died (pid and start time no longer running) and releases their tokens exactly once, so
 * a killed consumer's memory comes back well within a second; unmaps idle received
 * segments their senders removed; runs the {@link Sharing#addHousekeeping housekeeping tasks}
 * (holders reclaiming their dead readers); and publishes the process's {@link StatusFile}.</li>
 * </ul>
 */
final class Collector implements Runnable {
    static final long SLEEP_MILLIS = 10;
    /** Rest between wake-ups, so a stream of releases costs a few wake-ups a millisecond, not one each. */
    static final long REST_MICROS = 250;
    static final long HOUSEKEEPING_MILLIS = 100;
    private static final System.Logger LOG = System.getLogger(Collector.class.getName());

    private final Sharing sharing;
    private final Set<ProcessIdentity> knownDead = new HashSet<>();

    Collector(Sharing sharing) {
        this.sharing = sharing;
    }

    @Override
    public void run() {
        long nextHousekeeping = System.nanoTime();
        while (!sharing.isClosed()) {
            try {
                waitForWork();
                if (System.nanoTime() - nextHousekeeping >= 0) {
                    reclaimDeadHolders();
                    sharing.runHousekeeping(); // holders of this process reclaim their dead readers
                    sharing.receiveCache().dropIdleRemoved();
                    sharing.publishStatus();
                    nextHousekeeping = System.nanoTime() + HOUSEKEEPING_MILLIS * 1_000_000;
                }
            } catch (RuntimeException e) {
                if (!sharing.isClosed()) {
                    LOG.log(System.Logger.Level.WARNING, "background collection failed", e);
                }
            }
        }
    }

    private void waitForWork() {
        if (sharing.limbo().size() == 0) {
            LockSupport.parkNanos(SLEEP_MILLIS * 1_000_000);
            return;
        }
        CounterFilePool files = sharing.counterFiles();
        CounterFile current = files.pinCurrent();
        try {
            if (current == null) {
                LockSupport.parkNanos(SLEEP_MILLIS * 1_000_000);
                return;
            }
            long seen = current.releases();
            if (sharing.collect() == 0 || sharing.limbo().size() > 0) {
                current.awaitRelease(seen, SLEEP_MILLIS * 1_000_000);
            }
        } finally {
            files.unpin();
        }
        sharing.collect();
        LockSupport.parkNanos(REST_MICROS * 1_000);
    }

    private void reclaimDeadHolders() {
        int reclaimed = sharing.counterFiles().reclaimDeadHolders(knownDead);
        if (reclaimed > 0) {
            LOG.log(System.Logger.Level.INFO, "reclaimed {0} references held by dead processes", reclaimed);
            sharing.reclaimed(reclaimed);
            sharing.collect();
        }
    }
}
