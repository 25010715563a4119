package io.refshare.channel;

import io.refshare.WaitStrategy;
import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.BufferedOutputStream;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A consumer process: takes tensors until the stream ends, verifies every byte against the
 * id in its first 8 bytes, and writes each id to a file (so the test can check every
 * message was taken exactly once). With a forward queue it puts each tensor on it instead
 * of only verifying (a forwarding stage). With a stop count it closes the queue after
 * taking that many (an orderly consumer leaving mid-stream).
 * Prints {@code READY}, then {@code DONE taken bad rejected limboEmpty}.
 * Args: directory, queue, ids file, forward queue or "-", stop after (or -1), and optionally
 * the {@link WaitStrategy} of its handle (default BACKOFF).
 */
public final class QueueConsumerMain {
    static void run(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        long stopAfter = Long.parseLong(args[4]);
        long taken = 0;
        long bad = 0;
        long rejected;
        boolean limboEmpty = true;
        try (Refshare rs = Refshare.open(config);
             DataOutputStream ids = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(args[2])))) {
            ShareQueue forward = args[3].equals("-") ? null : rs.openQueue(args[3]);
            WaitStrategy waiting = args.length > 5 ? WaitStrategy.valueOf(args[5]) : WaitStrategy.BACKOFF;
            try (ShareQueue queue = rs.openQueue(args[1], waiting)) {
                System.out.println("READY");
                System.out.flush();
                while (taken != stopAfter) {
                    Tensor t;
                    try {
                        t = queue.take();
                    } catch (QueueClosedException end) {
                        break;
                    }
                    try (t) {
                        long id = t.data().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                        if (Patterns.firstMismatch(t.data().asSlice(8), id) >= 0) {
                            bad++;
                        }
                        ids.writeLong(id);
                        taken++;
                        if (forward != null) {
                            forward.put(t);
                        }
                    }
                }
                rejected = queue.rejected();
            }
            if (forward != null) {
                forward.close();
                limboEmpty = rs.awaitLimboEmpty(Duration.ofSeconds(60));
            }
        }
        System.out.println("DONE " + taken + " " + bad + " " + rejected + " " + limboEmpty);
    }
}
