package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.ShareQueue;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A producer process: puts {@code count} tensors on a queue. Each tensor starts with its
 * id (producer << 32 | sequence), the rest is filled with the pattern of that id. Then waits for
 * its limbo to empty and reports {@code DONE sent limboEmpty blocksInUse liveCounts}.
 * Args: directory, queue, producer number, count.
 */
public final class QueueProducerMain {
    static void run(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        long producer = Long.parseLong(args[2]);
        int count = Integer.parseInt(args[3]);
        try (Refshare rs = Refshare.open(config); ShareQueue queue = rs.openQueue(args[1])) {
            for (int seq = 0; seq < count; seq++) {
                long id = producer << 32 | seq;
                try (Tensor t = rs.allocateBytes(64 + (seq % 16) * 64)) {
                    t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
                    Patterns.fill(t.data().asSlice(8), id);
                    queue.put(t);
                }
            }
            boolean empty = rs.awaitLimboEmpty(Duration.ofSeconds(60));
            System.out.println("DONE " + count + " " + empty + " " + rs.stats().allocator().blocksInUse() + " "
                    + Internals.sharing(rs).liveCounts());
        }
    }
}
