package io.refshare.testing;

import java.util.function.BooleanSupplier;

/** Waits for something a background thread does (the collector, say); fails after 10 s. */
public final class Eventually {
    private Eventually() {
    }

    public static void await(BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("not within 10 s: " + what);
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
