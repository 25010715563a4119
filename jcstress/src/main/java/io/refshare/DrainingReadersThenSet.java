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
 * Two readers whose acquires both drain (their compare-and-sets race each other and one
 * takes its credit back); afterwards the arbiter re-points the holder, which must destroy
 * the old value exactly once: a credit lost or counted twice would leave it alive or
 * destroy it early. r1, r2: what each reader used; r3: destroys of the old value.
 */
@JCStressTest
@Outcome(id = "1, 1, 1", expect = ACCEPTABLE, desc = "both used it intact; destroyed once when replaced")
@Outcome(expect = FORBIDDEN, desc = "a drain lost or doubled a count")
@State
public class DrainingReadersThenSet {
    final AtomicHolder<Item> holder = new AtomicHolder<>(4, 1);
    final Item a = new Item(1);

    public DrainingReadersThenSet() {
        holder.set(a, Item::destroy);
    }

    @Actor
    public void reader1(III_Result r) {
        try (AtomicHolder.Ref<Item> ref = holder.acquire()) {
            r.r1 = ref.get().use();
        }
    }

    @Actor
    public void reader2(III_Result r) {
        try (AtomicHolder.Ref<Item> ref = holder.acquire()) {
            r.r2 = ref.get().use();
        }
    }

    @Arbiter
    public void arbiter(III_Result r) {
        holder.set(new Item(2), Item::destroy);
        r.r3 = a.destroyed;
    }
}
