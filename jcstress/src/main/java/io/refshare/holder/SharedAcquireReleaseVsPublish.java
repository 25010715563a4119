package io.refshare.holder;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The shared holder's protocol (its file layout, on native memory): a reader acquires,
 * uses and releases while a publisher installs version 2. r1: the version the reader used
 * (-1: retired or rewritten under it); r2, r3: retirements of versions 1 and 2.
 */
@JCStressTest
@Outcome(id = {"1, 1, 0", "2, 1, 0"}, expect = ACCEPTABLE, desc = "an intact version; version 1 retired once")
@Outcome(expect = FORBIDDEN, desc = "use after retirement, double or missing retirement")
@State
public class SharedAcquireReleaseVsPublish {
    final SharedFixture f = new SharedFixture(HolderWord.DEFAULT_DRAIN_AT);

    @Actor
    public void reader(III_Result r) {
        long w = f.acquire();
        r.r1 = f.use(w);
        f.release(w);
    }

    @Actor
    public void publisher() {
        f.publish(2);
    }

    @Arbiter
    public void arbiter(III_Result r) {
        r.r2 = f.retired.get(1);
        r.r3 = f.retired.get(2);
    }
}
