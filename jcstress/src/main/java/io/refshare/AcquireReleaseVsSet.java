package io.refshare;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A reader acquires, uses and releases while the publisher re-points the holder: the
 * reader sees the old or the new value intact; the old one is destroyed exactly once, the
 * new one not at all. r1: the id the reader used (-1: destroyed under it); r2, r3: how
 * often the old and the new value were destroyed.
 */
@JCStressTest
@Outcome(id = {"1, 1, 0", "2, 1, 0"}, expect = ACCEPTABLE, desc = "reader used an intact version; old destroyed once")
@Outcome(expect = FORBIDDEN, desc = "use after destroy, double destroy, or a destroy that never happened")
@State
public class AcquireReleaseVsSet {
    final AtomicHolder<Item> holder = new AtomicHolder<>(4);
    final Item a = new Item(1);
    final Item b = new Item(2);

    public AcquireReleaseVsSet() {
        holder.set(a, Item::destroy);
    }

    @Actor
    public void reader(III_Result r) {
        AtomicHolder.Ref<Item> ref = holder.acquire();
        r.r1 = ref.get().use();
        ref.release();
    }

    @Actor
    public void publisher() {
        holder.set(b, Item::destroy);
    }

    @Arbiter
    public void arbiter(III_Result r) {
        r.r2 = a.destroyed;
        r.r3 = b.destroyed;
    }
}
