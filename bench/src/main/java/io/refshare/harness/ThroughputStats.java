package io.refshare.harness;

/**
 * Streaming throughput of one system at one size, timed by the consumer: from the moment
 * it finished the warm-up messages to the moment it finished the last one.
 *
 * @param messages messages timed (after the warm-up)
 * @param bytes    bytes those messages carried (for refshare: made readable, not copied)
 * @param nanos    consumer's elapsed time for them
 * @param window   messages the producer may have in flight (queue capacity; for the socket, its buffers)
 */
record ThroughputStats(long messages, long bytes, long nanos, String window) {

    double tensorsPerSecond() {
        return messages / (nanos / 1e9);
    }

    /** Decimal gigabytes (10^9 bytes) per second. */
    double gigabytesPerSecond() {
        return bytes / (double) nanos;
    }
}
