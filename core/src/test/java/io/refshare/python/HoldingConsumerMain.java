package io.refshare.python;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A Java consumer that dies holding references: takes {@code n} messages from the queue,
 * verifies every byte, keeps them open, prints {@code HELD n}, and waits to be killed.
 * Args: directory, queue, n.
 */
public final class HoldingConsumerMain {
    public static void main(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        int n = Integer.parseInt(args[2]);
        Refshare rs = Refshare.open(config);
        ShareQueue queue = rs.openQueue(args[1]);
        List<Tensor> held = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Tensor t = queue.take();
            Messages.verify(t.data());
            held.add(t);
        }
        System.out.println("HELD " + held.size());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE); // to be killed holding every reference
    }
}
