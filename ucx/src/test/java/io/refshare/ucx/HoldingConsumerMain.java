package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** A local consumer on the receiving host: {@code DIR QUEUE N} takes N tensors, keeps them, prints {@code holding N}, waits to be killed. */
public final class HoldingConsumerMain {
    public static void main(String[] args) throws Exception {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
             ShareQueue q = rs.openQueue(args[1])) {
            List<Tensor> held = new ArrayList<>();
            int n = Integer.parseInt(args[2]);
            while (held.size() < n) {
                Tensor t = q.poll(30, TimeUnit.SECONDS);
                if (t == null) {
                    throw new AssertionError("nothing arrived");
                }
                held.add(t);
            }
            System.out.println("holding " + held.size());
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
    }
}
