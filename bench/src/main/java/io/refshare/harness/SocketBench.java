package io.refshare.harness;


import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The copy baseline: the same payloads through a Unix domain socket between the same two
 * processes. The producer writes the whole payload, the consumer reads all of it into its
 * own buffer before it reads the first and last element and 64 bytes, and in a ping-pong
 * answers with one byte. One connection serves the whole run; its socket file lives in a
 * private temporary directory that is removed as soon as the consumer has connected. Both
 * ends ask for 4 MiB socket buffers (the default is about 200 KiB): fewer wake-ups per large
 * payload, so the baseline is a well-tuned copy rather than a straw man.
 */
final class SocketBench implements AutoCloseable {
    /** Socket buffers asked for on both ends (the kernel caps them at net.core.wmem_max and rmem_max). */
    static final int BUFFER_BYTES = 4 << 20;

    private final PeerProcess peer;
    private final SocketChannel channel;

    private SocketBench(PeerProcess peer, SocketChannel channel) {
        this.peer = peer;
        this.channel = channel;
    }

    static SocketBench connect(PeerProcess peer) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("refshare-bench-");
        Path file = dir.resolve("bench.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(file));
            server.configureBlocking(false); // so a consumer that cannot connect is noticed, not waited for
            peer.send(BenchPeer.CONNECT, file.toString());
            SocketChannel channel;
            long deadline = System.nanoTime() + 30_000_000_000L;
            while ((channel = server.accept()) == null) {
                peer.requireAlive();
                if (System.nanoTime() - deadline > 0) {
                    throw new IOException("the consumer process did not connect to " + file + " within 30 s");
                }
                Thread.sleep(1);
            }
            try {
                peer.await(BenchPeer.CONNECTED);
            } catch (IOException | InterruptedException e) {
                channel.close();
                throw e;
            }
            channel.setOption(StandardSocketOptions.SO_SNDBUF, BUFFER_BYTES);
            channel.setOption(StandardSocketOptions.SO_RCVBUF, BUFFER_BYTES);
            return new SocketBench(peer, channel);
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    /** The kernel's send and receive buffer sizes on our end: the socket's in-flight window. */
    String window() throws IOException {
        return "kernel buffers " + ByteSize.label(channel.getOption(StandardSocketOptions.SO_SNDBUF)) + " send / "
                + ByteSize.label(channel.getOption(StandardSocketOptions.SO_RCVBUF)) + " receive";
    }

    LatencyStats pingPong(long size, int warmup, int rounds) throws IOException, InterruptedException {
        int total = warmup + rounds;
        long[] sendAt = new long[total];
        long[] ackAt = new long[total];
        try (Arena arena = Arena.ofConfined()) {
            ByteBuffer payload = filled(arena, size);
            ByteBuffer ack = ByteBuffer.allocateDirect(1);
            peer.send(BenchPeer.UDS_PINGPONG, Integer.toString(total), Long.toString(size));
            peer.await(BenchPeer.READY);
            for (int i = 0; i < total; i++) {
                payload.clear();
                sendAt[i] = System.nanoTime();
                SocketIo.writeFully(channel, payload);
                SocketIo.readFully(channel, ack.clear());
                ackAt[i] = System.nanoTime();
            }
        }
        Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
        reply.requireNoneBad("unix socket ping-pong");
        return LatencyStats.of(sendAt, reply.timestamps(), ackAt, warmup);
    }

    ThroughputStats stream(long size, int warmup, int messages) throws IOException, InterruptedException {
        int total = warmup + messages;
        try (Arena arena = Arena.ofConfined()) {
            ByteBuffer payload = filled(arena, size);
            peer.send(BenchPeer.UDS_STREAM, Integer.toString(total), Integer.toString(warmup), Long.toString(size));
            peer.await(BenchPeer.READY);
            for (int i = 0; i < total; i++) {
                SocketIo.writeFully(channel, payload.clear());
            }
        }
        Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
        reply.requireNoneBad("unix socket streaming");
        return new ThroughputStats(messages, messages * size, reply.elapsedNanos(), window());
    }

    private static ByteBuffer filled(Arena arena, long size) {
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("the socket baseline sends at most 2 GiB - 1 per message");
        }
        MemorySegment data = arena.allocate(size, 64);
        Payload.fill(data, Payload.tag(Mode.REUSE, 0));
        return data.asByteBuffer();
    }

    @Override
    public void close() throws IOException {
        channel.close();
    }
}
