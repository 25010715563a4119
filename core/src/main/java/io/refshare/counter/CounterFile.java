package io.refshare.counter;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.shm.Libc;
import io.refshare.shm.LifeFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.LittleEndian;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.shm.Verdict;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import java.util.function.ObjIntConsumer;
import java.util.stream.Stream;

import static io.refshare.counter.CounterFileLayout.*;

/**
 * A shared-memory file of reference tokens (see {@link CounterFileLayout}), owned by the
 * process that created it and mapped once by every process that holds one of its tokens.
 *
 * <h2>Implementation notes</h2>
 * A token's life is FREE &rarr; IN_FLIGHT (owner, {@link #handOut}) &rarr; HELD by one peer
 * ({@link #claim}) &rarr; RELEASED ({@link #release}); or HELD &rarr; IN_FLIGHT again when the
 * holder cannot finish the receive its claim began ({@link #unclaim}); or IN_FLIGHT &rarr;
 * RELEASED when an undelivered message is returned ({@link #cancel}); or HELD &rarr; RELEASED by
 * {@link #releaseAllHeldBy} / {@link #reclaimDeadPeers} once the holder is dead, or by
 * {@link #leave} when it goes. Each arrow is a single compare-and-set of the slot word, so of
 * two racing transitions out of one state exactly one succeeds: a token is never claimed
 * twice, never released twice, and no count can go below zero. The word's upper half, the
 * {@link RangeTag}, is set at hand-out and kept by every later transition; a claim must
 * present it.
 * <p>
 * Memory ordering: the VarHandle compare-and-set and getAndAdd have volatile semantics,
 * which on a shared mapping order them with all other accesses of this process. A
 * release is a CAS whose volatile write follows every read the releasing process made of
 * the block, so when the owner observes RELEASED (volatile read) and reuses the block, no
 * read of the old contents can be outstanding. Writes of the owner to a block before
 * handing out its token happen-before the consumer's claim observing IN_FLIGHT.
 * <p>
 * Peer entries are recycled (see the layout): a process registers once per instance of
 * this class (two instances in one process get two entries, so neither frees the other's
 * entry while tokens are still held through it), leaves with {@link #leave}, and the owner
 * frees the entries of dead peers in {@link #reclaimDeadPeers}. The owner does not trust
 * what other processes can write: it counts the slots it handed out in its own memory, and
 * {@link #isReturned} reports a slot word that no legal transition produces as damage.
 */
public final class CounterFile implements AutoCloseable {
    private static final VarHandle LONG = LittleEndian.ATOMIC_LONG;

    private final ShmDirectory directory;
    private final ShmFile file;
    private final MemorySegment mem;
    private final int slotCapacity;
    private final int peerCapacity;
    private final ProcessIdentity owner;
    private final Tokens tokens;
    /** Owner only: slots handed out, counted here rather than trusted from the shared header. */
    private int nextSlot;
    private volatile int selfPeer = -1;

    private CounterFile(ShmDirectory directory, ShmFile file, int slotCapacity, int peerCapacity,
                        ProcessIdentity owner) {
        this.directory = directory;
        this.file = file;
        this.mem = file.segment();
        this.slotCapacity = slotCapacity;
        this.peerCapacity = peerCapacity;
        this.owner = owner;
        this.tokens = new Tokens(mem, slotsOffset(peerCapacity));
    }

    /** Creates a counter file owned by this process. */
    public static CounterFile create(ShmDirectory dir, int slotCapacity, int peerCapacity) {
        if (slotCapacity < 1 || slotCapacity > MAX_SLOTS) {
            throw new IllegalArgumentException("slot capacity must be in 1.." + MAX_SLOTS + ": " + slotCapacity);
        }
        if (peerCapacity < 1 || peerCapacity > MAX_PEERS) {
            throw new IllegalArgumentException("peer capacity must be in 1.." + MAX_PEERS + ": " + peerCapacity);
        }
        ShmFile f = dir.create(ShmKind.COUNTERS, fileLength(slotCapacity, peerCapacity));
        MemorySegment m = f.segment();
        ProcessIdentity me = ProcessIdentity.current();
        FileHeader.write(m, VERSION, HEADER_LENGTH, me);
        m.set(LittleEndian.INT, SLOT_CAPACITY_OFFSET, slotCapacity);
        m.set(LittleEndian.INT, PEER_CAPACITY_OFFSET, peerCapacity);
        FileHeader.publish(m, MAGIC);
        return new CounterFile(dir, f, slotCapacity, peerCapacity, me);
    }

