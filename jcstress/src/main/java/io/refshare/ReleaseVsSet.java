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
 * The transfer racing the release it must account for: a reference acquired before the
 * race is released while the publisher re-points. If the release lands first, the old
 * version's own count is transiently net negative (its acquire is still in the holder
 * word); either order must end with exactly one destroy, run by whichever thread came
 * last. r1: the id the reader used; r2, r3: destroys of the old and the new value.
 */
@JCStressTest
@Outcome(id = "1, 1, 0", expect = ACCEPTABLE, desc = "old destroyed once, by the release or by the set")
@Outcome(expect = FORBIDDEN, desc = "use after destroy, double destroy, or a destroy that never happened")
@State
public class ReleaseVsSet {
    final AtomicHolder<Item> holder = new AtomicHolder<>(4);
    final Item a = new Item(1);
    final Item b = new Item(2);
    final AtomicHolder.Ref<Item> held;

    public ReleaseVsSet() {
        holder.set(a, Item::destroy);
        held = holder.acquire();
    }

    @Actor
    public void reader(III_Result r) {
        r.r1 = held.get().use();
        held.release();
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
