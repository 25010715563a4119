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
 * The in-process hand-out racing retirement: a thread acquires from the process's share of
 * version 1 (or, finding it retired or replaced, takes a reference of its own and makes it the
 * share of the current version), uses the version and lets go, while another thread publishes
 * version 2 and retires the share of version 1 as the background round does. The share's
 * reference is given back exactly once, never before the thread's use, and version 1 is
 * retired once. r1: version used (1 or 2; -1: retired under the reader); r2: retirements of
 * version 1; r3: give-backs of the share of version 1; r4: what the row still holds on it.
 */
@JCStressTest
@Outcome(id = {"1, 1, 1, 0", "2, 1, 1, 0"}, expect = ACCEPTABLE, desc = "given back once, after the use; retired once")
@Outcome(id = "-1, .*", expect = FORBIDDEN, desc = "use after give-back")
@Outcome(expect = FORBIDDEN, desc = "given back twice or never, version retired twice or never, held count left")
@State
public class ShareHandOutVsRetire {
    final ShareFixture s = new ShareFixture();

    @Actor
    public void reader(IIII_Result r) {
        ProcessShare.Share<Object> share = s.acquire();
        r.r1 = s.f.use(share.word());
        share.leave.run();
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
