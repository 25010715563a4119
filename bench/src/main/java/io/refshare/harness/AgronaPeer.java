package io.refshare.harness;

import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * The peer of the Agrona rows ({@link AgronaBench}): reads each message in place from the
 * ping ring, busy-spinning, checks it as every consumer of the bench does ({@link Payload#read})
 * and, in a ping-pong, answers with an 8-byte message on the pong ring. Commands on stdin,
 * replies on stdout, as {@link BenchPeer}:
 * {@code PINGPONG rounds} (replies {@code RESULT bad readAt...}) and
 * {@code STREAM messages warmup} (replies {@code RESULT bad start end}). Args: the rings' file.
 */
public final class AgronaPeer {
    private AgronaPeer() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (AgronaRings rings = AgronaRings.map(Path.of(args[0]), false)) {
            System.out.println(BenchPeer.READY);
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null && !line.equals(BenchPeer.EXIT)) {
                String[] w = line.split(" ");
                String reply = switch (w[0]) {
                    case "PINGPONG" -> pingPong(rings, Integer.parseInt(w[1]));
                    case "STREAM" -> stream(rings.ping, Integer.parseInt(w[1]), Integer.parseInt(w[2]));
                    default -> BenchPeer.ERROR + " unknown command " + w[0];
                };
                System.out.println(reply);
                System.out.flush();
            }
        }
    }

    private static String pingPong(AgronaRings rings, int rounds) {
        long[] readAt = new long[rounds];
        int[] bad = new int[1];
        UnsafeBuffer ack = new UnsafeBuffer(new byte[8]);
        for (int i = 0; i < rounds; i++) {
            int round = i;
            while (rings.ping.read((type, buffer, index, length) -> {
                if (!Payload.read(AgronaRings.view(buffer, index, length), Payload.tag(Mode.REUSE, round))) {
                    bad[0]++;
                }
                readAt[round] = System.nanoTime();
            }, 1) == 0) {
                Thread.onSpinWait();
            }
            while (!rings.pong.write(AgronaRings.MESSAGE_TYPE, ack, 0, 8)) {
                Thread.onSpinWait();
            }
        }
        StringBuilder s = new StringBuilder(BenchPeer.RESULT).append(' ').append(bad[0]);
        for (long t : readAt) {
            s.append(' ').append(t);
        }
        return s.toString();
    }

    private static String stream(OneToOneRingBuffer ring, int messages, int warmup) {
        int[] bad = new int[1];
        int[] read = new int[1];
        long start = 0;
        while (read[0] < messages) {
            int before = read[0];
            int n = ring.read((type, buffer, index, length) -> {
                if (!Payload.read(AgronaRings.view(buffer, index, length), Payload.tag(Mode.REUSE, read[0]))) {
                    bad[0]++;
                }
                read[0]++;
            });
            if (n == 0) {
                Thread.onSpinWait();
            } else if (before < warmup && read[0] >= warmup) {
                start = System.nanoTime();
            }
        }
        return BenchPeer.RESULT + " " + bad[0] + " " + start + " " + System.nanoTime();
    }
}
