package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The wake-pending flag (protocol.md 9.5) against a consumer registering to sleep.
 * Producer actor, as one thread playing two participants in a legal order: it publishes m1,
 * another consumer takes m1 (a non-counted taker: poll(), a batch, a Python consumer), the
 * producer's signal for m1 runs (sets the flag, bumps the sequence, futex_wake reaches
 * nobody), then it publishes m2 and signals again (skipped while the flag is set).
 * Sleeper actor: QueueSignal.prepare (counts, reads the sequence, clears the flag), then its
 * re-try. The arbiter asks what the sleeper's futex_wait(seq, s) would do.
 *
 * r1: the sleeper's re-try found a message; r2: its futex_wait would return at once (the
 * sequence moved since prepare read it); r3: a message still waits at the head.
 * "false, false, true": the sleeper blocks on an unchanged sequence with m2 queued and the
 * flag still set, so every later signaller skips too: it sleeps its whole slice.
 */
@JCStressTest
@Outcome(id = "false, false, true", expect = FORBIDDEN, desc = "lost wake-up: sleeps a slice with a message queued")
@Outcome(id = ".*", expect = ACCEPTABLE, desc = "the sleeper finds a message or is woken")
@State
public class WakePendingVsRegisteringSleeper {
    private final CellsFixture q = new CellsFixture(4);
    private int sequence;
    private boolean sleeperFound;

    @Actor
    public void producerAndOtherConsumer() {
        CellsFixture.put(q.first, (byte) 1);   // m1
        CellsFixture.take(q.first);            // another consumer takes m1 first
        q.notEmpty.signal();                   // the producer's signal for m1
        CellsFixture.put(q.first, (byte) 2);   // m2
        q.notEmpty.signal();
    }

    @Actor
    public void sleeper() {
        sequence = q.notEmpty.prepare(q.waiterEntry);
        sleeperFound = CellsFixture.take(q.second) > 0;
    }

    @Arbiter
    public void arbiter(ZZZ_Result r) {
        r.r1 = sleeperFound;
        r.r2 = q.notEmptySequence() != sequence;
        r.r3 = q.second.hasMessage();
    }
}
