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
 * The shared protocol's transfer racing a release: version 1 was acquired before the race;
 * its release and the publish of version 2 race, in either order the version is retired
 * exactly once, and the row's held count returns to zero. r1: version used (-1: retired
 * under the reader); r2: retirements of version 1; r3: what the reader's row still holds.
 */
@JCStressTest
@Outcome(id = "1, 1, 0", expect = ACCEPTABLE, desc = "retired once, by the release or by the publish")
@Outcome(expect = FORBIDDEN, desc = "use after retirement, double or missing retirement, held count left over")
@State
public class SharedReleaseVsPublish {
    final SharedFixture f = new SharedFixture(HolderWord.DEFAULT_DRAIN_AT);
    final long held = f.acquire();

    @Actor
    public void reader(III_Result r) {
        r.r1 = f.use(held);
        f.release(held);
    }

    @Actor
    public void publisher() {
        f.publish(2);
    }

    @Arbiter
    public void arbiter(III_Result r) {
        r.r2 = f.retired.get(1);
        r.r3 = (int) f.file.held(f.row, HolderWord.slot(held));
    }
}
