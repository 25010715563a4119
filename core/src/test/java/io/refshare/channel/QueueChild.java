package io.refshare.channel;

import io.refshare.shm.ShmDirectory;

import java.io.DataOutputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The other process in multi-process tests. Modes:
 * <ul>
 * <li>{@code claim-read DIR NAME}: claims the head cell as a consumer, says so, then
 *     hangs (to be killed holding the claim)</li>
 * <li>{@code claim-write DIR NAME}: the same for the tail cell, as a producer</li>
 * <li>{@code produce DIR NAME PRODUCER COUNT [record]}: offers COUNT test messages;
 *     with {@code record}, prints each sequence number once its offer returned</li>
 * <li>{@code consume DIR NAME RESULT [record]}: polls until the queue is closed and
 *     empty, checking every message, then writes (producer, sequence) pairs to RESULT;
 *     with {@code record}, prints each sequence number once its poll returned</li>
 * </ul>
 * Exit codes: 0 done, 2 usage, 3 a check failed.
 */
public final class QueueChild {
    private QueueChild() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: QueueChild MODE DIR NAME ...");
            System.exit(2);
        }
        ShmDirectory dir = new ShmDirectory(Path.of(args[1]), "rstest", ShmDirectory.OWNER_ONLY);
        PrintStream out = new PrintStream(System.out, true);
        try (ShmQueue queue = ShmQueue.open(dir, args[2])) {
            switch (args[0]) {
                case "claim-read" -> hang(out, queue.claimReadable());
                case "claim-write" -> hang(out, queue.claimWritable());
                case "produce" -> produce(queue, Integer.parseInt(args[3]), Long.parseLong(args[4]),
                        args.length > 5 ? out : null);
                case "consume" -> consume(queue, Path.of(args[3]), args.length > 4 ? out : null);
                default -> {
                    System.err.println("unknown mode " + args[0]);
                    System.exit(2);
                }
            }
        } catch (AssertionError e) {
            e.printStackTrace();
            System.exit(3);
        }
    }

    private static void hang(PrintStream out, long position) throws InterruptedException {
        out.println("CLAIMED " + position);
        Thread.sleep(Long.MAX_VALUE);
    }

    private static void produce(ShmQueue queue, int producer, long count, PrintStream record)
            throws InterruptedException {
        for (long seq = 0; seq < count; seq++) {
            if (!queue.offer(TestMessages.encode(producer, seq), 60, TimeUnit.SECONDS)) {
                throw new AssertionError("queue stayed full for a minute at message " + seq);
            }
            if (record != null) {
                record.println(seq);
            }
        }
    }

    private static void consume(ShmQueue queue, Path result, PrintStream record)
            throws InterruptedException, IOException {
        try (DataOutputStream data = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(result)))) {
            long[] lastSeen = new long[64];
            java.util.Arrays.fill(lastSeen, -1);
            while (true) {
                byte[] m;
                try {
                    m = queue.poll(60, TimeUnit.SECONDS);
                } catch (QueueClosedException closed) {
                    break;
                }
                if (m == null) {
                    throw new AssertionError("no message for a minute and the queue is not closed");
                }
                int producer = TestMessages.producer(m);
                long seq = TestMessages.sequence(m);
                if (record != null) {
                    record.println(seq);
                }
                if (seq <= lastSeen[producer]) {
                    throw new AssertionError("producer " + producer + ": " + seq + " after " + lastSeen[producer]);
                }
                lastSeen[producer] = seq;
                data.writeInt(producer);
                data.writeLong(seq);
            }
        }
    }
}
