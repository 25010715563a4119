package io.refshare.channel;

/**
 * Whether a queue has at least as many consumers as this machine has CPUs: then the
 * consumers, not the producers, limit its rate, and the queue's room wake-ups change (a local
 * choice, protocol.md 9.5):
 * <ul>
 * <li>a backing-off producer that finds the queue full sleeps at once instead of spinning:
 *     the spin would take the CPU a consumer needs, and a full queue is a queue of work for
 *     them, so catching the first free cell within a microsecond gains nothing;</li>
 * <li>a consumer wakes a sleeping producer only once at most half the cells are taken, so the
 *     producer refills half a queue per wake-up instead of a cell or two (otherwise the
 *     producer slept and was woken once for every few messages: with eight 1 KiB consumers
 *     on two CPUs, kernel time, most of it those futex calls, was 29% of all samples).</li>
 * </ul>
 * With fewer consumers than CPUs neither holds: the producer's spin runs on a CPU of its own
 * and catches the room without costing the consumer a wake-up, and waking it late would let
 * the queue run dry (two processes streaming 1 KiB: a third of the rate).
 *
 * <p>Each handle counts the participant table's entries with the consumer role: a producer
 * waiting for room at most every {@value ShmQueue#SWEEP_INTERVAL_MILLIS} ms (it reads the
 * clock anyway), a consumer every {@value #TAKES_PER_COUNT} takes (no clock on that path).
 * The answer is a hint: a stale one costs speed, never a message, since sleepers sleep in
 * bounded slices and re-check.
 */
final class CrowdedConsumers {
    private static final long COUNT_INTERVAL_NANOS = ShmQueue.SWEEP_INTERVAL_MILLIS * 1_000_000L;
    static final int TAKES_PER_COUNT = 1024;

    private final Participants participants;
    private final OncePerInterval counts = new OncePerInterval(COUNT_INTERVAL_NANOS);
    private volatile boolean crowded;
    /** Takes since the last count; updated racily (a lost increment only delays a count). */
    private int takes;

    CrowdedConsumers(Participants participants) {
        this.participants = participants;
        count();
    }

    /** The answer for a waiter: counted afresh when {@code now} is past the interval. */
    boolean crowded(long now) {
        if (counts.open(now)) {
            count();
        }
        return crowded;
    }

    /** The answer for a consumer that just took a message: counted afresh every so many takes. */
    boolean crowdedAfterTake() {
        if (++takes >= TAKES_PER_COUNT) {
            takes = 0;
            count();
        }
        return crowded;
    }

    private void count() {
        crowded = participants.consumers() >= Spinning.CPUS;
    }
}
