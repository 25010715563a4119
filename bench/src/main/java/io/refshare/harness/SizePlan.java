package io.refshare.harness;

/**
 * How much to measure at one size. Counts shrink as sizes grow so that copying through
 * the socket (hundreds of milliseconds per 256 MiB message) keeps the run within minutes,
 * with floors that still give percentiles some meaning.
 *
 * @param pingPongWarmup rounds run and discarded before the measured ones (page faults, caches)
 * @param pingPongRounds rounds measured
 * @param streamWarmup   messages streamed before the consumer starts its clock (at least a window)
 * @param streamMessages messages the consumer times
 * @param window         capacity of the streaming queue: messages in flight at most ({@link #defaultWindow})
 * @param reclaimRounds  measured rounds of reclamation latency, each consumer closing at once
 *                       (plus a tenth as warm-up)
 * @param reclaimHeldRounds measured rounds of reclamation latency, each consumer holding the
 *                       tensor for {@link Reclamation#HELD_NANOS} first (plus a tenth as warm-up)
 */
record SizePlan(long size, int pingPongWarmup, int pingPongRounds, int streamWarmup, int streamMessages, int window,
                int reclaimRounds, int reclaimHeldRounds) {
    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;
    static final int STREAM_SLICES = 10;
    static final int MESSAGES_PER_SLICE = 50_000;

    /**
     * The plan for {@code size}: {@code iterations > 0} fixes the measured counts, otherwise
     * they follow the size (fewer for {@code quick}); {@code window > 0} fixes the streaming
     * window, otherwise {@link #defaultWindow}.
     */
    static SizePlan of(long size, boolean quick, int iterations, int window) {
        long budget = quick ? GIB / 4 : 4 * GIB;
        int rounds = iterations > 0 ? iterations : Math.clamp(budget / size, 30, quick ? 2_000 : 10_000);
        // up to two million small messages: at a million a second or more a shorter window (it was
        // 200,000) is a tenth of a second, and one scheduling hiccup moved a row by a third
        int messages = iterations > 0 ? iterations : Math.clamp(budget / size, 20, quick ? 200_000 : 2_000_000);
        window = window > 0 ? window : defaultWindow(size);
        // reclamation rounds wait for the producer's collector (up to milliseconds each) whatever the size
        int reclaim = iterations > 0 ? iterations : quick ? 200 : 1_000;
        int reclaimHeld = iterations > 0 ? Math.max(10, iterations / 10) : quick ? 20 : 100;
        return new SizePlan(size, Math.max(3, rounds / 10), rounds, Math.max(window, messages / 10), messages, window,
                reclaim, reclaimHeld);
    }

    /**
     * Slices the streams of this size are measured in, interleaved (up to {@value #STREAM_SLICES}): one
     * for every {@value #MESSAGES_PER_SLICE} messages, so that a slice streams for tens of milliseconds
     * at least. Shorter slices measured their own starts: at 64 KiB, ten slices of 409 messages
     * streamed refshare at 57k-493k tensors/s where one stream of 4,096 moved 1.9-6.1 M, since a
     * scheduler's tick or a sampler's wake-up in a slice of 0.1 ms is the slice.
     */
    int streamSlices() {
        return Math.clamp(streamMessages / MESSAGES_PER_SLICE, 1, STREAM_SLICES);
    }

    /** Timed messages of slice {@code i} (0-based); the slices add up to {@link #streamMessages}. */
    int sliceMessages(int i) {
        int slices = streamSlices();
        return streamMessages / slices + (i < streamMessages % slices ? 1 : 0);
    }

    /** Untimed messages before each slice: its share of the warm-up, and at least a window. */
    int sliceWarmup() {
        return Math.max(window, streamWarmup / streamSlices());
    }

    /**
     * Messages in flight at most, by default: 64, up to a MiB of small ones (1,024 of 1 KiB; the
     * socket's kernel buffers hold 8 MiB), and no more than a GiB of large ones (fresh tensors in
     * flight each hold their own memory). With only 64 messages of 1 KiB the two processes took
     * turns sleeping on two CPUs: the producer found the queue full within microseconds of any
     * pause of the consumer's, and each sleep's wake-up could bring the pair onto one CPU.
     */
    static int defaultWindow(long size) {
        return (int) Math.clamp(Math.min(GIB / size, Math.max(64, MIB / size)), 4, 1024);
    }
}
