package io.refshare.harness;


import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The producer's side of the Agrona rows: the same payload (the reuse tag in every byte) copied
 * into a one-to-one ring for each message, busy-spinning for room and for the acknowledgement;
 * timestamps as the refshare rows take them (just before the write; the peer's once it has read
 * the first and last byte and 64 from the middle). Sizes up to {@link AgronaRings#CAPACITY} / 8.
 */
final class AgronaBench implements AutoCloseable {
    static final String SYSTEM = "agrona ring copy (busy-spin)";

    private final Path file;
    private final AgronaRings rings;
    private final PeerProcess peer;

    private AgronaBench(Path file, AgronaRings rings, PeerProcess peer) {
        this.file = file;
        this.rings = rings;
        this.peer = peer;
    }

    static boolean fits(long size) {
        return size <= AgronaRings.CAPACITY / 8;
    }

    static AgronaBench start(Path directory) throws IOException, InterruptedException {
        Path file = directory.resolve("refshare-bench-agrona-" + ProcessHandle.current().pid());
        AgronaRings rings = AgronaRings.map(file, true);
        try {
            return new AgronaBench(file, rings, PeerProcess.startAgrona(file));
        } catch (IOException | InterruptedException | RuntimeException e) {
            rings.close();
            Files.deleteIfExists(file);
            throw e;
        }
    }

    private static UnsafeBuffer payload(long size) {
        byte[] bytes = new byte[(int) size];
        Payload.fill(MemorySegment.ofArray(bytes), Payload.tag(Mode.REUSE, 0));
        return new UnsafeBuffer(bytes);
    }

    LatencyStats pingPong(long size, int warmup, int rounds) throws IOException, InterruptedException {
        int total = warmup + rounds;
        long[] sendAt = new long[total];
        long[] ackAt = new long[total];
        UnsafeBuffer message = payload(size);
        peer.send("PINGPONG", Integer.toString(total));
        for (int i = 0; i < total; i++) {
            sendAt[i] = System.nanoTime();
            while (!rings.ping.write(AgronaRings.MESSAGE_TYPE, message, 0, (int) size)) {
                Thread.onSpinWait();
            }
            while (rings.pong.read((type, buffer, index, length) -> { }, 1) == 0) {
                Thread.onSpinWait();
                if ((i & 1023) == 0) {
                    peer.requireAlive();
                }
            }
            ackAt[i] = System.nanoTime();
        }
        Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
        reply.requireNoneBad(SYSTEM + " ping-pong");
        return LatencyStats.of(sendAt, reply.timestamps(), ackAt, warmup);
    }

    ThroughputStats stream(long size, int warmup, int messages) throws IOException, InterruptedException {
        int total = warmup + messages;
        UnsafeBuffer message = payload(size);
        peer.send("STREAM", Integer.toString(total), Integer.toString(warmup));
        for (int i = 0; i < total; i++) {
            int spins = 0;
            while (!rings.ping.write(AgronaRings.MESSAGE_TYPE, message, 0, (int) size)) {
                Thread.onSpinWait();
                if (++spins % 100_000 == 0) {
                    peer.requireAlive();
                }
            }
        }
        Reply reply = Reply.parse(peer.await(BenchPeer.RESULT));
        reply.requireNoneBad(SYSTEM + " streaming");
        return new ThroughputStats(messages, messages * size, reply.elapsedNanos(),
                "ring of " + ByteSize.label(AgronaRings.CAPACITY));
    }

    @Override
    public void close() throws IOException {
        try {
            peer.close();
        } finally {
            rings.close();
            Files.deleteIfExists(file);
        }
    }
}