    /** Opens a counter file by a name from outside; its header is checked before any use. */
    public static CounterFile open(ShmDirectory dir, String name) {
        return dir.open(name, ShmKind.COUNTERS, HEADER_LENGTH).checkOrClose(f -> {
            MemorySegment m = f.segment();
            ProcessIdentity owner = FileHeader.check(m, MAGIC, VERSION, "counter file", f.path()).owner();
            int headerLength = m.get(LittleEndian.INT, HEADER_LENGTH_OFFSET);
            int slots = m.get(LittleEndian.INT, SLOT_CAPACITY_OFFSET);
            int peers = m.get(LittleEndian.INT, PEER_CAPACITY_OFFSET);
            if (headerLength != HEADER_LENGTH || slots < 1 || slots > MAX_SLOTS || peers < 1 || peers > MAX_PEERS) {
                throw new InvalidDataException(f.path() + " has a corrupt header: header length " + headerLength
                        + ", " + slots + " slots, " + peers + " peers");
            }
            if (f.size() != fileLength(slots, peers)) {
                throw new InvalidDataException(f.path() + " is " + f.size() + " bytes but its header describes "
                        + fileLength(slots, peers) + " (truncated or corrupt)");
            }
            return new CounterFile(dir, f, slots, peers, owner);
        });
    }

    public String name() {
        return file.name();
    }

    public ProcessIdentity owner() {
        return owner;
    }

    public boolean ownedByMe() {
        return file.created();
    }

    public int slotCapacity() {
        return slotCapacity;
    }

    public int peerCapacity() {
        return peerCapacity;
    }

    /**
     * Slots handed out so far: the owner's own count; for other processes the header's word,
     * clamped, since anyone of this uid can write it and callers loop up to it over the slots.
     */
    public int handedOut() {
        if (file.created()) {
            return nextSlot;
        }
        return Math.clamp((long) LONG.getAcquire(mem, HANDED_OUT_OFFSET), 0, slotCapacity);
    }

    public boolean isRetired() {
        return ((long) LONG.getAcquire(mem, FLAGS_OFFSET) & FLAG_RETIRED) != 0;
    }

    /** Releases recorded in this file by all processes. */
    public long releases() {
        return tokens.releases();
    }

    /**
     * Owner only, one thread at a time: hands out the next slot as an IN_FLIGHT token bound to
     * the block whose {@link RangeTag} is {@code tag}. Returns -1 when the file is full; it is
     * then retired.
     *
     * @throws InvalidDataException when the next slot is not free: another process wrote
     *                              into the file, which is then unusable (the caller retires it)
     */
    public int handOut(int tag) {
        requireOwner();
        int slot = nextSlot;
        if (slot >= slotCapacity) {
            retire();
            return -1;
        }
        long found = tokens.handOut(slot, tag);
        if (found != FREE) {
            Libc.deliverPendingFault(); // see orPendingFault
            throw new InvalidDataException(this + " is damaged: slot " + slot + " was not free (word 0x"
                    + Long.toHexString(found) + "), another process wrote into it");
        }
        nextSlot = slot + 1;
        LONG.setRelease(mem, HANDED_OUT_OFFSET, (long) slot + 1);
        if (slot + 1 == slotCapacity) {
            retire();
        }
        return slot;
    }

