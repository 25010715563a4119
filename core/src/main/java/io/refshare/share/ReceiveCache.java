package io.refshare.share;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.counter.CounterFile;
import io.refshare.memory.HostBackend;
import io.refshare.observe.Events;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What the receiving side of this process keeps mapped: each sender's segment once, and
 * each sender's counter file once, for as long as this process holds one of its tokens or
 * the sender may still hand out more from it (the file is not retired; a retired file is left
 * within a housekeeping round of the last release, {@link #leaveIdleRetired}). Nothing is
 * mapped or opened per message or per release, and a release reads nothing the sender writes.
 *
 * <p>A segment whose last received block closed stays mapped while idle, because the
 * sender pools its segments and the next message most likely lies in the same one:
 * mapping and unmapping a segment costs tens of microseconds, which would dwarf the cost
 * of the message itself. Idle mappings are bounded ({@value #MAX_IDLE_SEGMENTS}, least
 * recently used go first) and dropped by {@link #dropIdleRemoved()} (the housekeeper runs
 * it every 100 ms) once the sender has removed the file, so they never keep a freed
 * segment's memory alive for long. The bound is generous because an idle mapping costs only
 * address space and the page-table entries of the pages read (the descriptor was closed
 * after mapping): a sender's pool of 1 MiB blocks spans tens of 4 MiB segments, and with a
 * bound of 64 two such senders already overflowed it, so that every message unmapped one
 * segment and mapped another (`refshare bench --scaling`, 1 MiB: two producers into one
 * consumer fell to 0.21× of one, four to 0.09×; with 1,024, 0.92× and 1.05×).
 */
final class ReceiveCache {
    private static final byte[] NO_HANDLE = new byte[0];

    /** A segment mapped in this process and the number of open blocks that use it. */
    static final class Mapping implements ReceivedSegment {
        private final ShmFile file;
        private final MemorySegment readOnly;
        private int users;
        /** When it last became idle, on the cache's clock; meaningless while it has users. */
        private long idleSince;

        Mapping(ShmFile file) {
            this.file = file;
            this.readOnly = file.segment().asReadOnly();
        }

        ShmFile file() {
            return file;
        }

        @Override
        public String name() {
            return file.name();
        }

        @Override
        public long size() {
            return file.size();
        }

        @Override
        public Backend backend() {
            return Backend.HOST;
        }

        @Override
        public MemorySegment hostMemory() {
            return file.segment();
        }

        @Override
        public MemorySegment readOnlyHostMemory() {
            return readOnly;
        }

        @Override
        public long deviceAddress() {
            throw new UnsupportedOperationException("segment " + file.name() + " is host memory");
        }

        @Override
        public byte[] memoryHandle() {
            return NO_HANDLE;
        }
    }

    private static final class OpenCounters {
        final CounterFile file;
        int tokens;

        OpenCounters(CounterFile file) {
            this.file = file;
        }
    }

    private static final System.Logger LOG = System.getLogger(ReceiveCache.class.getName());
    static final int MAX_IDLE_SEGMENTS = 1024;
    private final ShmDirectory directory;
    /** Idle mappings kept at most ({@link #MAX_IDLE_SEGMENTS}; tests use fewer). */
    private final int maxIdle;

    private final Map<String, Mapping> segments = new HashMap<>();
    /** Mapped segments no open block uses. */
    private int idle;
    /** Set by {@link #close}: releases after it find their mappings gone. */
    private boolean closed;
    /** Counts the times a segment became idle: orders them for eviction, least recently used first. */
    private long clock;
    /** Written under the lock; read without it only by {@link #heldCounters}, for a file whose token the reader holds. */
    private final Map<String, OpenCounters> counters = new ConcurrentHashMap<>();

    ReceiveCache(ShmDirectory directory) {
        this(directory, MAX_IDLE_SEGMENTS);
    }

    ReceiveCache(ShmDirectory directory, int maxIdle) {
        this.directory = directory;
        this.maxIdle = maxIdle;
    }

    /**
     * The counter file of this name, mapped once, counting one more token held from it. For a
     * cancel, which may come after the close (a queue closed after its context returns the
     * messages it still holds).
     */
    synchronized CounterFile holdCounters(String name) {
        return hold(name);
    }

    /**
     * {@link #holdCounters} for a device block's receive, refused once the cache closed, as
     * {@link #holdAndMap} is for a host block's.
     *
     * @throws IllegalStateException once the cache closed
     */
    synchronized CounterFile holdCountersToReceive(String name) {
        requireOpen();
        return hold(name);
    }

    private void requireOpen() {
        if (closed) {
            throw new IllegalStateException("refshare context is closed");
        }
    }

    private CounterFile hold(String name) {
        OpenCounters c = counters.get(name);
        if (c == null) {
            c = new OpenCounters(CounterFile.open(directory, name));
            counters.put(name, c);
        }
        c.tokens++;
        return c.file;
    }

    /**
     * For a host block's receive, under one taking of the lock (a small tensor's receive and
     * release took it three times): {@link #holdCounters} of {@code d}'s counter file, the check that
     * its owner is {@code d}'s sender, then {@link #mapSegment} of {@code d}'s segment. On a
     * failure nothing stays held or mapped. The counter file is {@link #heldCounters}.
     *
     * @throws IllegalStateException once the cache closed: a receive that raced its context's
     *         close would otherwise map into the cleared cache and claim a token that its tensor,
     *         born detached, never gives back
     */
    synchronized Mapping holdAndMap(Descriptor d) {
        requireOpen();
        CounterFile file = hold(d.counterFileName());
        try {
            Sharing.checkSender(file, d);
            return map(d.segmentName(), d.segmentSize(), d.offset());
        } catch (RuntimeException | OutOfMemoryError e) {
            // a segment cut while map opened it is one too (ShmFile.checkOrClose); a full heap leaves nothing held
            dropToken(file);
            throw e;
        }
    }

    /** The counter file of this name, which the caller holds a token of (so it stays): no lock taken. */
    CounterFile heldCounters(String name) {
        OpenCounters c = counters.get(name);
        if (c == null) {
            throw new IllegalStateException("refshare was closed during a receive from " + name);
        }
        return c.file;
    }

    /** Undoes {@link #holdCounters} for a token that was not taken after all. */
    synchronized void unholdCounters(CounterFile file) {
        dropToken(file);
    }

    /** The segment of this name, mapped once, with one more user. */
    synchronized Mapping mapSegment(String name, long expectedSize, long offset) {
        return map(name, expectedSize, offset);
    }

    private Mapping map(String name, long expectedSize, long offset) {
        if (offset < HostBackend.HEADER_BYTES) {
            throw new InvalidDataException("offset " + offset + " points into the header of segment " + name);
        }
        Mapping m = segments.get(name);
        if (m == null) {
            ShmFile f = directory.open(name, ShmKind.SEGMENT, expectedSize).checkOrClose(opened -> {
                if (opened.size() != expectedSize) {
                    throw new InvalidDataException("segment " + name + " is " + opened.size() + " bytes, the descriptor"
                            + " says " + expectedSize);
                }
                HostBackend.checkHeader(opened.segment(), name);
                return opened;
            });
            m = new Mapping(f);
            segments.put(name, m);
        } else if (m.file.size() != expectedSize) {
            throw new InvalidDataException("segment " + name + " is " + m.file.size() + " bytes, the descriptor says "
                    + expectedSize);
        }
        if (m.users++ == 0 && m.idleSince > 0) {
            idle--;
        }
        return m;
    }

    /**
     * Releases a received token (the {@code slot} of {@code counters}) and drops one user of its
     * mapping, both under one taking of the lock: this runs for every received block closed.
     */
    void release(CounterFile counters, int slot, Mapping mapping) {
        try {
            giveBack(counters, slot);
        } finally {
            synchronized (this) {
                try {
                    dropToken(counters);
                } finally {
                    dropUser(mapping);
                }
            }
        }
    }

    /** Releases a received token whose memory this cache did not map (device memory). */
    void releaseToken(CounterFile counters, int slot) {
        try {
            giveBack(counters, slot);
        } finally {
            synchronized (this) {
                dropToken(counters);
            }
        }
    }

    /**
     * Puts a token this process claimed but never used back in flight ({@link CounterFile#unclaim}),
     * for the message's next receiver; its memory was unmapped or closed first.
     */
    void unclaimToken(CounterFile counters, int slot) {
        try {
            if (!counters.unclaim(slot)) {
                LOG.log(System.Logger.Level.WARNING, "token {0} of {1} was no longer held by this process", slot,
                        counters);
            }
        } catch (RuntimeException | InternalError e) {
            LOG.log(System.Logger.Level.WARNING, "cannot put token " + slot + " of " + counters
                    + " back in flight: the file is damaged", e);
        } finally {
            synchronized (this) {
                dropToken(counters);
            }
        }
    }

    /** Moves the token to RELEASED in the sender's file; a damaged file or a token no longer ours is logged. */
    private static void giveBack(CounterFile counters, int slot) {
        Events.Release event = new Events.Release();
        if (event.shouldCommit()) {
            event.counterFile = counters.name();
            event.slot = slot;
            event.commit();
        }
        try {
            if (!counters.release(slot)) { // a fault on a cut file is thrown inside release, not later
                // reclaimed after we were judged dead, or a corrupted slot: nothing to give back
                LOG.log(System.Logger.Level.WARNING, "token {0} of {1} was no longer held by this process", slot,
                        counters);
            }
        } catch (RuntimeException | InternalError e) {
            // the sender's file was truncated or broken by another process: nothing to give back
            LOG.log(System.Logger.Level.WARNING, "cannot release token " + slot + " of " + counters
                    + ": the file is damaged", e);
        }
    }

    synchronized void unmapSegment(Mapping m) {
        dropUser(m);
    }

    private void dropUser(Mapping m) {
        if (closed) {
            return; // a release after the close (the leak detector's, or one that raced it): unmapped already
        }
        if (--m.users == 0) {
            m.idleSince = ++clock; // no allocation: a segment goes idle and back with every message
            if (++idle > maxIdle) {
                unmap(leastRecentlyIdle());
            }
        }
    }

    private Mapping leastRecentlyIdle() {
        Mapping oldest = null;
        for (Mapping m : segments.values()) {
            if (m.users == 0 && (oldest == null || m.idleSince < oldest.idleSince)) {
                oldest = m;
            }
        }
        return oldest;
    }

    /**
     * Unmaps the idle segments whose sender removed the file; returns how many. The files are
     * looked up without the lock, so receives never wait for those system calls (one per idle
     * mapping, up to a thousand every round); a segment received again meanwhile stays.
     */
    int dropIdleRemoved() {
        List<Mapping> idleNow;
        synchronized (this) {
            idleNow = segments.values().stream().filter(m -> m.users == 0).toList();
        }
        List<Mapping> removed = idleNow.stream()
                .filter(m -> !Files.exists(m.file.path(), LinkOption.NOFOLLOW_LINKS)).toList();
        int dropped = 0;
        synchronized (this) {
            for (Mapping m : removed) {
                if (m.users == 0 && segments.get(m.name()) == m) {
                    unmap(m);
                    dropped++;
                }
            }
        }
        return dropped;
    }

    /** Unmaps an idle segment. */
    private void unmap(Mapping m) {
        idle--;
        segments.remove(m.file.name());
        m.file.close();
    }

    /**
     * One token fewer held from {@code file}. A file this process then holds none of stays
     * mapped, whether or not its sender still hands out from it: {@link #leaveIdleRetired}
     * leaves it later. Asking here would read the sender's retired flag at every release, and
     * that word shares its cache line with the count the sender writes at every hand-out: a
     * line moved between the two processes per message (eight consumers of fresh 1 KiB tensors
     * moved 0.77 M tensors/s without that read against 0.68 M with it, five alternated runs
     * on two CPUs).
     */
    private void dropToken(CounterFile file) {
        OpenCounters c = counters.get(file.name());
        if (c != null) {
            c.tokens--;
        }
    }

    /**
     * Leaves the counter files this process holds no token of and whose sender hands out no
     * more from them (retired, or unreadable): frees its peer entry there and unmaps them;
     * returns how many. The housekeeper runs it every round, so a retired file is left within
     * a round of its last release. The flags are read without the lock; a file received from
     * again meanwhile stays.
     */
    int leaveIdleRetired() {
        List<OpenCounters> idleNow;
        synchronized (this) {
            idleNow = counters.values().stream().filter(c -> c.tokens == 0).toList();
        }
        List<OpenCounters> retired = idleNow.stream().filter(c -> retiredOrBroken(c.file)).toList();
        int left = 0;
        synchronized (this) {
            for (OpenCounters c : retired) {
                if (c.tokens == 0 && counters.get(c.file.name()) == c) {
                    counters.remove(c.file.name());
                    leave(c.file, false); // its token count says this process holds none of the file's tokens
                    c.file.close();
                    left++;
                }
            }
        }
        return left;
    }

    private static boolean retiredOrBroken(CounterFile file) {
        try {
            return file.isRetired();
        } catch (RuntimeException | InternalError e) {
            return true; // unreadable: nothing more will come from it
        }
    }

    /**
     * Leaves {@code file} cleanly, first giving back what this process still holds of it when
     * {@code mayHoldTokens}; returns the tokens given back. A damaged file is left as it is.
     */
    private static int leave(CounterFile file, boolean mayHoldTokens) {
        try {
            if (!mayHoldTokens) {
                file.leaveHoldingNone();
                return 0;
            }
            return file.leave();
        } catch (RuntimeException | InternalError e) {
            LOG.log(System.Logger.Level.WARNING, "cannot leave " + file + " cleanly: the file is damaged", e);
            return 0;
        }
    }

    synchronized int mappedSegments() {
        return segments.size();
    }

    synchronized int mappedCounterFiles() {
        return counters.size();
    }

    /**
     * Gives back every token this process still holds, frees its peer entries in the
     * senders' counter files, and unmaps everything; blocks still open in this process
     * become unusable. Returns the tokens given back.
     */
    synchronized int close() {
        closed = true;
        int released = 0;
        for (OpenCounters c : counters.values()) {
            released += leave(c.file, true);
        }
        segments.values().forEach(m -> m.file.close());
        // a release racing the close may be in its wake-up of the sender's collector, a system
        // call on the file's mapping (it waits for this lock after it): the unmap waits for it
        counters.values().forEach(c -> c.file.closeAfterCalls());
        segments.clear();
        idle = 0;
        counters.clear();
        return released;
    }
}
