package io.refshare.channel;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A gate that opens at most once per interval, for whichever thread reaches it first once the
 * interval has passed (one compare-and-set, no lock): how a handle paces its sweeps, checks,
 * counts and warnings. Open at once when made.
 */
final class OncePerInterval {
    private final long intervalNanos;
    private final AtomicLong next = new AtomicLong(System.nanoTime());

    OncePerInterval(long intervalNanos) {
        this.intervalNanos = intervalNanos;
    }

    /** True for one caller at {@code now} (a {@link System#nanoTime()} value) or later, past the next opening; it then moves an interval on. */
    boolean open(long now) {
        long due = next.get();
        return now - due >= 0 && next.compareAndSet(due, now + intervalNanos);
    }

    /** Moves the next opening to {@code at}. */
    void nextAt(long at) {
        next.set(at);
    }
}
