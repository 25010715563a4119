package io.refshare.cli.bench;

import io.refshare.Refshare;
import io.refshare.channel.ShareQueue;
import io.refshare.tensor.Tensor;

import java.io.IOException;
import java.util.concurrent.TimeUnit;

/**
 * The producer's side of the refshare measurements, over {@link ShareQueue}s between this
 * process and the consumer process.
 * <ul>
 * <li>Ping-pong: one tensor in flight on a "ping" queue, a small acknowledgement tensor
 * back on a "pong" queue. The send timestamp is taken just before {@code put}.</li>
 * <li>Streaming: back-to-back puts into one queue whose capacity bounds the messages in
 * flight; the consumer times what it takes.</li>
 * </ul>
 * Waits on the queues are sliced so that a consumer that died turns into an exception,
 * never a hang.
 */
final class RefshareBench {
    private static final int PING_PONG_CAPACITY = 2;
    private static final long WAIT_SLICE_MILLIS = 100;

    private final Refshare rs;
    private final PeerProcess peer;

    RefshareBench(Refshare rs, PeerProcess peer) {
        this.rs = rs;
        this.peer = peer;
    }

    LatencyStats pingPong(long size, Mode mode, int warmup, int rounds) throws IOException, InterruptedException {
        int total = warmup + rounds;
        long[] sendAt = new long[total];
        long[] ackAt = new long[total];
        try (ShareQueue ping = ShareQueue.create(rs, PING_PONG_CAPACITY);
             ShareQueue pong = ShareQueue.create(rs, PING_PONG_CAPACITY);
             Tensor reused = mode == Mode.REUSE ? filled(size, Payload.tag(mode, 0)) : null) {
            peer.send(BenchPeer.RS_PINGPONG, ping.name(), pong.name(), Integer.toString(total), mode.name());
            peer.await(BenchPeer.READY);
            for (int i = 0; i < total; i++) {
                if (reused != null) {
                    sendAt[i] = System.nanoTime();
                    put(ping, reused);
                } else {
                    try (Tensor fresh = filled(size, Payload.tag(mode, i))) {
                        sendAt[i] = System.nanoTime();
                        put(ping, fresh);
                    } // dropped at once, as a producer does: the block waits for the consumer to let go
                }
                Tensor ack = take(pong);
                ackAt[i] = System.nanoTime();
                ack.close();
            }
            Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
            reply.requireNoneBad("refshare " + mode.label() + " ping-pong");
            return LatencyStats.of(sendAt, reply.timestamps(), ackAt, warmup);
        }
    }

    ThroughputStats stream(long size, Mode mode, int warmup, int messages, int window)
            throws IOException, InterruptedException {
        int total = warmup + messages;
        try (ShareQueue queue = ShareQueue.create(rs, window);
             Tensor reused = mode == Mode.REUSE ? filled(size, Payload.tag(mode, 0)) : null) {
            peer.send(BenchPeer.RS_STREAM, queue.name(), Integer.toString(total), Integer.toString(warmup), mode.name());
            peer.await(BenchPeer.READY);
            for (int i = 0; i < total; i++) {
                if (reused != null) {
                    put(queue, reused);
                } else {
                    try (Tensor fresh = filled(size, Payload.tag(mode, i))) {
                        put(queue, fresh);
                    }
                }
            }
            Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
            reply.requireNoneBad("refshare " + mode.label() + " streaming");
            return new ThroughputStats(messages, messages * size, reply.elapsedNanos(), window + " messages");
        }
    }

    private Tensor filled(long size, byte tag) {
        Tensor t = rs.allocateBytes(size);
        Payload.fill(t.data(), tag);
        return t;
    }

    private void put(ShareQueue queue, Tensor t) throws InterruptedException, IOException {
        while (!queue.offer(t, WAIT_SLICE_MILLIS, TimeUnit.MILLISECONDS)) {
            peer.requireAlive();
        }
    }

    private Tensor take(ShareQueue queue) throws InterruptedException, IOException {
        Tensor t;
        while ((t = queue.poll(WAIT_SLICE_MILLIS, TimeUnit.MILLISECONDS)) == null) {
            peer.requireAlive();
        }
        return t;
    }
}
