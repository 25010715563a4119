package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.JJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/** Two producers race for the one free cell: exactly one gets position 0, the other finds the queue full. */
@JCStressTest
@Outcome(id = {"0, -1", "-1, 0"}, expect = ACCEPTABLE, desc = "one claim, one full queue")
@Outcome(id = "0, 0", expect = FORBIDDEN, desc = "one position claimed twice")
@Outcome(id = "-1, -1", expect = FORBIDDEN, desc = "a free cell nobody got")
@Outcome(expect = FORBIDDEN, desc = "anything else")
@State
public class TwoProducersOneCell {
    private final CellsFixture q = new CellsFixture(1);

    @Actor
    public void first(JJ_Result r) {
        r.r1 = CellsFixture.put(q.first, (byte) 1);
    }

    @Actor
    public void second(JJ_Result r) {
        r.r2 = CellsFixture.put(q.second, (byte) 2);
    }
}
