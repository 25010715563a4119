package io.refshare.share;

import io.refshare.exceptions.RefshareException;
import io.refshare.counter.CounterFile;
import io.refshare.observe.Events;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Verdict;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

/**
 * The sender's counter files: tokens are handed out from the current file, a full file is
 * retired and a new one started, and a retired file is unlinked and unmapped as soon as
 * every token it handed out has come back to its sender ({@link #isReturned}).
 *
 * <p><b>Damaged files.</b> Any process of this uid can write (or truncate) a counter file.
 * A file whose slot words no legal transition produces, or whose mapping faults, is
 * <i>quarantined</i>: it is logged once, no token is handed out from it again (the next share
 * starts a fresh file), and it is no longer scanned. Its tokens never count as returned:
 * the blocks they keep stay in the limbo until this process closes, since after damage
 * nothing can prove that the consumers holding them are done. That costs memory, never a
 * block reused under a reader. A quarantined file is unlinked when the pool closes.
 *
 * <p>The pool's lock serialises everything that changes the files' bookkeeping, including
 * {@link #reclaimDeadHolders}: the owner's reclamation of dead peers, the only place where
 * another process's peer entry is freed, runs here on one thread at a time.
 *
 * <p><b>Files are made and unmapped off the send path.</b> Making a counter file (create,
 * reserve, map) took about 300 µs on the development VM, and unmapping a used one about 240 µs
 * (the shared arena's close and the unmap); a stream of 1 KiB tensors uses up a file of 100,000
 * slots some fifty times a second, and both ran inside a {@code put}: the share that retired
 * a file made the next, and the share whose prune saw a retired file's last token back unmapped
 * it. Now a hand-out that reaches the middle of the current file asks for the next one
 * ({@code wakeTidier}: the housekeeper), which {@link #tidy} makes ahead as the <i>spare</i>,
 * and a file whose every token came back is unlinked at once (so it leaves the directory as
 * before) and unmapped by the next {@link #tidy}: at the next request for a spare, or the
 * housekeeper's round, whichever comes first (one wake-up per file, each a system call on the
 * send path). Where the spare is not ready in time (a slow housekeeper, tiny files), the
 * share makes the file itself, as before. These hand-overs take no lock (a flag, an atomic
 * reference, a concurrent queue): under the pool's lock the housekeeper contended with a
 * streaming producer's every hand-out, and each time it lost, the producer's unlock had to wake
 * it, a futex call on the send path.
 */
final class CounterFilePool implements TokenList.TokenCheck {
    private static final System.Logger LOG = System.getLogger(CounterFilePool.class.getName());

    /** A counter file of ours and what we know of it without trusting its contents. */
    private static final class OwnFile {
        /** 16 ints are 64 bytes: the cache line of element 16 of a 32-int array holds only that array's elements. */
        static final int RETURNED = 16;

        final CounterFile file;
        /** Its index in {@link #byId}, the high half of its tokens. */
        final int id;
        /** Its name as a message carries it (ASCII). */
        final byte[] name;
        /**
         * Tokens seen back, counted without the pool's lock, once per token, by whoever collects
         * (the hand-outs are the file's own count, {@link CounterFile#handedOut}). The element
         * {@link #RETURNED} of a padded array, so that its cache line holds nothing the producing
         * thread touches per message: one {@code AtomicInteger} counted up by every hand-out and
         * down by every return cost a 16-core machine's producer 15 % of its time (the line moved
         * to the collector's core and back for each token).
         */
        final AtomicIntegerArray returned = new AtomicIntegerArray(2 * RETURNED);
        /** The tokens it handed out, set when it retires (before its last token goes out); -1 until then. */
        volatile int finalCount = -1;
        volatile boolean damaged;

        OwnFile(CounterFile file, int id) {
            this.file = file;
            this.id = id;
            this.name = file.name().getBytes(StandardCharsets.US_ASCII);
        }
    }

