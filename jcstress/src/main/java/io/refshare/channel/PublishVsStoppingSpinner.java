package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A consumer that spun for a message and won it (ShmQueue's {@code spinForMessage}) stops
 * counting itself as a spinner, frees the cell and looks for a message behind it, while a
 * producer publishes that next message and asks whether a sleeping consumer must be woken
 * (it need not while a spinner is counted). One of them must see the other, or the message
 * waits for the sleeper's slice to end: the producer skipped its wake-up because it counted
 * the winner, and the winner looked before the message was there. The look must come after
 * the decrement; with the two swapped this test finds the lost wake-up.
 */
@JCStressTest
@Outcome(id = "true, true", expect = ACCEPTABLE, desc = "both saw each other")
@Outcome(id = "true, false", expect = ACCEPTABLE, desc = "the producer wakes the sleeper")
@Outcome(id = "false, true", expect = ACCEPTABLE, desc = "the winner sees the message and signals on")
@Outcome(id = "false, false", expect = FORBIDDEN, desc = "a lost wake-up")
@State
public class PublishVsStoppingSpinner {
    private final CellsFixture q = new CellsFixture(2);

    public PublishVsStoppingSpinner() {
        q.notEmpty.prepare(q.waiterEntry); // another consumer is asleep
        q.notEmpty.startSpinning(q.waiterEntry, Integer.MAX_VALUE); // the winner-to-be spins
        CellsFixture.put(q.first, (byte) 1);
    }

    @Actor
    public void producer(ZZ_Result r) {
        CellsFixture.put(q.first, (byte) 2);
        r.r1 = q.notEmpty.wakeNeeded();
    }

    @Actor
    public void winner(ZZ_Result r) {
        long h = q.second.claimReadable(CellsFixture.deadline());
        q.notEmpty.stopSpinning(q.waiterEntry);
        q.second.freeCell(h);
        r.r2 = q.second.hasMessage();
    }
}
