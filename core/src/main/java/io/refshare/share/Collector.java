package io.refshare.share;

import io.refshare.counter.CounterFile;

import java.util.HashMap;
import java.util.Map;
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
 * <li>Every {@value #HOUSEKEEPING_MILLIS} ms it reclaims the tokens of holders that died
 * (DEAD by the directory's life files; UNKNOWN counts as alive) and frees their peer
 * entries, so a killed consumer's memory comes back well within a second; unmaps idle
 * received segments their senders removed; runs the {@link Sharing#addHousekeeping
 * housekeeping tasks} (holders reclaiming their dead readers); and publishes the process's
 * {@link StatusFile}.</li>
 * </ul>
 *
 * <h2>Surviving damage</h2>
 * Every step runs on its own and the thread survives whatever a step throws short of a
 * virtual machine error (see {@link Failures}; the {@link InternalError} of a fault on a
 * truncated mapping is survived). A damaged counter file is quarantined by its pool, a
 * damaged status file is no longer written, and the next step and the next round go on, so
 * the other files' references are still reclaimed and {@code collect()} and allocation
 * pressure still work. A step that keeps failing is logged once, then again only after it
 * has succeeded in between.
 */
final class Collector implements Runnable {
    static final long SLEEP_MILLIS = 10;
    /** Rest between wake-ups, so a stream of releases costs a few wake-ups a millisecond, not one each. */
    static final long REST_MICROS = 250;
    static final long HOUSEKEEPING_MILLIS = 100;
    private static final System.Logger LOG = System.getLogger(Collector.class.getName());

    private final Sharing sharing;
    /** Steps whose last run failed: their next failure is not logged again. */
    private final Map<String, Boolean> failing = new HashMap<>();

    Collector(Sharing sharing) {
        this.sharing = sharing;
    }

    @Override
    public void run() {
        long nextHousekeeping = System.nanoTime();
        while (!sharing.isClosed()) {
            boolean waited = step("collecting the limbo", this::waitForWork);
            if (!waited) {
                LockSupport.parkNanos(SLEEP_MILLIS * 1_000_000); // no busy loop over a failing step
            }
            if (System.nanoTime() - nextHousekeeping >= 0) {
                step("reclaiming the references of dead processes", this::reclaimDeadHolders);
                step("housekeeping", sharing::runHousekeeping); // holders reclaim their dead readers
                step("unmapping removed segments", () -> sharing.receiveCache().dropIdleRemoved());
                step("publishing the status file", sharing::publishStatus);
                nextHousekeeping = System.nanoTime() + HOUSEKEEPING_MILLIS * 1_000_000;
            }
        }
    }

    /** Runs one step; true when it completed. */
    private boolean step(String what, Runnable step) {
        try {
            step.run();
            failing.remove(what);
            return true;
        } catch (Throwable t) {
            Failures.rethrowIfFatal(t);
            if (!sharing.isClosed() && failing.put(what, Boolean.TRUE) == null) {
                LOG.log(System.Logger.Level.WARNING, "background " + what + " failed; the collector goes on (logged"
                        + " once until it succeeds again)", t);
            }
            return false;
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
            } else {
                sleepOnReleases(files, current);
            }
        } finally {
            files.unpin();
        }
        sharing.collect();
        LockSupport.parkNanos(REST_MICROS * 1_000);
    }

    /** Collects, and sleeps on {@code current}'s release word while blocks still wait. */
    private void sleepOnReleases(CounterFilePool files, CounterFile current) {
        long seen;
        try {
            seen = current.releases();
        } catch (RuntimeException | InternalError e) {
            files.damaged(current, e); // its release word cannot be read: quarantined, never slept on again
            return;
        }
        if (sharing.collect() == 0 || sharing.limbo().size() > 0) {
            try {
                current.awaitRelease(seen, SLEEP_MILLIS * 1_000_000);
            } catch (RuntimeException | InternalError e) {
                files.damaged(current, e);
            }
        }
    }

    private void reclaimDeadHolders() {
        int reclaimed = sharing.counterFiles().reclaimDeadHolders();
        if (reclaimed > 0) {
            LOG.log(System.Logger.Level.INFO, "reclaimed {0} references held by dead processes", reclaimed);
            sharing.reclaimed(reclaimed);
            sharing.collect();
        }
    }
}
