package io.refshare.counter;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZI_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/** Two receivers claim one in-flight token: exactly one holds it. r3: the holder's peer index. */
@JCStressTest
@Outcome(id = "true, false, 0", expect = ACCEPTABLE, desc = "peer 0 holds it")
@Outcome(id = "false, true, 1", expect = ACCEPTABLE, desc = "peer 1 holds it")
@Outcome(expect = FORBIDDEN, desc = "claimed twice, or by nobody")
@State
public class TwoClaims {
    private final TokensFixture f = new TokensFixture();

    @Actor
    public void peer0(ZZI_Result r) {
        r.r1 = f.tokens.claim(TokensFixture.SLOT, TokensFixture.TAG, 0);
    }

    @Actor
    public void peer1(ZZI_Result r) {
        r.r2 = f.tokens.claim(TokensFixture.SLOT, TokensFixture.TAG, 1);
    }

    @Arbiter
    public void arbiter(ZZI_Result r) {
        r.r3 = CounterFileLayout.holder(f.tokens.word(TokensFixture.SLOT));
    }
}
