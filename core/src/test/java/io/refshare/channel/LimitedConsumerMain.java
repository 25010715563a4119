package io.refshare.channel;

import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A consumer driven line by line, for limits met while receiving. Tensors carry their seed
 * in their size (seed * 1024 bytes) and are filled with {@link Patterns}.
 * <pre>
 *   POLL ms   poll and keep what came -> GOT seed ok|bad | NONE | LIMIT class | CLOSED
 *   RELEASE   close every kept tensor -> RELEASED
 *   EXIT      close everything        -> BYE rejected
 * </pre>
 * Args: directory, queue.
 */
public final class LimitedConsumerMain {
    static void run(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        List<Tensor> kept = new ArrayList<>();
        try (Refshare rs = Refshare.open(config);
             ShareQueue queue = rs.openQueue(args[1]);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            System.out.println("READY");
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "POLL" -> System.out.println(poll(queue, Long.parseLong(w[1]), kept));
                    case "RELEASE" -> {
                        kept.forEach(Tensor::close);
                        kept.clear();
                        System.out.println("RELEASED");
                    }
                    case "EXIT" -> {
                        kept.forEach(Tensor::close);
                        System.out.println("BYE " + queue.rejected());
                        System.out.flush();
                        return;
                    }
                    default -> System.out.println("ERROR " + line);
                }
                System.out.flush();
            }
        }
    }

    private static String poll(ShareQueue queue, long millis, List<Tensor> kept) throws InterruptedException {
        try {
            Tensor t = queue.poll(millis, TimeUnit.MILLISECONDS);
            if (t == null) {
                return "NONE";
            }
            kept.add(t);
            long seed = t.data().byteSize() / 1024;
            return "GOT " + seed + (Patterns.firstMismatch(t.data(), seed) < 0 ? " ok" : " bad");
        } catch (ResourceLimitException e) {
            return "LIMIT " + e.getClass().getSimpleName();
        } catch (QueueClosedException e) {
            return "CLOSED";
        }
    }
}
