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
 * Two publishers re-point at once: the first value and exactly one of the two new ones
 * are destroyed, once each, and the survivor is what the holder now gives out.
 * r1, r2, r3: destroys of the first, second and third value; the arbiter also checks the
 * survivor (a wrong one makes r1 negative).
 */
@JCStressTest
@Outcome(id = {"1, 1, 0", "1, 0, 1"}, expect = ACCEPTABLE, desc = "the later set wins; the loser destroyed once")
@Outcome(expect = FORBIDDEN, desc = "lost, doubled or premature destroy")
@State
public class SetVsSet {
    final AtomicHolder<Item> holder = new AtomicHolder<>(4);
    final Item a = new Item(1);
    final Item b = new Item(2);
    final Item c = new Item(3);

    public SetVsSet() {
        holder.set(a, Item::destroy);
    }

    @Actor
    public void first() {
        holder.set(b, Item::destroy);
    }

    @Actor
    public void second() {
        holder.set(c, Item::destroy);
    }

    @Arbiter
    public void arbiter(III_Result r) {
        int current;
        try (AtomicHolder.Ref<Item> ref = holder.acquire()) {
            current = ref.get().use();
        }
        boolean survivorIsCurrent = (b.destroyed == 0 && current == 2) || (c.destroyed == 0 && current == 3);
        r.r1 = survivorIsCurrent ? a.destroyed : -1;
        r.r2 = b.destroyed;
        r.r3 = c.destroyed;
    }
}
