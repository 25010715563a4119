package io.refshare.channel;

import java.util.concurrent.atomic.AtomicLong;

/**
 * One kind of warning that may repeat many times a second (a damaged queue rejecting
 * every message, say): the first is logged, then at most one per interval, carrying the
 * count of those left out since, so a log shows the problem and its rate without being
 * flooded. Thread-safe.
 */
public final class RepeatedWarning {
    public static final long INTERVAL_NANOS = 10_000_000_000L;

    private final System.Logger log;
    private final OncePerInterval logged;
    private final AtomicLong leftOut = new AtomicLong();

    public RepeatedWarning(System.Logger log, long intervalNanos) {
        this.log = log;
        this.logged = new OncePerInterval(intervalNanos);
    }

    /** Logs {@code message} now, or counts it if one was logged less than an interval ago. True when logged. */
    public boolean warn(String message) {
        if (!logged.open(System.nanoTime())) {
            leftOut.incrementAndGet();
            return false;
        }
        long skipped = leftOut.getAndSet(0);
        log.log(System.Logger.Level.WARNING, skipped == 0 ? message
                : message + " (" + skipped + " more like it since the last such warning)");
        return true;
    }
}
