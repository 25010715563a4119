package io.refshare;

import io.refshare.channel.ShmQueue;
import io.refshare.channel.RepeatedWarning;
import io.refshare.channel.Incoming;
import io.refshare.channel.QueueStats;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.exceptions.ReceiveInterruptedException;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.ProducersGoneException;
import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.wire.DescriptorCodec;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * A named queue of tensors between any number of producer and consumer processes, the
 * zero-copy counterpart of {@code torch.multiprocessing.Queue}: {@code put} shares a tensor
 * (counting one reference), {@code take} receives it in another process (mapping the same
 * memory). Each message goes to exactly one consumer. Thread-safe.
 *
 * <h2>The stream</h2>
 * Ending the stream is the producer side's decision alone. Consumers may leave and join
 * at any time: a consumer's {@link #close()} ends nothing and returns nothing, the
 * messages queued wait for the next consumer (a rolling restart of workers loses nothing).
 * The producer side is the queue's creator and every handle that has offered.
 * <table>
 * <caption>States of a queue's stream</caption>
 * <tr><th>State</th><th>Entered by</th><th>{@code put} / {@code offer}</th>
 *     <th>{@code take} / {@code poll}</th><th>{@code close}</th></tr>
 * <tr><td>OPEN</td><td>{@link Refshare#createQueue(int)}</td>
 *     <td>publish; when full, {@code put} waits and {@code offer} times out, also while no
 *     consumer is attached</td>
 *     <td>the next message; wait while empty</td>
 *     <td>detaches; see below for the creator and the last producer</td></tr>
 * <tr><td>ENDED by a producer</td><td>{@link #endOfStream()} of any handle, the creator's
 *     {@link #close()}, the last producer-side close with no consumer attached</td>
 *     <td>{@link QueueClosedException}</td>
 *     <td>the messages left, then {@link QueueClosedException}</td>
 *     <td>detaches</td></tr>
 * <tr><td>ENDED by the producers' death</td><td>a consumer that finds the queue empty,
 *     the creator DEAD and no producer attached that is alive or of unknown state (checked
 *     at least every 200 ms while waiting, so {@code take} ends within about a second); a
 *     process counts as dead only on the kernel's evidence (its life lock in the directory
 *     is free)</td>
 *     <td>{@link QueueClosedException}</td>
 *     <td>{@link ProducersGoneException} (a {@link QueueClosedException}), once drained</td>
 *     <td>detaches</td></tr>
 * </table>
 * Consumers that were attached keep draining an ended queue; its creator's close also
 * removes the queue's name, so no new handle can open it.
 *
 * <h2>Counts</h2>
 * A put that fails (timeout, ended stream) returns its reference at once. A producer-side
 * handle's close first waits (up to {@link #DEFAULT_LINGER}, or what {@link #close(Duration)}
 * is given) while messages are queued, for consumers to take them, also consumers that attach
 * only then. The last producer-side handle to close, if it then finds no consumer attached,
 * ends the stream and returns the references of every message still queued (logging a warning
 * with their number: nothing is dropped silently), so the producers' memory comes back; with a
 * consumer attached they stay for it. A message that cannot be received
 * (garbage, a sender lying about its identity, already received) is rejected, logged (at
 * most one warning per 10 s, with the count of those left out) and counted in
 * {@link #rejected()}; the queue goes on serving. A message this process cannot take
 * because a fixed resource is exhausted ({@link ResourceLimitException}, e.g. every peer
 * entry of the sender's counter file held, or its device memory to open a device tensor),
 * or because its heap is ({@link OutOfMemoryError}), is given back to the queue unconsumed,
 * for another consumer or a later take, and the exception is thrown to the caller of
 * take/poll/drainTo. A tensor {@code drainTo}'s collection refuses (its {@code add} throws)
 * is closed, its message consumed, and the exception thrown.
 *
 * <h2>Closing</h2>
 * {@link #close()} detaches this process; idempotent; blocked calls of this handle fail
 * with {@link QueueClosedException}. The creator's close ends the stream (consumers still
 * attached finish the remaining messages).
 */
public final class ShareQueue implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(ShareQueue.class.getName());
    /**
     * Rejected messages a poll still skips after its deadline, so a poll(0) behind a few
     * bad messages finds the good one after them; a run of failures longer than this (a
     * damaged queue failing every attempt) ends the poll at its deadline.
     */
    private static final int REJECTIONS_PAST_DEADLINE = 16;
    /** Pause between attempts once a poll has met that many rejections in a row. */
    private static final long PAUSE_AFTER_REJECTIONS_NANOS = 5_000_000L;

    /** How long {@link #close()} waits for queued messages to be taken: 10 seconds. */
    public static final Duration DEFAULT_LINGER = Duration.ofSeconds(10);

    private final Refshare refshare;
    private final ShmQueue queue;
    private final boolean creator;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder rejected = new LongAdder();
    private final RepeatedWarning rejections = new RepeatedWarning(LOG, RepeatedWarning.INTERVAL_NANOS);
    /** Receives a message in place from its cell (made once: a method reference is an object). */
    private final Incoming<Tensor> receiving;
    /** This handle has offered, so it is on the producer side. */
    private volatile boolean offered;

    private ShareQueue(Refshare refshare, ShmQueue queue, boolean creator) {
        this.refshare = refshare;
        this.receiving = refshare::receive;
        this.queue = queue;
        this.creator = creator;
    }

    /** See {@link Refshare#createQueue(int, WaitStrategy)}. */
    static ShareQueue create(Refshare refshare, int capacity, WaitStrategy waiting) {
        java.util.Objects.requireNonNull(waiting, "waiting");
        requireOpen(refshare);
        ShareQueue q = new ShareQueue(refshare, ShmQueue.create(refshare.sharing().directory(), capacity,
                DescriptorCodec.MAX_ENCODED_BYTES), true);
        q.queue.busySpin(waiting == WaitStrategy.BUSY_SPIN);
        return q;
    }

    /** See {@link Refshare#openQueue(String, WaitStrategy)}. */
    static ShareQueue open(Refshare refshare, String name, WaitStrategy waiting) {
        java.util.Objects.requireNonNull(waiting, "waiting");
        requireOpen(refshare);
        ShareQueue q = new ShareQueue(refshare, ShmQueue.open(refshare.sharing().directory(), name), false);
        q.queue.busySpin(waiting == WaitStrategy.BUSY_SPIN);
        return q;
    }

    private static void requireOpen(Refshare refshare) {
        if (refshare.isClosed()) {
            throw new IllegalStateException("the Refshare is closed: open a new one to create or open queues");
        }
    }

    /**
     * The queue's name, for other processes' {@link Refshare#openQueue(String)}. Answers after
     * close too.
     *
     * @return the name of the queue's file in the shared directory
     */
    public String name() {
        return queue.name();
    }

    /**
     * Shares {@code tensor} with one consumer, waiting while the queue is full. The caller
     * keeps its tensor and may close it at once: the memory lives until the consumer is done.
     * The first put or offer puts this handle on the producer side (see the class comment).
     *
     * @param tensor an open tensor of this handle's {@code Refshare}, host or device
     * @throws InterruptedException  when the waiting thread is interrupted; nothing is counted
     * @throws QueueClosedException  when the stream has ended or this handle is closed; nothing
     *                               is counted
     * @throws IllegalStateException when {@code tensor} or the {@code Refshare} is closed
     * @throws NullPointerException  when {@code tensor} is null
     */
    public void put(Tensor tensor) throws InterruptedException {
        if (!offer(tensor, Long.MAX_VALUE, TimeUnit.NANOSECONDS)) {
            throw new AssertionError("an unbounded offer timed out");
        }
    }

    /**
     * Like {@link #put}, giving up after {@code timeout}.
     *
     * @param tensor  an open tensor of this handle's {@code Refshare}, host or device
     * @param timeout how long to wait for room; zero or negative does not wait
     * @param unit    the unit of {@code timeout}
     * @return true when the message is queued; false when the queue stayed full, and then
     *         nothing is counted
     * @throws InterruptedException  when the waiting thread is interrupted; nothing is counted
     * @throws QueueClosedException  when the stream has ended or this handle is closed; nothing
     *                               is counted
     * @throws IllegalStateException when {@code tensor} or the {@code Refshare} is closed
     * @throws NullPointerException  when {@code tensor} or {@code unit} is null
     */
    public boolean offer(Tensor tensor, long timeout, TimeUnit unit) throws InterruptedException {
        PutMessage message = PutMessage.of(refshare, tensor);
        markOffered(); // a producer from its first real attempt, even one that times out
        boolean sent = false;
        try {
            sent = queue.offer(message, timeout, unit);
            return sent;
        } finally {
            if (!sent) {
                message.cancel();
            }
            message.done();
        }
    }

    /**
     * Puts every tensor of {@code tensors}, in order, waiting for room as {@link #put} does, and
     * wakes consumers once per run of messages published together instead of once per tensor:
     * the way to stream many small tensors. The batch's references are counted together (one
     * taking of the sender's counter lock for the batch, and a tensor that comes several times
     * in a row held once for the run), yet each tensor counts one reference, exactly as a put
     * of it would, given back when its message's receiver closes it; the tensors stay the
     * caller's to close.
     *
     * @param tensors open tensors of this handle's {@code Refshare}, host or device
     * @throws InterruptedException  when the waiting thread is interrupted; the tensors queued
     *                               before stay queued, the others count nothing
     * @throws QueueClosedException  when the stream ends (or this handle closes) before all are
     *                               queued: the ones queued before stay queued, the others count
     *                               nothing
     * @throws IllegalStateException when a tensor or the {@code Refshare} is closed; nothing is
     *                               queued or counted
     * @throws NullPointerException  when {@code tensors} or one of them is null
     */
    public void putAll(List<Tensor> tensors) throws InterruptedException {
        List<? extends PutMessage> messages = PutMessage.ofAll(refshare, tensors);
        markOffered();
        int sent = 0;
        try {
            while (sent < messages.size()) {
                sent += queue.offerAvailable(messages, sent);
                if (sent < messages.size() && queue.offer(messages.get(sent), Long.MAX_VALUE, TimeUnit.NANOSECONDS)) {
                    sent++; // the queue was full: the next one waited for room, as a put does
                }
            }
        } finally {
            for (int i = sent; i < messages.size(); i++) {
                messages.get(i).cancel();
            }
            messages.forEach(PutMessage::done);
        }
    }

    /** This handle is on the producer side from now on; written once (a volatile store is a fence, every put). */
    private void markOffered() {
        if (!offered) {
            offered = true;
        }
    }

    /**
     * The next tensor, waiting for one. It maps the producer's memory (its
     * {@link Tensor#data()} is read-only) and holds the message's reference: close it when
     * done. Messages that cannot be received are skipped (see {@link #rejected()}).
     *
     * @return the tensor, never null
     * @throws InterruptedException when the waiting thread is interrupted, also while it waits
     *         for the device work a device tensor's sender recorded; no message is taken (one
     *         being received goes back to the queue)
     * @throws QueueClosedException at the end of the stream, once drained ({@link ProducersGoneException}
     *         when it ended because every producer died)
     * @throws ResourceLimitException if the message could not be taken for a resource limit; it was given
     *         back to the queue for another consumer
     * @throws OutOfMemoryError when the heap is full while the message is taken; it was given back too
     * @throws QueueClosedException also when this handle is closed
     * @throws IllegalStateException when this handle's {@code Refshare} is closed (close the
     *         queue handle first)
     */
    public Tensor take() throws InterruptedException {
        Tensor t;
        do {
            t = poll(Long.MAX_VALUE, TimeUnit.NANOSECONDS);
        } while (t == null);
        return t;
    }

    /**
     * The next tensor, or null after {@code timeout}: returned by then whatever happens in
     * the queue, damaged cells included (past the deadline it only skips up to
     * {@value #REJECTIONS_PAST_DEADLINE} more rejected messages, each a quick failure).
     * Throws as {@link #take()}.
     *
     * @param timeout how long to wait for a message; zero or negative takes one only if it is
     *                there now
     * @param unit    the unit of {@code timeout}
     * @return the tensor, as {@code take} returns it, or null when none came in time
     * @throws InterruptedException   when the waiting thread is interrupted; no message is taken
     * @throws QueueClosedException   at the end of the stream, once drained, or when this handle
     *                                is closed ({@link ProducersGoneException} when every
     *                                producer died)
     * @throws ResourceLimitException as {@link #take()}: the message went back to the queue
     * @throws IllegalStateException  when this handle's {@code Refshare} is closed (close the
     *                                queue handle first)
     * @throws NullPointerException   when {@code unit} is null
     */
    public Tensor poll(long timeout, TimeUnit unit) throws InterruptedException {
        long nanos = Math.max(0, unit.toNanos(timeout));
        boolean unbounded = nanos >= ShmQueue.UNBOUNDED_NANOS; // take: no clock read for a message there now
        long deadline = unbounded ? 0 : System.nanoTime() + nanos;
        int rejectedHere = 0;
        while (true) {
            if (refshare.isClosed()) {
                // checked before a message is claimed; a close racing the claim gives it back (ShmQueue)
                throw new IllegalStateException("the Refshare of this queue handle is closed: it can receive nothing");
            }
            long left = unbounded ? Long.MAX_VALUE : deadline - System.nanoTime();
            try {
                // received while the message is still claimed in the queue: if this process dies
                // before taking the reference, another consumer gets the message; after, the
                // reference is attributed to this process and reclaimed by the producer
                return queue.poll(Math.max(0, left), TimeUnit.NANOSECONDS, receiving);
            } catch (QueueClosedException | ResourceLimitException e) {
                throw e; // the end of the stream, or a message given back: not a rejection
            } catch (ReceiveInterruptedException e) {
                Thread.interrupted(); // reported as the exception, as every interrupted wait does
                InterruptedException interrupted = new InterruptedException(e.getMessage());
                interrupted.initCause(e);
                throw interrupted; // the message was given back
            } catch (RefshareException e) {
                rejected.increment();
                rejections.warn(queue.name() + ": rejected a message: " + e.getMessage());
                rejectedHere++;
            }
            long remaining = unbounded ? Long.MAX_VALUE : deadline - System.nanoTime();
            if (remaining <= 0 && rejectedHere >= REJECTIONS_PAST_DEADLINE) {
                return null; // every attempt failed until the deadline: the timeout still holds
            }
            if (rejectedHere >= REJECTIONS_PAST_DEADLINE && remaining > 0) {
                // a long run of failures: a damaged queue, most likely; do not burn a CPU on it
                TimeUnit.NANOSECONDS.sleep(Math.min(remaining, PAUSE_AFTER_REJECTIONS_NANOS));
            }
        }
    }

    /**
     * Takes up to {@code max} tensors that are in the queue now, in order, and adds them to
     * {@code into}; never waits (as {@link java.util.concurrent.BlockingQueue#drainTo}).
     * Producers waiting for room are woken once for the whole batch. Each tensor is as
     * {@link #take()} returns it: close each when done. A consumer loop takes one, then drains
     * the rest of a batch: {@code batch.add(q.take()); q.drainTo(batch, 31);}.
     *
     * @param into where the tensors go
     * @param max  the most to take; 0 takes none
     * @return how many were added: 0 when the queue is empty (or its stream ended: the next
     *         {@code take} says so)
     * @throws ReceiveInterruptedException when the thread was interrupted while a device tensor's
     *                                receive waited for its sender's device work: that message
     *                                went back to the queue, the thread's interrupt status is set
     * @throws ResourceLimitException as {@link #take()}: that message went back to the queue;
     *                                the ones taken before are in {@code into}
     * @throws QueueClosedException   when this handle is closed
     * @throws IllegalStateException  when this handle's {@code Refshare} is closed
     */
    public int drainTo(Collection<? super Tensor> into, int max) {
        Objects.requireNonNull(into, "into");
        if (max < 0) {
            throw new IllegalArgumentException("max must not be negative: " + max);
        }
        if (refshare.isClosed()) {
            throw new IllegalStateException("the Refshare of this queue handle is closed: it can receive nothing");
        }
        int[] skipped = new int[1];
        int taken = queue.pollAvailable(max, (cell, offset, length) -> {
            try {
                return refshare.receive(cell, offset, length);
            } catch (ResourceLimitException | IllegalStateException | ReceiveInterruptedException cannotTakeNow) {
                throw cannotTakeNow; // given back to the queue
            } catch (RefshareException e) {
                rejected.increment();
                rejections.warn(queue.name() + ": rejected a message: " + e.getMessage());
                skipped[0]++;
                return null;
            }
        }, t -> {
            if (t != null) {
                try {
                    into.add(t);
                } catch (RuntimeException | Error refused) {
                    t.close(); // taken, its cell freed: nothing to give back, so at least nothing leaks
                    throw refused;
                }
            }
        });
        return taken - skipped[0];
    }

    /**
     * Ends the stream: no more puts from anyone; consumers drain what is left and then get
     * {@link QueueClosedException}. Any handle may end it, a consumer's too. Idempotent.
     *
     * @throws QueueClosedException when this handle is closed
     */
    public void endOfStream() {
        queue.markClosed();
    }

    /**
     * Messages this handle took from the queue and could not receive (malformed, hostile,
     * stale), or, at close, could not return.
     *
     * @return the count since this handle was opened
     */
    public long rejected() {
        return rejected.sum();
    }

    /**
     * Messages queued now, put and not yet taken (a moment's figure: concurrent puts and takes
     * move it).
     *
     * @return 0 .. the queue's capacity
     * @throws QueueClosedException when this handle is closed
     */
    public int size() {
        return queue.stats().size();
    }

    /** The queue's figures and participants, read from its file without locking. */
    QueueStats stats() {
        return queue.stats();
    }

    /** {@link #close(Duration)} with {@link #DEFAULT_LINGER}. */
    @Override
    public void close() {
        close(DEFAULT_LINGER);
    }

    /**
     * Detaches this handle (see the class comment). A handle on the producer side first waits,
     * up to {@code linger}, while messages it or others put are still queued, so that consumers,
     * also ones that have not attached yet, can take them: once this process closes its
     * {@code Refshare}, messages not yet received could no longer be. If it is then the producer
     * side's last handle and no consumer is attached, the stream ends and the messages left are
     * returned, with a warning naming how many. {@code Duration.ZERO} does not wait. Idempotent;
     * a second call, with any {@code linger}, does nothing. Calls of this handle blocked in
     * other threads fail with {@link QueueClosedException}.
     *
     * @param linger how long a producer-side handle waits for queued messages to be taken
     * @throws NullPointerException when {@code linger} is null and this handle is on the
     *                              producer side
     * @throws InvalidDataException when the queue's file was cut short under this process
     *                              (another process truncated it): the handle is closed all the
     *                              same, and messages still queued are not returned
     */
    public void close(Duration linger) {
        java.util.Objects.requireNonNull(linger, "linger");
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            if (creator) {
                queue.markClosed();
            }
            if (creator || offered) {
                lingerWhileQueued(linger);
                if (queue.lastProducerWithoutConsumer()) {
                    queue.markClosed(); // nobody is left to put, nobody is there to take
                    int returned = queue.drain(this::returnUndelivered);
                    if (returned > 0) {
                        LOG.log(System.Logger.Level.WARNING, "{0}: closed with {1} messages no consumer took within "
                                + "{2} ms; their references were returned", queue.name(), returned, linger.toMillis());
                    }
                }
            }
        } catch (InternalError cut) { // the file was cut short under us: say so (the finally detaches)
            throw queue.cutUnder(cut);
        } finally {
            queue.close();
        }
    }

    private void lingerWhileQueued(Duration linger) {
        long deadline = System.nanoTime() + linger.toNanos();
        while (queue.stats().size() > 0 && System.nanoTime() - deadline < 0) {
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private void returnUndelivered(byte[] message) {
        try {
            refshare.cancel(message);
        } catch (RefshareException e) {
            rejected.increment(); // garbage or a message whose sender's files are gone: nothing to return
        }
    }

    /**
     * A description for logs.
     *
     * @return {@code ShareQueue[name]}
     */
    @Override
    public String toString() {
        return "ShareQueue[" + queue.name() + "]";
    }
}
