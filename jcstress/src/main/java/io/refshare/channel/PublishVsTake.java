package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.JI_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A producer publishing into an empty one-cell queue while a consumer takes: the consumer
 * finds nothing yet, or the whole message; never a half-written one.
 */
@JCStressTest
@Outcome(id = "0, -1", expect = ACCEPTABLE, desc = "the consumer came first: empty")
@Outcome(id = "0, 7", expect = ACCEPTABLE, desc = "the consumer took the whole message")
@Outcome(id = "0, -3", expect = FORBIDDEN, desc = "torn: the consumer read bytes before they were published")
@Outcome(expect = FORBIDDEN, desc = "anything else")
@State
public class PublishVsTake {
    private final CellsFixture q = new CellsFixture(1);

    @Actor
    public void producer(JI_Result r) {
        r.r1 = CellsFixture.put(q.first, (byte) 7);
    }

    @Actor
    public void consumer(JI_Result r) {
        r.r2 = CellsFixture.take(q.second);
    }
}
