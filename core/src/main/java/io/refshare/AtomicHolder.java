package io.refshare;

import io.refshare.holder.FreeSlots;
import io.refshare.holder.HolderWord;
import io.refshare.holder.PaddedLong;
import io.refshare.holder.ThreadStripes;

import java.util.Objects;
import java.util.function.Consumer;

/**
 * A slot that a publisher keeps re-pointing at the newest version of something while any
 * number of readers acquire whatever is current, with no lock: differential reference
 * counting. An old version's destroy action runs exactly once, in whichever thread lets
 * go of it last: the publisher that replaces it (nobody held it) or the reader whose
 * release was the last.
 *
 * <pre>{@code
 * AtomicHolder<Table> holder = new AtomicHolder<>();
 * holder.set(load(), Table::free);            // publisher, any time, any thread
 *
 * try (AtomicHolder.Ref<Table> ref = holder.acquire()) {   // reader: one atomic add
 *     lookup(ref.get());
 * }                                            // one atomic add; may run Table::free
 * }</pre>
 *
 * <p>Each {@link #set} installs a new <i>version</i>: the value with its destroy action.
 * The same value set twice is two versions and is destroyed twice. At most
 * {@code maxVersions} versions live at once (the current one and those readers still
 * hold); {@code set} throws {@link IllegalStateException} rather than wait when all are in
 * use. A {@link Ref} belongs to one thread at a time, like any other try-with-resources
 * object; it may be released by a thread other than the one that acquired it.
 *
 * <p>A destroy action that throws does so in the thread that let go last (in its
 * {@code set}, {@code exchange}, {@code clear}, {@code close} or release), after that call
 * has taken effect; the version's entry is freed anyway. A {@code null} value is a value like any other: {@link #acquire()} then
 * returns a reference whose {@link Ref#get()} is null, while an empty holder returns no
 * reference at all.
 *
 * <h2>Implementation notes</h2>
 * <b>Counts.</b> The holder word ({@code HolderWord}) packs the current version's table
 * entry, the entry's generation and an <i>external count</i> of acquisitions. A version
 * keeps its own count {@code c}, created as {@code PINNED} (2<sup>62</sup>), which stands
 * for "the holder still points here". Acquire is {@code getAndAdd(word, 1)}: it counts and
 * learns the version in one step, which is the point of the scheme: a counter inside the
 * version could not be reached safely (the version may die between reading the pointer
 * and incrementing), a counter only in the holder would be lost when it is re-pointed.
 * Release subtracts one from the version: on one of its release stripes while they
 * are open, else from {@code c}. Re-pointing ({@link #set}, {@link #exchange},
 * {@link #clear}) is {@code getAndSet(word, new)}, then closing the old version's stripes,
 * which returns {@code -s}, the releases they counted, then the <b>transfer</b>, one
 * {@code getAndAdd(c, e - s - PINNED)} on the old version, where {@code e} is the external
 * count the getAndSet returned (plus one for {@code exchange}, whose caller keeps a
 * reference). The thread whose read-modify-write leaves {@code c == 0} destroys the version.
 * In the terms of the classic description, {@code e} is the holder's count, and the
 * object's "referenced by a holder" count and its own count are folded into {@code c}, the
 * former as the {@code PINNED} bias (an object is in at most one holder). The stripes are
 * this implementation's own: releases on different threads then write no common cache
 * line, so under contention an acquire + release costs one contended line, not two.
 * <p>
 * <b>Invariant.</b> For a version {@code V}, let {@code out} be the references acquired and
 * not released, {@code s} the releases counted in its stripes and {@code credit} the drain
 * credits added and not yet taken back or matched (below). While the word names {@code V}
 * (and until its stripes are closed): {@code out = e + (c - PINNED) - s - credit}, i.e.
 * {@code c = PINNED + out - e + s + credit}. After the transfer: {@code c = out + credit}.
 * {@code c - PINNED} is <i>transiently negative</i> while pinned: a
 * reader whose acquire is still counted in {@code e} may release on {@code c} (its stripe
 * already closed) before the transfer, decrementing {@code c} for an increment it has not
 * received yet. The bias keeps the stored value far from zero ({@code e} stays below
 * 2<sup>24</sup>, {@code credit} below 2<sup>24</sup> per thread draining at that moment), so
 * {@code c == 0} happens only after the transfer, with no reference and no credit
 * outstanding; from then on nobody can reach {@code V} (the word names another version, and
 * a reader could only have reached it through an acquire that is counted in {@code out}),
 * so {@code c} never moves again and exactly one thread sees it reach zero: destroy runs
 * once, and never while a reference is held. A release on an open stripe never checks for
 * zero: the transfer, which alone can bring {@code c} near zero, has not happened yet.
 * <p>
 * <b>Draining.</b> The external count has 24 bits. An acquirer that brings it to
 * {@code drainAt} moves {@code drainAt} from the word to {@code c}, credit first: it adds
 * {@code drainAt} to {@code c}, then compare-and-sets the word from {@code w} to
 * {@code w - drainAt} while the word still names {@code V} (same entry <i>and</i>
 * generation, so a reused entry cannot be mistaken for {@code V}) with a count of at least
 * {@code drainAt}. If the word moved on, the transfer took the whole count, so it takes its
 * credit back with {@code getAndAdd(c, -drainAt)}, which cannot reach zero because the
 * drainer still holds its own reference. Over-counting in between only delays a destroy.
 * <p>
 * <b>Memory ordering.</b> Every update of the word, of {@code c} and of a stripe is an
 * atomic read-modify-write with volatile semantics (each on cache lines of its own,
 * {@code PaddedLong}, {@code ThreadStripes}), so each variable's updates are totally ordered
 * and each synchronizes-with the next. The publisher stores the table entry (plain) before
 * the getAndSet that installs it; a reader's getAndAdd reads from that write or a later RMW
 * of the word, so it sees the entry (an entry is rewritten only after its version died,
 * which needs this reader's release first). A reader's use of the value precedes its
 * release's RMW, on a stripe or on {@code c}; a stripe's last release precedes the swap that
 * closes it, which precedes the transfer's RMW of {@code c}; and the destroyer's RMW comes
 * after every other RMW of {@code c}. So all uses happen-before the destroy action, and the
 * destroy action happens-before the entry is freed (an atomic or on the free-slot bitmap)
 * and so before the entry's reuse.
 *
 * @param <T> the type of the values held
 */
