package io.refshare.share;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.ReceiveInterruptedException;
import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.counter.CounterFile;
import io.refshare.counter.CounterFileLayout;
import io.refshare.counter.RangeTag;
import io.refshare.stats.RefshareStats;
import io.refshare.memory.CachingAllocator;
import io.refshare.memory.HostBackend;
import io.refshare.observe.Events;
import io.refshare.shm.HandleUses;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Uninterruptibly;
import io.refshare.shm.Verdict;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import io.refshare.wire.HostEncoder;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;

/**
 * One process's sharing engine: it allocates blocks, hands out a token for every send,
 * keeps dropped-but-still-used blocks in the {@link Limbo}, and turns descriptors from
 * other processes into {@link ReceivedBlock}s.
 *
 * <p>The limbo is collected when the allocator finds no free block (before it grows), on
 * {@link #collect()}, and by the background {@link Collector}, which a consumer's release
 * wakes (a dropped block's own tokens are looked at when it is dropped, protocol.md 12.4):
 * an idle producer gets its memory back as soon as its consumers let go, and the references
 * of consumers that died are reclaimed within a fraction of a second.
 *
 * <p>Device memory (CUDA) goes through a {@link DeviceSharing}, created on first use by the
 * factory given at construction, so a process that never touches the device never loads a
 * driver. Tokens, the limbo and collection are the same for both kinds of memory.
 */
