package io.refshare.holder;

import org.openjdk.jcstress.infra.results.IIII_Result;

import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * A process's share ({@link ProcessShare}) over the shared protocol's fixture: version 1 is
 * published (in slot 0) and the process holds its share of it, one reference in the file and
 * no use in progress, as after a thread acquired it and closed the tensor. Give-backs of the
 * share's reference are counted per slot.
 */
final class ShareFixture {
    final SharedFixture f = new SharedFixture(HolderWord.DEFAULT_DRAIN_AT);
    final AtomicIntegerArray givenBack = new AtomicIntegerArray(4);
    final ProcessShare<Object> shares = new ProcessShare<>(f.file, slot -> {
        givenBack.incrementAndGet(slot);
        f.file.release(f.row, slot, f.retirement);
    });
    final int slot1;

    ShareFixture() {
        ProcessShare.Share<Object> s = acquire();
        slot1 = HolderWord.slot(s.word());
        s.leave.run();
    }

    /** What {@code SharedHolder.acquire} does for a host version: the share, else one reference adopted as it. */
    ProcessShare.Share<Object> acquire() {
        ProcessShare.Share<Object> s = shares.tryAcquire();
        return s != null ? s : shares.adopt(f.acquire(), null);
    }

    /** A new version published and, as the background round does, the process's share of the old one retired. */
    void publishAndRetire(int id) {
        f.publish(id);
        shares.retireIfReplaced();
    }

    /** The outcome after the race, but the reader's: r2 retirements of version 1, r3 give-backs of its share, r4 what the row still holds on it. */
    void afterwards(IIII_Result r) {
        r.r2 = f.retired.get(1);
        r.r3 = givenBack.get(slot1);
        r.r4 = (int) f.file.held(f.row, slot1);
    }
}
