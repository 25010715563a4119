package io.refshare.channel;

import io.refshare.shm.ShmDirectory;
import io.refshare.testing.TruncatingOpener;

import java.nio.file.Path;

/**
 * A process that looks into another process's queue over and over while the queue file is cut
 * short and restored: some looks size the file whole and find it truncated at the header check
 * or while reading it. See {@link TruncatingOpener}, which prints the one line of the outcome.
 * Args: {@code directory queueName inspect|payloads maxSeconds wantedHits}: a look is an
 * {@link ShmQueue#inspect} or a {@link QueuedMessages#payloads}. Not {@link ShmQueue#open}: it
 * registers a participant with a compare-and-set on the file, inside the window, and the JVM
 * does not survive one on a page cut between the read that guards it and the instruction (a
 * reader of a holder file, which registers the same way, died so here).
 */
final class TruncatingQueueOpenerMain {
    private TruncatingQueueOpenerMain() {
    }

    static void run(String[] args) throws Exception {
        ShmDirectory dir = new ShmDirectory(Path.of(args[0]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        String name = args[1];
        TruncatingOpener.Attempt look = switch (args[2]) {
            case "inspect" -> () -> {
                ShmQueue.inspect(dir, name);
                return () -> { };
            };
            case "payloads" -> () -> {
                QueuedMessages.payloads(dir, name);
                return () -> { };
            };
            default -> throw new IllegalArgumentException("inspect or payloads, not " + args[2]);
        };
        TruncatingOpener.run(dir.path().resolve(name), Long.parseLong(args[3]), Integer.parseInt(args[4]), look);
    }
}
