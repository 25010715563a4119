package io.refshare;

/**
 * How a queue handle waits for a message (a consumer) or for room (a producer), chosen per
 * handle ({@link Refshare#createQueue(int, WaitStrategy)},
 * {@link Refshare#openQueue(String, WaitStrategy)}). Either way a waiter
 * still sweeps up after dead participants and notices the end of the stream; only how it
 * spends the time in between differs.
 */
public enum WaitStrategy {
    /**
     * The default: spin for about 30 µs (yielding the CPU after the first 2 µs, so a peer
     * that shares this CPU can run), then sleep on the queue's futex until woken. Measured
     * on two cores, this keeps a hand-off at a few microseconds when the peer is quick and
     * costs no CPU when it is not.
     */
    BACKOFF,
    /**
     * Spin without yielding or sleeping for as long as the wait lasts: the lowest hand-off
     * latency, for a waiter with a CPU of its own (pinned, isolated). It keeps that CPU busy
     * at 100 % while waiting; on a machine where it shares a CPU with its peer it is slower
     * than {@link #BACKOFF}, since it holds the CPU the peer needs.
     */
    BUSY_SPIN
}
