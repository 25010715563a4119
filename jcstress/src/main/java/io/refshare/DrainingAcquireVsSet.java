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
 * Like {@link AcquireReleaseVsSet}, with a holder that drains on every acquire: the
 * drain's credit-then-compare-and-set races the publisher's getAndSet and transfer, and
 * its credit must be taken back when the transfer wins. r1: the ids the reader used
 * (10 * first + second; a -1 anywhere makes it negative); r2, r3: destroys of the old and
 * the new value.
 */
@JCStressTest
@Outcome(id = {"11, 1, 0", "12, 1, 0", "22, 1, 0"}, expect = ACCEPTABLE,
        desc = "reader used intact versions, never older after newer; old destroyed once")
@Outcome(expect = FORBIDDEN, desc = "use after destroy, going back in time, double or missing destroy")
@State
public class DrainingAcquireVsSet {
    final AtomicHolder<Item> holder = new AtomicHolder<>(4, 1);
    final Item a = new Item(1);
    final Item b = new Item(2);

    public DrainingAcquireVsSet() {
        holder.set(a, Item::destroy);
    }

    @Actor
    public void reader(III_Result r) {
        AtomicHolder.Ref<Item> first = holder.acquire();
        AtomicHolder.Ref<Item> second = holder.acquire();
        int x = first.get().use();
        int y = second.get().use();
        first.release();
        second.release();
        r.r1 = x < 0 || y < 0 ? -1 : 10 * x + y;
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