    /** {@link #handOut(int)} with the tag 0: for tools and benchmarks of the counter alone. */
    public int handOut() {
        return handOut(0);
    }

    /** Owner only: hands out no more slots from this file. */
    public void retire() {
        requireOwner();
        LONG.getVolatile(mem, FLAGS_OFFSET); // guarded read first: see compareAndSet
        LONG.getAndBitwiseOr(mem, FLAGS_OFFSET, FLAG_RETIRED);
    }

    /**
     * Takes an IN_FLIGHT token handed out for the range of tag {@code tag} for this process
     * (registering it in the peer table on first use). False when it is not in flight (already
     * taken or returned) or was handed out for another range.
     *
     * @throws io.refshare.exceptions.ResourceLimitException when this process is not registered yet and
     *                                            every peer entry is taken
     */
    public boolean claim(int slot, int tag) {
        // registers in the peer table only for a token that can be claimed
        return orPendingFault(tokens.word(checkSlot(slot)) == word(IN_FLIGHT, tag)
                && tokens.claim(slot, tag, selfPeer()));
    }

    /** {@link #claim(int, int)} of a token handed out by {@link #handOut()} (tag 0). */
    public boolean claim(int slot) {
        return claim(slot, 0);
    }

    /**
     * Gives back a claim this process made through this instance and cannot finish (out of
     * memory, a limit reached, its context closing), before anything in this process used the
     * memory: the token is in flight again, for the message's next receiver. Nothing is counted.
     * False when this process does not hold it.
     */
    public boolean unclaim(int slot) {
        checkSlot(slot);
        int peer = selfPeer;
        return orPendingFault(peer >= 0 && tokens.unclaim(slot, peer));
    }

    /** Releases a token this process holds through this instance. False when it does not hold it. */
    public boolean release(int slot) {
        checkSlot(slot);
        int peer = selfPeer;
        return orPendingFault(peer >= 0 && tokens.release(slot, peer));
    }

    /**
     * Owner's collector: sleeps until a release is recorded after {@code seen} (a value of
     * {@link #releases()}), at most {@code timeoutNanos}. Returns at once if one already was.
     */
    public void awaitRelease(long seen, long timeoutNanos) {
        tokens.awaitRelease(seen, timeoutNanos);
    }

    /**
     * Returns an undelivered (IN_FLIGHT) token handed out for the range of tag {@code tag}.
     * False when someone already claimed or returned it, or it was handed out for another range.
     */
    public boolean cancel(int slot, int tag) {
        return orPendingFault(tokens.cancel(checkSlot(slot), tag));
    }

    /**
     * {@code done}, once a failed operation had the JVM throw here the fault that its read of a
     * page cut from the file left pending: compiled code gets such a fault as an
     * {@link InternalError} at its next safepoint check, not at the read (which goes on with a
     * wrong word, and the operation fails), so it would surface wherever the caller runs next
     * instead of in the caller's handler of damaged files ({@link Libc#deliverPendingFault}).
     * A success costs nothing.
     */
    private static boolean orPendingFault(boolean done) {
        if (!done) {
            Libc.deliverPendingFault();
        }
        return done;
    }

    /** {@link #cancel(int, int)} of a token handed out by {@link #handOut()} (tag 0). */
    public boolean cancel(int slot) {
        return cancel(slot, 0);
    }

    /** True once the token in {@code slot} is released (or returned). */
    public boolean isReleased(int slot) {
        return state(slot) == RELEASED;
    }

    /**
     * Owner: true once the token it handed out in {@code slot} for tag {@code tag} came back,
     * false while it is in flight or held.
     *
     * @throws InvalidDataException when the slot holds a word no legal transition of that token
     *                              produces (another tag, FREE, an unknown state, a holder
     *                              outside the peer table): the file was damaged
     */
    public boolean isReturned(int slot, int tag) {
        long w = tokens.word(checkSlot(slot));
        if (CounterFileLayout.tag(w) == tag) {
            int st = CounterFileLayout.state(w);
            int holder = CounterFileLayout.holder(w);
            if (w == word(RELEASED, tag)) {
                return true;
            }
            if (w == word(IN_FLIGHT, tag) || (st == HELD && holder >= 0 && holder < peerCapacity)) {
                return false;
            }
        }
        throw new InvalidDataException(this + " is damaged: slot " + slot + " holds 0x" + Long.toHexString(w)
                + ", which no token handed out with tag 0x" + Integer.toHexString(tag) + " can hold");
    }

