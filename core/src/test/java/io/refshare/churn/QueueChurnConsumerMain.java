package io.refshare.churn;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One short-lived consumer of the queue churn test. Args: directory, queue name. Prints
 * READY once attached, then:
 * <pre>
 *   TAKE n keep   take n messages, verify every byte, keep the last two open if keep is 1
 *                 -> GOT id retries (each) then DONE | BAD id detail | NONE (nothing within 30 s)
 *   EXIT          close the queue handle and refshare, kept tensors still open -> BYE
 * </pre>
 * A message is a tensor whose first 8 bytes hold its id and whose rest is the pattern of
 * that id. A take refused for a resource limit gave the message back to the queue: it is
 * taken again after a pause, and the retries are reported.
 */
public final class QueueChurnConsumerMain {
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
                if (w[0].equals("EXIT")) {
                    queue.close(); // a consumer leaving: the stream goes on for the others
                    rs.close();
                    System.out.println("BYE");
                    return;
                }
                int n = Integer.parseInt(w[1]);
                for (int i = 0; i < n; i++) {
                    int retries = 0;
                    Tensor t = null;
                    while (t == null) {
                        try {
                            t = queue.poll(30, TimeUnit.SECONDS);
                            if (t == null) {
                                System.out.println("NONE");
                                System.out.flush();
                                return;
                            }
                        } catch (ResourceLimitException e) {
                            retries++;
                            Thread.sleep(20);
                        }
                    }
                    MemorySegment data = t.data();
                    long id = data.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                    long bad = Patterns.firstMismatch(data.asSlice(8), id);
                    if (w[2].equals("1") && i >= n - 2) {
                        kept.add(t);
                    } else {
                        t.close();
                    }
                    System.out.println(bad < 0 ? "GOT " + id + " " + retries : "BAD " + id + " mismatch at " + bad);
                }
                System.out.println("DONE");
                System.out.flush();
            }
        }
    }
}
