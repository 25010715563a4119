package io.refshare.channel;

import io.refshare.Refshare;
import io.refshare.RefshareException;
import io.refshare.tensor.Tensor;
import io.refshare.wire.DescriptorCodec;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * A named queue of tensors between any number of producer and consumer processes, the
 * zero-copy counterpart of {@code torch.multiprocessing.Queue}: {@code put} shares a tensor
 * (counting one reference), {@code take} receives it in another process (mapping the same
 * memory). Each message goes to exactly one consumer. Thread-safe.
 *
 * <h2>Counts</h2>
 * A put that fails (timeout, closed queue) returns its reference at once. Messages still
 * queued when the last consumer leaves, or when the queue is closed and drained, have
 * their references returned too, so the producer's memory comes back. A message that
 * cannot be received (garbage, a sender lying about its identity, already received) is
 * rejected, logged and counted in {@link #rejected()}; the queue goes on serving.
 *
 * <h2>Closing</h2>
 * <ul>
 * <li>{@link #endOfStream()}: no more puts, from anyone; consumers take what is left and
 * then {@link #take()} throws {@link QueueClosedException}.</li>
 * <li>{@link #close()} detaches this process. The creator's close also ends the stream
 * and removes the queue's name (consumers still attached finish the remaining messages).
 * If no other consumer is attached, the close ends the stream and returns the references
 * of every message left. Idempotent; blocked calls of this handle fail with
 * {@link QueueClosedException}.</li>
 * </ul>
 */
public final class ShareQueue implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(ShareQueue.class.getName());

    private final Refshare refshare;
    private final ShmQueue queue;
    private final boolean creator;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder rejected = new LongAdder();
    /** This handle has polled, so the queue counts it among the consumers. */
    private volatile boolean polled;

    private ShareQueue(Refshare refshare, ShmQueue queue, boolean creator) {
        this.refshare = refshare;
        this.queue = queue;
        this.creator = creator;
    }

    /** Creates a queue holding at most {@code capacity} messages; other processes open it by {@link #name()}. */
    public static ShareQueue create(Refshare refshare, int capacity) {
        return new ShareQueue(refshare, ShmQueue.create(refshare.sharing().directory(), capacity,
                DescriptorCodec.MAX_ENCODED_BYTES), true);
    }

    /** Opens a queue another process created. */
    public static ShareQueue open(Refshare refshare, String name) {
        return new ShareQueue(refshare, ShmQueue.open(refshare.sharing().directory(), name), false);
    }

    public String name() {
        return queue.name();
    }

    /**
     * Shares {@code tensor} with one consumer, waiting while the queue is full. The caller
     * keeps its tensor and may close it at once: the memory lives until the consumer is done.
     */
    public void put(Tensor tensor) throws InterruptedException {
        if (!offer(tensor, Long.MAX_VALUE, TimeUnit.NANOSECONDS)) {
            throw new AssertionError("an unbounded offer timed out");
        }
    }

    /** Like {@link #put}, giving up after {@code timeout}; false (and nothing counted) when it did. */
    public boolean offer(Tensor tensor, long timeout, TimeUnit unit) throws InterruptedException {
        byte[] message = refshare.share(tensor);
        boolean sent = false;
        try {
            sent = queue.offer(message, timeout, unit);
            return sent;
        } finally {
            if (!sent) {
                refshare.cancel(message);
            }
        }
    }

    /** The next tensor, waiting for one; throws {@link QueueClosedException} at the end of the stream. */
    public Tensor take() throws InterruptedException {
        Tensor t;
        do {
            t = poll(Long.MAX_VALUE, TimeUnit.NANOSECONDS);
        } while (t == null);
        return t;
    }

    /** The next tensor, or null after {@code timeout}; throws {@link QueueClosedException} at the end of the stream. */
    public Tensor poll(long timeout, TimeUnit unit) throws InterruptedException {
        polled = true;
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        while (true) {
            long left = deadline - System.nanoTime();
            try {
                // received while the message is still claimed in the queue: if this process dies
                // before taking the reference, another consumer gets the message; after, the
                // reference is attributed to this process and reclaimed by the producer
                return queue.poll(Math.max(0, left), TimeUnit.NANOSECONDS, refshare::receive);
            } catch (QueueClosedException e) {
                throw e;
            } catch (RefshareException e) {
                rejected.increment();
                LOG.log(System.Logger.Level.WARNING, "{0}: rejected a message: {1}", queue.name(), e.getMessage());
            }
        }
    }

    /** No more puts from anyone; consumers drain what is left. Idempotent. */
    public void endOfStream() {
        queue.markClosed();
    }

    /** Messages taken from the queue that could not be received (malformed, hostile, stale). */
    public long rejected() {
        return rejected.sum();
    }

    public QueueStats stats() {
        return queue.stats();
    }

    /** See the class comment. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            // attached handles that consume, or may yet (they have not offered); ours is among them if we polled
            long consumers = queue.stats().participants().stream().filter(p -> p.consumer() || !p.producer()).count();
            boolean lastConsumer = consumers <= (polled ? 1 : 0);
            if (creator || lastConsumer) {
                queue.markClosed();
            }
            if (lastConsumer) {
                int returned = queue.drain(this::returnUndelivered);
                if (returned > 0) {
                    LOG.log(System.Logger.Level.DEBUG, "{0}: returned {1} undelivered messages", queue.name(), returned);
                }
            }
        } finally {
            queue.close();
        }
    }

    private void returnUndelivered(byte[] message) {
        try {
            refshare.cancel(message);
        } catch (RefshareException e) {
            rejected.increment(); // garbage or a message whose sender's files are gone: nothing to return
        }
    }

    @Override
    public String toString() {
        return "ShareQueue[" + queue.name() + "]";
    }
}