public final class AtomicHolder<T> implements AutoCloseable {
    /** The most live versions of a holder made with {@link #AtomicHolder()}. */
    public static final int DEFAULT_MAX_VERSIONS = 1024;

    /** The holder word ({@link HolderWord}), on cache lines of its own. */
    private final long[] word = PaddedLong.of(HolderWord.EMPTY);
    private final Version<T>[] versions;
    /** The generation of each entry's last version; written by whoever took the entry. */
    private final int[] generations;
    private final FreeSlots free;
    private final long drainAt;
    private volatile boolean closed;

    /** An empty holder for at most {@value #DEFAULT_MAX_VERSIONS} live versions. */
    public AtomicHolder() {
        this(DEFAULT_MAX_VERSIONS);
    }

    /**
     * An empty holder for at most {@code maxVersions} live versions. Its table of versions is
     * allocated up front, so size it for the versions readers may hold at once, not for
     * every version ever set.
     *
     * @param maxVersions the most versions alive at once, 1 .. 65535
     * @throws IllegalArgumentException when {@code maxVersions} is out of range
     */
    public AtomicHolder(int maxVersions) {
        this(maxVersions, HolderWord.DEFAULT_DRAIN_AT);
    }

    /** With a chosen drain threshold, so tests can make every acquire drain. */
    AtomicHolder(int maxVersions, int drainAt) {
        if (maxVersions < 1 || maxVersions > HolderWord.MAX_SLOTS) {
            throw new IllegalArgumentException("maxVersions must be in 1.." + HolderWord.MAX_SLOTS + ": " + maxVersions);
        }
        if (drainAt < 1 || drainAt > HolderWord.DEFAULT_DRAIN_AT) {
            throw new IllegalArgumentException("drainAt must be in 1.." + HolderWord.DEFAULT_DRAIN_AT + ": " + drainAt);
        }
        @SuppressWarnings("unchecked")
        Version<T>[] table = (Version<T>[]) new Version<?>[maxVersions];
        this.versions = table;
        this.generations = new int[maxVersions];
        this.free = new FreeSlots(maxVersions);
        this.drainAt = drainAt;
    }

