package io.refshare.harness;

/**
 * Reclamation latency of refshare at one size: from the consumer's close of the last
 * reference to a block the producer had already dropped, to that block being back in the
 * producer's allocator (its limbo empty again), reusable for the next allocation. The
 * producer does nothing to help: it only watches, so the number is what its background
 * collector achieves for a producer that is busy elsewhere or idle.
 *
 * @param holdNanos   how long the consumer held each tensor (after reading it) before closing it
 * @param latencyNanos per measured round: producer's clock when the limbo was empty minus the
 *                    consumer's clock just before its close (one CLOCK_MONOTONIC: {@link ClockCheck})
 * @param excluded    rounds not measured because the consumer closed before the producer had
 *                    dropped its own reference (the producer's drop then frees the block itself)
 */
record Reclamation(long size, long holdNanos, long[] latencyNanos, int excluded) {
    /** The consumer's hold in the "at once" variant: long enough for the producer to drop its reference first. */
    static final long AT_ONCE_NANOS = 100_000;
    /** The consumer's hold in the "held" variant: longer than the collector's idle sleep (10 ms). */
    static final long HELD_NANOS = 20_000_000;
    /** The reclamation target (docs/benchmarks.md). */
    static final double TARGET_P99_MICROS = 1_000;

    int rounds() {
        return latencyNanos.length;
    }

    double micros(double q) {
        return LatencyStats.percentile(latencyNanos, q) / 1e3;
    }

    String holdLabel() {
        return holdNanos >= 1_000_000 ? String.format(java.util.Locale.ROOT, "%d ms", holdNanos / 1_000_000)
                : String.format(java.util.Locale.ROOT, "%d us", holdNanos / 1_000);
    }

    boolean meetsTarget() {
        return rounds() > 0 && micros(0.99) <= TARGET_P99_MICROS;
    }
}