    /** The state of a slot's token: {@link CounterFileLayout#FREE} .. {@link CounterFileLayout#RELEASED}. */
    public int state(int slot) {
        return CounterFileLayout.state(tokens.word(checkSlot(slot)));
    }

    /** The range tag of the token in {@code slot} (0 while it is FREE). */
    public int tag(int slot) {
        return CounterFileLayout.tag(tokens.word(checkSlot(slot)));
    }

    /** The process holding the token in {@code slot}, if it is held. */
    public ProcessIdentity holder(int slot) {
        int peer = CounterFileLayout.holder(tokens.word(checkSlot(slot)));
        return peer < 0 ? null : peer(peer);
    }

    /** Tokens handed out and not yet released. */
    public int live() {
        int live = 0;
        int n = handedOut();
        for (int s = 0; s < n; s++) {
            int st = state(s);
            if (st == IN_FLIGHT || st == HELD) {
                live++;
            }
        }
        return live;
    }

    /**
     * Releases every token {@code holder} holds in this file and answers how many: the
     * owner reclaiming a dead process's tokens. Exact: each token moves by CAS from
     * HELD(holder) to RELEASED, so racing callers (or the holder's own release) never count
     * one twice. Leaves the holder's entries in place (see {@link #reclaimDeadPeers}).
     */
    public int releaseAllHeldBy(ProcessIdentity holder) {
        int count = 0;
        for (int peer = 0; peer < peerCapacity; peer++) {
            if (holder.equals(peerOrNull(peer))) {
                count += releaseHeldBy(peer);
            }
        }
        return count;
    }

    private int releaseHeldBy(int peer) {
        return tokens.releaseAllHeldBy(peer, handedOut());
    }

    /**
     * This process leaves the file cleanly: releases every token it still holds through this
     * instance, then frees its peer entry (start word, then pid word) for another process.
     * Returns the tokens released. The caller guarantees that no claim through this instance
     * runs concurrently; a later claim registers again.
     */
    public synchronized int leave() {
        return leave(true);
    }

    /**
     * As {@link #leave()}, for a caller whose own count of the tokens it holds from this file
     * is zero: the peer entry is freed without reading every slot for tokens to release (for a
     * file of 10,000 tokens, that scan was a tenth of a streaming consumer's work).
     */
    public synchronized void leaveHoldingNone() {
        leave(false);
    }

    private int leave(boolean releaseHeld) {
        int peer = selfPeer;
        if (peer < 0) {
            return 0;
        }
        int released = releaseHeld ? releaseHeldBy(peer) : 0;
        long off = peerOffset(peer);
        LONG.setVolatile(mem, off + 8, 0L);
        LONG.setVolatile(mem, off, 0L);
        selfPeer = -1;
        return released;
    }

    /**
     * Owner only, from the one thread that serialises dead-peer reclamation (the collector,
     * under its pool's lock): for every peer that is DEAD by the directory's verdict,
     * releases its tokens, then frees its entry; frees entries left registering by a process
     * of which no life file is held any more. UNKNOWN counts as alive: it costs a leak, never
     * a use of freed memory. Each reclaimed peer with tokens is reported to {@code onReclaim}.
     * Returns the tokens released.
     */
    public int reclaimDeadPeers(ObjIntConsumer<ProcessIdentity> onReclaim) {
        return reclaimDeadPeers(directory::verdict, onReclaim);
    }

