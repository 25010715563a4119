package io.refshare.shm;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The lifetime of a handle to a mapped file (the queue's; a holder's handle keeps the same
 * contract with its uses counted per thread, {@code io.refshare.holder.StripedUses}): the uses
 * in progress are counted; {@link #close()} marks the handle closed, after which nothing
 * enters; and the release given at construction (unmapping, say) runs exactly once, when the
 * last use that started before the close has left, by the thread that leaves last, or by
 * {@code close()} itself when nothing was in use. A handle whose close must not return
 * before that (the queue's, which then leaves the file's tables itself) waits with
 * {@link #awaitReleased()}.
 *
 * <h2>Implementation notes</h2>
 * One word: the uses in progress, plus {@code CLOSED} (bit 62) once closed. {@link #enter}
 * increments and backs out if it saw {@code CLOSED}, so after the close no use starts; the
 * count falls to exactly {@code CLOSED} after the last use that started before the close, and
 * the first decrement that makes it so runs the release (a refused enter after that brings it
 * back to {@code CLOSED} again, so a flag keeps the release to one run). {@code close} counts
 * itself as a use while it sets the bit, so a close with nothing in use releases on its own
 * leave.
 */
public final class HandleUses {
    private static final long CLOSED = 1L << 62;

    private final AtomicLong count = new AtomicLong();
    private final Runnable release;
    private final CountDownLatch released = new CountDownLatch(1);
    /** Set by the one leave that runs the release: the count returns to {@code CLOSED} after every late, refused enter. */
    private final AtomicBoolean releasing = new AtomicBoolean();

    /** A handle in use by nobody yet; {@code release} runs once, after the close and the last use. */
    public HandleUses(Runnable release) {
        this.release = release;
    }

    /** Starts a use; false once the handle is closed (nothing started). Each true is paired with a {@link #leave()}. */
    public boolean enter() {
        if ((count.incrementAndGet() & CLOSED) != 0) {
            leave();
            return false;
        }
        return true;
    }

    /** Ends a use; the last one after the close runs the release (its exception, if any, is this call's). */
    public void leave() {
        if (count.decrementAndGet() == CLOSED && releasing.compareAndSet(false, true)) {
            try {
                release.run();
            } finally {
                released.countDown();
            }
        }
    }

    /** True once {@link #close()} was called. */
    public boolean isClosed() {
        return (count.get() & CLOSED) != 0;
    }

    /** Closes the handle: true for the first call, false (and nothing done) after. */
    public boolean close() {
        long seen;
        do {
            seen = count.get();
            if ((seen & CLOSED) != 0) {
                return false;
            }
        } while (!count.compareAndSet(seen, seen + CLOSED + 1));
        leave();
        return true;
    }

    /** Waits until the release has run (uninterruptibly: an interrupt is kept for the caller). */
    public void awaitReleased() {
        Uninterruptibly.await(released::await);
    }
}
