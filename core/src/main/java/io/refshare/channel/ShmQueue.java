package io.refshare.channel;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.ProducersGoneException;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.exceptions.ReceiveInterruptedException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.HandleUses;
import io.refshare.shm.Libc;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * A bounded multi-producer, multi-consumer queue of small byte messages in a
 * shared-memory file: any number of processes, and threads in them, offer and poll; each
 * message goes to exactly one consumer, in the order of the positions producers claimed.
 * The layout is {@link ShmQueueLayout}. One {@code ShmQueue} is this process's handle to
 * the file; it is thread-safe.
 *
 * <p>Waiting is cheap: a blocked {@code offer} or {@code poll} spins for a couple of
 * microseconds, then spins yielding its CPU now and then for tens of microseconds, then
 * sleeps on a futex in the file, woken by the process that makes room or publishes a
 * message (no system call when nobody sleeps). With at least as many consumers as CPUs a
 * blocked {@code offer} sleeps at once and is woken when half the cells are free
 * ({@link CrowdedConsumers}).
 *
 * <p>Crashes: a process killed in the middle of an offer or a poll leaves a cell claimed
 * in its name. Waiters check the claimants of what blocks them (at most every
 * {@value #SWEEP_INTERVAL_MILLIS} ms per handle) and repair the queue once the claimant is
 * dead (see {@code Recovery}): an unpublished claim is skipped, a message claimed but not
 * returned by the dead consumer's poll is delivered to another consumer. So a published
 * message is delivered exactly once unless the consumer process dies after its poll
 * returned it, which no queue can tell apart from a slow application. A claimant is judged
 * dead only on the kernel's evidence (its life lock in the directory is free, see
 * {@link io.refshare.shm.Verdict}), which holds across PID namespaces sharing /dev/shm:
 * a crashed participant in another container is repaired like any other, a live one
 * is never touched, and one whose state cannot be known counts as alive.
 *
 * <p>The stream: {@link #markClosed()} (and the creator's close) ends it by a producer's
 * decision (closed flag 1). A consumer that finds the queue empty checks, at most every
 * {@value #PRODUCERS_CHECK_MILLIS} ms per handle, whether every producer is dead (the
 * creator DEAD and no attached participant that offered alive or unknown) and then ends it
 * by their death (flag 2): polls report {@link ProducersGoneException} once drained. A
 * handle's close never ends the stream, except the creator's.
 *
 * <h2>Implementation notes</h2>
 * The cells' protocol (claims, publication, memory ordering, closing) is {@link QueueCells},
 * argued there; this handle adds participation, waiting and wake-ups ({@link QueueSignal}),
 * repair of dead participants' claims ({@link Recovery}) and the stream's end.
 *
 * <h2>Known limitations</h2>
 * <ul>
 * <li>Any process that may write the file (its owner's uid; the group with mode 0660)
 *     can wedge the queue, for instance by faking a live claimant. What it cannot do is
 *     make a reader touch memory outside the file or hand out a message longer than a
 *     cell: impossible lengths are rejected ({@link InvalidDataException}), the cell is
 *     skipped and the queue serves on.</li>
 * <li>A consumer that dies after its poll returned takes that message with it.</li>
 * <li>Repairs wait for a waiter, a non-blocking call that finds the queue empty or full,
 *     or {@link #recover()}; the first comes within about 100 ms of the death being seen
 *     (a live verdict is cached for 100 ms).</li>
 * <li>A futex wait blocks its carrier thread: virtual threads waiting here pin one.</li>
 * </ul>
 */
public final class ShmQueue implements AutoCloseable {
    static final long SWEEP_INTERVAL_MILLIS = 100;
    private static final long SWEEP_INTERVAL_NANOS = SWEEP_INTERVAL_MILLIS * 1_000_000L;
    /** The longest sleep on a futex before a waiter looks again (repairs, deadlines, a missed wake-up). */
    private static final long SLEEP_SLICE_NANOS = 50_000_000;
    /**
     * Timeouts from this on (146 years) are waits without limit ({@code put}, {@code take}):
     * a put or take that succeeds at once then reads no clock, which on some virtual machines
     * costs as much as a tenth of a small message.
     */
    public static final long UNBOUNDED_NANOS = 1L << 62;
    /**
     * How often a waiting consumer that finds the queue empty asks whether every producer
     * is dead (the creator's life lock and every attached producer's): the stream's end by
     * their death is seen within this plus a sleep slice.
     */
    static final long PRODUCERS_CHECK_MILLIS = 200;
    private static final long PRODUCERS_CHECK_NANOS = PRODUCERS_CHECK_MILLIS * 1_000_000L;


    private final ShmFile file;
    private final MemorySegment mem;
    private final Geometry geometry;
    private final int capacity;
    private final int maxMessageBytes;
    private final boolean creator;
    private final ProcessIdentity owner;
    private final long packedOwner;
    private final Participants participants;
    private final CrowdedConsumers crowded;
    private final Liveness liveness;
    private final QueueSignal notEmpty;
    private final QueueSignal notFull;
    private final Recovery recovery;
    private final QueueCells cells;
    private final long me;
    private final int self;
    private final long selfEntry;

    /** This handle's lifetime: calls in progress, and the close that waits for them. */
    private final HandleUses uses = new HandleUses(() -> { });
    private final OncePerInterval sweeps = new OncePerInterval(SWEEP_INTERVAL_NANOS);
    private final OncePerInterval producersChecks = new OncePerInterval(PRODUCERS_CHECK_NANOS);
    /** Whether this handle's waiters spin without pause (the user gave them a CPU) instead of backing off. */
    private volatile boolean busySpin;
    /** What waiters spin on; made once, not per wait (a capturing lambda is an object). */
    private final Spinning.Condition roomOrEnd;
    private final Spinning.Condition messageOrEnd;
    private int rolesRecorded;

    private ShmQueue(ShmDirectory dir, ShmFile file, Geometry geometry, boolean creator, ProcessIdentity owner) {
        this.file = file;
        this.mem = file.segment();
        this.geometry = geometry;
        this.capacity = geometry.capacity();
        this.maxMessageBytes = geometry.maxMessageBytes();
        this.creator = creator;
        this.owner = owner;
        this.packedOwner = owner.packed();
        this.me = ProcessIdentity.current().packed();
        this.participants = new Participants(mem, geometry);
        this.crowded = new CrowdedConsumers(participants);
        this.notEmpty = QueueSignal.notEmpty(mem);
        this.notFull = QueueSignal.notFull(mem);
        this.liveness = new Liveness(dir);
        this.recovery = new Recovery(mem, geometry, participants, liveness, notEmpty, notFull, me);
        dir.holdLifeLock(); // before our identity is recorded in the table: others judge it by that lock
        int index = participants.tryRegister(me, Liveness.ownPidNamespace());
        if (index < 0) {
            recovery.sweep(Recovery.Role.JANITOR, -1, true);
            index = participants.tryRegister(me, Liveness.ownPidNamespace());
        }
        if (index < 0) {
            throw new ResourceLimitException("queue " + file.path() + " has all " + geometry.participantCapacity()
                    + " participant entries held by live handles; close unused handles or create the queue with more");
        }
        this.self = index;
        this.selfEntry = geometry.participantOffset(index);
        this.cells = new QueueCells(mem, geometry, index, file.path());
        this.roomOrEnd = () -> cells.hasRoom() || cells.isClosed() || uses.isClosed();
        this.messageOrEnd = () -> cells.hasMessage() || cells.isClosed() || uses.isClosed();
    }

    /** Creates a queue of {@code capacity} messages of up to 512 bytes, owned by this process. */
    public static ShmQueue create(ShmDirectory dir, int capacity) {
        return create(dir, capacity, DEFAULT_MAX_MESSAGE_BYTES);
    }

    /** Creates a queue of {@code capacity} messages of up to {@code maxMessageBytes} bytes. */
    public static ShmQueue create(ShmDirectory dir, int capacity, int maxMessageBytes) {
        return create(dir, capacity, maxMessageBytes, DEFAULT_PARTICIPANTS);
    }

    /**
     * Creates a queue that at most {@code maxParticipants} handles (across all processes)
     * may have open at once; handles of dead processes are reclaimed.
     */
    public static ShmQueue create(ShmDirectory dir, int capacity, int maxMessageBytes, int maxParticipants) {
        return createStartingAt(dir, Geometry.of(capacity, maxMessageBytes, maxParticipants), 0);
    }

    /** As create, with the first position given (tests cross the 2^46 wrap with it). */
    static ShmQueue createStartingAt(ShmDirectory dir, Geometry geometry, long firstPosition) {
        ProcessIdentity me = ProcessIdentity.current();
        me.packed(); // refuse before a file exists
        ShmFile f = dir.create(ShmKind.QUEUE, geometry.fileLength());
        try {
            geometry.initialize(f.segment(), me, firstPosition);
            return new ShmQueue(dir, f, geometry, true, me);
        } catch (RuntimeException e) {
            f.unlink();
            f.close();
            throw e;
        }
    }

    /** Attaches to a queue by a name from outside; its header is checked before any use. */
    public static ShmQueue open(ShmDirectory dir, String name) {
        return dir.open(name, ShmKind.QUEUE, HEADER_LENGTH).checkOrClose(f -> new ShmQueue(dir, f,
                Geometry.read(f.segment(), f.size(), f.path().toString()), false, ownerOf(f.segment())));
    }

    /** Reads a queue's statistics without attaching to it (for inspection tools). */
    public static QueueStats inspect(ShmDirectory dir, String name) {
        return dir.open(name, ShmKind.QUEUE, HEADER_LENGTH).readAndClose(f -> {
            Geometry g = Geometry.read(f.segment(), f.size(), f.path().toString());
            return stats(name, f.segment(), g, new Participants(f.segment(), g), ownerOf(f.segment()));
        });
    }

    /**
     * Sets how this handle waits, for waits that start later: spinning without pause when
     * {@code busySpin}, else (the default) spinning, then yielding, then parking.
     */
    public void busySpin(boolean busySpin) {
        this.busySpin = busySpin;
    }

    public String name() {
        return file.name();
    }

    public int capacity() {
        return capacity;
    }

    public int maxMessageBytes() {
        return maxMessageBytes;
    }

    /** The process that created the queue. */
    public ProcessIdentity owner() {
        return owner;
    }

    /** True once anyone called {@link #markClosed()}. */
    public boolean isClosed() {
        enter();
        try {
            return cells.isClosed();
        } finally {
            exit();
        }
    }

    /**
     * Publishes {@code message} if there is room now; never waits.
     *
     * @return false if the queue is full
     * @throws QueueClosedException if the queue is closed, or this handle was closed
     * @throws IllegalArgumentException if the message is longer than {@link #maxMessageBytes()}
     * @throws InvalidDataException if the file's cells were overwritten by someone else
     */
    public boolean offer(byte[] message) {
        return offer(checkMessage(message));
    }

    private boolean offer(Outgoing message) {
        enter();
        try {
            recordRole(ROLE_PRODUCER);
            long now = System.nanoTime();
            if (tryOffer(message, now)) {
                return true;
            }
            maybeSweep(Recovery.Role.PRODUCER);
            return tryOffer(message, now);
        } finally {
            exit();
        }
    }

    /**
     * Publishes {@code message}, waiting up to {@code timeout} for room.
     *
     * @return false if the queue stayed full for the whole timeout
     * @throws QueueClosedException if the queue is (or becomes, while waiting) closed, or this handle was closed
     * @throws IllegalArgumentException if the message is longer than {@link #maxMessageBytes()}
     * @throws InvalidDataException if the file's cells were overwritten by someone else
     */
    public boolean offer(byte[] message, long timeout, TimeUnit unit) throws InterruptedException {
        return offer(Outgoing.of(Objects.requireNonNull(message, "message")), timeout, unit); // checked there
    }

    /**
     * As {@link #offer(byte[], long, TimeUnit)}, the message written straight into its cell.
     *
     * @throws IllegalArgumentException if the message is longer than {@link #maxMessageBytes()}
     */
    public boolean offer(Outgoing message, long timeout, TimeUnit unit) throws InterruptedException {
        checkSize(message);
        long nanos = Math.max(0, unit.toNanos(timeout));
        enter();
        try {
            recordRole(ROLE_PRODUCER);
            if (Thread.interrupted()) {
                throw new InterruptedException();
            }
            if (tryOffer(message, claimDeadline(nanos))) {
                return true;
            }
            long start = System.nanoTime();
            return awaitRoom(message, start, start + nanos);
        } finally {
            exit();
        }
    }

    /**
     * Takes the next message if there is one now; never waits.
     *
     * @return the message, or null when the queue is empty
     * @throws QueueClosedException if the queue is closed and empty
     * @throws InvalidDataException if the next cell held an impossible length (it is skipped; poll
     *         again), or the file's cells were overwritten by someone else
     */
    public byte[] poll() {
        enter();
        try {
            recordRole(ROLE_CONSUMER);
            long now = System.nanoTime();
            byte[] m = tryPoll(Incoming.COPY, now);
            if (m != null) {
                return m;
            }
            Recovery.Adopted adopted = maybeSweep(Recovery.Role.CONSUMER);
            if (adopted != null) {
                return deliver(adopted.position(), Incoming.COPY);
            }
            m = tryPoll(Incoming.COPY, now);
            if (m == null) {
                maybeCheckProducers();
            }
            return m;
        } finally {
            exit();
        }
    }

    /**
     * Takes the next message, waiting up to {@code timeout} for one.
     *
     * @return the message, or null if none came within the timeout
     * @throws QueueClosedException once the queue is closed and empty, or if this handle was closed
     * @throws InvalidDataException if the next cell held an impossible length (it is skipped; poll
     *         again), or the file's cells were overwritten by someone else
     */
    public byte[] poll(long timeout, TimeUnit unit) throws InterruptedException {
        return poll(timeout, unit, Incoming.COPY);
    }

    /**
     * Takes the next message like {@link #poll(long, TimeUnit)} and hands it to
     * {@code whileClaimed} before the cell is released: if this process dies while the
     * function runs, the message is still in the queue, claimed in its name, and recovery
     * delivers it to another consumer. Whatever the message commits this process to (a
     * reference taken, say) is thus either done and attributable to this process, or not
     * done and still queued: it cannot be lost in between. An exception from the function
     * propagates; the message is consumed either way, except for a
     * {@link ResourceLimitException}, an {@link IllegalStateException}, a
     * {@link ReceiveInterruptedException} or an {@link OutOfMemoryError}: the message is then
     * given back to the queue unconsumed
     * (another consumer, or a later poll, gets it) and the exception propagates.
     *
     * @return what {@code whileClaimed} returned, or null if no message came within the timeout
     * @throws ProducersGoneException once the queue is empty and every producer is dead
     */
    public <T> T poll(long timeout, TimeUnit unit, Incoming<T> whileClaimed) throws InterruptedException {
        long nanos = Math.max(0, unit.toNanos(timeout));
        enter();
        try {
            recordRole(ROLE_CONSUMER);
            if (Thread.interrupted()) {
                throw new InterruptedException();
            }
            T m = tryPoll(whileClaimed, claimDeadline(nanos));
            if (m != null) {
                return m;
            }
            long start = System.nanoTime();
            return awaitMessage(start, start + nanos, whileClaimed);
        } finally {
            exit();
        }
    }

    /**
     * Publishes {@code messages[from..)} in order while there is room now, and wakes sleeping
     * consumers once for all of them; never waits. One of the batch operations: the counts
     * and the wake-up are paid once per batch instead of once per message.
     *
     * @return how many were published (from {@code from} on): all of them, or fewer when the
     *         queue filled up
     * @throws QueueClosedException if the queue is closed, or this handle was closed, before
     *         the first message of the batch was published
     * @throws IllegalArgumentException if the first message is larger than the cells (a later
     *         one ends the batch before it, so that what was published is returned, and the next
     *         call refuses it)
     */
    public int offerAvailable(List<? extends Outgoing> messages, int from) {
        enter();
        try {
            recordRole(ROLE_PRODUCER);
            long now = System.nanoTime();
            int published = 0;
            for (int i = from; i < messages.size(); i++) {
                Outgoing m = messages.get(i);
                if (m.byteSize() > maxMessageBytes) {
                    if (published > 0) {
                        break; // the caller counts the published ones; its next call refuses this one first
                    }
                    throw tooLarge(m);
                }
                long t = claimWritable(now);
                if (t == QueueCells.NO_ROOM || (t == QueueCells.CLOSED && published > 0)) {
                    break;
                }
                if (t == QueueCells.CLOSED) {
                    throw ended();
                }
                cells.publishInBatch(t, m);
                published++;
            }
            if (published > 0) {
                QueueCells.fenceBatch(); // before the sleepers are read (QueueCells, "Batches")
                participants.countOffered(self, published);
                if (notEmpty.anyoneAsleep()) {
                    notEmpty.signalAll(); // up to a batch of consumers may take now
                }
            }
            return published;
        } finally {
            exit();
        }
    }

    /**
     * Takes up to {@code max} messages available now, each handed to {@code whileClaimed} while
     * its cell is still claimed, and wakes sleeping producers once for all of them; never
     * waits. Messages with an impossible length are skipped (counted as rejected); a
     * {@link ResourceLimitException}, {@link IllegalStateException},
     * {@link ReceiveInterruptedException} or {@link OutOfMemoryError} from {@code whileClaimed}
     * gives that message back and ends the batch.
     *
     * @return how many were handed to {@code whileClaimed} and then to {@code sink}
     */
    public <T> int pollAvailable(int max, Incoming<T> whileClaimed, Consumer<T> sink) {
        enter();
        try {
            recordRole(ROLE_CONSUMER);
            long now = System.nanoTime();
            int taken = 0;
            int claimed = 0;
            try {
                while (taken < max) {
                    long h = cells.claimReadable(now);
                    if (h < 0) {
                        break;
                    }
                    claimed++;
                    T result;
                    try {
                        result = deliverQuietly(h, whileClaimed, true);
                    } catch (InvalidDataException rejected) {
                        continue;
                    }
                    taken++;
                    sink.accept(result);
                }
            } finally {
                QueueCells.fenceBatch(); // before the sleepers are read (QueueCells, "Batches")
                if (taken > 0) {
                    participants.countTaken(self, taken);
                }
                // every cell claimed was freed, a rejected or failed delivery's too (or given back)
                if (claimed > 0 && notFull.anyoneAsleep()) {
                    notFull.signalAll(); // up to a batch of producers may put now
                }
            }
            return taken;
        } finally {
            exit();
        }
    }

    /**
     * Stops the queue for everyone: offers fail from now on, waiters wake, consumers take
     * what is left and then get {@link QueueClosedException}. Idempotent.
     */
    public void markClosed() {
        enter();
        try {
            setClosed();
            Libc.deliverPendingFault(); // a fault compiled code met on a cut file surfaces here, in the close's handler
        } finally {
            exit();
        }
    }

    /**
     * Removes every message left in the queue and hands each to {@code sink} (to return
     * the counts of undelivered messages, say). On a closed queue it also waits for
     * offers that claimed a cell before the close to publish (or for their dead
     * claimants to be detected), so nothing arrives after it returns. Cells with an
     * impossible length are skipped and counted as rejected.
     *
     * @return the number of messages handed to {@code sink}
     */
    public int drain(Consumer<byte[]> sink) {
        Objects.requireNonNull(sink, "sink");
        enter();
        try {
            recordRole(ROLE_CONSUMER);
            int drained = 0;
            while (true) {
                long h = claimReadable();
                byte[] m = null;
                try {
                    if (h >= 0) {
                        m = deliver(h, Incoming.COPY);
                    } else {
                        Recovery.Adopted adopted = sweepNow(Recovery.Role.CONSUMER);
                        if (adopted != null) {
                            m = deliver(adopted.position(), Incoming.COPY);
                        } else if (h == QueueCells.CLOSED || !cells.isClosed()) {
                            return drained;
                        } else {
                            awaitPublication();
                            continue;
                        }
                    }
                } catch (InvalidDataException rejected) {
                    continue;
                }
                sink.accept(m);
                drained++;
            }
        } finally {
            exit();
        }
    }

    /**
     * True when this handle is the producer side's last and no consumer is attached: no
     * other attached handle of a process not known dead has offered or polled, and the
     * creator's handle is not attached to an open queue. A producer closing then ends the
     * stream and returns what is queued.
     */
    public boolean lastProducerWithoutConsumer() {
        enter();
        try {
            for (int i = 0; i < participants.capacity(); i++) {
                long word = participants.identityWord(i);
                if (i == self || word == 0 || isReclaimMark(word) || namesNoProcess(word)) {
                    continue;
                }
                boolean creatorsHandle = !creator && word == packedOwner && cells.closedState() == OPEN;
                boolean takesPart = (participants.role(i) & (ROLE_PRODUCER | ROLE_CONSUMER)) != 0;
                if ((takesPart || creatorsHandle) && !liveness.isDead(word, true)) {
                    return false;
                }
            }
            return true;
        } finally {
            exit();
        }
    }

    /**
     * Repairs, now, whatever dead participants left in the queue (normally done by
     * waiters on their own) and frees their participant entries.
     */
    public void recover() {
        enter();
        try {
            sweepNow(Recovery.Role.JANITOR);
        } finally {
            exit();
        }
    }

    public QueueStats stats() {
        enter();
        try {
            return stats(name(), mem, geometry, participants, owner); // the owner as checked at open
        } finally {
            exit();
        }
    }

    /**
     * Detaches this process: wakes and fails this handle's waiters, frees its participant
     * entry and unmaps the file. The creator's close also marks the queue closed and
     * unlinks its name (processes still attached keep working and can drain it).
     * Idempotent. Must not be called from inside a {@link #drain} sink.
     *
     * @throws InvalidDataException when the file was cut short under this process (another
     *         process truncated it): the handle is closed and the file unmapped (and unlinked,
     *         by its creator) all the same; its waiters in other threads end by their timeouts
     */
    @Override
    public void close() {
        if (!uses.close()) {
            return;
        }
        InternalError cut = null;
        try {
            notEmpty.signalAll();
            notFull.signalAll();
            Libc.deliverPendingFault(); // compiled code reports a fault late: here, not after the close
        } catch (InternalError fault) {
            cut = fault;
        }
        uses.awaitReleased(); // every call of this handle has left: nothing uses its entry or mapping
        try {
            if (cut == null) { // the file's own steps, unless the wake-up already met the cut
                if (creator) {
                    setClosed();
                }
                participants.leave(self, me, notEmpty, notFull);
                Libc.deliverPendingFault();
            }
        } catch (InternalError fault) {
            cut = fault;
        } finally {
            if (creator) {
                file.unlink();
            }
            file.close();
        }
        if (cut != null) {
            throw cutUnder(cut);
        }
    }

    /** The JVM's answer to a fault on this queue's mapping (an {@link InternalError}), as a caller sees it. */
    public InvalidDataException cutUnder(InternalError fault) {
        return new InvalidDataException("queue " + file.path() + " was cut short under this process (truncated by"
                + " another): " + fault, fault);
    }


    @Override
    public String toString() {
        return "ShmQueue[" + file.path() + ", capacity " + capacity + ", max message " + maxMessageBytes + " bytes]";
    }

    // ---- the cells (package-private pieces are exercised by crash tests) ----

    /** Claims the tail cell for a producer: its position, {@link QueueCells#NO_ROOM} or {@link QueueCells#CLOSED}. */
    long claimWritable() {
        return claimWritable(QueueCells.NO_DEADLINE);
    }

    private long claimWritable(long deadline) {
        long t = cells.claimWritable(deadline);
        if (t == QueueCells.CLOSED) {
            notEmpty.signal(); // a consumer may wait on a position this claim gave up
        }
        return t;
    }

    /** Writes and publishes the message of a position claimed by {@link #claimWritable}. */
    void publish(long position, byte[] message) {
        publish(position, Outgoing.of(message));
    }

    private void publish(long position, Outgoing message) {
        cells.publish(position, message);
        participants.countOffered(self);
        notEmpty.signal();
        if (notFull.anyoneAsleep() && cells.hasRoom()) {
            notFull.signal(); // a sleeper may have been woken for the room this offer used
        }
    }

    /** Claims the head cell for a consumer: its position, {@link QueueCells#EMPTY} or {@link QueueCells#CLOSED}. */
    long claimReadable() {
        return cells.claimReadable(QueueCells.NO_DEADLINE);
    }

    /**
     * Reads the message of a position this handle holds in READING, in place with
     * {@code whileClaimed}, and frees the cell whatever happens: an impossible length is rejected (and counted), never left blocking
     * the queue. A {@link ResourceLimitException} from {@code whileClaimed} (this process is out
     * of a fixed resource), an {@link OutOfMemoryError}, a {@link ReceiveInterruptedException},
     * or an {@link IllegalStateException} (it can no longer receive: its context closed) gives
     * the message back to the queue instead,
     * for another consumer (or this one's next call): none of them is the message's fault.
     */
    <T> T deliver(long position, Incoming<T> whileClaimed) {
        T result;
        try {
            result = deliverQuietly(position, whileClaimed, false);
        } finally {
            // the cell is free again, or given back; a crowded queue's producer is woken only once
            // half the cells are free (CrowdedConsumers), and the head and tail lines are read for
            // that only while a producer sleeps
            if (!crowded.crowdedAfterTake() || (notFull.anyoneAsleep() && cells.atMostHalfFull())) {
                notFull.signal();
            }
            // a sleeper may have been woken for the message this poll took, or rejected (9.4)
            if (notEmpty.anyoneAsleep() && cells.hasMessage()) {
                notEmpty.signal();
            }
        }
        participants.countTaken(self);
        return result;
    }

    /**
     * {@link #deliver} without the counts and the producers' wake-up: the batch pays those once,
     * and its cells are freed without a fence each when {@code inBatch} (the batch fences once).
     */
    private <T> T deliverQuietly(long position, Incoming<T> whileClaimed, boolean inBatch) {
        boolean givenBack = false;
        try {
            int length;
            try {
                length = cells.messageLength(position);
            } catch (InvalidDataException rejected) {
                participants.countRejected();
                throw rejected;
            }
            return cells.read(position, length, whileClaimed);
        } catch (ResourceLimitException | IllegalStateException | ReceiveInterruptedException
                 | OutOfMemoryError cannotTakeNow) { // as Sharing.notTheMessagesFault: they must agree
            if (cells.giveBack(position)) {
                notEmpty.signalSleeper();
            }
            givenBack = true; // the cell is no longer ours to free, whether or not the give-back took
            throw cannotTakeNow;
        } finally {
            if (!givenBack) {
                if (inBatch) {
                    cells.freeCellInBatch(position);
                } else {
                    cells.freeCell(position);
                }
            }
        }
    }

    // ---- waiting ----

    private boolean awaitRoom(Outgoing message, long start, long deadline) throws InterruptedException {
        long nanos = deadline - start;
        boolean busy = busySpin;
        if (nanos > 0 && (busy || !crowded.crowded(start)) // see CrowdedConsumers
                && spin(notFull, start, start + Math.min(nanos, busy ? SLEEP_SLICE_NANOS : Spinning.SPIN_NANOS),
                roomOrEnd, busy)
                && tryOffer(message, deadline)) {
            return true;
        }
        while (true) {
            maybeSweep(Recovery.Role.PRODUCER);
            if (tryOffer(message, deadline)) {
                return true;
            }
            long now = System.nanoTime();
            long remaining = deadline - now;
            if (remaining <= 0) {
                passOnRoom();
                return false;
            }
            if (busy) {
                spinASlice(notFull, now, remaining, roomOrEnd);
                continue;
            }
            int sequence = notFull.prepare(selfEntry);
            try {
                if (tryOffer(message, deadline)) {
                    return true;
                }
                if (uses.isClosed()) {
                    throw handleClosed();
                }
                notFull.await(sequence, Math.min(remaining, SLEEP_SLICE_NANOS));
            } finally {
                notFull.awake(selfEntry);
            }
            if (Thread.interrupted()) {
                passOnRoom();
                throw new InterruptedException();
            }
        }
    }

    private <T> T awaitMessage(long start, long deadline, Incoming<T> whileClaimed)
            throws InterruptedException {
        long nanos = deadline - start;
        boolean busy = busySpin;
        if (nanos > 0) {
            T m = spinForMessage(start, start + Math.min(nanos, busy ? SLEEP_SLICE_NANOS : Spinning.SPIN_NANOS),
                    deadline, whileClaimed, busy);
            if (m != null) {
                return m;
            }
        }
        while (true) {
            Recovery.Adopted adopted = maybeSweep(Recovery.Role.CONSUMER);
            if (adopted != null) {
                return deliver(adopted.position(), whileClaimed);
            }
            T m = tryPoll(whileClaimed, deadline);
            if (m != null) {
                return m;
            }
            if (maybeCheckProducers()) {
                continue; // the stream just ended: the next attempt reports it (or finds a last message)
            }
            long now = System.nanoTime();
            long remaining = deadline - now;
            if (remaining <= 0) {
                passOnMessage();
                return null;
            }
            if (busy) {
                spinASlice(notEmpty, now, remaining, messageOrEnd);
                continue;
            }
            int sequence = notEmpty.prepare(selfEntry);
            try {
                m = tryPoll(whileClaimed, deadline);
                if (m != null) {
                    return m;
                }
                if (uses.isClosed()) {
                    throw handleClosed();
                }
                notEmpty.await(sequence, Math.min(remaining, SLEEP_SLICE_NANOS));
            } finally {
                notEmpty.awake(selfEntry);
            }
            if (Thread.interrupted()) {
                passOnMessage();
                throw new InterruptedException();
            }
        }
    }

    /**
     * Spins until {@code condition} holds or {@code deadline}, counted as one of {@code signal}'s
     * spinners, which spares signallers their wake-ups; false at once, without spinning, when a
     * backing-off waiter finds {@link Spinning#SPINNERS} spinning already (it sleeps instead:
     * more spinners than CPUs would take the CPU their peers need to publish). The caller
     * looks at the state again afterwards, whatever the answer, as {@link QueueSignal} requires.
     */
    private boolean spin(QueueSignal signal, long start, long deadline, Spinning.Condition condition, boolean busy) {
        if (!signal.startSpinning(selfEntry, busy ? Integer.MAX_VALUE : Spinning.SPINNERS)) {
            return false;
        }
        try {
            return Spinning.until(start, deadline, condition, !busy);
        } finally {
            signal.stopSpinning(selfEntry);
        }
    }

    /**
     * The first phase of a wait for a message: spins until {@code spinDeadline}, counted as a
     * spinner throughout, and claims each message it sees; a race lost to another consumer
     * does not end the spin. Null when the spin ran out or the stream ended (the caller looks
     * again), or at once when {@link Spinning#SPINNERS} already spin.
     *
     * <p>Why a loser spins on: with many consumers every message is raced by every spinner,
     * and a loser that went to sleep at once (as it used to) had to be woken by the producer
     * for a later message, a system call on the producer's thread. A loser still
     * counted as a spinner spares the producer that wake-up, and the spinner count's line is
     * not written twice per loser per message. The winner stops counting itself right after
     * its claim, before it delivers: the delivery's look for a message behind (which signals
     * sleepers on) then comes after the decrement, as {@link QueueSignal}'s spinner rule needs.
     * Where consumers are as many as the CPUs ({@link CrowdedConsumers}) a backing-off loser
     * sleeps at once, as before: there its spin takes the CPU the producer needs.
     */
    private <T> T spinForMessage(long start, long spinDeadline, long deadline, Incoming<T> whileClaimed, boolean busy) {
        if (!notEmpty.startSpinning(selfEntry, busy ? Integer.MAX_VALUE : Spinning.SPINNERS)) {
            return null;
        }
        long h;
        try {
            h = claimWhileSpinning(start, spinDeadline, deadline, busy);
        } finally {
            notEmpty.stopSpinning(selfEntry);
        }
        return h >= 0 ? deliver(h, whileClaimed) : null;
    }

    /**
     * The spin of {@link #spinForMessage}: the position it claimed, or {@link QueueCells#EMPTY}
     * when the spin ran out, the stream ended or this handle closed (the caller reports those).
     */
    private long claimWhileSpinning(long start, long spinDeadline, long deadline, boolean busy) {
        while (Spinning.until(start, spinDeadline, messageOrEnd, !busy)) {
            long h = cells.claimReadable(deadline);
            if (h >= 0) {
                return h;
            }
            // lost the race, or the stream ended
            long now = System.nanoTime();
            if (h != QueueCells.EMPTY || now - spinDeadline >= 0 || cells.isClosed() || uses.isClosed()
                    || (!busy && crowded.crowded(now))) {
                return QueueCells.EMPTY;
            }
        }
        return QueueCells.EMPTY;
    }

    /** A busy-spinning wait between attempts: a slice of spinning, never a sleep. */
    private void spinASlice(QueueSignal signal, long now, long remaining, Spinning.Condition condition)
            throws InterruptedException {
        if (uses.isClosed()) {
            throw handleClosed();
        }
        spin(signal, now, now + Math.min(remaining, SLEEP_SLICE_NANOS), condition, true);
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
    }

    /** Drain on a closed queue: a producer still holds the head cell; wait a slice for it. */
    private void awaitPublication() {
        int sequence = notEmpty.prepare(selfEntry);
        try {
            if (!cells.hasMessage() && !uses.isClosed()) {
                notEmpty.await(sequence, SLEEP_SLICE_NANOS);
            }
        } finally {
            notEmpty.awake(selfEntry);
        }
    }

    /** A waiter leaving without using its wake-up hands it on, so no message waits on a sleeper. */
    private void passOnMessage() {
        if (notEmpty.anyoneAsleep() && cells.hasMessage()) {
            notEmpty.signal();
        }
    }

    private void passOnRoom() {
        if (notFull.anyoneAsleep() && cells.hasRoom()) {
            notFull.signal();
        }
    }

    // ---- helpers ----

    /**
     * The deadline of the first claim of a wait of {@code nanos}: none for an unbounded one, so
     * that a put or take that succeeds at once reads no clock; a wait that follows reads it.
     */
    private static long claimDeadline(long nanos) {
        return nanos >= UNBOUNDED_NANOS ? QueueCells.NO_DEADLINE : System.nanoTime() + nanos;
    }

    private boolean tryOffer(Outgoing message, long deadline) {
        long t = claimWritable(deadline);
        if (t == QueueCells.NO_ROOM) {
            return false;
        }
        if (t == QueueCells.CLOSED) {
            throw ended();
        }
        publish(t, message);
        return true;
    }

    private <T> T tryPoll(Incoming<T> whileClaimed, long deadline) {
        long h = cells.claimReadable(deadline);
        if (h == QueueCells.EMPTY) {
            return null;
        }
        if (h == QueueCells.CLOSED) {
            // before saying "drained", make sure no dead consumer still holds a message
            Recovery.Adopted adopted = sweepNow(Recovery.Role.CONSUMER);
            if (adopted != null) {
                return deliver(adopted.position(), whileClaimed);
            }
            if (cells.closedState() == ENDED_BY_PRODUCERS_DEATH) {
                throw new ProducersGoneException("queue " + name() + " is drained and every producer is dead ("
                        + "its creator " + owner + " and every participant that offered): the stream has ended");
            }
            throw new QueueClosedException("queue " + name() + " is closed and empty");
        }
        return deliver(h, whileClaimed);
    }



    private Recovery.Adopted maybeSweep(Recovery.Role role) {
        long now = System.nanoTime();
        if (!sweeps.open(now)) {
            return null;
        }
        Recovery.Adopted adopted = recovery.sweep(role, self, false);
        if (adopted != null) {
            sweeps.nextAt(now); // a dead consumer may have held more than one cell
        }
        return adopted;
    }

    /** A sweep now, with liveness read afresh: for answers that must be final ("drained"). */
    private Recovery.Adopted sweepNow(Recovery.Role role) {
        sweeps.nextAt(System.nanoTime() + SWEEP_INTERVAL_NANOS);
        return recovery.sweep(role, self, true);
    }



    /** Ends the stream for {@code why}, unless it has already ended (the first reason stays). */
    private boolean endStream(int why) {
        boolean ended = cells.endStream(why);
        notEmpty.signalAll();
        notFull.signalAll();
        return ended;
    }

    private void setClosed() {
        endStream(ENDED_BY_PRODUCER);
    }

    /**
     * Called by a consumer that found the queue empty: at most every
     * {@value #PRODUCERS_CHECK_MILLIS} ms per handle, ends the stream if every producer is
     * dead. True when this call ended it.
     */
    private boolean maybeCheckProducers() {
        if (!producersChecks.open(System.nanoTime()) || cells.closedState() != OPEN || !everyProducerDead()) {
            return false;
        }
        return endStream(ENDED_BY_PRODUCERS_DEATH);
    }

    /**
     * Every producer is dead: the creator (every queue had one producer, its creator) is
     * DEAD, and no attached participant that has offered is alive or of unknown state.
     * Participants that have not offered yet do not count: a process that opens the queue
     * to produce after this is refused, as after endOfStream.
     */
    boolean everyProducerDead() {
        if (!liveness.isDead(packedOwner, false)) {
            return false;
        }
        for (int i = 0; i < participants.capacity(); i++) {
            long word = participants.identityWord(i);
            if (word == 0 || isReclaimMark(word) || namesNoProcess(word)
                    || (participants.role(i) & ROLE_PRODUCER) == 0) {
                continue;
            }
            if (!liveness.isDead(word, false)) {
                return false;
            }
        }
        return true;
    }

    private void recordRole(int role) {
        if ((rolesRecorded & role) == 0) {
            participants.addRole(self, role);
            rolesRecorded |= role; // a benign race: at worst the role is recorded twice
        }
    }

    private Outgoing checkSize(Outgoing message) {
        if (message.byteSize() > maxMessageBytes) {
            throw tooLarge(message);
        }
        return message;
    }

    private IllegalArgumentException tooLarge(Outgoing message) {
        return new IllegalArgumentException("message of " + message.byteSize() + " bytes exceeds this queue's "
                + "maximum of " + maxMessageBytes + " bytes");
    }

    private Outgoing checkMessage(byte[] message) {
        return checkSize(Outgoing.of(Objects.requireNonNull(message, "message")));
    }

    private void enter() {
        if (!uses.enter()) {
            throw handleClosed();
        }
    }

    private void exit() {
        uses.leave();
    }

    /** What an offer on an ended stream throws. */
    private QueueClosedException ended() {
        return new QueueClosedException("queue " + name() + (cells.closedState() == ENDED_BY_PRODUCERS_DEATH
                ? " was ended when every producer had died" : " is closed") + ": it accepts no more messages");
    }

    private QueueClosedException handleClosed() {
        return new QueueClosedException("this process closed its handle to queue " + file.path());
    }

    private static ProcessIdentity ownerOf(MemorySegment mem) {
        return new ProcessIdentity(mem.get(LE_LONG, OWNER_PID_OFFSET), mem.get(LE_LONG, OWNER_START_OFFSET));
    }

    private static QueueStats stats(String name, MemorySegment mem, Geometry g, Participants participants,
            ProcessIdentity owner) {
        long tail = (long) LONG.getVolatile(mem, TAIL_OFFSET);
        long head = (long) LONG.getVolatile(mem, HEAD_OFFSET);
        int size = (int) Math.max(0, Math.min(g.capacity(), tail - head));
        long[] totals = participants.totals();
        return new QueueStats(name, g.capacity(), g.maxMessageBytes(), size, totals[0], totals[1],
                (long) LONG.getVolatile(mem, REJECTED_OFFSET), (int) INT.getVolatile(mem, CLOSED_OFFSET) != 0,
                owner, participants.snapshot());
    }
}
