package io.refshare.holder;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The lifetime of a {@code SharedHolder} handle: {@code HandleUses}' contract (the uses in
 * progress are counted, nothing enters once {@link #close()} has returned, and the release
 * given at construction runs exactly once, after the close and the last use that started
 * before it) with the uses counted on {@link ThreadStripes}. Every acquired tensor is a use
 * until its release, so with one shared count two readers of one holder would write a common
 * cache line twice per acquire + release; on stripes, a tensor acquired and closed on one
 * thread writes only that thread's stripe.
 *
 * <h2>Implementation notes</h2>
 * {@link #enter} adds one on its thread's stripe, {@link #leave} subtracts one on its own
 * (another stripe when the tensor is closed on another thread). {@code close} swaps every
 * stripe closed and adds their sum, the uses in progress, to {@code lateLeaves}; a leave that
 * lands on a closed stripe subtracts one there instead, and an enter that lands on one is
 * refused (its add, on a stripe nobody sums again, counts nowhere).
 * <p>
 * Every use that entered was counted in its stripe's sum (its enter came before that
 * stripe's swap in the stripe's order of updates, or it was refused), and so was its leave
 * if it landed on an open stripe; a leave on a closed stripe is subtracted from
 * {@code lateLeaves}. So once {@code close} has added the sum, {@code lateLeaves} is the
 * number of uses not yet left, never below zero, and it falls to zero exactly once, by the
 * last of them or by the close itself when none is left. Before that add it is minus the
 * late leaves so far, below zero from the first one: no leave can see zero early. Each step
 * is an atomic read-modify-write of one variable, so the argument needs nothing but each
 * variable's own order of updates.
 */
public final class StripedUses {
    private final ThreadStripes stripes = new ThreadStripes();
    private final AtomicLong lateLeaves = new AtomicLong();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Runnable release;

    /** A handle in use by nobody yet; {@code release} runs once, after the close and the last use. */
    public StripedUses(Runnable release) {
        this.release = release;
    }

    /** Starts a use; false once the handle is closed (nothing started). Each true is paired with a {@link #leave()}. */
    public boolean enter() {
        return stripes.add(1L);
    }

    /** Ends a use; the last one after the close runs the release (its exception, if any, is this call's). */
    public void leave() {
        if (!stripes.add(-1L) && lateLeaves.decrementAndGet() == 0) {
            release.run();
        }
    }

    /** True once {@link #close()} was called. */
    public boolean isClosed() {
        return closed.get();
    }

    /** Closes the handle: true for the first call, false (and nothing done) after. */
    public boolean close() {
        if (!closed.compareAndSet(false, true)) {
            return false;
        }
        if (lateLeaves.addAndGet(stripes.close()) == 0) {
            release.run();
        }
        return true;
    }
}
