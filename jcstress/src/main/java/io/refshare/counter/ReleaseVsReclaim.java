package io.refshare.counter;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZIJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The holder releases its token while the owner reclaims every token of that holder
 * (judged dead a moment too early, say): the token is released exactly once, by one of
 * them. r2: tokens the reclaim released; r3: the release count.
 */
@JCStressTest
@Outcome(id = "true, 0, 1", expect = ACCEPTABLE, desc = "the holder released it")
@Outcome(id = "false, 1, 1", expect = ACCEPTABLE, desc = "the reclaim released it")
@Outcome(expect = FORBIDDEN, desc = "released twice, or not at all")
@State
public class ReleaseVsReclaim {
    private final TokensFixture f = new TokensFixture();

    public ReleaseVsReclaim() {
        if (!f.tokens.claim(TokensFixture.SLOT, TokensFixture.TAG, 0)) {
            throw new AssertionError("claim of a fresh token failed");
        }
    }

    @Actor
    public void holder(ZIJ_Result r) {
        r.r1 = f.tokens.release(TokensFixture.SLOT, 0);
    }

    @Actor
    public void owner(ZIJ_Result r) {
        r.r2 = f.tokens.releaseAllHeldBy(0, 1);
    }

    @Arbiter
    public void arbiter(ZIJ_Result r) {
        r.r3 = f.tokens.releases();
    }
}
