package io.refshare.ucx;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Forwards a local queue to a {@link RemoteQueue}: takes each tensor (this process holds it
 * as any consumer does), puts it on the remote queue (which keeps its own reference until the
 * far side has its copy) and lets its own go. Runs until the local stream ends (then the
 * remote side is told, after every tensor is delivered) or {@link #stop()}.
 */
public final class SendingBridge {
    private final ShareQueue from;
    private final RemoteQueue to;
    private volatile boolean stopped;

    public SendingBridge(ShareQueue from, RemoteQueue to) {
        this.from = from;
        this.to = to;
    }

    /** Forwards until the local queue's stream ends or {@link #stop()}; returns the tensors forwarded. */
    public long run() throws InterruptedException {
        long forwarded = 0;
        while (!stopped) {
            Tensor t;
            try {
                t = from.poll(100, TimeUnit.MILLISECONDS);
            } catch (QueueClosedException end) {
                break;
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

    /** Makes {@link #run()} return after the tensor it is forwarding. */
    public void stop() {
        stopped = true;
    }

    /** Waits for deliveries (at most {@code timeout}), tells the receiver the stream ended, disconnects. */
    public void finish(Duration timeout) {
        to.close(timeout);
    }
}
