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
 *   READT t n READ n on each of t threads at once, the figures summed (distinct: the most
 *             one thread saw)                                     -> DONE ...
 *   HOLD      acquire the current version and keep it            -> HELD id
 *   ACQ n     acquire and release n times (one version is enough) -> ACQ id-of-the-last
 *   STATS     this handle's figures, nothing else done          -> STATS retiredHere anomalies
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
                    case "READ" -> System.out.println(done(holder, read(holder, Long.parseLong(w[1]))));
                    case "READT" -> System.out.println(done(holder, readOnThreads(holder, Integer.parseInt(w[1]),
                            Long.parseLong(w[2]))));
                    case "HOLD" -> {
                        Tensor t = holder.acquire();
                        kept.add(t);
                        System.out.println("HELD " + Versions.id(t.data()));
                    }
                    case "ACQ" -> {
                        long id = -1;
                        for (long i = Long.parseLong(w[1]); i > 0; i--) {
                            try (Tensor t = holder.acquire()) {
                                id = Versions.id(t.data());
                            }
                        }
                        System.out.println("ACQ " + id);
                    }
                    case "STATS" -> {
                        SharedHolder.Stats s = holder.stats();
                        System.out.println("STATS " + s.retiredHere() + " " + s.anomalies());
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

    private static String done(SharedHolder holder, long[] f) {
        SharedHolder.Stats s = holder.stats();
        return "DONE " + f[0] + " " + f[1] + " " + f[2] + " " + f[3] + " " + s.retiredHere() + " " + s.anomalies();
    }

    private static long[] readOnThreads(SharedHolder holder, int threads, long iterations) throws Exception {
        long[][] figures = new long[threads][];
        Throwable[] failures = new Throwable[threads];
        Thread[] all = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            int me = i;
            all[i] = Thread.ofPlatform().start(() -> {
                try {
                    figures[me] = read(holder, iterations);
                } catch (Throwable e) {
                    failures[me] = e;
                }
            });
        }
        long[] sum = new long[4];
        for (int i = 0; i < threads; i++) {
            all[i].join();
            if (failures[i] != null) {
                throw new IllegalStateException("reader thread " + i + " failed", failures[i]);
            }
            sum[0] += figures[i][0];
            sum[1] += figures[i][1];
            sum[2] += figures[i][2];
            sum[3] = Math.max(sum[3], figures[i][3]);
        }
        return sum;
    }

    /** {iterations, mismatches, backwards, distinct} */
    private static long[] read(SharedHolder holder, long iterations) {
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
        return new long[]{done, mismatches, backwards, distinct};
    }
}
