package io.refshare.counter;

import io.refshare.InvalidDataException;
import io.refshare.RefshareException;
import io.refshare.shm.Libc;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

import static io.refshare.counter.CounterFileLayout.*;

/**
 * A shared-memory file of reference tokens (see {@link CounterFileLayout}), owned by the
 * process that created it and mapped once by every process that holds one of its tokens.
 *
 * <h2>Implementation notes</h2>
 * A token's life is FREE &rarr; IN_FLIGHT (owner, {@link #handOut}) &rarr; HELD by one peer
 * ({@link #claim}) &rarr; RELEASED ({@link #release}); or IN_FLIGHT &rarr; RELEASED when an
 * undelivered message is returned ({@link #cancel}); or HELD &rarr; RELEASED by
 * {@link #releaseAllHeldBy} once the holder is dead. Each arrow is a single compare-and-set on the
 * slot word, so of two racing transitions out of one state exactly one succeeds: a token
 * is never claimed twice, never released twice, and no count can go below zero.
 * <p>
 * Memory ordering: the VarHandle compare-and-set and getAndAdd have volatile semantics,
 * which on a shared mapping order them with all other accesses of this process. A
 * release is a CAS whose volatile write follows every read the releasing process made of
 * the block, so when the owner observes RELEASED (volatile read) and reuses the block, no
 * read of the old contents can be outstanding. Writes of the owner to a block before
 * handing out its token happen-before the consumer's claim observing IN_FLIGHT.
 * <p>
 * Only the owner writes the header's handed-out count and flags (plain ordered writes),
 * other processes only read them. Peer entries are claimed with a CAS of their pid word.
 */
public final class CounterFile implements AutoCloseable {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final ShmFile file;
    private final MemorySegment mem;
    private final int slotCapacity;
    private final int peerCapacity;
    private final long slotsOffset;
    private final ProcessIdentity owner;
    private volatile int selfPeer = -1;

    private CounterFile(ShmFile file, int slotCapacity, int peerCapacity, ProcessIdentity owner) {
        this.file = file;
        this.mem = file.segment();
        this.slotCapacity = slotCapacity;
        this.peerCapacity = peerCapacity;
        this.slotsOffset = slotsOffset(peerCapacity);
        this.owner = owner;
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
        m.set(ValueLayout.JAVA_INT_UNALIGNED, VERSION_OFFSET, VERSION);
        m.set(ValueLayout.JAVA_INT_UNALIGNED, HEADER_LENGTH_OFFSET, HEADER_LENGTH);
        m.set(ValueLayout.JAVA_LONG, OWNER_PID_OFFSET, me.pid());
        m.set(ValueLayout.JAVA_LONG, OWNER_START_OFFSET, me.startTicks());
        m.set(ValueLayout.JAVA_INT_UNALIGNED, SLOT_CAPACITY_OFFSET, slotCapacity);
        m.set(ValueLayout.JAVA_INT_UNALIGNED, PEER_CAPACITY_OFFSET, peerCapacity);
        // the magic goes last: a reader never sees a valid magic over a half-written header
        LONG.setRelease(m, MAGIC_OFFSET, MAGIC);
        return new CounterFile(f, slotCapacity, peerCapacity, me);
    }

