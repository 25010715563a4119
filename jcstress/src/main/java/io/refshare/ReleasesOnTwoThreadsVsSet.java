package io.refshare;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Releases of one version from two threads, on either side of the re-pointing that closes
 * its release stripes: the reader's release races with the publisher (it lands on its
 * stripe before the publisher closes it, or on the version's own count after), and a
 * second reference is released afterwards on another thread, always on a closed stripe.
 * Both must be counted exactly once: the old version outlives the first release and dies
 * with the second. r1: the id the reader used; r2: destroys of the old value before the
 * second release; r3: after it; r4: destroys of the new value.
 */
@JCStressTest
@Outcome(id = "1, 0, 1, 0", expect = ACCEPTABLE, desc = "old alive until the last release, then destroyed once")
@Outcome(expect = FORBIDDEN, desc = "use after destroy, or a release lost or counted twice")
@State
public class ReleasesOnTwoThreadsVsSet {
    final AtomicHolder<Item> holder = new AtomicHolder<>(4);
    final Item a = new Item(1);
    final Item b = new Item(2);
    final AtomicHolder.Ref<Item> first;
    final AtomicHolder.Ref<Item> second;

    public ReleasesOnTwoThreadsVsSet() {
        holder.set(a, Item::destroy);
        first = holder.acquire();
        second = holder.acquire();
    }

    @Actor
    public void reader(IIII_Result r) {
        r.r1 = first.get().use();
        first.release();
    }

    @Actor
    public void publisher() {
        holder.set(b, Item::destroy);
    }

    @Arbiter
    public void arbiter(IIII_Result r) {
        r.r2 = a.destroyed;
        second.release();
        r.r3 = a.destroyed;
        r.r4 = b.destroyed;
    }
}
