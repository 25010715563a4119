package io.refshare.share;

/**
 * The second background thread of a {@link Sharing}: every {@value #INTERVAL_MILLIS} ms it
 * reclaims the tokens of holders that died (DEAD by the directory's life files; UNKNOWN counts
 * as alive) and frees their peer entries, so a killed consumer's memory comes back well
 * within a second; runs the {@link Sharing#addHousekeeping housekeeping tasks} (holders
 * reclaiming their dead readers); leaves the received counter files their senders retired and
 * this process holds no token of; unmaps idle received segments their senders removed; and
 * publishes the process's {@link StatusFile}. Between those rounds, whenever the counter pool
 * wakes it, it makes the pool's next counter file and unmaps the removed ones
 * ({@link CounterFilePool#tidy}), work that used to stall a {@code put} for hundreds of
 * microseconds.
 *
 * <p>Why not on the {@link Collector}: these chores run ten times a second, so their code is
 * seldom compiled, and a round took from 0.3 to over 5 ms on the development VM (a life-file
 * verdict alone 300-500 µs). A consumer's release arriving meanwhile waited for the round to
 * end before its block was collected, which put reclamation's p99 over 1 ms in some runs.
 *
 * <p>Every step runs on its own and the thread survives whatever a step throws short of a
 * virtual machine error ({@link BackgroundSteps}), and pauses on a full heap.
 */
final class Housekeeper implements Runnable {
    static final long INTERVAL_MILLIS = 100;
    private static final System.Logger LOG = System.getLogger(Housekeeper.class.getName());

    private final Sharing sharing;
    private final BackgroundSteps steps;
    /** When the next round of the chores that run every {@value #INTERVAL_MILLIS} ms is due; this thread's only. */
    private long nextRound = System.nanoTime();

    Housekeeper(Sharing sharing) {
        this.sharing = sharing;
        this.steps = new BackgroundSteps("housekeeper", sharing::isClosed);
    }

    @Override
    public void run() {
        steps.repeat(this::round);
    }

    private void round() {
        if (System.nanoTime() - nextRound >= 0) {
            steps.run("reclaiming the references of dead processes", this::reclaimDeadHolders);
            steps.run("housekeeping", sharing::runHousekeeping);
            steps.run("leaving retired counter files", () -> sharing.receiveCache().leaveIdleRetired());
            steps.run("unmapping removed segments", () -> sharing.receiveCache().dropIdleRemoved());
            steps.run("publishing the status file", sharing::publishStatus);
            nextRound = System.nanoTime() + INTERVAL_MILLIS * 1_000_000;
        }
        steps.run("making and unmapping own counter files", () -> sharing.counterFiles().tidy());
        // closing unparks it, and so does the counter pool when it wants a file made or unmapped
        BackgroundSteps.park(nextRound - System.nanoTime());
    }

    private void reclaimDeadHolders() {
        int reclaimed = sharing.counterFiles().reclaimDeadHolders();
        if (reclaimed > 0) {
            // counted before the log line (the first can take milliseconds): the collector may
            // already be collecting the blocks, and whoever watches the limbo empty reads the count next
            sharing.reclaimed(reclaimed);
            LOG.log(System.Logger.Level.INFO, "reclaimed {0} references held by dead processes", reclaimed);
            sharing.collect();
        }
    }
}