    /** Opens a counter file by a name from outside; its header is checked before any use. */
    public static CounterFile open(ShmDirectory dir, String name) {
        ShmFile f = dir.open(name, ShmKind.COUNTERS, HEADER_LENGTH);
        try {
            MemorySegment m = f.segment();
            long magic = (long) LONG.getAcquire(m, MAGIC_OFFSET);
            if (magic != MAGIC) {
                throw new InvalidDataException(f.path() + " is not a refshare counter file (magic 0x"
                        + Long.toHexString(magic) + ")");
            }
            int version = m.get(ValueLayout.JAVA_INT_UNALIGNED, VERSION_OFFSET);
            if (version != VERSION) {
                throw new InvalidDataException(f.path() + " has counter layout version " + version
                        + "; this refshare reads version " + VERSION);
            }
            int headerLength = m.get(ValueLayout.JAVA_INT_UNALIGNED, HEADER_LENGTH_OFFSET);
            int slots = m.get(ValueLayout.JAVA_INT_UNALIGNED, SLOT_CAPACITY_OFFSET);
            int peers = m.get(ValueLayout.JAVA_INT_UNALIGNED, PEER_CAPACITY_OFFSET);
            if (headerLength != HEADER_LENGTH || slots < 1 || slots > MAX_SLOTS || peers < 1 || peers > MAX_PEERS) {
                throw new InvalidDataException(f.path() + " has a corrupt header: header length " + headerLength
                        + ", " + slots + " slots, " + peers + " peers");
            }
            if (f.size() != fileLength(slots, peers)) {
                throw new InvalidDataException(f.path() + " is " + f.size() + " bytes but its header describes "
                        + fileLength(slots, peers) + " (truncated or corrupt)");
            }
            long ownerPid = m.get(ValueLayout.JAVA_LONG, OWNER_PID_OFFSET);
            long ownerStart = m.get(ValueLayout.JAVA_LONG, OWNER_START_OFFSET);
            if (ownerPid <= 0 || ownerPid > Integer.MAX_VALUE || ownerStart < 0) {
                throw new InvalidDataException(f.path() + " names an impossible owner pid " + ownerPid);
            }
            return new CounterFile(f, slots, peers, new ProcessIdentity(ownerPid, ownerStart));
        } catch (RuntimeException e) {
            f.close();
            throw e;
        }
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

    /** Slots handed out so far. */
    public int handedOut() {
        // only the owner writes it, but anyone of this uid can write the file: callers loop up
        // to it over the slots, so a corrupt count must not lead them past the last slot
        return Math.clamp((long) LONG.getAcquire(mem, HANDED_OUT_OFFSET), 0, slotCapacity);
    }

    public boolean isRetired() {
        return ((long) LONG.getAcquire(mem, FLAGS_OFFSET) & FLAG_RETIRED) != 0;
    }

    /** Releases recorded in this file by all processes. */
    public long releases() {
        return (long) LONG.getVolatile(mem, RELEASES_OFFSET);
    }

    /**
     * Owner only, one thread at a time: hands out the next slot as an IN_FLIGHT token.
     * Returns -1 when the file is full; it is then retired.
     */
    public int handOut() {
        requireOwner();
        int slot = handedOut();
        if (slot >= slotCapacity) {
            retire();
            return -1;
        }
        if (!LONG.compareAndSet(mem, slotOffset(slot), (long) FREE, (long) IN_FLIGHT)) {
            throw new IllegalStateException(this + ": slot " + slot + " was not free (file corrupted by another process)");
        }
        LONG.setRelease(mem, HANDED_OUT_OFFSET, (long) slot + 1);
        if (slot + 1 == slotCapacity) {
            retire();
        }
        return slot;
    }

    /** Owner only: hands out no more slots from this file. */
    public void retire() {
        requireOwner();
        LONG.getAndBitwiseOr(mem, FLAGS_OFFSET, FLAG_RETIRED);
    }

    /** Takes an IN_FLIGHT token for this process. False when it is not in flight (already taken or returned). */
    public boolean claim(int slot) {
        return LONG.compareAndSet(mem, slotOffset(checkSlot(slot)), (long) IN_FLIGHT, held(selfPeer()));
    }

    /** Releases a token this process holds. False when this process does not hold it. */
    public boolean release(int slot) {
        if (LONG.compareAndSet(mem, slotOffset(checkSlot(slot)), held(selfPeer()), (long) RELEASED)) {
            released();
            return true;
        }
        return false;
    }

    /** Counts a release and wakes the owner's collector if it sleeps on this file. */
    private void released() {
        LONG.getAndAdd(mem, RELEASES_OFFSET, 1L);
        // the getAndAdd above is a full fence: either the collector sees the new count before
        // it sleeps (futex compares it), or we see its waiting flag here and wake it
        if ((long) LONG.getVolatile(mem, COLLECTOR_WAITING_OFFSET) != 0) {
            Libc.futexWake(mem.asSlice(RELEASES_OFFSET, 4), Integer.MAX_VALUE);
        }
    }

    /**
     * Owner's collector: sleeps until a release is recorded after {@code seen} (a value of
     * {@link #releases()}), at most {@code timeoutNanos}. Returns at once if one already was.
     */
    public void awaitRelease(long seen, long timeoutNanos) {
        LONG.setVolatile(mem, COLLECTOR_WAITING_OFFSET, 1L);
        try {
            if (releases() == seen) {
                Libc.futexWait(mem.asSlice(RELEASES_OFFSET, 4), (int) seen, timeoutNanos);
            }
        } finally {
            LONG.setVolatile(mem, COLLECTOR_WAITING_OFFSET, 0L);
        }
    }

    /** Returns an undelivered (IN_FLIGHT) token. False when someone already claimed or returned it. */
    public boolean cancel(int slot) {
        if (LONG.compareAndSet(mem, slotOffset(checkSlot(slot)), (long) IN_FLIGHT, (long) RELEASED)) {
            released();
            return true;
        }
        return false;
    }

    /** True once the token in {@code slot} is released (or returned). */
    public boolean isReleased(int slot) {
        return state(slot) == RELEASED;
    }

    /** The state of a slot's token: {@link CounterFileLayout#FREE} .. {@link CounterFileLayout#RELEASED}. */
    public int state(int slot) {
        return CounterFileLayout.state((long) LONG.getVolatile(mem, slotOffset(checkSlot(slot))));
    }

    /** The process holding the token in {@code slot}, if it is held. */
    public ProcessIdentity holder(int slot) {
        int peer = CounterFileLayout.holder((long) LONG.getVolatile(mem, slotOffset(checkSlot(slot))));
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
     * Releases every token {@code holder} holds in this file and answers how many. Used to
     * reclaim the tokens of a dead process, and by a process giving back what it still
     * holds as it shuts down. Exact: each token moves by CAS from HELD(holder) to RELEASED,
     * so racing callers (or the holder's own release) never count one twice.
     */
    public int releaseAllHeldBy(ProcessIdentity holder) {
        int count = 0;
        for (int peer = 0; peer < peerCapacity; peer++) {
            if (holder.equals(peerOrNull(peer))) {
                long word = held(peer);
                int n = handedOut();
                for (int s = 0; s < n; s++) {
                    if (LONG.compareAndSet(mem, slotOffset(s), word, (long) RELEASED)) {
                        released();
                        count++;
                    }
                }
            }
        }
        return count;
    }

    /** Tokens {@code holder} holds in this file now. */
    public int heldBy(ProcessIdentity holder) {
        int count = 0;
        for (int peer = 0; peer < peerCapacity; peer++) {
            if ((long) LONG.getVolatile(mem, peerOffset(peer)) == 0) {
                break; // entries are claimed in order
            }
            if (holder.equals(peerOrNull(peer))) {
                long word = held(peer);
                int n = handedOut();
                for (int s = 0; s < n; s++) {
                    if ((long) LONG.getVolatile(mem, slotOffset(s)) == word) {
                        count++;
                    }
                }
            }
        }
        return count;
    }

    /** The processes holding at least one token of this file now (alive or not). */
    public java.util.Set<ProcessIdentity> currentHolders() {
        java.util.BitSet peers = new java.util.BitSet();
        int n = handedOut();
        for (int s = 0; s < n; s++) {
            int peer = CounterFileLayout.holder((long) LONG.getVolatile(mem, slotOffset(s)));
            if (peer >= 0 && peer < peerCapacity) {
                peers.set(peer);
            }
        }
        java.util.Set<ProcessIdentity> holders = new java.util.HashSet<>();
        peers.stream().mapToObj(this::peerOrNull).filter(java.util.Objects::nonNull).forEach(holders::add);
        return holders;
    }

    /** The processes registered as holders in this file (alive or not), in registration order. */
    public java.util.List<ProcessIdentity> holders() {
        java.util.List<ProcessIdentity> list = new java.util.ArrayList<>();
        for (int peer = 0; peer < peerCapacity; peer++) {
            if ((long) LONG.getVolatile(mem, peerOffset(peer)) == 0) {
                break; // entries are claimed in order
            }
            ProcessIdentity p = peerOrNull(peer);
            if (p != null) {
                list.add(p);
            }
        }
        return list;
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

    /** This process's peer index in this file, registering it on first use. */
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
        for (int peer = 0; peer < peerCapacity; peer++) {
            long off = peerOffset(peer);
            long pid = (long) LONG.getVolatile(mem, off);
            if (pid == me.pid() && (long) LONG.getVolatile(mem, off + 8) == me.startTicks()) {
                return selfPeer = peer;
            }
            if (pid == 0 && LONG.compareAndSet(mem, off, 0L, me.pid())) {
                LONG.setVolatile(mem, off + 8, me.startTicks());
                return selfPeer = peer;
            }
        }
        throw new RefshareException(this + ": all " + peerCapacity + " peer entries are taken; too many processes hold"
                + " tokens of one producer file");
    }

    private int checkSlot(int slot) {
        if (slot < 0 || slot >= slotCapacity) {
            throw new InvalidDataException(this + ": slot " + slot + " is out of range 0.." + (slotCapacity - 1));
        }
        return slot;
    }

    private long slotOffset(int slot) {
        return slotsOffset + (long) slot * SLOT_LENGTH;
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

    @Override
    public String toString() {
        return "counter file " + file.name();
    }
}
