package io.refshare.share;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * The steps of one background thread ({@link Collector}, {@link Housekeeper}), each run on its
 * own: the thread survives whatever a step throws short of a virtual machine error (see
 * {@link Failures}; a full heap pauses the thread, {@link #repeat}), and a step that
 * keeps failing is logged once, then again only after it
 * has succeeded in between. Not thread-safe: one per thread.
 */
final class BackgroundSteps {
    private static final System.Logger LOG = System.getLogger(BackgroundSteps.class.getName());

    static final long FULL_HEAP_PAUSE_MILLIS = 100;

    private final String thread;
    private final BooleanSupplier closed;
    /** Steps whose last run failed: their next failure is not logged again. */
    private final Set<String> failing = new HashSet<>();

    BackgroundSteps(String thread, BooleanSupplier closed) {
        this.thread = thread;
        this.closed = closed;
    }

    /**
     * Parks the calling background thread for at most {@code nanos} (an unpark ends it sooner),
     * first clearing its interrupt status. Nobody interrupts these threads to stop them (a close
     * unparks them), so an interrupt means nothing to them; but a thread whose interrupt status
     * stays set parks for no time at all, every time: one interrupt from outside (code that
     * interrupts every thread it finds, say) made the collector and the housekeeper each spin
     * on a whole CPU for good.
     */
    static void park(long nanos) {
        Thread.interrupted();
        LockSupport.parkNanos(nanos);
    }

    /**
     * Runs {@code round} again and again until the thread's owner is closed. A round that meets
     * a full heap ({@link OutOfMemoryError}) ends there, and the thread pauses and goes on
     * instead of ending, since the application may free memory again, and a collector or
     * housekeeper gone for good would keep every block sent from then on. Nothing is logged:
     * logging needs the heap.
     */
    void repeat(Runnable round) {
        while (!closed.getAsBoolean()) {
            try {
                round.run();
            } catch (OutOfMemoryError fullHeap) {
                park(FULL_HEAP_PAUSE_MILLIS * 1_000_000);
            }
        }
    }

    /** Runs one step; true when it completed. */
    boolean run(String what, Runnable step) {
        try {
            step.run();
            failing.remove(what);
            return true;
        } catch (Throwable t) {
            Failures.rethrowIfFatal(t);
            if (!closed.getAsBoolean() && failing.add(what)) {
                LOG.log(System.Logger.Level.WARNING, "background " + what + " failed; the " + thread
                        + " goes on (logged once until it succeeds again)", t);
            }
            return false;
        }
    }
}