    /**
     * {@link #reclaimDeadPeers(ObjIntConsumer)} with the verdicts taken from {@code verdicts}
     * instead of the life files: for an owner that judged the peers of many files beforehand,
     * each process once (a verdict opens and locks a life file).
     */
    public int reclaimDeadPeers(Function<ProcessIdentity, Verdict> verdicts, ObjIntConsumer<ProcessIdentity> onReclaim) {
        requireOwner();
        int count = 0;
        for (int peer = 0; peer < peerCapacity; peer++) {
            long off = peerOffset(peer);
            long pid = (long) LONG.getVolatile(mem, off);
            if (pid <= 0) {
                continue; // free, or garbage that no process can own: left alone
            }
            long start = (long) LONG.getVolatile(mem, off + 8);
            if (start == 0) {
                if (registrantGone(pid) && (long) LONG.getVolatile(mem, off + 8) == 0) {
                    compareAndSet(off, pid, 0L);
                }
                continue;
            }
            ProcessIdentity id = new ProcessIdentity(pid, start);
            if (verdicts.apply(id) != Verdict.DEAD) {
                continue;
            }
            int n = releaseHeldBy(peer);
            count += n;
            if (n > 0) {
                onReclaim.accept(id, n);
            }
            // DEAD is final: nobody else writes this entry until it is free again
            LONG.setVolatile(mem, off + 8, 0L);
            compareAndSet(off, pid, 0L);
        }
        return count;
    }