    private final ShmDirectory directory;
    private final int slotsPerFile;
    private final int peersPerFile;
    private final Map<String, OwnFile> byName = new ConcurrentHashMap<>();
    /**
     * Our files, by id (the only list of them: {@link #all()}); an id is used again once its
     * file is gone. Safe: a file goes only when
     * every token of it was seen back, and whoever saw a token back drops it, so no token of a
     * gone file is held anywhere. Replaced (never written in place once published) under the
     * lock, read without it.
     */
    private volatile OwnFile[] byId = new OwnFile[4];
    private OwnFile current;
    /**
     * The file retired last, while it is ours: the collector sleeps on it while no file is
     * current (a file retires with its last token, and the next file starts with the next
     * share), since that is where the tokens handed out last are.
     */
    private OwnFile lastRetired;
    /** Tokens handed out so far, every file together (the engine's "shared" count): under the lock, which every hand-out holds. */
    private long handedOut;
    /** The file the collector sleeps on: it must stay mapped until the collector wakes. */
    private CounterFile pinned;
    private boolean pinnedIsDone;
    private volatile boolean closed;
    /** The next file, made ahead by {@link #tidy} (which alone sets it); taken under the lock. */
    private final AtomicReference<CounterFile> spare = new AtomicReference<>();
    /** A hand-out reached the middle of the current file with no spare ready; {@link #tidy} clears it. */
    private volatile boolean spareWanted;
    /** A retired file's last token was counted back: {@link #removeFinished} has a file to remove. */
    private volatile boolean finished;
    /** Removed files (unlinked, every token back) that {@link #tidy} unmaps. */
    private final Queue<CounterFile> toUnmap = new ConcurrentLinkedQueue<>();
    /** Asks for {@link #tidy} to run soon (unparks the housekeeper); cheap, called under the lock. */
    private final Runnable wakeTidier;

    CounterFilePool(ShmDirectory directory, int slotsPerFile, int peersPerFile, Runnable wakeTidier) {
        this.directory = directory;
        this.slotsPerFile = slotsPerFile;
        this.peersPerFile = peersPerFile;
        this.wakeTidier = wakeTidier;
    }

    /**
     * A token for the block of range tag {@code tag}: its file's id in the high half, its
     * slot in the low half (see {@link #file} and {@link #slot}), a number rather than an
     * object because a token is handed out with every message. A current file found damaged
     * is quarantined and a fresh one used; only when a fresh file fails too does this throw.
     *
     * @throws IllegalStateException once the pool closed (a share that raced its context's close)
     */
    synchronized long handOut(int tag) {
        ensureOpen();
        return handOutLocked(tag);
    }

    /**
     * {@link #handOut} for each of {@code tags[0..n)}, into the same places of {@code tokens},
     * under one taking of the lock (a batch's hand-outs). All or nothing: when one fails (as
     * {@link #handOut} fails: a fresh file failed too), the ones handed out before it are
     * cancelled and counted back here, since no sent block records them, and it throws, counting
     * none of them as handed out.
     */
    synchronized void handOutAll(int[] tags, long[] tokens, int n) {
        ensureOpen();
        int handed = 0;
        try {
            for (; handed < n; handed++) {
                tokens[handed] = handOutLocked(tags[handed]);
            }
        } catch (RuntimeException | Error e) {
            for (int i = 0; i < handed; i++) {
                OwnFile f = own(tokens[i]);
                try {
                    if (f.file.cancel(slot(tokens[i]), tags[i])) {
                        returned(f);
                    }
                } catch (RuntimeException | InternalError damaged) {
                    e.addSuppressed(damaged); // the file's other failure: it stays outstanding, as a damaged file's tokens do
                }
            }
            handedOut -= handed;
            try {
                removeFinished(); // a cancelled token may have been a retired file's last
            } catch (RuntimeException | Error removal) {
                e.addSuppressed(removal);
            }
            throw e;
        }
    }

