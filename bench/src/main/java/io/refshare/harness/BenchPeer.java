package io.refshare.harness;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.WaitStrategy;
import io.refshare.Tensor;
import org.HdrHistogram.Histogram;

import java.io.BufferedReader;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The consumer process of {@code refshare bench}: one child JVM that serves every
 * measurement of the run, driven by one-line commands on stdin ({@link PeerProcess}),
 * answering on stdout. For each message it does what the producer's counterpart expects
 * of a consumer: receive, read the first and last element and 64 bytes
 * ({@link Payload#read}), take its timestamp, let go, and (in a ping-pong) answer with a
 * small acknowledgement. Timestamps are kept in arrays and reported at the end of a
 * measurement, so reporting costs nothing while it runs.
 * Args: shared-memory directory, file prefix.
 */
public final class BenchPeer {
    static final String READY = "READY";
    static final String RESULT = "RESULT";
    static final String ERROR = "ERROR";
    static final String EXIT = "EXIT";
    static final String CLOCK = "CLOCK";
    static final String CONNECT = "CONNECT";
    static final String CONNECTED = "CONNECTED";
    /**
     * {@code THREAD}: replies {@code THREAD tid}, the thread that serves the commands and so
     * consumes every stream ({@code THREAD -} when /proc cannot tell).
     */
    static final String THREAD = "THREAD";
    /** {@code RS_PINGPONG ping pong rounds mode [waitStrategy]}: replies {@code RESULT bad readAt...}. */
    static final String RS_PINGPONG = "RS_PINGPONG";
    /** {@code RS_STREAM queue messages warmup mode}: replies {@code RESULT bad start end}. */
    static final String RS_STREAM = "RS_STREAM";
    /**
     * {@code RS_STREAM_BATCH queue messages warmup batch}: as {@link #RS_STREAM} in reuse mode,
     * taking one and then draining up to {@code batch - 1} more at a time.
     */
    static final String RS_STREAM_BATCH = "RS_STREAM_BATCH";
    /** {@code RS_RECLAIM ping pong rounds holdNanos}: replies {@code RESULT bad closeAt...}. */
    static final String RS_RECLAIM = "RS_RECLAIM";
    /**
     * {@code RS_DRAIN queue}: takes until the stream ends, each message's one-way latency from the
     * producer's stamp (its first 8 bytes: {@code System.nanoTime()} just before {@code put}); replies
     * {@code RESULT count firstTakeAt lastTakeAt histogram} (the latencies' HdrHistogram, in
     * {@link ScalingBench#encode}'s form).
     */
    static final String RS_DRAIN = "RS_DRAIN";
    /**
     * {@code RS_PRODUCE queue size count}: opens the queue, replies {@code READY}, and after a line
     * {@code GO} puts {@code count} fresh tensors of {@code size} bytes, each stamped as for
     * {@link #RS_DRAIN}; replies {@code PUT} once the last is taken (its close waits for that).
     */
    static final String RS_PRODUCE = "RS_PRODUCE";
    /** {@code UDS_PINGPONG rounds size}: replies {@code RESULT bad readAt...}. */
    static final String UDS_PINGPONG = "UDS_PINGPONG";
    /** {@code UDS_STREAM messages warmup size}: replies {@code RESULT bad start end}. */
    static final String UDS_STREAM = "UDS_STREAM";

    private final Refshare rs;
    private final PrintStream out;
    private final BufferedReader commands;
    private SocketChannel socket;

    private BenchPeer(Refshare rs, PrintStream out, BufferedReader commands) {
        this.rs = rs;
        this.out = out;
        this.commands = commands;
    }

    public static void main(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0])).withPrefix(args[1]);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        boolean producerGone = false;
        try (Refshare rs = Refshare.open(config)) {
            BenchPeer peer = new BenchPeer(rs, out, in);
            peer.reply(READY);
            try {
                String line;
                while ((line = in.readLine()) != null && !line.equals(EXIT)) {
                    peer.serve(line.split(" "));
                }
            } catch (QueueClosedException | EOFException e) {
                // the producer stopped in the middle (it failed, or was interrupted): not our failure to trace
                peer.reply(ERROR + " " + e.getMessage());
                producerGone = true;
            } catch (Exception e) {
                peer.reply(ERROR + " " + e);
                throw e;
            } finally {
                if (peer.socket != null) {
                    peer.socket.close();
                }
            }
        } // closing refshare gives back what this process holds and removes its files
        if (producerGone) {
            System.err.println("refshare bench consumer: the producer stopped in the middle of a measurement");
            System.exit(1);
        }
    }

    private void serve(String[] w) throws Exception {
        switch (w[0]) {
            case CLOCK -> reply(CLOCK + " " + System.nanoTime());
            case THREAD -> reply(THREAD + " " + SharedCpu.currentThread().map(t -> Long.toString(SharedCpu.threadId(t)))
                    .orElse("-"));
            case CONNECT -> {
                socket = SocketChannel.open(StandardProtocolFamily.UNIX);
                socket.setOption(StandardSocketOptions.SO_SNDBUF, SocketBench.BUFFER_BYTES);
                socket.setOption(StandardSocketOptions.SO_RCVBUF, SocketBench.BUFFER_BYTES);
                socket.connect(UnixDomainSocketAddress.of(w[1]));
                reply(CONNECTED);
            }
            case RS_PINGPONG -> refsharePingPong(w[1], w[2], Integer.parseInt(w[3]), Mode.valueOf(w[4]), waiting(w, 5));
            case RS_RECLAIM -> refshareReclaim(w[1], w[2], Integer.parseInt(w[3]), Long.parseLong(w[4]));
            case RS_STREAM -> refshareStream(w[1], Integer.parseInt(w[2]), Integer.parseInt(w[3]), Mode.valueOf(w[4]),
                    waiting(w, 5), 1);
            case RS_STREAM_BATCH -> refshareStream(w[1], Integer.parseInt(w[2]), Integer.parseInt(w[3]), Mode.REUSE,
                    WaitStrategy.BACKOFF, Integer.parseInt(w[4]));
            case RS_DRAIN -> refshareDrain(w[1]);
            case RS_PRODUCE -> refshareProduce(w[1], Long.parseLong(w[2]), Integer.parseInt(w[3]));
            case UDS_PINGPONG -> socketPingPong(Integer.parseInt(w[1]), Long.parseLong(w[2]));
            case UDS_STREAM -> socketStream(Integer.parseInt(w[1]), Integer.parseInt(w[2]), Long.parseLong(w[3]));
            default -> throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }

    /** The wait strategy word {@code at} of a command, BACKOFF when absent. */
    private static WaitStrategy waiting(String[] words, int at) {
        return words.length > at ? WaitStrategy.valueOf(words[at]) : WaitStrategy.BACKOFF;
    }

    private void refsharePingPong(String pingName, String pongName, int rounds, Mode mode, WaitStrategy waiting)
            throws InterruptedException {
        long[] readAt = new long[rounds];
        int bad = 0;
        try (ShareQueue ping = rs.openQueue(pingName, waiting);
             ShareQueue pong = rs.openQueue(pongName, waiting);
             Tensor ack = rs.allocateBytes(8)) {
            reply(READY);
            for (int i = 0; i < rounds; i++) {
                boolean ok;
                try (Tensor t = ping.take()) {
                    ok = Payload.read(t.data(), Payload.tag(mode, i));
                    readAt[i] = System.nanoTime();
                } // closed before the ack: a fresh producer can have the block back for its next message
                if (!ok) {
                    bad++;
                }
                pong.put(ack);
            }
        }
        replyTimestamps(bad, readAt);
    }

    /**
     * Reclamation rounds: take a fresh tensor, read it, hold it for {@code holdNanos}, note the
     * time just before closing it (the last reference anywhere: the producer dropped its own
     * before we are done holding), close it, acknowledge.
     */
    private void refshareReclaim(String pingName, String pongName, int rounds, long holdNanos)
            throws InterruptedException {
        long[] closeAt = new long[rounds];
        int bad = 0;
        try (ShareQueue ping = rs.openQueue(pingName);
             ShareQueue pong = rs.openQueue(pongName);
             Tensor ack = rs.allocateBytes(8)) {
            reply(READY);
            for (int i = 0; i < rounds; i++) {
                try (Tensor t = ping.take()) {
                    if (!Payload.read(t.data(), Payload.tag(Mode.FRESH, i))) {
                        bad++;
                    }
                    hold(holdNanos);
                    closeAt[i] = System.nanoTime();
                }
                pong.put(ack);
            }
        }
        replyTimestamps(bad, closeAt);
    }

    /**
     * Holds on for {@code nanos}, asleep: a consumer at work elsewhere leaves the producer the
     * CPU to finish dropping its own reference (on two cores a spinning consumer could take it).
     */
    private static void hold(long nanos) {
        long deadline = System.nanoTime() + nanos;
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(left);
        }
    }

    /** Takes {@code messages}, one and then up to {@code batchSize - 1} more at a time, checking each. */
    private void refshareStream(String name, int messages, int warmup, Mode mode, WaitStrategy waiting, int batchSize)
            throws InterruptedException {
        int bad = 0;
        long start = 0;
        List<Tensor> batch = new ArrayList<>(batchSize);
        try (ShareQueue queue = rs.openQueue(name, waiting)) {
            reply(READY);
            int i = 0;
            while (i < messages) {
                batch.add(queue.take());
                if (batchSize > 1) {
                    queue.drainTo(batch, Math.min(batchSize, messages - i) - 1);
                }
                for (Tensor t : batch) {
                    try (t) {
                        if (!Payload.read(t.data(), Payload.tag(mode, i))) {
                            bad++;
                        }
                    }
                    if (i++ == warmup - 1) {
                        start = System.nanoTime();
                    }
                }
                batch.clear();
            }
        }
        long end = System.nanoTime();
        reply(RESULT + " " + bad + " " + start + " " + end);
    }

    private void refshareDrain(String name) throws InterruptedException {
        Histogram latency = new Histogram(3);
        int count = 0;
        long first = 0;
        long last = 0;
        try (ShareQueue queue = rs.openQueue(name)) {
            reply(READY);
            while (true) {
                Tensor t;
                try {
                    t = queue.take();
                } catch (QueueClosedException end) {
                    break;
                }
                try (t) {
                    last = System.nanoTime();
                    if (count++ == 0) {
                        first = last;
                    }
                    latency.recordValue(Math.max(0, last - t.data().get(ScalingBench.STAMP, 0)));
                }
            }
        }
        reply(RESULT + " " + count + " " + first + " " + last + " " + ScalingBench.encode(latency));
    }

    private void refshareProduce(String name, long size, int count) throws InterruptedException, IOException {
        try (ShareQueue queue = rs.openQueue(name)) {
            reply(READY);
            String go = commands.readLine();
            if (!"GO".equals(go)) {
                throw new IOException("expected GO, got " + go);
            }
            for (int i = 0; i < count; i++) {
                try (Tensor t = rs.allocateBytes(size)) {
                    t.data().set(ScalingBench.STAMP, 0, System.nanoTime());
                    queue.put(t);
                }
            }
        } // the close waits while messages are queued: the consumer takes them first
        reply("PUT");
    }

    private void socketPingPong(int rounds, long size) throws IOException {
        long[] readAt = new long[rounds];
        int bad = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(size, 64);
            ByteBuffer buffer = data.asByteBuffer();
            ByteBuffer ack = ByteBuffer.allocateDirect(1);
            reply(READY);
            for (int i = 0; i < rounds; i++) {
                SocketIo.readFully(socket, buffer.clear());
                if (!Payload.read(data, Payload.tag(Mode.REUSE, i))) {
                    bad++;
                }
                readAt[i] = System.nanoTime();
                SocketIo.writeFully(socket, ack.clear());
            }
        }
        replyTimestamps(bad, readAt);
    }

    private void socketStream(int messages, int warmup, long size) throws IOException {
        int bad = 0;
        long start = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(size, 64);
            ByteBuffer buffer = data.asByteBuffer();
            reply(READY);
            for (int i = 0; i < messages; i++) {
                SocketIo.readFully(socket, buffer.clear());
                if (!Payload.read(data, Payload.tag(Mode.REUSE, i))) {
                    bad++;
                }
                if (i == warmup - 1) {
                    start = System.nanoTime();
                }
            }
        }
        long end = System.nanoTime();
        reply(RESULT + " " + bad + " " + start + " " + end);
    }

    private void replyTimestamps(int bad, long[] readAt) {
        StringBuilder line = new StringBuilder(RESULT.length() + 20 * (readAt.length + 1)).append(RESULT).append(' ')
                .append(bad);
        for (long t : readAt) {
            line.append(' ').append(t);
        }
        reply(line.toString());
    }

    private void reply(String line) {
        out.println(line);
        out.flush();
    }
}
