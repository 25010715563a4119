package io.refshare.counter;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A receiver claims an in-flight token while its sender cancels it (a put that timed out):
 * either the receiver holds it and nothing was released, or it came back to the sender,
 * counted once. r3: the release count.
 */
@JCStressTest
@Outcome(id = "true, false, 0", expect = ACCEPTABLE, desc = "received")
@Outcome(id = "false, true, 1", expect = ACCEPTABLE, desc = "returned to the sender")
@Outcome(expect = FORBIDDEN, desc = "both, neither, or a wrong count")
@State
public class ClaimVsCancel {
    private final TokensFixture f = new TokensFixture();

    @Actor
    public void receiver(ZZJ_Result r) {
        r.r1 = f.tokens.claim(TokensFixture.SLOT, TokensFixture.TAG, 0);
    }

    @Actor
    public void sender(ZZJ_Result r) {
        r.r2 = f.tokens.cancel(TokensFixture.SLOT, TokensFixture.TAG);
    }

    @Arbiter
    public void arbiter(ZZJ_Result r) {
        r.r3 = f.tokens.releases();
    }
}
