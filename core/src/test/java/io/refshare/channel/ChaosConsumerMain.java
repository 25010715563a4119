package io.refshare.channel;

import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayDeque;

/**
 * A consumer that keeps its last few tensors open (so a SIGKILL finds it holding
 * references), verifying each. Prints {@code READY}, and {@code DONE taken bad} at the end
 * of the stream. Args: directory, queue.
 */
public final class ChaosConsumerMain {
    static void run(String[] args) throws Exception {
        long taken = 0;
        long bad = 0;
        ArrayDeque<Tensor> open = new ArrayDeque<>();
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
             ShareQueue queue = rs.openQueue(args[1])) {
            System.out.println("READY");
            System.out.flush();
            while (true) {
                Tensor t;
                try {
                    t = queue.take();
                } catch (QueueClosedException end) {
                    break;
                }
                long id = t.data().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                if (Patterns.firstMismatch(t.data().asSlice(8), id) >= 0) {
                    bad++;
                }
                taken++;
                open.addLast(t);
                if (open.size() > 8) {
                    open.removeFirst().close();
                }
            }
            open.forEach(Tensor::close);
        }
        System.out.println("DONE " + taken + " " + bad);
    }
}
