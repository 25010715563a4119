package io.refshare.holder;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A use of the process's share taken before the race (a tensor acquired from it) is used and
 * released while another thread publishes version 2 and retires the share: whichever comes
 * last gives the share's reference back, once, after the use; version 1 is retired once.
 * r1: version used (-1: retired under the reader); r2: retirements of version 1; r3:
 * give-backs of the share; r4: what the row still holds on version 1.
 */
@JCStressTest
@Outcome(id = "1, 1, 1, 0", expect = ACCEPTABLE, desc = "given back once, by the release or the retirement")
@Outcome(id = "-1, .*", expect = FORBIDDEN, desc = "use after give-back")
@Outcome(expect = FORBIDDEN, desc = "given back twice or never, retired twice or never, held count left")
@State
public class ShareReleaseVsRetire {
    final ShareFixture s = new ShareFixture();
    final ProcessShare.Share<Object> held = s.acquire();

    @Actor
    public void reader(IIII_Result r) {
        r.r1 = s.f.use(held.word());
        held.leave.run();
    }

    @Actor
    public void publisher() {
        s.publishAndRetire(2);
    }

    @Arbiter
    public void arbiter(IIII_Result r) {
        s.afterwards(r);
    }
}
