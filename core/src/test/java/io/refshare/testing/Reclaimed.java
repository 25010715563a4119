package io.refshare.testing;

import io.refshare.Refshare;

/** Waiting for a producer to take back what a killed consumer held, for the crash tests to then check. */
public final class Reclaimed {
    private Reclaimed() {
    }

    /**
     * Waits until {@code producer}'s limbo is empty and it has counted {@code references}
     * reclaimed, or {@code limitNanos} passed; returns the milliseconds waited. It does not
     * fail: the caller asserts what it expects. Both are waited for because the housekeeper
     * counts what it reclaimed after releasing it, and the collector may empty the limbo in
     * between.
     */
    public static long await(Refshare producer, long references, long limitNanos) throws InterruptedException {
        long start = System.nanoTime();
        while ((producer.stats().limboBlocks() > 0 || producer.stats().reclaimed() < references)
                && System.nanoTime() - start < limitNanos) {
            Thread.sleep(1);
        }
        return (System.nanoTime() - start) / 1_000_000;
    }
}
