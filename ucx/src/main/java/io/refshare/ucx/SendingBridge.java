package io.refshare.ucx;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Forwards a local queue to a {@link RemoteQueue}: takes each tensor (this process holds it
 * as any consumer does), puts it on the remote queue (which keeps its own reference until the
 * far side has its copy) and lets its own go. Runs until the local stream ends (then the
 * remote side is told, after every tensor is delivered) or {@link #stop()}.
 *
 * <p>A take that meets a resource limit (every peer entry of the sender's counter file held,
 * or this process out of open files or mappings) leaves the message in the local queue: the
 * bridge logs it, at most every {@value #LIMIT_WARNING_SECONDS} s, and tries again
 * {@value #LIMIT_PAUSE_MILLIS} ms later, since a bridge is a service that outlives such a spell.
 */
public final class SendingBridge {
    private static final System.Logger LOG = System.getLogger(SendingBridge.class.getName());
    static final long LIMIT_PAUSE_MILLIS = 100;
    static final long LIMIT_WARNING_SECONDS = 10;

    /** Where the bridge puts what it takes: a {@link RemoteQueue} (a test's own sink in tests). */
    interface Destination {
        void put(Tensor tensor) throws InterruptedException;

        void close(Duration timeout);
    }

    private final ShareQueue from;
    private final Destination to;
    private volatile boolean stopped;
    private volatile long limitsMet; // written by the thread in run() only

    public SendingBridge(ShareQueue from, RemoteQueue to) {
        this(from, (Destination) to);
    }

    SendingBridge(ShareQueue from, Destination to) {
        this.from = from;
        this.to = to;
    }

    /** Forwards until the local queue's stream ends or {@link #stop()}; returns the tensors forwarded. */
    public long run() throws InterruptedException {
        long forwarded = 0;
        long nextWarning = System.nanoTime();
        while (!stopped) {
            Tensor t;
            try {
                t = from.poll(100, TimeUnit.MILLISECONDS);
            } catch (QueueClosedException end) {
                break;
            } catch (ResourceLimitException limit) {
                limitsMet++;
                if (System.nanoTime() - nextWarning >= 0) {
                    nextWarning = System.nanoTime() + TimeUnit.SECONDS.toNanos(LIMIT_WARNING_SECONDS);
                    LOG.log(System.Logger.Level.WARNING, "queue " + from.name() + ": a message stays queued ("
                            + limitsMet + " so far), trying again: " + limit.getMessage());
                }
                TimeUnit.MILLISECONDS.sleep(LIMIT_PAUSE_MILLIS);
                continue;
            }
            if (t == null) {
                continue;
            }
            try (t) {
                to.put(t);
                forwarded++;
            }
        }
        return forwarded;
    }

    /** How many takes met a resource limit and left their message queued (each tried again). */
    public long limitsMet() {
        return limitsMet;
    }

    /** Makes {@link #run()} return after the tensor it is forwarding. */
    public void stop() {
        stopped = true;
    }

    /** Waits for deliveries (at most {@code timeout}), tells the receiver the stream ended, disconnects. */
    public void finish(Duration timeout) {
        to.close(timeout);
    }
}
