package io.refshare.holder;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A tensor acquired on one thread and closed on another while the handle closes
 * ({@link StripedUses}): the use entered on the state's thread's stripe and leaves on the
 * actor's, before or after the close swaps either. The release runs exactly once, and only
 * after the leave. r1: releases seen by the leaving thread just before its leave (must be 0);
 * r2: releases in all.
 */
@JCStressTest
@Outcome(id = "0, 1", expect = ACCEPTABLE, desc = "released once, after the use left")
@Outcome(expect = FORBIDDEN, desc = "released during the use, twice, or never")
@State
public class StripedLeaveElsewhereVsClose {
    private int releases;
    private final StripedUses uses = new StripedUses(() -> releases++);
    private final boolean entered = uses.enter();

    @Actor
    public void leave(II_Result r) {
        r.r1 = entered ? releases : -1;
        uses.leave();
    }

    @Actor
    public void close() {
        uses.close();
    }

    @Arbiter
    public void arbiter(II_Result r) {
        r.r2 = releases;
    }
}
