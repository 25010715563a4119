package io.refshare.harness;

/**
 * One system at one size: its ping-pong latency and its streaming throughput.
 *
 * @param system   as shown in the table ("refshare reuse", "unix socket copy", ...)
 * @param baseline true for the copy that the ratios compare against
 */
record Measurement(long size, String system, boolean baseline, LatencyStats latency, ThroughputStats throughput) {
    static final String REFSHARE = "refshare ";
    /** refshare with both queue handles busy-spinning ({@code WaitStrategy.BUSY_SPIN}). */
    static final String BUSY_SPIN = "refshare busy-spin ";
    static final String SOCKET = "unix socket copy";
    /** refshare reuse streaming with putAll/drainTo batches; its latency is reuse's (one hand-off is not batched). */
    static final String BATCHES = "refshare reuse, batches of ";
    /** The batch size of the {@link #BATCHES} rows. */
    static final int BATCH_SIZE = 32;
    /** The batch row of {@link #BATCH_SIZE} different tensors (the {@link #BATCHES} row's are references to one). */
    static final String DIFFERENT_BATCHES = "refshare batches of " + BATCH_SIZE + " different";
    /** The largest size with a {@link #DIFFERENT_BATCHES} row: its batch is {@link #BATCH_SIZE} tensors of this size. */
    static final long DIFFERENT_UP_TO = 1 << 20;
}
