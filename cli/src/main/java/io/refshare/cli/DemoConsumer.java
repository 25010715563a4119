package io.refshare.cli;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.channel.QueueClosedException;
import io.refshare.channel.ShareQueue;
import io.refshare.tensor.Tensor;

import java.nio.file.Path;

/**
 * A consumer process of {@code refshare demo}: takes tensors until the stream ends,
 * verifies every byte, closes each, and reports on stdout:
 * {@code PROGRESS received bytes bad} a few times a second, {@code DONE received bytes bad} at the end.
 * Args: directory, prefix, queue name.
 */
public final class DemoConsumer {
    public static void main(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0])).withPrefix(args[1]);
        long received = 0;
        long bytes = 0;
        long bad = 0;
        long lastReport = System.nanoTime();
        try (Refshare rs = Refshare.open(config); ShareQueue queue = ShareQueue.open(rs, args[2])) {
            System.out.println("READY");
            System.out.flush();
            while (true) {
                Tensor t;
                try {
                    t = queue.take();
                } catch (QueueClosedException end) {
                    break;
                }
                try (t) {
                    if (DemoPattern.verify(t.data()) < 0) {
                        bad++;
                    }
                    received++;
                    bytes += t.data().byteSize();
                }
                if (System.nanoTime() - lastReport > 100_000_000L) {
                    System.out.println("PROGRESS " + received + " " + bytes + " " + bad);
                    System.out.flush();
                    lastReport = System.nanoTime();
                }
            }
        }
        System.out.println("DONE " + received + " " + bytes + " " + bad);
        System.out.flush();
    }
}
