package io.refshare.harness;

import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.WaitStrategy;
import io.refshare.Tensor;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The producer's side of the refshare measurements, over {@link ShareQueue}s between this
 * process and the consumer process.
 * <ul>
 * <li>Ping-pong: one tensor in flight on a "ping" queue, a small acknowledgement tensor
 * back on a "pong" queue. The send timestamp is taken just before {@code put}.</li>
 * <li>Streaming: back-to-back puts into one queue whose capacity bounds the messages in
 * flight; the consumer times what it takes.</li>
 * <li>Reclamation: one fresh tensor at a time, dropped by the producer at once; the time from
 * the consumer's close to the block being back in the producer's allocator.</li>
 * </ul>
 * Waits on the queues are sliced so that a consumer that died turns into an exception,
 * never a hang.
 */
final class RefshareBench {
    private static final int PING_PONG_CAPACITY = 2;
    private static final long WAIT_SLICE_MILLIS = 100;
    private static final long LIMBO_TIMEOUT_NANOS = 30_000_000_000L;
    private static final long WATCH_SPIN_NANOS = 50_000;
    private static final long WATCH_NAP_NANOS = 10_000;

    private final Refshare rs;
    private final PeerProcess peer;
    /** How both ends' queue handles wait (the peer is told with each command). */
    private final WaitStrategy waiting;

    RefshareBench(Refshare rs, PeerProcess peer) {
        this(rs, peer, WaitStrategy.BACKOFF);
    }

    RefshareBench(Refshare rs, PeerProcess peer, WaitStrategy waiting) {
        this.rs = rs;
        this.peer = peer;
        this.waiting = waiting;
    }

    /** The same measurements with both ends' handles waiting with {@code strategy}. */
    RefshareBench waitingWith(WaitStrategy strategy) {
        return new RefshareBench(rs, peer, strategy);
    }

    LatencyStats pingPong(long size, Mode mode, int warmup, int rounds) throws IOException, InterruptedException {
        int total = warmup + rounds;
        long[] sendAt = new long[total];
        long[] ackAt = new long[total];
        try (ShareQueue ping = rs.createQueue(PING_PONG_CAPACITY, waiting);
             ShareQueue pong = rs.createQueue(PING_PONG_CAPACITY, waiting);
             Tensor reused = mode == Mode.REUSE ? filled(size, Payload.tag(mode, 0)) : null) {
            Sampled done = sampled(() -> exchange(ping, pong, reused, size, mode, sendAt, ackAt),
                    BenchPeer.RS_PINGPONG, ping.name(), pong.name(), Integer.toString(total), mode.name(),
                    waiting.name());
            done.reply().requireNoneBad("refshare " + mode.label() + " ping-pong");
            return LatencyStats.of(sendAt, done.reply().timestamps(), ackAt, warmup).withSharedCpu(done.sharedCpu());
        }
    }