    /**
     * A reference to the current version, or null when the holder is empty. Release it
     * (or close it) exactly once. Lock-free, one atomic add in the common case; never
     * throws, and returns null once the holder is closed.
     *
     * @return a reference the version lives at least as long as, or null
     */
    public Ref<T> acquire() {
        long w = PaddedLong.getAndAdd(word, 1L);
        int slot = HolderWord.slot(w);
        boolean drain = HolderWord.count(w) + 1 >= drainAt;
        if (slot < 0) {
            if (drain) {
                forgetEmptyCount();
            }
            return null;
        }
        Version<T> v = versions[slot];
        if (drain) {
            drain(v);
        }
        return new Ref<>(v);
    }

    /**
     * Installs {@code value} as the current version; the version it replaces dies once nobody
     * holds it (at once, in this thread, when nobody does).
     *
     * @param value     the new value; may be null
     * @param onDestroy runs exactly once with {@code value} when this version dies, in the
     *                  thread that lets go of it last; {@code v -> {}} for none
     * @throws NullPointerException  when {@code onDestroy} is null
     * @throws IllegalStateException when the holder is closed, or all its version slots hold
     *                               versions still in use (it fails rather than wait)
     */
    public void set(T value, Consumer<? super T> onDestroy) {
        install(value, onDestroy, false);
    }

    /**
     * Like {@link #set}, and returns a reference to the version it replaced (null if the
     * holder was empty), which the caller must release: the replaced version cannot die
     * before it is.
     *
     * @param value     the new value; may be null
     * @param onDestroy runs exactly once with {@code value} when this version dies
     * @return a reference to the replaced version, or null
     * @throws NullPointerException  when {@code onDestroy} is null
     * @throws IllegalStateException when the holder is closed, or all its version slots hold
     *                               versions still in use
     */
    public Ref<T> exchange(T value, Consumer<? super T> onDestroy) {
        return install(value, onDestroy, true);
    }

    /**
     * Empties the holder; the version it pointed at dies once nobody holds it (at once, in
     * this thread, when nobody does). Clearing an empty holder does nothing. A later
     * {@link #set} fills it again.
     */
    public void clear() {
        swap(HolderWord.EMPTY, false);
    }

    /**
     * Versions alive now: the current one and those still held (a snapshot).
     *
     * @return 0 .. the holder's {@code maxVersions}
     */
    public int liveVersions() {
        return free.inUse();
    }

    /**
     * Whether {@link #close()} was called.
     *
     * @return true once closed, from any thread
     */
    public boolean isClosed() {
        return closed;
    }

    /**
     * Empties the holder for good: later {@code set}s and {@code exchange}s throw, acquires
     * return null. References already acquired stay valid until released. Idempotent.
     */
    @Override
    public void close() {
        closed = true;
        clear();
    }

    private Ref<T> install(T value, Consumer<? super T> onDestroy, boolean keepOld) {
        Objects.requireNonNull(onDestroy, "onDestroy (use v -> {} for none)");
        if (closed) {
            throw new IllegalStateException("holder is closed");
        }
        int slot = free.take();
        if (slot < 0) {
            throw new IllegalStateException("all " + versions.length + " version slots hold versions still in use;"
                    + " release references or create the holder with more maxVersions");
        }
        int generation = HolderWord.nextGeneration(generations[slot]);
        generations[slot] = generation;
        Version<T> v = new Version<>(this, value, onDestroy, slot, generation);
        versions[slot] = v; // published by the getAndSet in swap
        Ref<T> old = swap(v.word, keepOld);
        if (closed) {
            clear(); // a close raced with us and may have cleared before we installed
        }
        return old;
    }

    private Ref<T> swap(long newWord, boolean keepOld) {
        long old = PaddedLong.getAndSet(word, newWord);
        int slot = HolderWord.slot(old);
        if (slot < 0) {
            return null; // acquisitions of an empty holder hold nothing
        }
        Version<T> v = versions[slot];
        long delta = HolderWord.count(old) + v.releases.close() - HolderWord.PINNED + (keepOld ? 1 : 0);
        if (PaddedLong.getAndAdd(v.count, delta) + delta == 0) {
            destroy(v);
        }
        return keepOld ? new Ref<>(v) : null;
    }