public final class Sharing implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Sharing.class.getName());
    private static final byte[] NO_EVENT = new byte[0];
    /** The longest an allocation's miss waits for blocks another thread's collection is freeing. */
    static final long MISS_SETTLE_MILLIS = 10;

    private final ShmDirectory directory;
    private final CachingAllocator allocator;
    private final CounterFilePool counterFiles;
    private final ReceiveCache receiveCache;
    private final Limbo limbo;
    private final ProcessIdentity self = ProcessIdentity.current();
    private final StatusFile status;
    private final Thread collector;
    private final Thread housekeeper;
    /** Range tags of blocks received lately, by segment name, offset and length (see {@link #rangeTag}). */
    private final KnownTag[] knownTags = new KnownTag[64];
    /** The segment names encoded last for a sent block and for a received one: see {@link AsciiNames}. */
    private final AsciiNames sentNames = new AsciiNames();
    private final AsciiNames receivedNames = new AsciiNames();
    private final LongAdder received = new LongAdder();
    private final LongAdder reclaimed = new LongAdder();
    private final Set<Runnable> housekeeping = ConcurrentHashMap.newKeySet();
    private final Set<Runnable> beforeClose = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;
    private volatile boolean statusDamaged;
    // ---- device memory: created on first use (see DeviceSharing) ----
    private final Function<Sharing, DeviceSharing> deviceFactory;
    private volatile DeviceSharing device;
    /** Device receives in progress: {@link #close} waits for them after ending their waits. */
    private final HandleUses deviceReceives = new HandleUses(() -> { });

    /** An engine for host memory only: {@link #device()} refuses. */
    public Sharing(ShmDirectory directory, long capacityBytes, int slotsPerFile, int peersPerFile) {
        this(directory, capacityBytes, slotsPerFile, peersPerFile, null);
    }

    /**
     * An engine whose device memory comes from {@code deviceFactory}, called once, on first
     * use (null: host memory only).
     */
    public Sharing(ShmDirectory directory, long capacityBytes, int slotsPerFile, int peersPerFile,
                   Function<Sharing, DeviceSharing> deviceFactory) {
        this.deviceFactory = deviceFactory;
        this.directory = directory;
        this.allocator = new CachingAllocator(new HostBackend(directory), this::collectOnMiss, capacityBytes);
        this.limbo = new Limbo(allocator);
        this.counterFiles = new CounterFilePool(directory, slotsPerFile, peersPerFile, this::wakeHousekeeper);
        this.receiveCache = new ReceiveCache(directory);
        this.status = StatusFile.create(directory);
        this.collector = Thread.ofPlatform().daemon().name("refshare-collector").start(new Collector(this));
        this.housekeeper = Thread.ofPlatform().daemon().name("refshare-housekeeper").start(new Housekeeper(this));
    }

    /** Ends the housekeeper's park early: the counter pool has files to make or unmap ({@link CounterFilePool#tidy}). */
    private void wakeHousekeeper() {
        LockSupport.unpark(housekeeper);
    }

    /**
     * Publishes this process's figures in its status file. A status file that fails (another
     * process truncated it: the mapping faults) is no longer written: logged once, the rest
     * of the housekeeper's work goes on.
     */
    void publishStatus() {
        if (statusDamaged) {
            return;
        }
        RefshareStats s = stats();
        try {
            publish(s);
        } catch (RuntimeException | InternalError e) {
            statusDamaged = true;
            LOG.log(System.Logger.Level.WARNING, "the status file of this process is damaged (truncated or written by"
                    + " another process?); it is no longer updated", e);
        }
    }

    private void publish(RefshareStats s) {
        status.publish(s.limboBlocks(), s.limboBytes(), s.allocator().segments(), s.allocator().segmentBytes(),
                s.allocator().blocksInUse(), s.allocator().bytesInUse(), s.ownCounterFiles(), s.mappedSegments(),
                s.mappedCounterFiles(), s.shared(), s.received(), s.collected());
    }

    void reclaimed(int references) {
        reclaimed.add(references);
    }

    Limbo limbo() {
        return limbo;
    }

    public ShmDirectory directory() {
        return directory;
    }

    /** A new block of at least {@code bytes} bytes (its length is exactly {@code bytes}). */
    public LocalBlock allocate(long bytes) {
        ensureOpen();
        return new LocalBlock(this, allocator, allocator.allocate(bytes), null);
    }

    /** A new block of device memory of at least {@code bytes} bytes (its length is exactly {@code bytes}). */
    public LocalBlock allocateOnDevice(long bytes) {
        ensureOpen();
        DeviceSharing d = device();
        return new LocalBlock(this, d.allocator(), d.allocator().allocate(bytes), d);
    }

    /**
     * The device half, created on first call.
     *
     * @throws RefshareException when this engine has no device support, or the device cannot
     *                           be used (no driver, no device: the factory's exception)
     */
    public DeviceSharing device() {
        DeviceSharing d = device;
        if (d == null) {
            synchronized (this) {
                ensureOpen();
                d = device;
                if (d == null) {
                    if (deviceFactory == null) {
                        throw new RefshareException("this refshare engine was created for host memory only");
                    }
                    device = d = deviceFactory.apply(this);
                }
            }
        }
        return d;
    }

    /**
     * Counts one more reference to {@code storage} for a message and describes it. The
     * reference stays counted until the receiver closes what it received, or until the
     * message is returned with {@link #cancel} if it is never received.
     */
    public Descriptor share(Storage storage, TensorLayout layout) {
        ensureOpen();
        layout.checkFits(storage.byteSize());
        storage.retain();
        try {
            Backend backend = storage.backend();
            // device ordering first: if it fails, no token has been handed out
            byte[] event = backend == Backend.CUDA ? device().orderForSend(storage) : NO_EVENT;
            long token = handOut(storage);
            return new Descriptor(backend, storage.segmentName(), storage.segmentSize(), storage.segmentOffset(),
                    storage.byteSize(), storage.memoryHandle(), counterFiles.file(token).name(),
                    CounterFilePool.slot(token), event, layout, self.pid(), self.startTicks());
        } finally {
            storage.release();
        }
    }

    /**
     * {@link #share} of host memory for a transport that writes the message at once, with no
     * descriptor object: answers the message's token, and {@link #encode} writes the message.
     * A message never delivered goes back with {@link #cancel(Storage, long)}.
     *
     * @throws IllegalArgumentException for device memory (its messages carry an event: use {@link #share})
     */
    public long shareHost(Storage storage, TensorLayout layout) {
        if (storage.backend() != Backend.HOST) {
            throw new IllegalArgumentException(storage + " is device memory");
        }
        ensureOpen();
        layout.checkFits(storage.byteSize());
        storage.retain();
        try {
            return handOut(storage);
        } finally {
            storage.release();
        }
    }

    /**
     * {@link #shareHost} of each of {@code storages[0..n)} with the layout of the same index,
     * the tokens into {@code tokens[0..n)}: what {@code n} calls do, with the counter pool's lock
     * taken once for all of them, and a storage that comes several times in a row held and
     * recorded once for the run (a batch of references to one tensor). {@code tags[0..n)} is
     * the caller's room for the blocks' range tags, so that a batch allocates nothing here.
     * When it throws, nothing is counted.
     *
     * @throws IllegalArgumentException for device memory
     */
    public void shareHostAll(Storage[] storages, TensorLayout[] layouts, int[] tags, long[] tokens, int n) {
        ensureOpen();
        for (int i = 0; i < n; i++) {
            if (storages[i].backend() != Backend.HOST) {
                throw new IllegalArgumentException(storages[i] + " is device memory");
            }
            layouts[i].checkFits(storages[i].byteSize());
        }
        int held = 0;
        try {
            for (int i = 0; i < n; i++) {
                if (startsRun(storages, i)) {
                    storages[i].retain(); // fails for a closed tensor: then nothing is handed out
                }
                held = i + 1;
                tags[i] = storages[i].sentBlock().tag();
            }
            counterFiles.handOutAll(tags, tokens, n);
            recordSent(storages, tokens, n);
        } finally {
            for (int i = 0; i < held; i++) {
                if (startsRun(storages, i)) {
                    storages[i].release();
                }
            }
        }
    }

    private static boolean startsRun(Storage[] storages, int i) {
        return i == 0 || storages[i] != storages[i - 1];
    }

    /** Records tokens handed out for {@code storages[0..n)} in their sent blocks, a run of one storage at once. */
    private void recordSent(Storage[] storages, long[] tokens, int n) {
        for (int start = 0, end; start < n; start = end) {
            for (end = start + 1; end < n && !startsRun(storages, end); end++) {
                // to the end of the run
            }
            storages[start].sentBlock().addAll(tokens, start, end - start);
        }
        for (int i = 0; i < n; i++) {
            sendEvent(storages[i], tokens[i]);
        }
    }

    /** Bytes {@link #encode} writes for the message of {@code token}. */
    public int encodedSize(Storage storage, TensorLayout layout, long token) {
        return DescriptorCodec.encodedHostSize(storage.sentBlock().segmentName().length,
                counterFiles.fileName(token).length, layout);
    }

    /**
     * Writes the message of {@code token} ({@link #shareHost}) at {@code offset} of {@code dst}:
     * the encoding {@link #share} would have described, through the calling thread's
     * {@code encoder}.
     */
    public void encode(Storage storage, TensorLayout layout, long token, MemorySegment dst, long offset,
                       HostEncoder encoder) {
        encoder.write(storage.sentBlock().segmentName(), storage.segmentSize(), storage.segmentOffset(),
                storage.byteSize(), counterFiles.fileName(token), CounterFilePool.slot(token), layout, self.pid(),
                self.startTicks(), dst, offset);
    }

    /**
     * Returns the reference of a message of {@link #shareHost} that was never delivered; false
     * once this context closed (its every token counts as back).
     */
    public boolean cancel(Storage storage, long token) {
        CounterFile counters = counterFiles.file(token);
        return counters != null && cancel(counters, CounterFilePool.slot(token), storage.sentBlock().tag());
    }

    /** Hands out a token for {@code storage} and records it as sent. */
    private long handOut(Storage storage) {
        // binds the token to this block's exact range, as the descriptor will carry it
        SentBlock sent = storage.sentBlock();
        long token = counterFiles.handOut(sent.tag());
        sent.add(token);
        sendEvent(storage, token);
        return token;
    }

    private void sendEvent(Storage storage, long token) {
        Events.Send event = new Events.Send();
        if (event.shouldCommit()) {
            event.segment = storage.segmentName();
            event.offset = storage.segmentOffset();
            event.length = storage.byteSize();
            event.counterFile = counterFiles.file(token).name();
            event.slot = CounterFilePool.slot(token);
            event.commit();
        }
    }

    /**
     * Takes the reference a descriptor carries and maps its memory. A descriptor can be
     * received once: a second attempt (here or in any process) fails without touching any
     * count, and so does one naming another range than its token was handed out for. Host
     * memory is checked and mapped before the token is taken; device memory is opened after
     * (so a stale descriptor never opens freed memory), and a device descriptor refused then
     * (its sender dead, a failed open) gives its token back, used up. A failure after the claim
     * that is not the message's fault (a resource limit, out of memory, this context closing)
     * puts the token back in flight instead: the descriptor can still be received.
     *
     * @throws io.refshare.exceptions.ResourceLimitException when this process cannot record itself in
     *         the sender's counter file (every peer entry taken), is out of open files or
     *         mappings, or (device memory) out of device memory to open the segment: nothing was
     *         consumed, the descriptor can be received later or by another process
     * @throws InvalidDataException when the descriptor does not match the sender's files
     * @throws RefshareException when the message was already received or returned, a device block's
     *         sender is dead, or a file is unusable
     * @throws IllegalStateException when this context is closed, also by a close that raced this
     *         receive: nothing was taken
     */
    public ReceivedBlock receive(Descriptor d) {
        return receive(d, d.slot());
    }

    /**
     * {@link #receive(Descriptor)} of the token in {@code slot} of a message of the block
     * {@code d} describes ({@code d}'s own slot is not looked at): a receiver's memo keeps one
     * descriptor per block, whatever slot each message carries.
     */
    public ReceivedBlock receive(Descriptor d, int slot) {
        ensureOpen();
        if (d.backend() != Backend.CUDA) {
            return receive(d, slot, null);
        }
        // the device half first: a process without a driver refuses before anything is taken
        DeviceSharing dev = device();
        // counted, so that a close, which ends the device waits, lets such a receive put its token
        // back before the counter files are left (a leave would release the claimed token)
        if (!deviceReceives.enter()) {
            throw new IllegalStateException("refshare context is closed");
        }
        try {
            return receive(d, slot, dev);
        } finally {
            deviceReceives.leave();
        }
    }

    private ReceivedBlock receive(Descriptor d, int slot, DeviceSharing dev) {
        int tag = rangeTag(d);
        CounterFile counters;
        ReceivedSegment mapping = null;
        if (dev == null) {
            // host memory outlives its sender: the counter file is held, its owner checked and the
            // segment mapped before the token is taken (one taking of the receive cache's lock), so a
            // rejected message costs no count; a failure here leaves nothing held
            mapping = receiveCache.holdAndMap(d);
            counters = receiveCache.heldCounters(d.counterFileName());
        } else {
            counters = receiveCache.holdCountersToReceive(d.counterFileName());
        }
        boolean claimed = false;
        try {
            if (dev != null) {
                checkSender(counters, d);
                // device memory is claimed before it is opened: while the token is ours the sender cannot
                // free the allocation nor destroy the event, so a stale descriptor (returned, received, its
                // block freed) never opens either. A descriptor refused after the claim (its sender dead, a
                // failed open) releases the token; a failure that is not the message's puts it back in flight.
                claimOrThrow(counters, slot, tag);
                claimed = true;
                refuseIfSenderDead(counters.owner(), d);
                mapping = dev.open(d);
            } else {
                claimOrThrow(counters, slot, tag);
                claimed = true;
            }
            received.increment();
            Events.Receive receipt = new Events.Receive();
            if (receipt.shouldCommit()) {
                receipt.segment = d.segmentName();
                receipt.length = d.length();
                receipt.senderPid = d.senderPid();
                receipt.slot = slot;
                receipt.commit();
            }
            return new ReceivedBlock(this, counters, slot, mapping, d.offset(), d.length());
        } catch (OutOfMemoryError e) {
            undoReceive(counters, slot, mapping, claimed, true, e);
            throw e;
        } catch (RuntimeException | InternalError failure) {
            // a fault on a sender's file that another process truncated: compiled code gets it as an
            // InternalError at its next safepoint check, not at the read that faulted (a claim that
            // read a wrong word from the lost page fails, and the counter file has the fault delivered
            // before it answers), so it is caught for the whole section that touches the file
            RuntimeException e = failure instanceof RuntimeException r ? r : damaged(counters, failure);
            undoReceive(counters, slot, mapping, claimed, notTheMessagesFault(e), e);
            throw e;
        }
    }

    /**
     * True for a receive's failure that says nothing about the message: this process is out of
     * a fixed resource, can no longer receive (its context closed), or its thread was
     * interrupted; out of memory is one too (caught apart). The receive then puts its token back
     * in flight, and ShmQueue.deliverQuietly gives the message back for exactly these: the two
     * lists must agree, or a message is lost. Written out here and there, not shared through a
     * class of its own: such a class would be loaded at the first failure, when a process out of
     * heap or open files cannot load it (tried: both ProcessLimitsTest cases failed with
     * NoClassDefFoundError).
     */
    private static boolean notTheMessagesFault(RuntimeException e) {
        return e instanceof ResourceLimitException || e instanceof IllegalStateException
                || e instanceof ReceiveInterruptedException;
    }

    /**
     * Undoes a receive that failed: unmaps what it mapped, then gives the token back, in flight
     * again when {@code unclaim} (a failure that is not the message's fault), else released (the
     * message is used up); failures are added to {@code failure}. A mapping that cannot be closed
     * keeps the token held (the memory may still be open), and this process in the file with it.
     */
    private void undoReceive(CounterFile counters, int slot, ReceivedSegment mapping, boolean claimed,
                             boolean unclaim, Throwable failure) {
        try {
            if (mapping != null) {
                unmap(mapping); // closed before the token goes back
            }
        } catch (RuntimeException suppressed) {
            failure.addSuppressed(suppressed);
            if (!claimed) {
                receiveCache.unholdCounters(counters);
            }
            return;
        }
        if (!claimed) {
            receiveCache.unholdCounters(counters);
        } else if (unclaim) {
            receiveCache.unclaimToken(counters, slot);
        } else {
            receiveCache.releaseToken(counters, slot); // unholds the counters too
        }
    }

    /**
     * Gives back a block {@link #receive} returned that nothing in this process used, because its
     * caller could not finish making the tensor ({@code failure}, out of memory): the memory is
     * unmapped and the token is in flight again, as after a receive that failed for a reason that
     * is not the message's. A failure of the unmapping is added to {@code failure}.
     */
    public void unreceive(ReceivedBlock block, Throwable failure) {
        block.dropOnlyReference();
        undoReceive(block.counters, block.slot, block.segment, true, true, failure);
    }

    /**
     * The range tag of the block {@code d} describes. A CRC over some fifty bytes is a good part
     * of a small message's receive, so the tags of the blocks seen lately are remembered by
     * segment name, offset and length. The name is compared by identity: a receiver's decode
     * memo hands out one name object per segment (another object with the same name only
     * misses). Not by the descriptor's identity: the memo makes a descriptor for each block of
     * a segment, and making each one's identity hash cost a consumer of fresh tensors 2 %.
     */
    private int rangeTag(Descriptor d) {
        String segment = d.segmentName();
        int i = (Long.hashCode(d.offset() * 0x9E3779B97F4A7C15L) ^ segment.hashCode()) & (knownTags.length - 1);
        KnownTag known = knownTags[i];
        if (known != null && known.segment == segment && known.offset == d.offset() && known.length == d.length()) {
            return known.tag;
        }
        int tag = RangeTag.of(d.offset(), d.length(), receivedNames.of(segment));
        // a whole immutable entry: racing readers see it whole or not
        knownTags[i] = new KnownTag(segment, d.offset(), d.length(), tag);
        return tag;
    }

    private record KnownTag(String segment, long offset, long length, int tag) {
    }

    /** The bytes of a segment name of a block this process sends, as {@link AsciiNames#of} gives them. */
    byte[] sentName(String segment) {
        return sentNames.of(segment);
    }

    /**
     * Refuses a device block whose sender is DEAD: its event went with it, and the memory it
     * allocated (or held a reference on, for a forwarder) is freed or no longer protected, so
     * the driver must not be asked to open either. Only DEAD refuses: UNKNOWN (another PID
     * namespace without a life file here, say) may be a live sender, and refusing it would
     * lose a good message. A sender that dies after this check is not caught here.
     */
    private void refuseIfSenderDead(ProcessIdentity sender, Descriptor d) {
        if (directory.verdict(sender) == Verdict.DEAD) {
            throw new RefshareException("device block of segment " + d.segmentName() + " refused: its sender, "
                    + sender + ", is dead, and device memory and events do not outlive their process; nothing was"
                    + " opened, and the reference goes back");
        }
    }

    /** Refuses a descriptor whose sender is not the owner of the counter file it names. */
    static void checkSender(CounterFile counters, Descriptor d) {
        if (counters.owner().pid() != d.senderPid() || counters.owner().startTicks() != d.senderStartTicks()) {
            throw new InvalidDataException("descriptor claims sender pid " + d.senderPid() + " but "
                    + counters + " belongs to " + counters.owner());
        }
    }

    private static void claimOrThrow(CounterFile counters, int slot, int tag) {
        if (!counters.claim(slot, tag)) {
            throw notClaimed(counters, slot, tag);
        }
    }

    private static RefshareException notClaimed(CounterFile counters, int slot, int tag) {
        int state = counters.state(slot);
        if (state == CounterFileLayout.IN_FLIGHT && counters.tag(slot) != tag) {
            return new InvalidDataException("token " + slot + " of " + counters + " was handed out for another block"
                    + " than the descriptor names (range tag 0x" + Integer.toHexString(counters.tag(slot))
                    + ", the descriptor's is 0x" + Integer.toHexString(tag) + "): nothing taken");
        }
        return new RefshareException("message already received or returned: token " + slot + " of " + counters
                + " is " + stateName(state));
    }

    private void unmap(ReceivedSegment segment) {
        if (segment instanceof ReceiveCache.Mapping host) {
            receiveCache.unmapSegment(host);
        } else {
            device.release(segment);
        }
    }

    /** A received block is freed for good: its token goes back, its segment loses a user. */
    void releaseReceived(ReceivedBlock block, CounterFile counters, int slot, ReceivedSegment segment) {
        if (segment instanceof ReceiveCache.Mapping host) {
            receiveCache.release(counters, slot, host);
            return;
        }
        // device memory: our view closes before the token goes back, since the sender may free
        // the memory once it has, and CUDA leaves freeing before the importer's close undefined
        RuntimeException failure = null;
        try {
            device.disposed(block); // the event of a forwarded block: its failure must not keep the segment open
        } catch (RuntimeException e) {
            failure = e;
        }
        try {
            device.release(segment);
        } catch (RuntimeException e) {
            // the memory may still be open here: keeping the token (and this process's entry in the
            // counter file, until it exits and the sender reclaims the token) leaks a block, returning
            // it could let the sender free memory in use
            if (failure != null) {
                e.addSuppressed(failure);
            }
            throw e;
        }
        receiveCache.releaseToken(counters, slot);
        if (failure != null) {
            throw failure;
        }
    }

    // ---- hooks for io.refshare.SharedHolder ----
    /**
     * Maps (host) or opens (device) the block a descriptor names without taking its token:
     * for holders, which keep one token per published version and count each reader's
     * acquisition themselves. A device descriptor's event, if it has one, is waited for as
     * on receive. The storage holds one in-process reference; when the last one goes (and
     * anything shared onward from it came back), the segment reference is dropped and
     * {@code onDispose} runs.
     */
    public ViewedBlock view(Descriptor d, Runnable onDispose) {
        ensureOpen();
        ReceivedSegment segment = d.backend() == Backend.CUDA ? device().open(d)
                : receiveCache.mapSegment(d.segmentName(), d.segmentSize(), d.offset());
        try {
            return new ViewedBlock(this, segment, d.offset(), d.length(), onDispose);
        } catch (RuntimeException e) {
            unmap(segment);
            throw e;
        }
    }

    /** A viewed block is freed for good: like a received one, less the token, which its holder keeps. */
    void releaseViewed(ViewedBlock block, ReceivedSegment segment) {
        if (segment instanceof ReceiveCache.Mapping host) {
            receiveCache.unmapSegment(host);
            return;
        }
        try {
            device.disposed(block); // the event of a forwarded view
        } finally {
            device.release(segment); // waits for our stream before the holder's count goes back
        }
    }

    /**
     * Runs {@code task} on the background housekeeper at each round (every
     * {@value Housekeeper#INTERVAL_MILLIS} ms) until it is removed: holders this process
     * created reclaim their dead readers' references there, so an old version a killed
     * reader held is freed without waiting for another publish.
     */
    public void addHousekeeping(Runnable task) {
        housekeeping.add(task);
    }

    public void removeHousekeeping(Runnable task) {
        housekeeping.remove(task);
    }

    /**
     * Runs {@code task} at the start of {@link #close()}, while everything still works, unless
     * it was removed before: holder handles left open give back the references they hold for
     * their process's threads. Each task runs on its own (one failing stops no other).
     */
    public void addCloseHook(Runnable task) {
        beforeClose.add(task);
    }

    public void removeCloseHook(Runnable task) {
        beforeClose.remove(task);
    }

    /**
     * Called by the housekeeper: each task on its own, so one failing (a corrupt holder file,
     * a fault on a truncated one) stops no other.
     */
    void runHousekeeping() {
        runEach(housekeeping, "a housekeeping task");
    }

    /** Runs every task of {@code tasks}, each on its own: a failure is logged (unless closed) and stops no other. */
    private void runEach(Set<Runnable> tasks, String what) {
        for (Runnable task : tasks) {
            try {
                task.run();
            } catch (Throwable e) {
                Failures.rethrowIfFatal(e);
                if (!closed) {
                    LOG.log(System.Logger.Level.WARNING, what + " failed", e);
                }
            }
        }
    }
    // ---- end of hooks ----

    /**
     * Returns the reference of a message that will never be received (its queue closed, its
     * receiver left). False when it was already received or returned, or the descriptor names
     * another range than its token was handed out for: then nothing changes.
     *
     * @throws RefshareException when the counter file is unusable (damaged, gone)
     */
    public boolean cancel(Descriptor d) {
        int tag = RangeTag.of(d.offset(), d.length(), d.segmentName());
        CounterFile own = counterFiles.ownFile(d.counterFileName());
        if (own != null) {
            return cancel(own, d.slot(), tag);
        }
        CounterFile counters = receiveCache.holdCounters(d.counterFileName());
        try {
            return cancel(counters, d.slot(), tag);
        } finally {
            receiveCache.unholdCounters(counters);
        }
    }

    /**
     * Cancels through {@code counters}. An own file may be unmapped under the cancel (every token
     * of it came back, or this context closed): then the token counts as back, and the answer is
     * false, even in the rare case in which this cancel's move took just before the unmap and its
     * count of the release then met the unmapped file (that count is shared with every consumer's
     * release, a path left as it is).
     */
    private static boolean cancel(CounterFile counters, int slot, int tag) {
        try {
            return counters.cancel(slot, tag);
        } catch (InternalError e) {
            throw damaged(counters, e);
        } catch (IllegalStateException e) {
            if (counters.isMapped()) {
                throw e;
            }
            return false;
        }
    }

    /** The failure to report for a fault on {@code counters}: another process cut it short, most likely. */
    private static InvalidDataException damaged(CounterFile counters, Throwable fault) {
        return new InvalidDataException(counters + " is damaged (truncated by another process?): " + fault, fault);
    }

    /**
     * Frees every block in the limbo that no process uses any more; returns how many. Blocks
     * a concurrent collection (the background collector's) is freeing may still count in the
     * limbo when it returns.
     */
    public int collect() {
        return limbo.collect();
    }

    /**
     * The allocators' miss handler: {@link #collect()}, then up to {@value #MISS_SETTLE_MILLIS} ms
     * for the blocks a concurrent collection is freeing, which are memory about to come back.
     */
    public void collectOnMiss() {
        limbo.collectAndSettle(MISS_SETTLE_MILLIS * 1_000_000);
    }

    /**
     * Like {@link #collect()}, and returns only once blocks a concurrent collection took out
     * are freed too: afterwards the limbo holds exactly the blocks still in use. For callers
     * that then read the limbo or the allocator (and never with the allocator's lock held).
     */
    public int collectAndSettle() {
        return limbo.collectAndSettle();
    }

    /** Collects the limbo and gives cached free memory back to the system; returns the bytes released. */
    public long trim() {
        collectAndSettle();
        DeviceSharing d = device;
        return allocator.releaseCached() + (d != null ? d.allocator().releaseCached() : 0);
    }

    /**
     * The last in-process reference to {@code storage} went: it is freed now if no message of
     * it is out, else it waits in the limbo. The rest of the limbo is not scanned here: that
     * made every drop cost a pass over every waiting block (a streaming producer's whole
     * window); the collector, woken by releases, and the allocator's miss path do it.
     */
    void lastReferenceDropped(Storage storage) {
        SentBlock sent = storage.sentBlockOrNull();
        if (sent == null) {
            storage.dispose();
            return;
        }
        if (sent.prune() == 0) {
            storage.dispose();
        } else if (limbo.add(sent)) {
            // The collector parks for up to Collector.IDLE_MILLIS while the limbo is empty and
            // waits on a release word only once it sees a block there: without this a release
            // arriving during that park would wait for the park to end.
            // Only the empty -> non-empty step wakes it; with blocks already waiting it is
            // watching releases. An unpark before it parks is kept as a permit, so none is lost.
            LockSupport.unpark(collector);
        }
    }

    CachingAllocator allocator() {
        return allocator;
    }

    CounterFilePool counterFiles() {
        return counterFiles;
    }

    ReceiveCache receiveCache() {
        return receiveCache;
    }

    public RefshareStats stats() {
        return new RefshareStats(allocator.stats(), limbo.size(), limbo.bytes(), counterFiles.liveFiles(),
                receiveCache.mappedSegments(), receiveCache.mappedCounterFiles(), counterFiles.handedOut(), received.sum(),
                limbo.collected(), reclaimed.sum());
    }

    /**
     * References to this process's memory that are counted now: messages in flight and
     * blocks other processes hold. Scans the counter files; for monitoring, not hot paths.
     */
    public long liveCounts() {
        return counterFiles.liveTokens();
    }

    /** References to this process's memory that {@code holder} holds now. Scans; not for hot paths. */
    public long heldBy(ProcessIdentity holder) {
        return counterFiles.heldBy(holder);
    }

    public boolean isClosed() {
        return closed;
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("refshare context is closed");
        }
    }

    private static String stateName(int state) {
        return switch (state) {
            case CounterFileLayout.FREE -> "not handed out";
            case CounterFileLayout.IN_FLIGHT -> "in flight";
            case CounterFileLayout.HELD -> "held by a receiver";
            case CounterFileLayout.RELEASED -> "released";
            default -> "corrupt (state " + state + ")";
        };
    }

    /**
     * Gives back every reference this process still holds, then removes and unmaps its
     * files. Other processes keep the memory they mapped; messages not yet received can
     * no longer be. Idempotent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        runEach(beforeClose, "a task run before closing");
        closed = true;
        LockSupport.unpark(collector);
        LockSupport.unpark(housekeeper);
        // even on an interrupted thread: going on while they still ran would unmap files under them,
        // and a housekeeper making a spare counter file then could leave it behind
        Uninterruptibly.await(collector::join);
        Uninterruptibly.await(housekeeper::join);
        status.close();
        if (device != null) {
            device.close(); // before the tokens go back: received device memory is closed first
        }
        deviceReceives.close(); // the device's close ended their waits: each gives its token back now
        deviceReceives.awaitReleased();
        receiveCache.close();
        collect();
        allocator.close();
        counterFiles.close();
    }
}
