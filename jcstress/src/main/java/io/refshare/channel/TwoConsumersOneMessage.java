package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/** Two consumers race for the one published message: exactly one takes it, whole; the other finds the queue empty. */
@JCStressTest
@Outcome(id = {"5, -1", "-1, 5"}, expect = ACCEPTABLE, desc = "delivered exactly once")
@Outcome(id = "5, 5", expect = FORBIDDEN, desc = "delivered twice")
@Outcome(id = "-1, -1", expect = FORBIDDEN, desc = "a published message nobody got")
@Outcome(expect = FORBIDDEN, desc = "anything else (a torn read)")
@State
public class TwoConsumersOneMessage {
    private final CellsFixture q = new CellsFixture(2);

    public TwoConsumersOneMessage() {
        CellsFixture.put(q.first, (byte) 5);
    }

    @Actor
    public void first(II_Result r) {
        r.r1 = CellsFixture.take(q.first);
    }

    @Actor
    public void second(II_Result r) {
        r.r2 = CellsFixture.take(q.second);
    }
}