    private void drain(Version<T> v) {
        long n = drainAt;
        PaddedLong.getAndAdd(v.count, n);
        long cur = PaddedLong.get(word);
        while (HolderWord.version(cur) == v.word && HolderWord.count(cur) >= n) {
            if (PaddedLong.compareAndSet(word, cur, cur - n)) {
                return;
            }
            cur = PaddedLong.get(word);
        }
        PaddedLong.getAndAdd(v.count, -n); // the transfer (or another drainer) took the count; we still hold v
    }

    private void forgetEmptyCount() {
        long cur = PaddedLong.get(word);
        while (HolderWord.slot(cur) < 0 && HolderWord.count(cur) >= drainAt) {
            if (PaddedLong.compareAndSet(word, cur, HolderWord.EMPTY)) {
                return;
            }
            cur = PaddedLong.get(word);
        }
    }

    private void destroy(Version<T> v) {
        try {
            v.onDestroy.accept(v.value);
        } finally {
            versions[v.slot] = null;
            free.give(v.slot);
        }
    }

    /**
     * A description for debugging: the holder word and the number of live versions.
     *
     * @return the description
     */
    @Override
    public String toString() {
        return "AtomicHolder[" + HolderWord.toString(PaddedLong.get(word)) + ", " + liveVersions()
                + " live versions]";
    }

    /** One installed value and its own count. */
    static final class Version<T> {
        final AtomicHolder<T> holder;
        final T value;
        final Consumer<? super T> onDestroy;
        final int slot;
        /** The holder word naming this version, count 0. */
        final long word;
        /** The version's own count, on cache lines of its own: the fields above stay read-only. */
        final long[] count = PaddedLong.of(HolderWord.PINNED);
        /** Where releases are counted until the holder is re-pointed away from this version. */
        final ThreadStripes releases = new ThreadStripes();

        Version(AtomicHolder<T> holder, T value, Consumer<? super T> onDestroy, int slot, int generation) {
            this.holder = holder;
            this.value = value;
            this.onDestroy = onDestroy;
            this.slot = slot;
            this.word = HolderWord.of(slot, generation);
        }

        void release() {
            if (!releases.add(-1L) && PaddedLong.getAndAdd(count, -1L) == 1L) {
                holder.destroy(this);
            }
        }
    }

    /**
     * A counted reference to one version. {@link #release()} gives it back (a second
     * release throws); {@link #close()} does the same and is a no-op once released. Used by
     * one thread at a time: hand it to another with a happens-before edge (a queue, a lock).
     *
     * @param <T> the type of the value
     */
    public static final class Ref<T> implements AutoCloseable {
        private final Version<T> version;
        private boolean released;

        Ref(Version<T> version) {
            this.version = version;
        }

        /**
         * The value of the version this reference holds, unchanged however often the holder
         * is re-pointed meanwhile.
         *
         * @return the value, as given to {@code set} or {@code exchange} (possibly null)
         * @throws IllegalStateException once this reference is released
         */
        public T get() {
            if (released) {
                throw new IllegalStateException("reference already released");
            }
            return version.value;
        }

        /**
         * Gives this reference back; if it was the last of a version no longer current, the
         * version's destroy action runs now, in this thread.
         *
         * @throws IllegalStateException when this reference was already released
         */
        public void release() {
            if (released) {
                throw new IllegalStateException("reference released twice");
            }
            released = true;
            version.release();
        }

        /**
         * Whether this reference was given back.
         *
         * @return true once {@link #release()} or {@link #close()} ran
         */
        public boolean isReleased() {
            return released;
        }

        /** {@link #release()}, doing nothing when already released. */
        @Override
        public void close() {
            if (!released) {
                release();
            }
        }

        /**
         * A description for debugging.
         *
         * @return whether the reference is released, or the version it holds
         */
        @Override
        public String toString() {
            return "Ref[" + (released ? "released" : HolderWord.toString(version.word)) + "]";
        }
    }
}
