package io.refshare.channel;

import io.refshare.exceptions.QueueClosedException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.testing.ChildJvm;

import java.io.DataOutputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The other process in multi-process tests. Modes:
 * <ul>
 * <li>{@code claim-read DIR NAME}: claims the head cell as a consumer, says so, then
 *     hangs (to be killed holding the claim)</li>
 * <li>{@code claim-write DIR NAME}: the same for the tail cell, as a producer</li>
 * <li>{@code produce DIR NAME PRODUCER COUNT}: offers COUNT test messages</li>
 * <li>{@code consume DIR NAME RESULT}: polls until the queue is closed and empty,
 *     checking every message and the order of each producer's, then writes
 *     (producer, sequence) pairs to RESULT</li>
 * <li>{@code consume-mark DIR NAME MARKS}: polls until closed, checking every message,
 *     and right after each poll returns sets the message's byte in the segment file
 *     MARKS (at {@link #MARKS} + sequence) and adds one to the count at {@link #MARK_COUNT_OFFSET}</li>
 * <li>{@code produce-mark DIR NAME MARKS PRODUCER COUNT}: offers, marking each message
 *     the same way once its offer returned</li>
 * </ul>
 * Marking costs no system call, so a kill is likely to land inside a queue operation.
 * Exit codes: 0 done, 2 usage, 3 a check failed.
 */
public final class QueueChild {
    static final VarHandle MARK_COUNT = ValueLayout.JAVA_LONG.varHandle();
    /** A marks file is made by ShmDirectory.create, whose common header comes first: the count follows it. */
    static final long MARK_COUNT_OFFSET = FileHeader.LENGTH;
    /** The byte of sequence s is at MARKS + s. */
    static final long MARKS = MARK_COUNT_OFFSET + 8;

    /** Starts a child in {@code mode} on queue {@code name} in {@code dir}; {@code more} are the mode's other arguments. */
    static ChildJvm start(Path dir, String mode, String name, String... more) {
        String[] args = new String[4 + more.length];
        args[0] = "QueueChild";
        args[1] = mode;
        args[2] = dir.toString();
        args[3] = name;
        System.arraycopy(more, 0, args, 4, more.length);
        return ChildJvm.start(ChannelChildMain.class, args);
    }

    private QueueChild() {
    }

    static void run(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: QueueChild MODE DIR NAME ...");
            System.exit(2);
        }
        ShmDirectory dir = new ShmDirectory(Path.of(args[1]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        PrintStream out = new PrintStream(System.out, true);
        try (ShmQueue queue = ShmQueue.open(dir, args[2])) {
            switch (args[0]) {
                case "claim-read" -> hang(out, queue.claimReadable());
                case "claim-write" -> hang(out, queue.claimWritable());
                case "produce" -> produce(queue, Integer.parseInt(args[3]), Long.parseLong(args[4]));
                case "consume" -> consume(queue, Path.of(args[3]));
                case "spin" -> {
                    queue.busySpin(true);
                    queue.poll(60, TimeUnit.SECONDS); // spins, counted, until killed
                }
                case "consume-mark" -> consumeMarking(queue, dir, args[3]);
                case "produce-mark" -> produceMarking(queue, dir, args[3], Integer.parseInt(args[4]),
                        Long.parseLong(args[5]));
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

    private static void consumeMarking(ShmQueue queue, ShmDirectory dir, String marks) throws InterruptedException {
        try (ShmFile file = dir.open(marks, ShmKind.SEGMENT, MARKS)) {
            MemorySegment m = file.segment();
            while (true) {
                byte[] message;
                try {
                    message = queue.poll(60, TimeUnit.SECONDS);
                } catch (QueueClosedException closed) {
                    return;
                }
                if (message == null) {
                    throw new AssertionError("no message for a minute and the queue is not closed");
                }
                mark(m, TestMessages.sequence(message));
            }
        }
    }

    private static void produceMarking(ShmQueue queue, ShmDirectory dir, String marks, int producer, long count)
            throws InterruptedException {
        try (ShmFile file = dir.open(marks, ShmKind.SEGMENT, MARKS + count)) {
            MemorySegment m = file.segment();
            for (long seq = 0; seq < count; seq++) {
                if (!queue.offer(TestMessages.encode(producer, seq), 60, TimeUnit.SECONDS)) {
                    throw new AssertionError("queue stayed full for a minute at message " + seq);
                }
                mark(m, seq);
            }
        }
    }

    private static void mark(MemorySegment marks, long seq) {
        marks.set(ValueLayout.JAVA_BYTE, MARKS + seq, (byte) 1);
        MARK_COUNT.getAndAdd(marks, MARK_COUNT_OFFSET, 1L);
    }

    private static void hang(PrintStream out, long position) throws InterruptedException {
        out.println("CLAIMED " + position);
        Thread.sleep(Long.MAX_VALUE);
    }

    private static void produce(ShmQueue queue, int producer, long count) throws InterruptedException {
        for (long seq = 0; seq < count; seq++) {
            if (!queue.offer(TestMessages.encode(producer, seq), 60, TimeUnit.SECONDS)) {
                throw new AssertionError("queue stayed full for a minute at message " + seq);
            }
        }
    }

    private static void consume(ShmQueue queue, Path result) throws InterruptedException, IOException {
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
