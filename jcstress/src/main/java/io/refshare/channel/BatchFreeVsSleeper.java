package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A consumer freeing the last cell of a batch in a full queue
 * (release stores, then one fence before the sleepers are read) against a producer that
 * counts itself asleep and then looks at the cells, as a waiter does before it sleeps: at
 * least one of them must see the other, or the waiter sleeps through the change (a lost
 * wake-up). Without {@link QueueCells#fenceBatch()} the store and the read may be reordered.
 */
@JCStressTest
@Outcome(id = "true, true", expect = ACCEPTABLE, desc = "both saw each other")
@Outcome(id = "true, false", expect = ACCEPTABLE, desc = "the consumer sees the sleeper and wakes it")
@Outcome(id = "false, true", expect = ACCEPTABLE, desc = "the waiter sees the change and does not sleep")
@Outcome(id = "false, false", expect = FORBIDDEN, desc = "a lost wake-up")
@State
public class BatchFreeVsSleeper {
    private final CellsFixture q = new CellsFixture(1);

    {
        CellsFixture.put(q.first, (byte) 1); // full: the waiter waits for room
    }

    @Actor
    public void consumer(ZZ_Result r) {
        long h = q.first.claimReadable(CellsFixture.deadline());
        q.first.freeCellInBatch(h);
        QueueCells.fenceBatch();
        r.r1 = q.notFull.anyoneAsleep();
    }

    @Actor
    public void waiter(ZZ_Result r) {
        q.notFull.prepare(q.waiterEntry);
        r.r2 = q.second.hasRoom();
    }
}