    private long handOutLocked(int tag) {
        RefshareException failure = null;
        for (int fresh = 0; fresh < 2; ) {
            if (current == null) {
                current = next();
                fresh++;
            }
            OwnFile f = current;
            try {
                int slot = f.file.handOut(tag);
                if (slot >= 0) {
                    handedOut++;
                    if (slot == f.file.slotCapacity() >> 1 && !spareWanted && spare.get() == null) {
                        spareWanted = true;
                        wakeTidier.run();
                    }
                    if (slot + 1 == f.file.slotCapacity()) {
                        retire(f);
                    }
                    return (long) f.id << 32 | slot;
                }
                retire(f);
            } catch (RuntimeException | InternalError e) {
                quarantine(f, e);
                failure = new RefshareException("cannot hand out a reference token: " + f.file + " failed", e);
            }
        }
        throw failure != null ? failure : new RefshareException("cannot hand out a reference token");
    }

    /** Tokens handed out so far, cancelled ones included (but not those of a failed {@link #handOutAll}). */
    synchronized long handedOut() {
        return handedOut;
    }

    /** No more tokens from {@code f}; the next starts a new file. */
    private void retire(OwnFile f) {
        f.finalCount = f.file.handedOut();
        current = null;
        lastRetired = f;
    }

    /** Tokens of {@code f} not seen back (under the lock: the hand-outs are counted under it). */
    private static int outstanding(OwnFile f) {
        return f.file.handedOut() - f.returned.get(OwnFile.RETURNED);
    }

    /** The next current file: the spare, or else one made now. */
    private OwnFile next() {
        CounterFile file = spare.getAndSet(null);
        if (file == null) {
            file = CounterFile.create(directory, slotsPerFile, peersPerFile);
        }
        OwnFile f = new OwnFile(file, freeId());
        OwnFile[] ids = byId.clone();
        ids[f.id] = f;
        byId = ids;
        byName.put(f.file.name(), f);
        return f;
    }

