package io.refshare.channel;

import io.refshare.ShareQueue;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

/**
 * A producer that creates its queue (so its death is the death of every producer): prints
 * {@code QUEUE name}, puts {@code count} tensors (id = sequence in the first 8 bytes, the
 * pattern of the id after it, sizes varying), prints {@code SENT} and waits to be killed.
 * Args: directory, capacity, count.
 */
public final class QueueCreatorMain {
    static void run(String[] args) throws Exception {
        int capacity = Integer.parseInt(args[1]);
        int count = Integer.parseInt(args[2]);
        Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
        ShareQueue queue = rs.createQueue(capacity);
        System.out.println("QUEUE " + queue.name());
        System.out.flush();
        for (long seq = 0; seq < count; seq++) {
            try (Tensor t = rs.allocateBytes(64 + (seq % 16) * 512)) {
                t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
                Patterns.fill(t.data().asSlice(8), seq);
                queue.put(t);
            }
        }
        System.out.println("SENT");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE); // killed here, with its messages queued
    }
}
