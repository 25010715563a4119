package io.refshare.holder;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.function.IntConsumer;

/**
 * One process's (one handle's) shared reference on the current version of a holder file,
 * handed out to the threads of the process without touching the file: the first acquire of
 * a version takes one reference in the file ({@link HolderFile#acquire}, counted in the
 * process's row), wraps it in a {@link Share}, and every later acquire of the same version in
 * the process counts one use on the share's per-thread stripes ({@link StripedUses}) instead
 * of writing the holder word, the row and the version's count. The share is <i>retired</i>
 * once the holder word names another version (an acquire notices it, or the process's
 * background round, or the handle's own publish, clear or close); its reference in the file
 * is given back once it is retired and its last use has ended, exactly once.
 *
 * <h2>Implementation notes</h2>
 * <b>Invariants.</b> (1) A share holds exactly one reference in the file, on the version
 * {@code version} names, from its creation until {@code giveBack} runs for it; {@code
 * giveBack} runs once per share (it is {@link StripedUses}'s release, which runs once, after
 * the close and the last use that entered before it). (2) {@code current} is null or a share
 * that was never closed; a share leaves {@code current} only by a compare-and-set or a
 * get-and-set that takes it out, and only the thread that took it out closes it (a share that
 * never became current, because another was installed first, is closed at once by the thread
 * that made it: it then lives only for that thread's use). So each share is closed at most
 * once, and every share that was ever current is closed once it is taken out. (3) A use that
 * {@link StripedUses#enter() entered} holds the share's reference: the give-back runs only
 * after that use left, and nothing enters after the close. So no thread uses a version after
 * its share gave the reference back, and the version itself, which the file keeps while any
 * reference is out, outlives every use.
 * <p>
 * <b>Freshness.</b> {@link #tryAcquire} enters a use and then reads the holder word; it hands
 * the share out only if the word still names the share's version (same slot and generation:
 * the slot cannot be reused while the share holds its reference, so equal words mean the same
 * version). So every version handed out was the current one at an instant inside the call,
 * and the acquires of one thread, being ordered, never go back to an older version. A share
 * installed late by a slow acquirer (its file acquire happened before a publish) is retired by
 * the next acquire or background round that reads the word.
 * <p>
 * <b>Retirement bound.</b> A share on a replaced version is retired by whichever comes first:
 * an acquire in the process, the handle's own publish or clear, its close, or the background
 * round ({@link #retireIfReplaced}, every housekeeping round, about 100 ms). Its reference goes
 * back at the retirement or at the release of its last local use, whichever is later.
 * <p>
 * <b>Memory ordering.</b> A share is published to other threads through {@code current}, a
 * volatile field written by compare-and-set; its fields are final and what it carries (the
 * decoded version, its mapping) was built before, so a thread that reads the share from
 * {@code current} sees them. Every update of a stripe, of {@code lateLeaves} and of
 * {@code closed} in {@link StripedUses} is an atomic read-modify-write, so a use's last access
 * to the version precedes its leave, which precedes the give-back (run by the last leave or by
 * the close that finds none left); the give-back's release of the reference in the file is
 * then ordered, by the file's own atomics, before the version is retired anywhere (see
 * {@link HolderFile}). The freshness check needs only that the word read is a volatile read
 * after the entering RMW.
 *
 * @param <T> what a share carries for its users (the decoded version and its mapping)
 */
public final class ProcessShare<T> {
    private static final VarHandle CURRENT;

    static {
        try {
            CURRENT = MethodHandles.lookup().findVarHandle(ProcessShare.class, "current", Share.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final HolderFile file;
    private final IntConsumer giveBack;
    @SuppressWarnings("unused") // through CURRENT
    private volatile Share<T> current;

    /**
     * Shares of the versions of {@code file}; {@code giveBack} gives back one reference of the
     * process on the version in the slot it is passed (it runs once per share).
     */
    public ProcessShare(HolderFile file, IntConsumer giveBack) {
        this.file = file;
        this.giveBack = giveBack;
    }

    /** One shared reference of the process on a version, handed out to local users. */
    public static final class Share<T> {
        private final long version;
        private final T attachment;
        private final StripedUses uses;
        /** Ends one use (a tensor's release runs it); made once per share, not per acquisition. */
        public final Runnable leave;

        Share(long word, T attachment, IntConsumer giveBack) {
            this.version = HolderWord.version(word);
            this.attachment = attachment;
            int slot = HolderWord.slot(word);
            this.uses = new StripedUses(() -> giveBack.accept(slot));
            this.leave = uses::leave;
        }

        /** The holder word naming the version, count 0. */
        public long word() {
            return version;
        }

        public T attachment() {
            return attachment;
        }

        boolean enter() {
            return uses.enter();
        }
    }

    /**
     * A use of the process's share of the current version, or null when there is none (no
     * share yet, or it was retired, or the holder moved on: then it is retired now). The
     * caller ends the use with the share's {@link Share#leave}.
     */
    public Share<T> tryAcquire() {
        Share<T> s = current;
        if (s == null || !s.enter()) {
            return null;
        }
        if (HolderWord.version(file.word()) == s.version) {
            return s;
        }
        s.leave.run();
        retire(s);
        return null;
    }

    /**
     * Wraps the reference the caller took with {@link HolderFile#acquire} (which returned
     * {@code word}, naming a version) in a share holding one use, the caller's, and makes it
     * the current share unless another is current: then the share is retired at once and
     * lives only for the caller's use.
     */
    public Share<T> adopt(long word, T attachment) {
        Share<T> s = new Share<>(word, attachment, giveBack);
        s.enter();
        if (!CURRENT.compareAndSet(this, (Share<T>) null, s)) {
            s.uses.close();
        }
        return s;
    }

    /** Retires {@code s} if it is still the current share (once, whoever else tries). */
    public void retire(Share<T> s) {
        if (CURRENT.compareAndSet(this, s, (Share<T>) null)) {
            s.uses.close();
        }
    }

    /** Retires the current share when the holder no longer names its version: the background round. */
    public void retireIfReplaced() {
        Share<T> s = current;
        if (s != null && HolderWord.version(file.word()) != s.version) {
            retire(s);
        }
    }

    /** Retires the current share, whatever it is: the handle is closing. */
    @SuppressWarnings("unchecked")
    public void retireCurrent() {
        Share<T> s = (Share<T>) CURRENT.getAndSet(this, (Share<T>) null);
        if (s != null) {
            s.uses.close();
        }
    }
}
