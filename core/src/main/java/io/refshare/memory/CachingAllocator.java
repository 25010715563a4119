package io.refshare.memory;

import io.refshare.stats.AllocatorStats;
import io.refshare.exceptions.OutOfSharedMemoryException;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A size-classed caching allocator over the segments of a {@link SegmentBackend}: segments
 * are created rarely and kept, blocks are carved from them and recycled, so a steady
 * workload creates no files and takes no page faults after warm-up.
 *
 * <h2>Size classes</h2>
 * <ul>
 * <li><b>Small</b> requests (up to {@value #MAX_SMALL_BYTES} bytes) are rounded up to a power
 * of two of at least {@value #MIN_BLOCK_BYTES} bytes and carved by a buddy allocator from
 * shared {@value #SMALL_SEGMENT_BYTES}-byte segments; blocks of every small class share those
 * segments, and a segment whose blocks are all free merges back into one chunk.</li>
 * <li><b>Large</b> requests get a segment of their own, rounded up to a multiple of
 * {@value #LARGE_GRANULE_BYTES} bytes. A freed large segment is cached and handed to a later
 * request whose rounded size it covers without wasting more than half of it (a cached
 * segment of {@code s} bytes serves a rounded request {@code r} when {@code r <= s <= 2r});
 * the smallest such segment is taken.</li>
 * </ul>
 * Every block offset is a multiple of {@value #BLOCK_ALIGNMENT} (small blocks are aligned to
 * their class, large blocks start at 0), and segments start page-aligned.
 *
 * <h2>Misses, growth and the cap</h2>
 * When no cached block fits, the allocator runs the <em>miss handler</em> given at
 * construction (the share layer passes "collect the limbo", which frees blocks whose
 * consumers are done), retries the cache, and only then creates a segment. If that would
 * take the bytes held in segments over the cap, or the backend reports that the memory is
 * exhausted ({@link OutOfSharedMemoryException} from a full {@code /dev/shm}), it first gives
 * every cached free segment back (cached large segments and wholly free small segments)
 * and tries once more; if that is not enough it throws {@link OutOfSharedMemoryException}.
 * The allocator is unharmed by such a failure and serves the next request normally.
 *
 * <h2>Implementation notes</h2>
 * All bookkeeping (buddy bitmaps, the large-segment cache, the set of large segments in use,
 * the byte totals and counters, each block's {@code freed} flag) is guarded by one
 * {@link ReentrantLock}, held only for short in-memory work.
 * <p><b>Lock ordering.</b> Three things are never done while holding the lock: running the
 * miss handler, {@link SegmentBackend#create} and {@link SegmentBackend#free}. The miss handler
 * may call {@link #free} on this allocator from the same thread, and may take locks of its own
 * (the limbo's) that other threads hold while they call {@link #free}; calling it under our
 * lock would invert that order and deadlock, which is how PyTorch's CUDA allocator deadlocked
 * when it freed shared blocks under its own mutex. The backend calls are slow (file creation,
 * page reservation, unmapping) and would stall every allocating thread. {@link #free} and
 * {@link #freeAll} never call out: they only update the bookkeeping, so they are safe from any
 * context, including the miss handler and the limbo's own lock.
 * <p><b>Growth without the lock.</b> A thread that grows first <em>reserves</em> the new
 * segment's bytes under the lock ({@code reservedBytes}), so concurrent growers cannot
 * together pass the cap; it then creates the segment unlocked and registers it under the lock,
 * taking its block in the same critical section so no other thread can steal it. Segments
 * given back (trimming, cap pressure, close) are first detached from the bookkeeping under the
 * lock, so no thread can hand out a block from them, and then freed unlocked. Invariant, at
 * every unlock: {@code heldBytes} is the sum of the sizes of the segments in
 * {@code smallSegments}, {@code largeInUse} and {@code largeCache}, and
 * {@code heldBytes + reservedBytes <= cap} (given a backend that returns segments of exactly
 * the size asked for, as {@link HostBackend} does).
 * <p>The miss handler runs at most once per {@link #allocate} call, possibly on several
 * threads at once (it must be thread-safe). An {@link #allocate} made by the miss handler
 * itself does not run it again (no recursion).
 * <p><b>Close.</b> {@link #close} detaches everything under the lock and frees it unlocked. A
 * grower that comes back with a new segment after close frees it and fails with
 * {@link IllegalStateException}; {@link #free} of a block after close only marks it freed.
 */
public final class CachingAllocator implements AutoCloseable {
    /** Smallest block: small requests are rounded up to a power of two of at least this. */
    public static final long MIN_BLOCK_BYTES = 1L << BuddySegment.MIN_SHIFT;
    /** Largest request served from shared small-block segments. */
    public static final long MAX_SMALL_BYTES = 1L << 20;
    /** Size of the segments small blocks are carved from. */
    public static final long SMALL_SEGMENT_BYTES = BuddySegment.SEGMENT_BYTES;
    /** Large segments are a multiple of this. */
    public static final long LARGE_GRANULE_BYTES = 2L << 20;
    /** Every block offset is a multiple of this (enough for any atomic and for cache-line alignment). */
    public static final long BLOCK_ALIGNMENT = MIN_BLOCK_BYTES;
    /** The default cap: no limit but the backend's. */
    public static final long UNLIMITED = Long.MAX_VALUE;
    /** Largest request accepted; keeps the rounding arithmetic far from overflow. */
    public static final long MAX_REQUEST_BYTES = 1L << 50;

    private static final System.Logger LOG = System.getLogger(CachingAllocator.class.getName());

    private final SegmentBackend backend;
    private final Runnable missHandler;
    private final long cap;
    private final ThreadLocal<Boolean> inMissHandler = ThreadLocal.withInitial(() -> Boolean.FALSE);

    private final ReentrantLock lock = new ReentrantLock();
    // ---- guarded by lock ----
    private final List<BuddySegment> smallSegments = new ArrayList<>();
    /**
     * The segment a small block last came from or went back to: it usually has a free chunk
     * of exactly the size a stream of same-sized blocks asks for next, found without walking
     * the list (dozens of segments when blocks wait for many consumers). Null when none.
     */
    private BuddySegment recentSmall;
    private final Set<Segment> largeInUse = Collections.newSetFromMap(new IdentityHashMap<>());
    /** Cached free large segments by size. */
    private final TreeMap<Long, ArrayDeque<Segment>> largeCache = new TreeMap<>();
    private int largeCached;
    private long heldBytes;
    private long reservedBytes;
    private long blocksInUse;
    private long bytesInUse;
    private long allocations;
    private long reuses;
    private long segmentCreations;
    private long segmentReleases;
    private long missHandlerCalls;
    /** Written under the lock; volatile so blocks can check validity without it. */
    private volatile boolean closed;

    /** An allocator with no miss handler and no cap. */
    public CachingAllocator(SegmentBackend backend) {
        this(backend, () -> {
        }, UNLIMITED);
    }

    /** An allocator with no cap. */
    public CachingAllocator(SegmentBackend backend, Runnable missHandler) {
        this(backend, missHandler, UNLIMITED);
    }

    /**
     * @param backend     where segments come from; segments are freed through it on trim and close
     * @param missHandler run (without any allocator lock held) when no cached block fits, before growing;
     *                    it may call {@link #free} re-entrantly and must be thread-safe
     * @param capBytes    the most bytes this allocator may hold in segments, {@link #UNLIMITED} for none
     */
    public CachingAllocator(SegmentBackend backend, Runnable missHandler, long capBytes) {
        this.backend = Objects.requireNonNull(backend, "backend");
        this.missHandler = Objects.requireNonNull(missHandler, "missHandler");
        if (capBytes <= 0) {
            throw new IllegalArgumentException("cap must be positive (or UNLIMITED): " + capBytes);
        }
        this.cap = capBytes;
    }

    /**
     * The bytes a request of {@code bytes} occupies: a power of two of at least
     * {@value #MIN_BLOCK_BYTES} up to {@value #MAX_SMALL_BYTES}, a multiple of
     * {@value #LARGE_GRANULE_BYTES} above.
     */
    public static long sizeClassOf(long bytes) {
        checkRequest(bytes);
        if (bytes <= MAX_SMALL_BYTES) {
            return Math.max(MIN_BLOCK_BYTES, bytes <= 1 ? 1 : Long.highestOneBit(bytes - 1) << 1);
        }
        return (bytes + LARGE_GRANULE_BYTES - 1) / LARGE_GRANULE_BYTES * LARGE_GRANULE_BYTES;
    }

    /**
     * Allocates a block of {@code bytes} bytes (zero is allowed and takes the smallest class).
     * Its contents are whatever the previous user left there.
     *
     * @throws OutOfSharedMemoryException when the cap or the backend's memory is exhausted even after the
     *                                    miss handler ran and cached segments were given back
     * @throws RuntimeException           whatever the miss handler throws, unchanged (nothing is allocated)
     * @throws IllegalStateException      when the allocator is closed
     * @throws IllegalArgumentException   when {@code bytes} is negative or above {@link #MAX_REQUEST_BYTES}
     */
    public AllocatedBlock allocate(long bytes) {
        long blockBytes = sizeClassOf(bytes);
        AllocatedBlock block = takeCached(bytes, blockBytes);
        if (block != null) {
            return block;
        }
        runMissHandler();
        block = takeCached(bytes, blockBytes);
        if (block != null) {
            return block;
        }
        return grow(bytes, blockBytes);
    }

    /**
     * Returns a block to the cache. Never calls the backend or the miss handler, so it may be
     * called from anywhere, including the miss handler. After {@link #close} it only marks the
     * block freed (its memory is already gone).
     *
     * @throws IllegalArgumentException when the block belongs to another allocator
     * @throws IllegalStateException    when the block was freed already
     */
    public void free(AllocatedBlock block) {
        checkOwnBlock(block);
        lock.lock();
        try {
            freeLocked(block);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Returns {@code blocks} to the cache as {@link #free} returns each, under one taking of the
     * lock: a collector that frees a pass's worth of blocks keeps a thread that allocates
     * meanwhile waiting once, not once per block. Every block that can be freed is; the first
     * failure is thrown after the last block, later ones added to it as suppressed.
     *
     * @throws IllegalArgumentException when a block belongs to another allocator
     * @throws IllegalStateException    when a block was freed already
     */
    public void freeAll(List<AllocatedBlock> blocks) {
        RuntimeException failure = null;
        lock.lock();
        try {
            for (AllocatedBlock block : blocks) {
                try {
                    checkOwnBlock(block);
                    freeLocked(block);
                } catch (IllegalArgumentException | IllegalStateException | NullPointerException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        } finally {
            lock.unlock();
        }
        if (failure != null) {
            throw failure;
        }
    }

    private void checkOwnBlock(AllocatedBlock block) {
        Objects.requireNonNull(block, "block");
        if (block.owner != this) {
            throw new IllegalArgumentException("block " + block + " was not allocated by this allocator");
        }
    }

    private void freeLocked(AllocatedBlock block) {
        if (block.freed) {
            throw new IllegalStateException("double free of block " + block);
        }
        block.freed = true;
        if (closed) {
            return;
        }
        blocksInUse--;
        bytesInUse -= block.length();
        if (block.small != null) {
            block.small.release(block.offset(), block.order);
            recentSmall = block.small;
        } else {
            Segment segment = block.segment();
            if (!largeInUse.remove(segment)) {
                throw new IllegalStateException("large block " + block + " has no segment in use (bookkeeping corrupted)");
            }
            largeCache.computeIfAbsent(segment.size(), size -> new ArrayDeque<>()).push(segment);
            largeCached++;
        }
    }

    /**
     * Gives every cached free segment back to the backend (cached large segments, and small
     * segments none of whose blocks is allocated); blocks in use are unaffected.
     *
     * @return the bytes given back
     */
    public long releaseCached() {
        List<Segment> released;
        lock.lock();
        try {
            checkOpen();
            released = detachCachedLocked();
        } finally {
            lock.unlock();
        }
        return freeSegments(released);
    }

    public AllocatorStats stats() {
        lock.lock();
        try {
            long freeBlocks = largeCached;
            for (BuddySegment s : smallSegments) {
                freeBlocks += s.freeChunks();
            }
            return new AllocatorStats(Math.toIntExact(smallSegments.size() + largeInUse.size() + largeCached), heldBytes, blocksInUse,
                    bytesInUse, freeBlocks, cap, allocations, reuses, segmentCreations, segmentReleases,
                    missHandlerCalls);
        } finally {
            lock.unlock();
        }
    }

    public long cap() {
        return cap;
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Frees every segment, in use or cached. Blocks still allocated become invalid: their
     * {@link AllocatedBlock#memory()} throws, segments obtained from them throw on access,
     * and other processes lose the names (mappings they already hold stay valid). Idempotent.
     */
    @Override
    public void close() {
        List<Segment> all = new ArrayList<>();
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            for (BuddySegment s : smallSegments) {
                all.add(s.segment());
            }
            all.addAll(largeInUse);
            largeCache.values().forEach(all::addAll);
            smallSegments.clear();
            recentSmall = null;
            largeInUse.clear();
            largeCache.clear();
            largeCached = 0;
            heldBytes = 0;
            blocksInUse = 0;
            bytesInUse = 0;
        } finally {
            lock.unlock();
        }
        for (Segment segment : all) {
            freeQuietly(segment);
        }
    }

    @Override
    public String toString() {
        return "caching allocator over " + backend + " " + stats();
    }

    // ---------------------------------------------------------------------------------------

    private static void checkRequest(long bytes) {
        if (bytes < 0 || bytes > MAX_REQUEST_BYTES) {
            throw new IllegalArgumentException("cannot allocate " + bytes + " bytes: a request must be between 0 and "
                    + MAX_REQUEST_BYTES);
        }
    }

    /** A block from memory already held, or null. */
    private AllocatedBlock takeCached(long bytes, long blockBytes) {
        lock.lock();
        try {
            checkOpen();
            AllocatedBlock block = blockBytes <= MAX_SMALL_BYTES
                    ? carveSmallLocked(bytes, blockBytes)
                    : reuseLargeLocked(bytes, blockBytes);
            if (block != null) {
                reuses++;
                countAllocationLocked(block);
            }
            return block;
        } finally {
            lock.unlock();
        }
    }

    /** Best fit across segments: the one whose smallest sufficient free chunk is smallest, to keep big chunks whole. */
    private AllocatedBlock carveSmallLocked(long bytes, long blockBytes) {
        int order = BuddySegment.orderOf(blockBytes);
        BuddySegment best = null;
        if (recentSmall != null && recentSmall.smallestFreeOrder(order) == order) {
            best = recentSmall; // an exact fit: no segment fits better
        } else {
            int bestOrder = Integer.MAX_VALUE;
            for (BuddySegment s : smallSegments) {
                int o = s.smallestFreeOrder(order);
                if (o >= 0 && o < bestOrder) {
                    best = s;
                    bestOrder = o;
                    if (o == order) {
                        break;
                    }
                }
            }
        }
        if (best == null) {
            return null;
        }
        long offset = best.allocate(order);
        recentSmall = best;
        return new AllocatedBlock(this, best.segment(), best, order, offset, bytes);
    }

    private AllocatedBlock reuseLargeLocked(long bytes, long blockBytes) {
        Map.Entry<Long, ArrayDeque<Segment>> fit = largeCache.ceilingEntry(blockBytes);
        if (fit == null || fit.getKey() / 2 > blockBytes) {
            return null;
        }
        Segment segment = fit.getValue().pop();
        if (fit.getValue().isEmpty()) {
            largeCache.remove(fit.getKey());
        }
        largeCached--;
        largeInUse.add(segment);
        return new AllocatedBlock(this, segment, null, -1, 0, bytes);
    }

    private void countAllocationLocked(AllocatedBlock block) {
        allocations++;
        blocksInUse++;
        bytesInUse += block.length();
    }

    private void runMissHandler() {
        if (inMissHandler.get()) {
            return;
        }
        assert !lock.isHeldByCurrentThread() : "the miss handler must never run under the allocator lock";
        lock.lock();
        try {
            missHandlerCalls++;
        } finally {
            lock.unlock();
        }
        inMissHandler.set(Boolean.TRUE);
        try {
            missHandler.run();
        } finally {
            inMissHandler.remove();
        }
    }

    /** Creates a segment for this request (reserving its bytes against the cap first) and carves the block from it. */
    private AllocatedBlock grow(long bytes, long blockBytes) {
        boolean small = blockBytes <= MAX_SMALL_BYTES;
        long segmentBytes = small ? SMALL_SEGMENT_BYTES : blockBytes;
        reserve(bytes, segmentBytes);
        Segment segment = null;
        try {
            segment = createWithOneRetry(segmentBytes);
        } finally {
            if (segment == null) {
                unreserve(segmentBytes);
            }
        }
        AllocatedBlock block = null;
        lock.lock();
        try {
            reservedBytes -= segmentBytes;
            if (!closed) {
                heldBytes += segment.size();
                segmentCreations++;
                if (small) {
                    BuddySegment buddy = new BuddySegment(segment);
                    smallSegments.add(buddy);
                    recentSmall = buddy;
                    int order = BuddySegment.orderOf(blockBytes);
                    block = new AllocatedBlock(this, segment, buddy, order, buddy.allocate(order), bytes);
                } else {
                    largeInUse.add(segment);
                    block = new AllocatedBlock(this, segment, null, -1, 0, bytes);
                }
                countAllocationLocked(block);
            }
        } finally {
            lock.unlock();
        }
        if (block == null) {
            freeQuietly(segment);
            throw closedException();
        }
        return block;
    }

    /** Reserves room under the cap, giving cached segments back if that makes room; throws when nothing does. */
    private void reserve(long bytes, long segmentBytes) {
        List<Segment> released = List.of();
        String overCap = null;
        lock.lock();
        try {
            checkOpen();
            if (!fitsLocked(segmentBytes)) {
                released = detachCachedLocked();
                if (!fitsLocked(segmentBytes)) {
                    overCap = "shared memory cap reached: cap " + cap + " bytes, request " + bytes
                            + " bytes needs a new " + segmentBytes + "-byte segment, but " + heldBytes
                            + " bytes are held in segments" + (reservedBytes > 0 ? " (+" + reservedBytes
                            + " being created)" : "") + " with " + bytesInUse + " bytes in use by " + blocksInUse
                            + " blocks; the miss handler ran and cached free segments were released";
                }
            }
            if (overCap == null) {
                reservedBytes += segmentBytes;
            }
        } finally {
            lock.unlock();
        }
        freeSegments(released);
        if (overCap != null) {
            throw new OutOfSharedMemoryException(overCap);
        }
    }

    private void unreserve(long segmentBytes) {
        lock.lock();
        try {
            reservedBytes -= segmentBytes;
        } finally {
            lock.unlock();
        }
    }

    /** A full backend (ENOSPC in /dev/shm) gets one more try after the cache is given back. */
    private Segment createWithOneRetry(long segmentBytes) {
        try {
            return backend.create(segmentBytes);
        } catch (OutOfSharedMemoryException full) {
            List<Segment> released;
            lock.lock();
            try {
                released = closed ? List.of() : detachCachedLocked();
            } finally {
                lock.unlock();
            }
            if (released.isEmpty()) {
                throw full;
            }
            freeSegments(released);
            try {
                return backend.create(segmentBytes);
            } catch (RuntimeException again) {
                again.addSuppressed(full);
                throw again;
            }
        }
    }

    private boolean fitsLocked(long segmentBytes) {
        return segmentBytes <= cap - heldBytes - reservedBytes;
    }

    /** Removes every cached large segment and every unused small segment from the bookkeeping; the caller frees them unlocked. */
    private List<Segment> detachCachedLocked() {
        List<Segment> detached = new ArrayList<>();
        largeCache.values().forEach(detached::addAll);
        largeCache.clear();
        largeCached = 0;
        smallSegments.removeIf(s -> {
            if (s.isUnused()) {
                if (s == recentSmall) {
                    recentSmall = null;
                }
                detached.add(s.segment());
                return true;
            }
            return false;
        });
        for (Segment s : detached) {
            heldBytes -= s.size();
        }
        segmentReleases += detached.size();
        return detached;
    }

    private long freeSegments(List<Segment> segments) {
        long bytes = 0;
        for (Segment s : segments) {
            bytes += s.size();
            freeQuietly(s);
        }
        return bytes;
    }

    /** A segment that cannot be freed is logged, not thrown: it is already out of the bookkeeping, and the caller's work (an allocation, a close) should go on. */
    private void freeQuietly(Segment segment) {
        assert !lock.isHeldByCurrentThread() : "backend calls must never run under the allocator lock";
        try {
            backend.free(segment);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot free segment " + segment.name() + ": " + e.getMessage(), e);
        }
    }

    private void checkOpen() {
        if (closed) {
            throw closedException();
        }
    }

    private static IllegalStateException closedException() {
        return new IllegalStateException("the caching allocator is closed");
    }
}
