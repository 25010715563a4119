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
 * Uses of a holder handle racing its close ({@link StripedUses}): one use entered on the
 * state's thread before the race and left on the actor's (a tensor acquired on one thread and
 * closed on another), and one entered and left by the actor while the close swaps the stripes.
 * The release runs exactly once, after both uses left, and the racing use either runs wholly
 * before the release or does not start. r1: the racing use started; r2: releases seen by the
 * actor before its last leave (must be 0); r3: releases in all.
 */
@JCStressTest
@Outcome(id = {"true, 0, 1", "false, 0, 1"}, expect = ACCEPTABLE, desc = "released once, after every use left")
@Outcome(id = ".*, 1, .*", expect = FORBIDDEN, desc = "released while in use")
@Outcome(expect = FORBIDDEN, desc = "released twice, or never")
@State
public class StripedUsesVsClose {
    private int releases;
    private final StripedUses uses = new StripedUses(() -> releases++);
    private final boolean enteredBefore = uses.enter();

    @Actor
    public void use(ZII_Result r) {
        if (uses.enter()) {
            r.r1 = true;
            uses.leave();
        }
        r.r2 = enteredBefore ? releases : -1;
        uses.leave(); // the use entered on the state's thread
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
