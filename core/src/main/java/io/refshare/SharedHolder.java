package io.refshare;

import io.refshare.holder.HolderFile;
import io.refshare.holder.SharedHolderLayout;
import io.refshare.holder.HolderWord;
import io.refshare.holder.ProcessShare;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.holder.SharedHolderLayout.Geometry;
import io.refshare.holder.StripedUses;
import io.refshare.share.Sharing;
import io.refshare.share.ViewedBlock;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * A named holder in shared memory that any process can re-point at a new tensor (in host
 * shared memory or in CUDA device memory) while readers in every process acquire the
 * current one, zero-copy and without a lock: the cross-process form of {@link AtomicHolder},
 * for weights or tables hot-swapped under live workers.
 *
 * <pre>{@code
 * // publisher process
 * try (Refshare rs = Refshare.open(); SharedHolder weights = rs.createHolder()) {
 *     tellWorkers(weights.name());
 *     while (training) {
 *         try (Tensor w = rs.allocate(DType.FLOAT32, 4096, 4096)) {
 *             fill(w.data());
 *             weights.publish(w);          // readers see it from their next acquire
 *         }                                // the old version is freed when its last reader lets go
 *     }
 * }
 *
 * // worker process
 * try (Refshare rs = Refshare.open(); SharedHolder weights = rs.openHolder(name)) {
 *     while (serving) {
 *         try (Tensor w = weights.acquire()) {   // the current version, mapped zero-copy
 *             infer(w.data());
 *         }
 *     }
 * }
 * }</pre>
 *
 * <h2>How versions are kept alive</h2>
 * {@link #publish} shares the tensor once: one token in the publisher's counter file keeps
 * its memory alive (the publisher may close its tensor at once; the block then waits in
 * its limbo). The version's descriptor goes into a slot of the holder file, and the
 * holder's differential count (as in {@link AtomicHolder}) counts every reader's acquisition.
 * When a version is no longer current and its last reader anywhere releases it, that
 * reader (or the publisher that replaced it, if nobody held it) returns the token; the
 * publisher's collector then frees the memory. Acquire maps the block through the
 * process's receive cache without taking a token of its own; each handle keeps the segment
 * of the latest version it saw in each slot mapped (until it sees the slot's next version,
 * or closes), so acquiring the same version again maps nothing.
 *
 * <h2>One reference per version for the whole process</h2>
 * A handle takes one reference in the holder file on a host version, the first time one of
 * its threads acquires it, and hands that version out to its threads from then on without
 * writing to the shared file: an acquire of the version the handle already holds counts one
 * use on a per-thread stripe and reads the holder word to check the version is still
 * current. The handle gives its reference back once the version is no longer current
 * <i>and</i> the last tensor it handed out on it is closed. It notices a replacement at its
 * next acquire, at its own publish, clear or close, and on its process's background collector
 * every housekeeping round (100 ms), so a process that never acquires again still lets go.
 * <b>Bound:</b> an old version is freed at most about one housekeeping round (100 ms, plus
 * the round's own work) after it was replaced and every tensor any process acquired on it
 * was closed; without this process share it was at that last close. Device versions are not
 * shared this way: each acquisition takes and gives back its own reference (see below).
 *
 * <h2>Device memory</h2>
 * A CUDA tensor is published the same way: its descriptor carries the segment's IPC handle
 * and, as every send of device memory does, an interprocess event recorded on the
 * publisher's stream at the publish (over the live-event cap, the publish synchronizes the
 * stream instead). A reader's acquire opens the segment through the handle (once in its
 * process while any block of it is held) and returns once the event has completed (as a
 * receive does), so its device work sees what the publisher wrote before publishing; the
 * tensor it gets is the publisher's memory, not a copy. Its release waits for that stream
 * and closes the segment if it held its last block, before the count goes back, since the
 * publisher may then free the memory. Unlike host memory, device segments are not kept open
 * between acquisitions (an open IPC handle must never outlive the counts that keep its
 * allocation alive), and device memory dies with its publisher's process.
 *
 * <h2>Attribution and dead readers</h2>
 * Each process that opens the holder has a row in its file, named by pid and start
 * time, counting the references it holds per version (one per host version a handle of it
 * holds for its threads, one per device acquisition).
 * {@link #reclaimDeadReaders()} gives back the references of processes that died, exactly
 * once; it runs by itself on the creating process's background collector every
 * housekeeping round (100 ms), so an old version a killed reader held is freed without any
 * further publish, and also when a publish finds no free slot or an open finds no free row.
 * A process killed in the few instructions between counting an acquisition in the holder
 * word and in its row (or between its row and the count on release) leaks that one
 * reference: the version then lives until its publisher closes, but is never freed early.
 * Likewise a publisher killed between re-pointing the holder and unpinning the old
 * version leaves that version pinned.
 *
 * <h2>Lifecycle</h2>
 * The creator's {@link #close()} empties the holder, stops further publishes and removes
 * the file's name; versions still held stay valid until released. Any handle's close
 * stops its acquires; tensors it handed out stay valid (until their {@link Refshare} is
 * closed) and are released by closing them. Versions live in the publisher's memory:
 * close the holder before the publisher's {@code Refshare}. A handle's close gives back its
 * process's share of the current version (at once, or when the last tensor acquired from it
 * is closed); a {@code Refshare} closed while a handle of it is still open does the same for
 * that handle first.
 *
 * <h2>Implementation notes</h2>
 * The counting protocol, its invariants, the transfer arithmetic, why a version's count is
 * transiently negative and the memory-ordering argument are those of the engine's
 * {@code HolderFile} (and {@link AtomicHolder}'s), and the file layout is specified in
 * {@code docs/protocol.md}. This class adds the handle's own lifetime ({@link StripedUses},
 * the queue handle's idiom on per-thread stripes): the operations in progress on the mapping
 * are counted, each acquired tensor until its release, and the mapping is unmapped after the
 * close by the last of them, never before one. Publishing installs with one getAndSet: if the
 * creator closed the holder meanwhile (it sets the closed flag before emptying), the publisher
 * sees the flag after its getAndSet and empties the holder again, so no version stays pinned
 * in a closed holder. The per-slot cache of seen versions is replaced by compare-and-set, so
 * each pin is released exactly once (by the thread that replaced it, or at unmapping).
 * <p>
 * <b>The process share.</b> {@code ProcessShare} (read its notes for the invariants and the
 * ordering argument) holds the handle's one reference on the current host version and
 * counts the tensors handed out on it on per-thread stripes; its give-back is {@code
 * release(slot)}: the reference in the file, then one use of the handle. A share owns one
 * use of the handle from the acquire that created it to its give-back, so the mapping (and
 * each pin, below) outlives every share, and a tensor acquired from a share needs no handle
 * use of its own. Once {@code close} has closed the uses it retires the current share; an
 * acquire that installs a share reads the closed flag after installing it and retires it if
 * set. Both are sequentially consistent accesses (a compare-and-set of the current share, a
 * read or compare-and-set of the flag), so at least one of the two sees the other and the
 * share is retired (once: retirement takes it out of the current field by compare-and-set),
 * and the handle's unmapping waits for its give-back. The fast path of {@code acquire} writes
 * only its thread's stripe; it reads the Refshare's closed flag, the current share and the
 * holder word.
 * <p>
 * <b>Acquired host tensors borrow the pin's mapping.</b> Their block is a view alongside the
 * pin ({@code ViewedBlock.alongside}), which takes no reference on the mapping of its own, so
 * an acquire touches neither the receive cache nor its lock. The pin outlives every such view:
 * it is dropped either at unmapping, after every acquired tensor was released (each is a use
 * of the handle, directly or through its share's), or by a thread that holds a different
 * version in the slot; that version can only be there once the pin's version was retired,
 * which takes the release of every reference to it (a share's goes back only after its last
 * tensor's release), and a tensor's release comes after its last access to the memory. For
 * the same reason every thread that records a version in the slot while holding it records
 * the same version, so the loser of the compare-and-set uses the winner's.
 */
public final class SharedHolder implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(SharedHolder.class.getName());

    private final Refshare refshare;
    private final Sharing sharing;
    private final ShmFile shm;
    private final HolderFile file;
    private final boolean creator;
    private final long self = ProcessIdentity.current().packed();
    private final int row;
    /** The latest version this handle has seen in each slot (checked by sequence on every use). */
    private final AtomicReferenceArray<Seen> seen;
    /**
     * Uses of the mapping in progress (each acquired tensor counts until it is released): the
     * mapping goes after the close and the last use, and nothing enters after the close.
     */
    private final StripedUses uses = new StripedUses(this::unmap);
    private volatile Stats statsAtClose;
    private final LongAdder retiredHere = new LongAdder();
    private final LongAdder anomalies = new LongAdder();
    /** {@link #retired}, made once: a method reference made at each release would be an object per release. */
    private final HolderFile.Retirement retirement = this::retired;
    /**
     * This handle's task on its process's collector, every housekeeping round: retires the
     * process's share of a version that is no longer current, and (the creator's) reclaims dead
     * readers.
     */
    private final Runnable housekeeping = this::housekeep;
    /** Run when this handle's {@code Refshare} closes first: the process's share goes back then. */
    private final Runnable refshareClosing = this::refshareClosing;
    /** The process's one reference on the current host version, handed out to its threads. */
    private final ProcessShare<Seen> shares;

    /**
     * A version as this handle knows it: decoded once, and with a pin (a view with no count
     * of its own) that keeps its segment mapped in this process, so that acquiring it again
     * finds the mapping instead of mapping and unmapping the segment every time. The pin is
     * dropped when the slot's next version is seen, or when the handle closes.
     *
     * @param release gives back one acquisition of the version (made once, run by each
     *                acquired tensor's block when it is disposed)
     */
    private record Seen(int slot, long sequence, Descriptor descriptor, TensorLayout layout, ViewedBlock pin,
                        Runnable release) {
        /** A block for one acquisition: alongside the pin for host memory, opened anew for device memory. */
        ViewedBlock view(Sharing sharing) {
            return pin != null ? pin.alongside(release) : sharing.view(descriptor, release);
        }

        /** Drops the pin (none for device memory). */
        void unpin() {
            if (pin != null) {
                pin.release();
            }
        }
    }

    private SharedHolder(Refshare refshare, ShmFile shm, Geometry geometry, boolean creator, int drainAt) {
        this.refshare = refshare;
        this.sharing = refshare.sharing();
        this.shm = shm;
        this.file = new HolderFile(shm.segment(), geometry, drainAt);
        this.creator = creator;
        this.seen = new AtomicReferenceArray<>(geometry.slotCapacity());
        this.row = claimRow();
        // a share's give-back: its reference in the file, then the use of the handle it held
        this.shares = new ProcessShare<>(file, this::release);
    }

    /** See {@link Refshare#createHolder(int, int)}. */
    static SharedHolder create(Refshare refshare, int versionSlots, int readerProcesses) {
        return create(refshare, versionSlots, readerProcesses, HolderWord.DEFAULT_DRAIN_AT);
    }

    static SharedHolder create(Refshare refshare, int versionSlots, int readerProcesses, int drainAt) {
        requireOpen(refshare);
        Geometry g = new Geometry(versionSlots, readerProcesses);
        ShmFile f = refshare.sharing().directory().create(ShmKind.HOLDER, g.fileLength());
        try {
            SharedHolderLayout.format(f.segment(), g, ProcessIdentity.current());
            SharedHolder holder = new SharedHolder(refshare, f, g, true, drainAt);
            // registered once constructed, so the collector never sees a half-built holder
            holder.register();
            return holder;
        } catch (RuntimeException e) {
            f.unlink();
            f.close();
            throw e;
        }
    }

    private static void requireOpen(Refshare refshare) {
        if (refshare.isClosed()) {
            throw new IllegalStateException("the Refshare is closed: open a new one to create or open holders");
        }
    }

    /** See {@link Refshare#openHolder(String)}. */
    static SharedHolder open(Refshare refshare, String name) {
        return open(refshare, name, HolderWord.DEFAULT_DRAIN_AT);
    }

    static SharedHolder open(Refshare refshare, String name, int drainAt) {
        requireOpen(refshare);
        SharedHolder holder = refshare.sharing().directory().open(name, ShmKind.HOLDER,
                SharedHolderLayout.HEADER_LENGTH).checkOrClose(f -> new SharedHolder(refshare, f,
                        SharedHolderLayout.readGeometry(f.segment(), f.path().toString()), false, drainAt));
        // registered only once the check passed: housekeeping never sees a holder whose file was unmapped
        holder.register();
        return holder;
    }

    private void register() {
        sharing.addHousekeeping(housekeeping);
        sharing.addCloseHook(refshareClosing);
    }

    /** The Refshare closes with this handle open: its share goes back now (or when its last tensor is closed). */
    private void refshareClosing() {
        if (!uses.enter()) {
            return;
        }
        try {
            shares.retireCurrent();
        } finally {
            leave();
        }
    }

    /** Reclaiming needs the kernel's evidence of death: an unknown process counts as alive. */
    private boolean mayBeAlive(ProcessIdentity reader) {
        return sharing.directory().verdict(reader).mayBeAlive();
    }

    private int claimRow() {
        // before our identity is in the file, and while the file exists: the row outlives this
        // handle and is reclaimed only once the kernel drops our lock
        sharing.directory().holdLifeLockWhileNamedIn(name());
        int r = file.registerReader(self);
        if (r < 0) {
            reclaimDeadReaders(); // rows of dead processes become free
            r = file.registerReader(self);
        }
        if (r < 0) {
            throw new RefshareException("holder " + name() + ": all " + file.geometry().readerCapacity()
                    + " reader rows are taken by live processes");
        }
        return r;
    }

    /**
     * The holder's name, for other processes' {@link Refshare#openHolder(String)}. Answers
     * after close too.
     *
     * @return the name of the holder's file in the shared directory
     */
    public String name() {
        return shm.name();
    }

    /**
     * Makes {@code tensor} the current version and returns its sequence number (1, 2, ...
     * across all publishers of this holder). Counts one reference to the tensor's memory
     * for as long as the version lives; the caller keeps its tensor and may close it. A
     * device tensor is ordered for readers like any send: its work queued on
     * {@code rs.cuda().stream()} before the publish is done before a reader's work on its own.
     * Any handle may publish, in any process. Versions live in the publisher's memory (see
     * Lifecycle in the class comment).
     *
     * @param tensor an open tensor of this handle's {@code Refshare}, host or device; the same
     *               tensor published twice is two versions
     * @return the new version's sequence number
     * @throws IllegalStateException when this handle, the holder (by its creator) or the
     *                               {@code Refshare} is closed, or {@code tensor} is closed, or
     *                               all version slots hold versions that live readers still use
     *                               (after reclaiming those of dead readers); nothing is counted
     * @throws NullPointerException  when {@code tensor} is null
     */
    public long publish(Tensor tensor) {
        enter();
        try {
            if (file.isClosed()) {
                throw new IllegalStateException("holder " + name() + " was closed by its creator");
            }
            Descriptor d = refshare.shareDescriptor(tensor);
            long claimed = 0;
            boolean haveSlot = false;
            boolean installed = false;
            try {
                byte[] bytes = DescriptorCodec.encode(d);
                claimed = claimSlot();
                haveSlot = true;
                long sequence = file.fill(claimed, self, bytes);
                long old = file.swap(claimed);
                installed = true; // from here the token belongs to the version
                file.unpin(old, retirement);
                if (file.isClosed()) {
                    file.unpin(file.swap(HolderWord.EMPTY), retirement); // the creator closed as we installed
                }
                shares.retireIfReplaced(); // this process's share of the old version goes now, not at the next round
                return sequence;
            } finally {
                if (!installed) {
                    if (haveSlot) {
                        file.abandon(claimed);
                    }
                    sharing.cancel(d);
                }
            }
        } finally {
            leave();
        }
    }

    private long claimSlot() {
        long word = file.claimSlot();
        if (word < 0 && reclaimDeadReaders() > 0) {
            word = file.claimSlot();
        }
        if (word < 0) {
            throw new IllegalStateException("holder " + name() + ": all " + file.geometry().slotCapacity()
                    + " version slots hold versions still in use; readers must release, or create the holder with"
                    + " more slots");
        }
        return word;
    }

    /**
     * A reference to the current version, mapped zero-copy (a device tensor for a device
     * version: this process's {@code Refshare} must be able to use that CUDA device); null
     * when nothing is published, the holder was cleared, or its creator closed it. Closing the
     * tensor releases it. Thread-safe.
     *
     * <p>The tensor is the publisher's memory: its {@link Tensor#data()} is read-only. It
     * stays valid after this handle closes, and after the version is replaced, until it is
     * closed or its {@code Refshare} is. A tensor never closed keeps its version alive until
     * this process dies and its references are reclaimed.
     *
     * <p>The first acquire of a host version in this handle takes one reference in the holder
     * file for the whole process; later acquires of the same version write nothing shared
     * (see the class comment for when that reference goes back).
     *
     * @return the current version, holding one reference; or null
     * @throws IllegalStateException when this handle or its {@code Refshare} is closed
     * @throws io.refshare.cuda.CudaUnavailableException when the version is device memory and
     *                               this process cannot use CUDA
     * @throws RefshareException     when the version cannot be mapped (its file gone with its
     *                               publisher, say), or the holder file holds a descriptor that
     *                               does not decode ({@link InvalidDataException}: written by
     *                               something other than refshare)
     */
    public Tensor acquire() {
        if (sharing.isClosed()) {
            throw new IllegalStateException("refshare context is closed");
        }
        // the fast path: a use of the process's share of the current version, no write to the file
        ProcessShare.Share<Seen> share = shares.tryAcquire();
        if (share != null) {
            return tensorOf(share);
        }
        enter();
        long w;
        try {
            if (sharing.isClosed()) {
                throw new IllegalStateException("refshare context is closed");
            }
            w = file.acquire(row);
        } catch (RuntimeException e) {
            leave();
            throw e;
        }
        int slot = HolderWord.slot(w);
        if (slot < 0) {
            leave();
            return null;
        }
        Seen v;
        try {
            v = seen(slot, HolderWord.generation(w));
        } catch (RuntimeException e) {
            undo(e, () -> release(slot));
            throw e;
        }
        if (v.pin() == null) {
            return deviceTensor(v); // device memory: one reference per acquisition, as an IPC open must not linger
        }
        // the reference just taken, and the use of the handle, become the process's share of the version
        share = shares.adopt(w, v);
        if (uses.isClosed()) {
            shares.retire(share); // closed as we installed: close() may have retired the share before it was current
        }
        return tensorOf(share);
    }

    /** A tensor for one use of {@code share}, which the tensor's release ends. */
    private Tensor tensorOf(ProcessShare.Share<Seen> share) {
        Seen v = share.attachment();
        ViewedBlock block;
        try {
            block = v.pin().alongside(share.leave);
        } catch (RuntimeException e) {
            undo(e, share.leave);
            throw e;
        }
        try {
            return new Tensor(block, v.layout());
        } catch (RuntimeException e) {
            undo(e, block::release); // ends the use
            throw e;
        }
    }

    /** A device tensor holding the acquisition's own reference (released by the tensor's release). */
    private Tensor deviceTensor(Seen v) {
        int slot = v.slot();
        ViewedBlock block;
        try {
            block = v.view(sharing);
        } catch (RuntimeException e) {
            undo(e, () -> release(slot));
            throw e;
        }
        try {
            return new Tensor(block, v.layout());
        } catch (RuntimeException e) {
            undo(e, block::release); // runs release(slot)
            throw e;
        }
    }

    /** Gives back what a failed acquire took, keeping the failure as the exception to report. */
    private static void undo(RuntimeException failure, Runnable giveBack) {
        try {
            giveBack.run();
        } catch (RuntimeException alsoFailed) {
            failure.addSuppressed(alsoFailed);
        }
    }

    /** The version in {@code slot}, which the caller holds. */
    private Seen seen(int slot, int generation) {
        long sequence = file.sequence(slot);
        Seen known = seen.get(slot);
        if (known != null && known.sequence() == sequence) {
            return known;
        }
        Descriptor d = DescriptorCodec.decode(file.descriptor(slot, generation));
        TensorLayout layout = d.tensor() != null ? d.tensor() : TensorLayout.contiguous(DType.UINT8, d.length());
        // device memory is not pinned: an IPC-opened segment must be closed before its publisher can free
        // it (CUDA leaves freeing an allocation another process still has open undefined), so it may stay
        // open only while this process holds one of its blocks; each acquisition opens it (the first
        // open in this process maps it, the others count a user) and its release closes it
        ViewedBlock pin = d.backend() == Backend.HOST ? sharing.view(d, () -> {
        }) : null;
        Seen fresh = new Seen(slot, sequence, d, layout, pin, () -> release(slot));
        Seen recorded = seen.compareAndExchange(slot, known, fresh);
        if (recorded == known) {
            if (known != null) {
                known.unpin();
            }
            return fresh;
        }
        fresh.unpin(); // another thread recorded this version first (threads holding a slot hold the same one)
        if (recorded == null || recorded.sequence() != sequence) {
            throw new InvalidDataException("version slot " + slot + " changed while held (corrupt holder file)");
        }
        return recorded;
    }

    private void release(int slot) {
        try {
            file.release(row, slot, retirement);
        } finally {
            leave();
        }
    }

    /** Runs in whichever process let go of a version last: returns the version's token. */
    private void retired(int slot, long sequence, byte[] bytes) {
        retiredHere.increment();
        try {
            Descriptor d = DescriptorCodec.decode(bytes);
            if (!sharing.cancel(d)) {
                anomalies.increment();
                LOG.log(System.Logger.Level.WARNING, "holder {0}: the token of version {1} was already returned",
                        name(), sequence);
            }
        } catch (InvalidDataException e) {
            anomalies.increment();
            LOG.log(System.Logger.Level.WARNING, "holder {0}: version {1} has a corrupt descriptor: {2}", name(),
                    sequence, e.getMessage());
        } catch (RefshareException e) {
            // the publisher is gone, and its counter file with it: there is nothing left to give back
            LOG.log(System.Logger.Level.DEBUG, "holder {0}: version {1} outlived its publisher: {2}", name(), sequence,
                    e.getMessage());
        }
    }

    /**
     * Gives back every reference held by processes that died (exactly once, whoever else
     * tries at the same time) and returns how many. Versions whose last reference that was
     * are retired. A process counts as dead only on the kernel's evidence (its life lock is
     * free); one whose state cannot be known keeps its references. The creator's handle does
     * this by itself every 100 ms, so calling it is rarely needed.
     *
     * @return the references given back by this call
     * @throws IllegalStateException when this handle is closed
     */
    public long reclaimDeadReaders() {
        enter();
        try {
            return file.reclaimDead(self, this::mayBeAlive, retirement);
        } finally {
            leave();
        }
    }

    /**
     * The handle's housekeeping round, on the collector thread: retires this process's share
     * of a version no longer current (so an idle process lets an old version go within a
     * round), and on the creator's handle reclaims dead readers. Does nothing once the handle
     * is closed (the collector may run it while {@link #close()} removes it), and reports what
     * it gave back in the log rather than to a caller.
     */
    private void housekeep() {
        if (!uses.enter()) {
            return;
        }
        try {
            shares.retireIfReplaced();
            if (creator) {
                long n = file.reclaimDead(self, this::mayBeAlive, retirement);
                if (n > 0) {
                    LOG.log(System.Logger.Level.INFO, "holder {0}: reclaimed {1} references held by dead readers",
                            name(), n);
                }
            }
        } finally {
            leave();
        }
    }

    /**
     * Empties the holder: acquires return null until the next publish, and the current
     * version is retired once nobody holds it. Any handle may clear it. Doing it twice does
     * nothing more.
     *
     * @throws IllegalStateException when this handle is closed
     */
    public void clear() {
        enter();
        try {
            file.unpin(file.swap(HolderWord.EMPTY), retirement);
            shares.retireIfReplaced();
        } finally {
            leave();
        }
    }

    /**
     * Whether this handle, or the holder, is closed: either way no publish succeeds.
     *
     * @return true once this handle is closed, or the creator closed the holder
     */
    public boolean isClosed() {
        if (!uses.enter()) {
            return true;
        }
        try {
            return file.isClosed();
        } finally {
            leave();
        }
    }

    /**
     * The holder's figures now, read from its file (a moment's figures: concurrent
     * operations move them); after {@link #close()}, as they were when it closed.
     *
     * @return the figures
     */
    public Stats stats() {
        if (!uses.enter()) {
            Stats s = statsAtClose;
            if (s == null) { // the figures could not be read while closing (a damaged file)
                return new Stats(0, 0, 0, 0, List.of(), retiredHere.sum(), anomalies.sum());
            }
            return new Stats(s.published(), s.retired(), s.reclaimed(), s.liveVersions(), s.readers(),
                    retiredHere.sum(), anomalies.sum());
        }
        try {
            return readStats();
        } finally {
            leave();
        }
    }

    private Stats readStats() {
        HolderFile.Figures f = file.figures();
        return new Stats(f.published(), f.retired(), f.reclaimed(), f.liveVersions(), f.readers().stream().map(ProcessIdentity::pid).toList(),
                retiredHere.sum(), anomalies.sum());
    }

    /**
     * The holder as every process sees it, and what this handle did.
     *
     * @param published       versions installed so far, by every publisher
     * @param retired         versions whose last reference went, anywhere
     * @param reclaimed       references given back on behalf of dead processes
     * @param liveVersions    versions alive now (current and still held)
     * @param readers         the process ids of the processes with a row, alive or not
     * @param retiredHere     versions this handle retired (it let go last)
     * @param anomalies       retirements that found the token already returned or the
     *                        descriptor corrupt; 0 unless the file was tampered with
     */
    public record Stats(long published, long retired, long reclaimed, int liveVersions,
                        List<Long> readers, long retiredHere, long anomalies) {
        /**
         * Figures as given, the list of readers copied.
         *
         * @param published    versions installed so far
         * @param retired      versions whose last reference went
         * @param reclaimed    references given back on behalf of dead processes
         * @param liveVersions versions alive now
         * @param readers      the process ids of the processes with a row
         * @param retiredHere  versions this handle retired
         * @param anomalies    retirements that found the token already returned or the
         *                     descriptor corrupt
         * @throws NullPointerException when {@code readers} is or holds null
         */
        public Stats {
            readers = List.copyOf(readers);
        }
    }

    /**
     * Detaches this handle; the creator's close also empties the holder, stops publishes
     * everywhere and removes its name (handles already open can still acquire what is left:
     * nothing, once it is emptied). Tensors this handle acquired stay valid until closed.
     * Idempotent; safe from any thread.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (uses.isClosed()) {
                return;
            }
            enter();
            try {
                sharing.removeHousekeeping(housekeeping);
                sharing.removeCloseHook(refshareClosing);
                if (creator) {
                    file.markClosed();
                    try {
                        file.unpin(file.swap(HolderWord.EMPTY), retirement);
                    } finally {
                        shm.unlink();
                    }
                }
            } finally {
                uses.close(); // no acquire installs a share after this without retiring it (see acquire)
                try {
                    // the process's share goes back now, or when the last tensor acquired from it is closed
                    shares.retireCurrent();
                    statsAtClose = readStats();
                } finally {
                    leave(); // the last use, maybe this one, unmaps
                }
            }
        }
    }

    /** Counts a use of the mapping, which stays until every use is over; fails once closed. */
    private void enter() {
        if (!uses.enter()) {
            throw new IllegalStateException("holder handle is closed");
        }
    }

    private void leave() {
        uses.leave();
    }

    /** Runs once, when nothing uses the handle any more (no acquire in flight can record a new pin). */
    private void unmap() {
        try {
            for (int slot = 0; slot < seen.length(); slot++) {
                Seen known = seen.getAndSet(slot, null);
                if (known != null) {
                    try {
                        known.unpin();
                    } catch (IllegalStateException contextClosedFirst) {
                        // its refshare context was closed before this handle and unmapped everything already
                    }
                }
            }
        } finally {
            shm.close();
        }
    }

    /**
     * A description for logs.
     *
     * @return the holder's name, and whether this handle created it
     */
    @Override
    public String toString() {
        return "SharedHolder[" + name() + (creator ? ", creator" : "") + "]";
    }
}
