package io.refshare.share;

import io.refshare.counter.CounterFile;

/**
 * The background thread of a {@link Sharing} that gives memory back without waiting for
 * allocator pressure, and does nothing else (the periodic chores are the {@link Housekeeper}'s,
 * so a release is never kept waiting behind them).
 * <ul>
 * <li>While the limbo is empty it sleeps; a block entering it unparks it.</li>
 * <li>While the limbo is not empty it sleeps on the current counter file's release word (or,
 * between a file that retired with its last token and the next share, on that file's); a
 * consumer's release wakes it, and it collects the limbo at once, then rests
 * ({@value #REST_MICROS} µs; {@value #CROWDED_REST_MICROS} µs while a stream keeps it freeing
 * blocks by the dozen on CPUs that more threads want than they have). Releases into an older
 * counter file wake nobody: those blocks wait for the sleep to end ({@value #SLEEP_MILLIS} ms
 * at most). Polling faster while an old file has tokens out was considered and left out: a
 * consumer may hold such a token for hours.</li>
 * </ul>
 *
 * <h2>Surviving damage</h2>
 * Every step runs on its own and the thread survives whatever a step throws short of a
 * virtual machine error ({@link BackgroundSteps}; the {@link InternalError} of a fault on a
 * truncated mapping is survived, and a full heap pauses the thread). A damaged counter file is
 * quarantined by its pool, and the next round goes on, so the other files' references are
 * still reclaimed and {@code collect()} and allocation pressure still work.
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
    /** The longest sleep on an empty limbo: a bound, since a block entering it unparks the collector. */
    static final long IDLE_MILLIS = 1_000;

    private final Sharing sharing;
    private final BackgroundSteps steps;
    private final LateWakeups lateWakeups = new LateWakeups();

    Collector(Sharing sharing) {
        this.sharing = sharing;
        this.steps = new BackgroundSteps("collector", sharing::isClosed);
    }

    @Override
    public void run() {
        steps.repeat(() -> {
            if (!steps.run("collecting the limbo", this::waitForWork)) {
                BackgroundSteps.park(SLEEP_MILLIS * 1_000_000); // no busy loop over a failing step
            }
        });
    }

    private void waitForWork() {
        if (sharing.limbo().size() == 0) {
            BackgroundSteps.park(IDLE_MILLIS * 1_000_000); // a block entering the limbo unparks it
            return;
        }
        CounterFilePool files = sharing.counterFiles();
        CounterFile file = files.pinFileToSleepOn();
        int freed = 0;
        try {
            if (file == null) {
                BackgroundSteps.park(SLEEP_MILLIS * 1_000_000);
            } else {
                freed = sleepOnReleases(files, file);
            }
        } finally {
            files.unpin();
        }
        freed += sharing.collect();
        rest(freed >= STREAM_BLOCKS && lateWakeups.oversubscribed() ? CROWDED_REST_MICROS : REST_MICROS);
    }

    private void rest(long micros) {
        long start = System.nanoTime();
        BackgroundSteps.park(micros * 1_000);
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
}
