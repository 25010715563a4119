package io.refshare.testing;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * Waits for something a background thread or another process does (the collector, a child's
 * death); fails the test after 10 s, or the time given. The one deadline loop of the tests.
 */
public final class Eventually {
    private static final Duration DEFAULT = Duration.ofSeconds(10);

    private Eventually() {
    }

    public static void await(BooleanSupplier condition, String what) {
        await(DEFAULT, condition, what);
    }

    public static void await(Duration limit, BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("not within " + limit.toSeconds() + " s: " + what);
            }
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }
}
