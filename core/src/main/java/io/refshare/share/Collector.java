package io.refshare.share;

import io.refshare.counter.CounterFile;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * The background thread of a {@link Sharing}: it gives memory back without waiting for
 * allocator pressure.
 * <ul>
 * <li>While the limbo is empty it sleeps until the next housekeeping; a block entering it
 * unparks it. While the limbo is not empty it sleeps on the current counter file's release
 * word; a consumer's release wakes it, and it collects the limbo at once, then rests
 * ({@value #REST_MICROS} µs; {@value #CROWDED_REST_MICROS} µs while a stream keeps it freeing
 * blocks by the dozen on CPUs that more threads want than they have). Releases into an older
 * counter file wake nobody: those blocks wait for the sleep to end ({@value #SLEEP_MILLIS} ms
 * at most). Polling faster while an old file has tokens out was considered and left out: a
 * consumer may hold such a token for hours.</li>
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
    /**
     * Rest after a collection that freed at least {@value #STREAM_BLOCKS} blocks while the
     * CPUs are oversubscribed ({@link LateWakeups}). Each wake-up then takes a CPU from a
     * thread doing the work, and the stream's producer collects on its own when its allocator
     * finds no free block, so coming back sooner only adds wake-ups: one producer streaming
     * fresh 1 KiB tensors to eight consumers on two CPUs moved 708-748k tensors/s with the
     * 250 µs rest and 808-849k with 2 ms (three alternated runs each). With CPUs to spare the
     * short rest stays: there the collector runs beside the producer, and a producer that
     * limits the rate (one consumer of fresh 1 MiB tensors) lost 10 % with the long rest,
     * the collection having moved into its allocation path.
     */
    static final long CROWDED_REST_MICROS = 2_000;
    static final int STREAM_BLOCKS = 64;
    static final long HOUSEKEEPING_MILLIS = 100;
    private static final System.Logger LOG = System.getLogger(Collector.class.getName());

    private final Sharing sharing;
    /** Steps whose last run failed: their next failure is not logged again. */
    private final Map<String, Boolean> failing = new HashMap<>();
    private final LateWakeups lateWakeups = new LateWakeups();
    private long nextHousekeeping = System.nanoTime();

    Collector(Sharing sharing) {
        this.sharing = sharing;
    }

    @Override
    public void run() {
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
            // until the next housekeeping: a block entering the limbo unparks it, so a process
            // that only receives wakes ten times a second, not a hundred
            LockSupport.parkNanos(Math.max(0, nextHousekeeping - System.nanoTime()));
            return;
        }
        CounterFilePool files = sharing.counterFiles();
        CounterFile current = files.pinCurrent();
        int freed = 0;
        try {
            if (current == null) {
                LockSupport.parkNanos(SLEEP_MILLIS * 1_000_000);
            } else {
                freed = sleepOnReleases(files, current);
            }
        } finally {
            files.unpin();
        }
        freed += sharing.collect();
        rest(freed >= STREAM_BLOCKS && lateWakeups.oversubscribed() ? CROWDED_REST_MICROS : REST_MICROS);
    }

    private void rest(long micros) {
        long start = System.nanoTime();
        LockSupport.parkNanos(micros * 1_000);
        lateWakeups.rested(micros * 1_000, System.nanoTime() - start);
    }

    /**
     * Collects, and sleeps on {@code current}'s release word while blocks still wait; returns
     * how many blocks that collection freed.
     */
    private int sleepOnReleases(CounterFilePool files, CounterFile current) {
        long seen;
        try {
            seen = current.releases();
        } catch (RuntimeException | InternalError e) {
            files.damaged(current, e); // its release word cannot be read: quarantined, never slept on again
            return 0;
        }
        int freed = sharing.collect();
        if (freed == 0 || sharing.limbo().size() > 0) {
            try {
                current.awaitRelease(seen, SLEEP_MILLIS * 1_000_000);
            } catch (RuntimeException | InternalError e) {
                files.damaged(current, e);
            }
        }
        return freed;
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
