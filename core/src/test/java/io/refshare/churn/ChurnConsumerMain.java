package io.refshare.churn;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * One short-lived consumer of the churn test. Arg: directory. Prints READY once open, then:
 * <pre>
 *   MSG id seed keep hex   receive, verify every byte, close it unless keep is 1
 *                          -> TOOK id retries | BAD id detail
 *   EXIT                   close refshare with the kept tensors still open -> BYE
 * </pre>
 * A message refused for a resource limit (every peer entry of the producer's counter file
 * taken) was not consumed: it is received again after a pause, as a queue would hand it to
 * a consumer again, and the retries are reported.
 */
public final class ChurnConsumerMain {
    private static final long RETRY_FOR_NANOS = 20_000_000_000L;

    static void run(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        List<Tensor> kept = new ArrayList<>();
        try (Refshare rs = Refshare.open(config);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            System.out.println("READY");
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                if (w[0].equals("EXIT")) {
                    rs.close(); // gives back what the kept tensors hold
                    System.out.println("BYE");
                    return;
                }
                String id = w[1];
                long seed = Long.parseLong(w[2]);
                byte[] message = HexFormat.of().parseHex(w[4]);
                int retries = 0;
                long deadline = System.nanoTime() + RETRY_FOR_NANOS;
                Tensor t;
                while (true) {
                    try {
                        t = rs.receive(message);
                        break;
                    } catch (ResourceLimitException e) {
                        if (System.nanoTime() - deadline > 0) {
                            throw e;
                        }
                        retries++;
                        Thread.sleep(20);
                    }
                }
                long bad = Patterns.firstMismatch(t.data(), seed);
                if (w[3].equals("1")) {
                    kept.add(t);
                } else {
                    t.close();
                }
                System.out.println(bad < 0 ? "TOOK " + id + " " + retries : "BAD " + id + " first mismatch at " + bad);
                System.out.flush();
            }
        }
    }
}
