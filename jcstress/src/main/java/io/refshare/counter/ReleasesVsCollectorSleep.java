package io.refshare.counter;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The owner's collector is about to sleep on the release count (it saw 0) while a releaser
 * counts two releases: if the collector sleeps (r1), exactly one of the releases claimed its
 * wake-up (r2, r3), never none (a lost wake-up: the memory would wait for the sleep's
 * timeout) and never both (one system call per sleep). When the collector saw a release it
 * does not sleep, and a claim then only wakes nobody.
 */
@JCStressTest
@Outcome(id = "true, true, false", expect = ACCEPTABLE, desc = "sleeps; the first release wakes it")
@Outcome(id = "false, false, false", expect = ACCEPTABLE, desc = "saw both releases: no sleep, no claim")
@Outcome(id = "false, true, false", expect = ACCEPTABLE, desc = "saw a release after the flag: a claim that wakes nobody")
@Outcome(id = "false, false, true", expect = ACCEPTABLE, desc = "saw a release; the second release found the flag and claims")
@Outcome(id = "true, false, false", expect = FORBIDDEN, desc = "sleeps and nobody wakes it")
@Outcome(expect = FORBIDDEN, desc = "two claims of one sleep, or a release that missed the flag while the collector missed its count")
@State
public class ReleasesVsCollectorSleep {
    private final TokensFixture f = new TokensFixture();

    @Actor
    public void collector(ZZZ_Result r) {
        r.r1 = f.tokens.announceSleep(0);
    }

    @Actor
    public void releaser(ZZZ_Result r) {
        r.r2 = f.tokens.countRelease();
        r.r3 = f.tokens.countRelease();
    }
}
