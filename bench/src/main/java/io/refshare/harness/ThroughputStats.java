package io.refshare.harness;

import java.util.List;

/**
 * Streaming throughput of one system at one size, timed by the consumer: from the moment
 * it finished the warm-up messages to the moment it finished the last one. A row streamed in
 * slices adds up its slices' messages and times ({@link #concat}).
 *
 * @param messages messages timed (after the warm-up)
 * @param bytes    bytes those messages carried (for refshare: made readable, not copied)
 * @param nanos    consumer's elapsed time for them
 * @param window   messages the producer may have in flight (queue capacity; for the socket, its buffers)
 * @param sharedCpu how often the two processes' measuring threads were found on one CPU while the row
 *                 streamed ({@link SharedCpu}; sampled for the refshare rows only)
 */
record ThroughputStats(long messages, long bytes, long nanos, String window, SharedCpu.Result sharedCpu) {

    ThroughputStats(long messages, long bytes, long nanos, String window) {
        this(messages, bytes, nanos, window, SharedCpu.Result.NONE);
    }

    /** One row's slices joined: their messages, bytes, times and CPU samples added up (the window is the first's). */
    static ThroughputStats concat(List<ThroughputStats> parts) {
        if (parts.isEmpty()) {
            throw new IllegalArgumentException("no throughputs to join");
        }
        return new ThroughputStats(parts.stream().mapToLong(ThroughputStats::messages).sum(),
                parts.stream().mapToLong(ThroughputStats::bytes).sum(),
                parts.stream().mapToLong(ThroughputStats::nanos).sum(), parts.getFirst().window(),
                SharedCpu.Result.sum(parts.stream().map(ThroughputStats::sharedCpu).toList()));
    }

    double tensorsPerSecond() {
        return messages / (nanos / 1e9);
    }

    /** Decimal gigabytes (10^9 bytes) per second. */
    double gigabytesPerSecond() {
        return bytes / (double) nanos;
    }
}