    /**
     * Whether a registrant of {@code pid} that wrote its pid but not its start can no longer
     * finish: it held its life lock before the pid, so while it runs some life file of that
     * pid in the directory is locked. Gone when none is ALIVE or UNKNOWN.
     */
    private boolean registrantGone(long pid) {
        String anyStart = LifeFile.name(directory, new ProcessIdentity(pid, 0));
        String lifePrefix = anyStart.substring(0, anyStart.length() - 16); // the name ends with 16 hex digits of start
        try (Stream<Path> names = Files.list(directory.path())) {
            return names.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith(lifePrefix) && n.length() == lifePrefix.length() + 16)
                    .map(n -> lifeIdentity(pid, n.substring(lifePrefix.length())))
                    .allMatch(id -> id != null && directory.verdict(id) == Verdict.DEAD);
        } catch (IOException | UncheckedIOException e) {
            return false;
        }
    }

    private static ProcessIdentity lifeIdentity(long pid, String startHex) {
        try {
            return new ProcessIdentity(pid, Long.parseUnsignedLong(startHex, 16));
        } catch (NumberFormatException e) {
            return null; // not a life file's name: no evidence
        }
    }

    /** Tokens {@code holder} holds in this file now. */
    public int heldBy(ProcessIdentity holder) {
        int count = 0;
        for (int peer = 0; peer < peerCapacity; peer++) {
            if (holder.equals(peerOrNull(peer))) {
                long low = held(peer);
                int n = handedOut();
                for (int s = 0; s < n; s++) {
                    if (low(tokens.word(s)) == low) {
                        count++;
                    }
                }
            }
        }
        return count;
    }

    /** The processes holding at least one token of this file now (alive or not). */
    public Set<ProcessIdentity> currentHolders() {
        BitSet peers = new BitSet();
        int n = handedOut();
        for (int s = 0; s < n; s++) {
            int peer = CounterFileLayout.holder(tokens.word(s));
            if (peer >= 0 && peer < peerCapacity) {
                peers.set(peer);
            }
        }
        Set<ProcessIdentity> holders = new HashSet<>();
        peers.stream().mapToObj(this::peerOrNull).filter(Objects::nonNull).forEach(holders::add);
        return holders;
    }

    /** The processes registered in this file's peer table now (alive or not), in table order. */
    public List<ProcessIdentity> holders() {
        List<ProcessIdentity> list = new ArrayList<>();
        for (int peer = 0; peer < peerCapacity; peer++) {
            ProcessIdentity p = peerOrNull(peer);
            if (p != null) {
                list.add(p);
            }
        }
        return list;
    }

    /**
     * Whether a peer entry is being registered now (its pid written, its start not yet), or
     * was left so by a process that died registering: {@link #reclaimDeadPeers} frees such an
     * entry once no life file of that pid is held.
     */
    public boolean anyPeerRegistering() {
        for (int peer = 0; peer < peerCapacity; peer++) {
            long off = peerOffset(peer);
            if ((long) LONG.getVolatile(mem, off) > 0 && (long) LONG.getVolatile(mem, off + 8) == 0) {
                return true;
            }
        }
        return false;
    }

    /** Peer entries not free (registered or registering) now. */
    public int peersInUse() {
        int used = 0;
        for (int peer = 0; peer < peerCapacity; peer++) {
            if ((long) LONG.getVolatile(mem, peerOffset(peer)) != 0) {
                used++;
            }
        }
        return used;
    }

    /** The identity recorded in peer entry {@code peer}, or null when the entry is empty or being registered. */
    public ProcessIdentity peerOrNull(int peer) {
        long pid = (long) LONG.getVolatile(mem, peerOffset(peer));
        long start = (long) LONG.getVolatile(mem, peerOffset(peer) + 8);
        return pid > 0 && start > 0 ? new ProcessIdentity(pid, start) : null;
    }

    private ProcessIdentity peer(int peer) {
        if (peer < 0 || peer >= peerCapacity) {
            throw new InvalidDataException(this + ": holder peer " + peer + " is out of range (corrupt slot)");
        }
        return peerOrNull(peer);
    }

    /** This instance's peer index in this file, registering this process on first use. */
    private int selfPeer() {
        int p = selfPeer;
        if (p < 0) {
            p = register(ProcessIdentity.current());
        }
        return p;
    }

    private synchronized int register(ProcessIdentity me) {
        if (selfPeer >= 0) {
            return selfPeer;
        }
        // the life lock before the identity is written: from now on the owner can tell
        // whether we run (and a pid without start ticks is never taken for dead while we do)
        directory.holdLifeLock();
        for (int peer = 0; peer < peerCapacity; peer++) {
            long off = peerOffset(peer);
            if (compareAndSet(off, 0L, me.pid())) {
                LONG.setVolatile(mem, off + 8, me.startTicks());
                return selfPeer = peer;
            }
        }
        throw new ResourceLimitException("all " + peerCapacity + " peer entries of " + this + " (owner " + owner
                + ") are held by live processes, or by dead ones its owner has not reclaimed yet; the producer raises"
                + " the limit with RefshareConfig.withPeersPerCounterFile (this file has " + peerCapacity + ")");
    }

    private boolean compareAndSet(long off, long expected, long next) {
        return Tokens.guardedCompareAndSet(mem, off, expected, next);
    }

    private int checkSlot(int slot) {
        if (slot < 0 || slot >= slotCapacity) {
            throw new InvalidDataException(this + ": slot " + slot + " is out of range 0.." + (slotCapacity - 1));
        }
        return slot;
    }

    private void requireOwner() {
        if (!file.created()) {
            throw new IllegalStateException(this + " is owned by " + owner + "; only its owner hands out slots");
        }
    }

    /** Removes the file's name (owner, once every token is released). */
    public void unlink() {
        file.unlink();
    }

    /** Unmaps this file in this process. */
    @Override
    public void close() {
        file.close();
    }

    /** Unmaps this file unless a thread of this process is inside a system call on it (see {@link ShmFile#closeUnlessInUse}). */
    public boolean closeUnlessInUse() {
        return file.closeUnlessInUse();
    }

    /** Unmaps this file once no thread of this process is inside a system call on it (see {@link ShmFile#closeAfterCalls}). */
    public void closeAfterCalls() {
        file.closeAfterCalls();
    }

    /** False once this process unmapped the file. */
    public boolean isMapped() {
        return file.isMapped();
    }

    @Override
    public String toString() {
        return "counter file " + file.name();
    }
}