    /** The producer's rounds of a ping-pong: a tensor out on {@code ping}, the acknowledgement back on {@code pong}. */
    private void exchange(ShareQueue ping, ShareQueue pong, Tensor reused, long size, Mode mode, long[] sendAt,
                          long[] ackAt) throws IOException, InterruptedException {
        for (int i = 0; i < sendAt.length; i++) {
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
    }

    ThroughputStats stream(long size, Mode mode, int warmup, int messages, int window)
            throws IOException, InterruptedException {
        int total = warmup + messages;
        try (ShareQueue queue = rs.createQueue(window, waiting);
             Tensor reused = mode == Mode.REUSE ? filled(size, Payload.tag(mode, 0)) : null) {
            return timedStream("refshare " + mode.label(), size, messages, window, () -> {
                for (int i = 0; i < total; i++) {
                    if (reused != null) {
                        put(queue, reused);
                    } else {
                        try (Tensor fresh = filled(size, Payload.tag(mode, i))) {
                            put(queue, fresh);
                        }
                    }
                }
            }, BenchPeer.RS_STREAM, queue.name(), Integer.toString(total), Integer.toString(warmup), mode.name(),
                    waiting.name());
        }
    }

    /** Starts the consumer with {@code command}, runs {@code producing}, and returns what the consumer timed. */
    private ThroughputStats timedStream(String what, long size, int messages, int window, PeerWork producing,
                                        String... command) throws IOException, InterruptedException {
        Sampled done = sampled(producing, command);
        done.reply().requireNoneBad(what + " streaming");
        return new ThroughputStats(messages, messages * size, done.reply().elapsedNanos(), window + " messages",
                done.sharedCpu());
    }

    /** The consumer's answer to a command, and how often the two measuring threads shared a CPU while it ran. */
    private record Sampled(Reply reply, SharedCpu.Result sharedCpu) {
    }

    /**
     * Starts the consumer with {@code command} and runs {@code producing}, sampling meanwhile how
     * often this thread and the consumer's measuring thread are on one CPU ({@link SharedCpu}).
     */
    private Sampled sampled(PeerWork producing, String... command) throws IOException, InterruptedException {
        Optional<Path> consumer = peer.measuringThread(); // asked first: a peer at work answers nothing else
        peer.send(command);
        peer.await(BenchPeer.READY);
        SharedCpu.Sampling sampling = SharedCpu.start(SharedCpu.currentThread(), consumer);
        SharedCpu.Result sharedCpu;
        try {
            producing.run();
        } finally {
            sharedCpu = sampling.stop();
        }
        return new Sampled(Reply.parse(peer.await(BenchPeer.RESULT)), sharedCpu);
    }

    /**
     * Streaming in reuse mode with {@link ShareQueue#putAll} of {@code batchSize} references at a
     * time, and a consumer that takes one and drains the rest of a batch: references to the one
     * tensor, or with {@code distinct} to {@code batchSize} different pre-filled tensors (a batch
     * of different blocks, as a real batch mostly is).
     */
    ThroughputStats streamBatches(long size, int batchSize, boolean distinct, int warmup, int messages, int window)
            throws IOException, InterruptedException {
        int total = warmup + messages;
        List<Tensor> tensors = new ArrayList<>();
        try (ShareQueue queue = rs.createQueue(window, waiting)) {
            for (int i = 0; i < (distinct ? batchSize : 1); i++) {
                tensors.add(filled(size, Payload.tag(Mode.REUSE, 0)));
            }
            List<Tensor> batch = distinct ? tensors : Collections.nCopies(batchSize, tensors.get(0));
            return timedStream("refshare batches of " + batchSize + (distinct ? " different tensors" : ""), size,
                    messages, window, () -> {
                        for (int sent = 0; sent < total; sent += batchSize) {
                            queue.putAll(total - sent >= batchSize ? batch : batch.subList(0, total - sent));
                        }
                    }, BenchPeer.RS_STREAM_BATCH, queue.name(), Integer.toString(total), Integer.toString(warmup),
                    Integer.toString(batchSize));
        } finally {
            tensors.forEach(Tensor::close);
        }
    }

    /**
     * Reclamation latency: each round a freshly allocated tensor (only the bytes the consumer
     * checks are written: this measures reclamation, not filling) is put and dropped by the producer at
     * once; the consumer reads it, holds it for {@code holdNanos} and closes it. The producer
     * only watches its limbo (never collects it itself) and notes the moment it is empty:
     * the block is back in its allocator. Rounds run one at a time.
     */
    Reclamation reclaim(long size, long holdNanos, int warmup, int rounds) throws IOException, InterruptedException {
        int total = warmup + rounds;
        long[] droppedAt = new long[total];
        long[] reusableAt = new long[total];
        try (ShareQueue ping = rs.createQueue(PING_PONG_CAPACITY);
             ShareQueue pong = rs.createQueue(PING_PONG_CAPACITY)) {
            peer.send(BenchPeer.RS_RECLAIM, ping.name(), pong.name(), Integer.toString(total), Long.toString(holdNanos));
            peer.await(BenchPeer.READY);
            for (int i = 0; i < total; i++) {
                try (Tensor fresh = rs.allocateBytes(size)) {
                    Payload.mark(fresh.data(), Payload.tag(Mode.FRESH, i)); // what the consumer checks, not a fill
                    put(ping, fresh);
                }
                droppedAt[i] = System.nanoTime();
                awaitLimboEmpty();
                reusableAt[i] = System.nanoTime();
                take(pong).close();
            }
            Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
            reply.requireNoneBad("refshare reclamation");
            long[] closeAt = reply.timestamps();
            if (closeAt.length != total) {
                throw new IOException("the consumer sent " + closeAt.length + " close times for " + total + " rounds");
            }
            long[] latency = new long[rounds];
            int n = 0;
            int excluded = 0;
            for (int i = warmup; i < total; i++) {
                if (closeAt[i] < droppedAt[i]) {
                    excluded++; // the producer's own drop found the block free: nothing for the collector to do
                } else {
                    latency[n++] = reusableAt[i] - closeAt[i];
                }
            }
            return new Reclamation(size, holdNanos, Arrays.copyOf(latency, n), excluded);
        }
    }

    /**
     * Watches (without collecting) until no block of the producer waits in the limbo: polls
     * it, spinning for the first {@value #WATCH_SPIN_NANOS} ns, then asleep between looks
     * ({@value #WATCH_NAP_NANOS} ns asked, plus the kernel's timer slack of 50 µs: a
     * reclamation slower than the spin is measured up to about 60 µs late). A watcher that
     * spins or yields all along keeps a CPU from the collector it is timing: on two cores the
     * collector, woken by the consumer's release on the other CPU's run queue, then waited 1.5
     * to 4 ms for a CPU in a few rounds of a hundred (timestamps of both, one clock), which
     * alone put the 20 ms-hold rows over 1 ms in about half the runs. Napping with the slack
     * removed (1 ns) brought those waits back: the watcher then ran every 10 µs.
     */
    private void awaitLimboEmpty() throws IOException {
        long start = System.nanoTime();
        long deadline = start + LIMBO_TIMEOUT_NANOS;
        for (int i = 1; rs.stats().limboBlocks() != 0; i++) {
            long now = System.nanoTime();
            if (now - start < WATCH_SPIN_NANOS) {
                Thread.onSpinWait();
                continue;
            }
            LockSupport.parkNanos(WATCH_NAP_NANOS);
            if ((i & 1023) == 0) {
                peer.requireAlive();
                if (now - deadline > 0) {
                    throw new IOException("the producer's limbo did not empty within "
                            + LIMBO_TIMEOUT_NANOS / 1_000_000_000 + " s after the consumer closed");
                }
            }
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
