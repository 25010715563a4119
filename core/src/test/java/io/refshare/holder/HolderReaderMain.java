package io.refshare.holder;

import io.refshare.SharedHolder;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A reader process for the shared holder tests. Opens the holder named on its command line
 * and answers commands on stdin:
 * <pre>
 *   READ n    acquire, verify every byte, release, n times (and until it saw two versions)
 *             -> DONE iterations mismatches backwards distinct retiredHere anomalies
 *   HOLD      acquire the current version and keep it            -> HELD id
 *   EXIT      close the holder and refshare                      -> BYE retiredHere anomalies
 * </pre>
 * A version is {@link Versions#fill written} with its id at both ends and a pattern of that
 * id between; a mismatch means the reader saw memory that was freed and reused, or not
 * fully written, while it held it.
 */
public final class HolderReaderMain {
    public static void main(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        List<Tensor> kept = new ArrayList<>();
        try (Refshare rs = Refshare.open(config);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            SharedHolder holder = rs.openHolder(args[1]);
            System.out.println("READY");
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "READ" -> System.out.println(read(holder, Long.parseLong(w[1])));
                    case "HOLD" -> {
                        Tensor t = holder.acquire();
                        kept.add(t);
                        System.out.println("HELD " + Versions.id(t.data()));
                    }
                    case "EXIT" -> {
                        kept.forEach(Tensor::close);
                        holder.close(); // gives back the process's share, which may retire a version here
                        SharedHolder.Stats s = holder.stats();
                        System.out.println("BYE " + s.retiredHere() + " " + s.anomalies());
                        return;
                    }
                    default -> throw new IllegalArgumentException(line);
                }
            }
        }
    }

    private static String read(SharedHolder holder, long iterations) {
        long mismatches = 0;
        long backwards = 0;
        long distinct = 0;
        long last = -1;
        long done = 0;
        while (done < iterations || distinct < 2) {
            try (Tensor t = holder.acquire()) {
                if (t == null) {
                    Thread.onSpinWait(); // not published yet
                    continue;
                }
                // every fourth iteration holds a second reference across the check
                Tensor nested = (done & 3) == 0 ? holder.acquire() : null;
                MemorySegment data = t.data();
                long id = Versions.id(data);
                if (!Versions.intact(data) || (nested != null && !Versions.intact(nested.data()))) {
                    mismatches++;
                }
                if (nested != null) {
                    if (Versions.id(nested.data()) < id) {
                        backwards++;
                    }
                    nested.close();
                }
                if (id < last) {
                    backwards++;
                }
                if (id != last) {
                    distinct++;
                }
                last = id;
            }
            done++;
        }
        SharedHolder.Stats s = holder.stats();
        return "DONE " + done + " " + mismatches + " " + backwards + " " + distinct + " " + s.retiredHere() + " "
                + s.anomalies();
    }
}