    private int freeId() {
        OwnFile[] ids = byId;
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] == null) {
                return i;
            }
        }
        byId = Arrays.copyOf(ids, 2 * ids.length);
        return ids.length;
    }

    private void forget(OwnFile f) {
        if (lastRetired == f) {
            lastRetired = null;
        }
        byName.remove(f.file.name());
        OwnFile[] ids = byId.clone();
        ids[f.id] = null;
        byId = ids;
    }

    /** Our files now (a snapshot: files come and go under the lock). */
    private List<OwnFile> all() {
        List<OwnFile> all = new ArrayList<>();
        for (OwnFile f : byId) {
            if (f != null) {
                all.add(f);
            }
        }
        return all;
    }

    /** The file of a token of ours; null once its file is gone (every token back) or the pool closed. */
    private OwnFile own(long token) {
        return byId[(int) (token >>> 32)];
    }

    /** The counter file of a token of ours; null once the pool is closed. */
    CounterFile file(long token) {
        OwnFile f = own(token);
        return f == null ? null : f.file;
    }

    /** The name of the counter file of a token of ours (ASCII), as a message carries it. */
    byte[] fileName(long token) {
        return own(token).name;
    }

    /** The slot of a token of ours. */
    static int slot(long token) {
        return (int) token;
    }

    /**
     * Whether a token of ours came back (released, returned or reclaimed); a true answer is
     * given once per token and counts it. Never true for a token of a quarantined file, nor
     * for one of a file found damaged by this very check. The count is the last thing it does:
     * when it throws, the token was not counted (see {@link TokenList}). A retired file whose
     * last token this was is removed by the next {@link #removeFinished}.
     */
    @Override
    public boolean isReturned(long token, int tag) {
        OwnFile f = own(token);
        if (f == null) {
            return true; // the pool was closed; the file is gone already
        }
        if (f.damaged) {
            return false;
        }
        boolean back;
        try {
            back = f.file.isReturned(slot(token), tag);
        } catch (RuntimeException | InternalError e) {
            synchronized (this) {
                quarantine(f, e);
            }
            return false;
        }
        if (back) {
            returned(f);
        }
        return back;
    }

    /** Counts a token of {@code f} seen back; throws nothing. */
    private void returned(OwnFile f) {
        if (f.returned.incrementAndGet(OwnFile.RETURNED) == f.finalCount) {
            finished = true; // the last token of a file that hands out no more
        }
    }

    /**
     * Removes the retired files whose every token came back (unlinks them; the housekeeper
     * unmaps them). Called after a {@link #isReturned} pass, by the thread that made it.
     */
    void removeFinished() {
        if (finished) {
            finished = false;
            for (OwnFile f : byId) {
                if (f != null) {
                    removeIfDone(f);
                }
            }
        }
    }

    /** Removes a retired file whose every token came back. */
    private synchronized void removeIfDone(OwnFile f) {
        if (closed || f.damaged) {
            return;
        }
        if (f.finalCount >= 0 && outstanding(f) == 0 && byId[f.id] == f) {
            forget(f);
            f.file.unlink();
            if (f.file == pinned) {
                pinnedIsDone = true;
            } else {
                toUnmap.add(f.file); // unmapped at the housekeeper's next wake-up: no wake-up of its own
            }
        }
    }

    /** {@code file} of ours failed while being used (a fault, a slot no token can hold): quarantine it. */
    synchronized void damaged(CounterFile file, Throwable cause) {
        OwnFile f = byName.get(file.name());
        if (f != null && f.file == file) {
            quarantine(f, cause);
        }
    }

    private void quarantine(OwnFile f, Throwable cause) {
        if (f.damaged || closed) {
            return;
        }
        f.damaged = true;
        if (current == f) {
            current = null;
        }
        LOG.log(System.Logger.Level.WARNING, "quarantined " + f.file + ": it is damaged (written or truncated by "
                + "another process). New shares use a fresh file; the " + outstanding(f) + " references it still "
                + "counts keep their blocks in the limbo until this process closes", cause);
        try {
            f.file.retire(); // tells receivers it hands out nothing more; best effort on a damaged file
        } catch (RuntimeException | InternalError ignored) {
            // unreachable memory: nothing more to tell
        }
    }

    /**
     * The file the collector sleeps on, kept mapped until {@link #unpin()}: the current one, or
     * while none is, the one retired last (while it is ours); null before the first.
     */
    synchronized CounterFile pinFileToSleepOn() {
        OwnFile f = current != null ? current : lastRetired;
        pinned = f == null || f.damaged ? null : f.file;
        return pinned;
    }

    synchronized void unpin() {
        CounterFile done = pinnedIsDone ? pinned : null;
        pinned = null;
        pinnedIsDone = false;
        if (done != null && !done.closeUnlessInUse()) {
            toUnmap.add(done);
        }
    }

    /** Our own healthy counter file of this name, or null when it is not (or no longer) ours. */
    CounterFile ownFile(String name) {
        OwnFile f = byName.get(name);
        return f == null || f.damaged ? null : f.file;
    }

    /**
     * Tokens of ours handed out and not yet released, across our files (a scan: not for hot
     * paths). A quarantined file counts every token not seen back.
     */
    synchronized long liveTokens() {
        long live = 0;
        for (OwnFile f : all()) {
            if (!f.damaged) {
                try {
                    live += f.file.live();
                    continue;
                } catch (RuntimeException | InternalError e) {
                    quarantine(f, e);
                }
            }
            live += outstanding(f);
        }
        return live;
    }

    /**
     * The owner's reclamation of dead peers in every healthy file of ours (see
     * {@link CounterFile#reclaimDeadPeers}); returns the tokens reclaimed. A file that fails
     * is quarantined and the others are still reclaimed.
     *
     * <p>The processes are judged first, each once however many files it is a peer of, and
     * without the pool's lock: a verdict opens and locks a life file, and on this periodic
     * path, never compiled hot, that took 300-500 µs a process on the development VM, while
     * every {@link #handOut} (every message sent) waited for the lock. The lock is taken only
     * when someone is dead or an entry is half-registered (its registrant's life files are
     * looked at under it, as before). A peer that registered after the judging counts as
     * alive until the next call; DEAD is final, so a verdict cannot go stale the other way.
     * Peer tables are read without the lock as any other process reads them; a file closed
     * meanwhile fails that read and is looked at again under the lock.
     */
    int reclaimDeadHolders() {
        Map<ProcessIdentity, Verdict> verdicts = new HashMap<>();
        boolean underLock = false;
        for (OwnFile f : all()) {
            if (f.damaged) {
                continue;
            }
            try {
                for (ProcessIdentity peer : f.file.holders()) {
                    verdicts.computeIfAbsent(peer, directory::verdict);
                }
                underLock |= f.file.anyPeerRegistering();
            } catch (RuntimeException | InternalError e) {
                underLock = true;
            }
        }
        if (!underLock && !verdicts.containsValue(Verdict.DEAD)) {
            return 0;
        }
        Function<ProcessIdentity, Verdict> judged = peer -> verdicts.getOrDefault(peer, Verdict.UNKNOWN);
        int reclaimed = 0;
        synchronized (this) {
            for (OwnFile f : all()) {
                if (f.damaged) {
                    continue;
                }
                try {
                    reclaimed += f.file.reclaimDeadPeers(judged, CounterFilePool::reclaimEvent);
                } catch (RuntimeException | InternalError e) {
                    quarantine(f, e);
                }
            }
        }
        return reclaimed;
    }

    private static void reclaimEvent(ProcessIdentity holder, int references) {
        Events.Reclaim event = new Events.Reclaim();
        if (event.shouldCommit()) {
            event.pid = holder.pid();
            event.references = references;
            event.commit();
        }
    }

    /** Tokens of ours that {@code holder} holds now (a scan: for tests and tools; quarantined files are skipped). */
    synchronized long heldBy(ProcessIdentity holder) {
        long n = 0;
        for (OwnFile f : all()) {
            if (!f.damaged) {
                try {
                    n += f.file.heldBy(holder);
                } catch (RuntimeException | InternalError e) {
                    quarantine(f, e);
                }
            }
        }
        return n;
    }

    /** Counter files of ours still needed, quarantined ones and the spare made ahead included. */
    int liveFiles() {
        return all().size() + (spare.get() != null ? 1 : 0);
    }

    /** Quarantined counter files of ours. */
    int quarantinedFiles() {
        int n = 0;
        for (OwnFile f : all()) {
            if (f.damaged) {
                n++;
            }
        }
        return n;
    }

    /**
     * The housekeeper's part (see the class notes): unmaps the files removed since the last
     * call, and makes the spare when a hand-out asked for one, without the pool's lock. A
     * failure to make it is thrown (the housekeeper logs it); the share that needs the file
     * then makes it itself and reports what fails to its caller.
     */
    void tidy() {
        unmapRemoved();
        if (!spareWanted) {
            return;
        }
        // cleared before the spare exists: a hand-out that takes this spare and reaches its middle
        // before we return must find the flag down, or its request for the next spare is lost
        spareWanted = false;
        if (!closed && spare.get() == null) {
            spare.set(CounterFile.create(directory, slotsPerFile, peersPerFile));
            if (closed) { // close() may have looked for a spare before it was set
                dispose(spare.getAndSet(null));
            }
        }
    }

    /**
     * Unmaps the removed files, but for those a thread of ours is inside a system call on (a
     * cancel's futex wake-up holds its file's mapping while it runs): they wait for the next call.
     */
    private void unmapRemoved() {
        List<CounterFile> inUse = new ArrayList<>();
        for (CounterFile f; (f = toUnmap.poll()) != null; ) {
            if (!f.closeUnlessInUse()) {
                inUse.add(f);
            }
        }
        toUnmap.addAll(inUse);
    }

    /** Unlinks {@code f} and unmaps it once a system call of ours on it returned (see {@link CounterFile#closeAfterCalls}). */
    private static void dispose(CounterFile f) {
        if (f != null) {
            f.unlink();
            f.closeAfterCalls();
        }
    }

    /** Unlinks and unmaps every file: processes still holding tokens keep their own mappings. */
    synchronized void close() {
        closed = true;
        List<OwnFile> all = all();
        byName.clear();
        byId = new OwnFile[byId.length]; // every token counts as back
        current = null;
        for (OwnFile f : all) {
            dispose(f.file);
        }
        for (CounterFile f; (f = toUnmap.poll()) != null; ) {
            f.closeAfterCalls(); // unlinked when it was removed
        }
        dispose(spare.getAndSet(null));
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("refshare context is closed");
        }
    }
}
