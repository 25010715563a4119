package io.refshare.counter;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZI_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A receiver (peer 0) that holds a token gives its claim back (it ran out of memory making
 * the tensor) while the next receiver (peer 1) tries to claim it: the give-back always
 * succeeds, and the token ends either held by the next receiver or in flight (its claim came
 * first and failed), never released and never counted. r3: the slot word's low half, or -1
 * when a release was counted.
 */
@JCStressTest
@Outcome(id = "true, true, 514", expect = ACCEPTABLE, desc = "given back, then claimed by peer 1: HELD(1)")
@Outcome(id = "true, false, 1", expect = ACCEPTABLE, desc = "peer 1's claim came first: in flight again")
@Outcome(expect = FORBIDDEN, desc = "a lost give-back, a token held twice, or a count")
@State
public class UnclaimVsClaim {
    private final TokensFixture f = new TokensFixture();

    public UnclaimVsClaim() {
        if (!f.tokens.claim(TokensFixture.SLOT, TokensFixture.TAG, 0)) {
            throw new AssertionError("the first claim failed");
        }
    }

    @Actor
    public void holder(ZZI_Result r) {
        r.r1 = f.tokens.unclaim(TokensFixture.SLOT, 0);
    }

    @Actor
    public void nextReceiver(ZZI_Result r) {
        r.r2 = f.tokens.claim(TokensFixture.SLOT, TokensFixture.TAG, 1);
    }

    @Arbiter
    public void arbiter(ZZI_Result r) {
        r.r3 = f.tokens.releases() != 0 ? -1 : (int) f.tokens.word(TokensFixture.SLOT);
    }
}
