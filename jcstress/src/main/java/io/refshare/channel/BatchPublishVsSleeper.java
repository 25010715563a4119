package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A producer publishing the last message of a batch into an empty queue
 * (release stores, then one fence before the sleepers are read) against a consumer that
 * counts itself asleep and then looks at the cells, as a waiter does before it sleeps: at
 * least one of them must see the other, or the waiter sleeps through the change (a lost
 * wake-up). Without {@link QueueCells#fenceBatch()} the store and the read may be reordered.
 */
@JCStressTest
@Outcome(id = "true, true", expect = ACCEPTABLE, desc = "both saw each other")
@Outcome(id = "true, false", expect = ACCEPTABLE, desc = "the producer sees the sleeper and wakes it")
@Outcome(id = "false, true", expect = ACCEPTABLE, desc = "the waiter sees the change and does not sleep")
@Outcome(id = "false, false", expect = FORBIDDEN, desc = "a lost wake-up")
@State
public class BatchPublishVsSleeper {
    private final CellsFixture q = new CellsFixture(1);

    @Actor
    public void producer(ZZ_Result r) {
        long t = q.first.claimWritable(CellsFixture.deadline());
        q.first.publishInBatch(t, Outgoing.of(new byte[CellsFixture.MESSAGE_BYTES]));
        QueueCells.fenceBatch();
        r.r1 = q.notEmpty.anyoneAsleep();
    }

    @Actor
    public void waiter(ZZ_Result r) {
        q.notEmpty.prepare(q.waiterEntry);
        r.r2 = q.second.hasMessage();
    }
}
