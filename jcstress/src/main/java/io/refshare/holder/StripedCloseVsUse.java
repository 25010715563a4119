package io.refshare.holder;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZII_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A use of a holder handle racing its close ({@link StripedUses}): the use either runs wholly
 * before the release or does not start; the release runs exactly once, never during a use.
 * r1: the use started; r2: releases seen by the use while it ran (must be 0); r3: releases
 * in all.
 */
@JCStressTest
@Outcome(id = {"true, 0, 1", "false, 0, 1"}, expect = ACCEPTABLE, desc = "used before the release, or refused")
@Outcome(id = ".*, 1, .*", expect = FORBIDDEN, desc = "released while in use")
@Outcome(expect = FORBIDDEN, desc = "released twice, or never")
@State
public class StripedCloseVsUse {
    private int releases;
    private final StripedUses uses = new StripedUses(() -> releases++);

    @Actor
    public void use(ZII_Result r) {
        if (uses.enter()) {
            r.r1 = true;
            r.r2 = releases;
            uses.leave();
        }
    }

    @Actor
    public void close() {
        uses.close();
    }

    @Arbiter
    public void arbiter(ZII_Result r) {
        uses.enter(); // refused: the handle is closed, and the release must not run again
        r.r3 = releases;
    }
}
