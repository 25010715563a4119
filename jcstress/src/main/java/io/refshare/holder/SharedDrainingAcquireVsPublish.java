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
 * The shared protocol with a drain on every acquire, racing a publish: the reader takes
 * two references (each drains into the version's own count in the file) and uses both.
 * r1: 10 * first + second version used (negative if either was retired under it);
 * r2, r3: retirements of versions 1 and 2.
 */
@JCStressTest
@Outcome(id = {"11, 1, 0", "12, 1, 0", "22, 1, 0"}, expect = ACCEPTABLE,
        desc = "intact versions, never older after newer; version 1 retired once")
@Outcome(expect = FORBIDDEN, desc = "a drain lost or doubled a count, or time went backwards")
@State
public class SharedDrainingAcquireVsPublish {
    final SharedFixture f = new SharedFixture(1);

    @Actor
    public void reader(III_Result r) {
        long first = f.acquire();
        long second = f.acquire();
        int x = f.use(first);
        int y = f.use(second);
        f.release(first);
        f.release(second);
        r.r1 = x < 0 || y < 0 ? -1 : 10 * x + y;
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
