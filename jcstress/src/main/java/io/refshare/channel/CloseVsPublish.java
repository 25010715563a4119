package io.refshare.channel;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.JII_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A producer publishing while another participant ends the stream and looks at the head:
 * a message whose claim succeeded is never lost to a "closed" answer, and a producer that
 * sees the close publishes nothing. The arbiter takes what is left afterwards.
 * <p>r1: the producer's claim (0, or -2 closed); r2: the closer's take (3, -1 empty: the
 * claim is still being written, or -2 closed); r3: the arbiter's take.
 */
@JCStressTest
@Outcome(id = "0, 3, -2", expect = ACCEPTABLE, desc = "published before the close; the closer took it")
@Outcome(id = "0, -1, 3", expect = ACCEPTABLE, desc = "claimed before the close, published after the closer looked")
@Outcome(id = "-2, -2, -2", expect = ACCEPTABLE, desc = "closed first: the producer published nothing")
@Outcome(id = "-2, -1, -2", expect = ACCEPTABLE, desc = "claimed, then saw the close and gave the claim up")
@Outcome(id = "0, -2, .*", expect = FORBIDDEN, desc = "the closer said drained over a claimed message")
@Outcome(expect = FORBIDDEN, desc = "anything else")
@State
public class CloseVsPublish {
    private final CellsFixture q = new CellsFixture(2);

    @Actor
    public void producer(JII_Result r) {
        r.r1 = CellsFixture.put(q.first, (byte) 3);
    }

    @Actor
    public void closer(JII_Result r) {
        q.second.endStream(ShmQueueLayout.ENDED_BY_PRODUCER);
        r.r2 = CellsFixture.take(q.second);
    }

    @Arbiter
    public void arbiter(JII_Result r) {
        r.r3 = CellsFixture.take(q.second);
    }
}
