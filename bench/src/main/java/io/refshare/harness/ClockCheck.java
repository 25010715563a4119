package io.refshare.harness;

import java.io.IOException;

/**
 * Evidence that {@link System#nanoTime()} of the producer and of the consumer can be
 * subtracted. The Java spec promises nothing across JVMs; on Linux, HotSpot reads
 * {@code clock_gettime(CLOCK_MONOTONIC)}, one system-wide clock, so it holds there. Rather
 * than trust that, the run checks it: the consumer's clock, read in answer to a probe,
 * must fall between the producer's clock readings before the probe and after the answer.
 * (Every ping-pong round checks it again: see {@link LatencyStats#clockViolations()}.)
 *
 * @param probes            probes sent
 * @param inside            probes whose answer fell inside the producer's window
 * @param medianWindowNanos median width of that window (the probe's round trip over pipes)
 */
record ClockCheck(int probes, int inside, long medianWindowNanos) {

    static ClockCheck probe(PeerProcess peer, int probes) throws IOException, InterruptedException {
        long[] windows = new long[probes];
        int inside = 0;
        for (int i = 0; i < probes; i++) {
            long before = System.nanoTime();
            peer.send(BenchPeer.CLOCK);
            long theirs = Long.parseLong(peer.await(BenchPeer.CLOCK));
            long after = System.nanoTime();
            windows[i] = after - before;
            if (before <= theirs && theirs <= after) {
                inside++;
            }
        }
        return new ClockCheck(probes, inside, (long) LatencyStats.percentile(windows, 0.5));
    }

    boolean holds() {
        return probes > 0 && inside == probes;
    }
}
