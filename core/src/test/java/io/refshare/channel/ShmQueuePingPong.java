package io.refshare.channel;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.ChildJvm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A measurement, not a test: round trips of one small message between this JVM and a
 * child JVM over two queues, then one-way streaming throughput. Run from core/ after
 * {@code mvn test-compile}:
 * <pre>
 *   $JAVA_HOME/bin/java --enable-native-access=ALL-UNNAMED -cp target/classes:target/test-classes \
 *       io.refshare.channel.ChannelChildMain ShmQueuePingPong [round trips] [streamed messages] [message bytes]
 * </pre>
 */
public final class ShmQueuePingPong {
    private ShmQueuePingPong() {
    }

    static void run(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("echo")) {
            echo(Path.of(args[1]), args[2], args[3], args[4], Long.parseLong(args[5]));
            return;
        }
        int roundTrips = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
        int streamed = args.length > 1 ? Integer.parseInt(args[1]) : 2_000_000;
        int size = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        Path path = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-pingpong-");
        ShmDirectory dir = new ShmDirectory(path, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        try (ShmQueue ping = ShmQueue.create(dir, 64, size);
                ShmQueue pong = ShmQueue.create(dir, 64, size);
                ShmQueue stream = ShmQueue.create(dir, 1024, size)) {
            try (ChildJvm child = ChildJvm.start(ChannelChildMain.class, "ShmQueuePingPong", "echo", path.toString(), ping.name(),
                    pong.name(), stream.name(), Integer.toString(streamed))) {
                byte[] message = new byte[size];
                roundTrip(ping, pong, message, roundTrips / 4); // warm up both JVMs
                long[] rtt = roundTrip(ping, pong, message, roundTrips);
                Arrays.sort(rtt);
                System.out.printf("round trip of a %d-byte message between two processes, %d samples:%n", size,
                        rtt.length);
                System.out.printf("  p50 %.2f us   p90 %.2f us   p99 %.2f us   p99.9 %.2f us   (one way ~ p50/2 = %.2f us)%n",
                        rtt[rtt.length / 2] / 1e3, rtt[rtt.length * 9 / 10] / 1e3, rtt[rtt.length * 99 / 100] / 1e3,
                        rtt[(int) (rtt.length * 999L / 1000)] / 1e3, rtt[rtt.length / 2] / 2e3);

                long[] sleepy = new long[2_000];
                for (int i = 0; i < sleepy.length; i++) {
                    Thread.sleep(1); // long enough for the echo side to stop spinning and sleep on the futex
                    sleepy[i] = roundTrip(ping, pong, message, 1)[0];
                }
                Arrays.sort(sleepy);
                System.out.printf("round trip when the echo side was asleep (futex wake-up), %d samples:%n",
                        sleepy.length);
                System.out.printf("  p50 %.2f us   p90 %.2f us   p99 %.2f us%n", sleepy[sleepy.length / 2] / 1e3,
                        sleepy[sleepy.length * 9 / 10] / 1e3, sleepy[sleepy.length * 99 / 100] / 1e3);

                long start = System.nanoTime();
                for (int i = 0; i < streamed; i++) {
                    if (!stream.offer(message, 30, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("the consumer stopped taking");
                    }
                }
                byte[] done = pong.poll(60, TimeUnit.SECONDS); // the child answers once it took them all
                long nanos = System.nanoTime() - start;
                if (done == null) {
                    throw new IllegalStateException("the child did not finish the stream (see its stderr)");
                }
                System.out.printf("streaming %d-byte messages, one producer process, one consumer process: %.0f msgs/s%n",
                        size, streamed / (nanos / 1e9));
                stream.markClosed();
                ping.markClosed();
                child.waitFor();
            }
        } finally {
            try (Stream<Path> files = Files.walk(path)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private static long[] roundTrip(ShmQueue ping, ShmQueue pong, byte[] message, int count) throws Exception {
        long[] samples = new long[count];
        for (int i = 0; i < count; i++) {
            long t0 = System.nanoTime();
            if (!ping.offer(message, 10, TimeUnit.SECONDS) || pong.poll(10, TimeUnit.SECONDS) == null) {
                throw new IllegalStateException("the echo process stopped answering");
            }
            samples[i] = System.nanoTime() - t0;
        }
        return samples;
    }

    /** The child: echoes ping to pong, and takes {@code streamed} messages from the stream, then says so on pong. */
    private static void echo(Path path, String pingName, String pongName, String streamName, long streamed)
            throws Exception {
        ShmDirectory dir = new ShmDirectory(path, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        try (ShmQueue ping = ShmQueue.open(dir, pingName);
                ShmQueue pong = ShmQueue.open(dir, pongName);
                ShmQueue stream = ShmQueue.open(dir, streamName)) {
            Thread echoer = Thread.ofPlatform().start(() -> {
                try {
                    while (true) {
                        pong.offer(ping.poll(1, TimeUnit.HOURS), 1, TimeUnit.HOURS);
                    }
                } catch (QueueClosedException | InterruptedException end) {
                    // the benchmark is over
                }
            });
            for (long taken = 0; taken < streamed; ) {
                if (stream.poll(1, TimeUnit.HOURS) != null) {
                    taken++;
                }
            }
            pong.offer(new byte[] {1}, 1, TimeUnit.MINUTES);
            echoer.join();
        }
    }
}
