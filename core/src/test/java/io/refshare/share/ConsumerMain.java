package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;

/**
 * A consumer process for the multi-process tests. Reads commands on stdin, answers on stdout:
 * <pre>
 *   RECV id seed hex     receive, verify every byte, keep it open    -> OK id | BAD id detail
 *   VERIFY id seed       verify a kept tensor again                  -> OK id | BAD id detail
 *   CLOSE id             close a kept tensor                         -> CLOSED id
 *   CYCLE seed hex       receive, check first and last byte, close   (no answer)
 *   SYNC                 -> SYNCED cycles mismatches
 *   STATS                -> STATS mappedSegments mappedCounterFiles
 *   EXIT                 close refshare                              -> BYE
 * </pre>
 */
public final class ConsumerMain {
    static void run(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        Map<String, Tensor> kept = new HashMap<>();
        long cycles = 0;
        long mismatches = 0;
        HexFormat hex = HexFormat.of();
        try (Refshare rs = Refshare.open(config);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "RECV" -> {
                        Tensor t = rs.receive(hex.parseHex(w[3]));
                        kept.put(w[1], t);
                        System.out.println(verify(w[1], t, Long.parseLong(w[2])));
                    }
                    case "VERIFY" -> System.out.println(verify(w[1], kept.get(w[1]), Long.parseLong(w[2])));
                    case "CLOSE" -> {
                        kept.remove(w[1]).close();
                        System.out.println("CLOSED " + w[1]);
                    }
                    case "CYCLE" -> {
                        long seed = Long.parseLong(w[1]);
                        try (Tensor t = rs.receive(hex.parseHex(w[2]))) {
                            var d = t.data();
                            byte first = d.get(ValueLayout.JAVA_BYTE, 0);
                            byte last = d.get(ValueLayout.JAVA_BYTE, d.byteSize() - 1);
                            if (first != Patterns.byteAt(seed, 0) || last != Patterns.byteAt(seed, d.byteSize() - 1)) {
                                mismatches++;
                            }
                        }
                        cycles++;
                    }
                    case "SYNC" -> System.out.println("SYNCED " + cycles + " " + mismatches);
                    case "STATS" -> System.out.println("STATS " + rs.stats().mappedSegments() + " "
                            + rs.stats().mappedCounterFiles());
                    case "EXIT" -> {
                        kept.values().forEach(Tensor::close);
                        rs.close();
                        System.out.println("BYE");
                        return;
                    }
                    default -> System.out.println("ERROR unknown command " + w[0]);
                }
                System.out.flush();
            }
        }
    }

    private static String verify(String id, Tensor t, long seed) {
        long bad = Patterns.firstMismatch(t.data(), seed);
        return bad < 0 ? "OK " + id : "BAD " + id + " first mismatch at byte " + bad;
    }
}
