package io.refshare.harness;

import org.HdrHistogram.Histogram;

import java.util.Arrays;
import java.util.List;

/**
 * Ping-pong latency of one system at one size, from per-round timestamps taken with
 * {@link System#nanoTime()} in both processes (one clock on Linux: see {@link ClockCheck}).
 *
 * @param oneWayNanos     per measured round: consumer's read time minus producer's send time
 * @param roundTripNanos  per measured round: producer's ack-received time minus its send time
 * @param clockViolations rounds whose consumer timestamp fell outside the producer's
 *                        [send, ack received] window: impossible with one shared clock
 * @param sharedCpu       how often the two processes' measuring threads were found on one CPU
 *                        during the rounds ({@link SharedCpu}; sampled for refshare's ping-pongs only)
 */
record LatencyStats(long[] oneWayNanos, long[] roundTripNanos, int clockViolations, SharedCpu.Result sharedCpu) {

    LatencyStats(long[] oneWayNanos, long[] roundTripNanos, int clockViolations) {
        this(oneWayNanos, roundTripNanos, clockViolations, SharedCpu.Result.NONE);
    }

    /** Drops the first {@code warmup} rounds and keeps the rest. */
    static LatencyStats of(long[] sendAt, long[] readAt, long[] ackAt, int warmup) {
        if (sendAt.length != readAt.length || sendAt.length != ackAt.length || warmup >= sendAt.length) {
            throw new IllegalStateException("timestamps do not line up: " + sendAt.length + " sent, " + readAt.length
                    + " read, " + ackAt.length + " acknowledged, " + warmup + " warm-up rounds");
        }
        int n = sendAt.length - warmup;
        long[] oneWay = new long[n];
        long[] roundTrip = new long[n];
        int violations = 0;
        for (int i = 0; i < n; i++) {
            int r = warmup + i;
            oneWay[i] = readAt[r] - sendAt[r];
            roundTrip[i] = ackAt[r] - sendAt[r];
            if (readAt[r] < sendAt[r] || readAt[r] > ackAt[r]) {
                violations++;
            }
        }
        return new LatencyStats(oneWay, roundTrip, violations);
    }

    /** These rounds, with what sampling the two threads' CPUs found during them. */
    LatencyStats withSharedCpu(SharedCpu.Result result) {
        return new LatencyStats(oneWayNanos, roundTripNanos, clockViolations, result);
    }

    /** The rounds of {@code parts} one after the other, as if measured in one go (their CPU samples added up). */
    static LatencyStats concat(List<LatencyStats> parts) {
        if (parts.isEmpty()) {
            throw new IllegalArgumentException("no latencies to join");
        }
        long[] oneWay = parts.stream().flatMapToLong(x -> Arrays.stream(x.oneWayNanos)).toArray();
        long[] roundTrip = parts.stream().flatMapToLong(x -> Arrays.stream(x.roundTripNanos)).toArray();
        return new LatencyStats(oneWay, roundTrip, parts.stream().mapToInt(LatencyStats::clockViolations).sum(),
                SharedCpu.Result.sum(parts.stream().map(LatencyStats::sharedCpu).toList()));
    }

    int rounds() {
        return oneWayNanos.length;
    }

    /** One-way latency in µs at quantile {@code q} (nearest rank). */
    double oneWayMicros(double q) {
        return percentile(oneWayNanos, q) / 1e3;
    }

    /** Half the round trip in µs at quantile {@code q}: the estimate that needs no shared clock. */
    double halfRoundTripMicros(double q) {
        return percentile(roundTripNanos, q) / 2e3;
    }

    double meanOneWayMicros() {
        return Arrays.stream(oneWayNanos).average().orElse(Double.NaN) / 1e3;
    }

    /**
     * The value at quantile {@code q} of {@code values}, from an HdrHistogram of them with 3
     * significant digits (so within 0.1% of the exact order statistic).
     */
    static double percentile(long[] values, double q) {
        if (values.length == 0) {
            return Double.NaN;
        }
        Histogram h = new Histogram(3);
        for (long v : values) {
            h.recordValue(Math.max(0, v));
        }
        return h.getValueAtPercentile(q * 100);
    }
}
