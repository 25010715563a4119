/*
 * The Java side of python/tests/test_java.py: a small program over the refshare library that
 * produces or consumes a queue, or publishes to or reads a holder, in a directory it is given.
 * Compiled by the test with the JDK's javac against the built CLI jar.
 */
import io.refshare.*;
import io.refshare.exceptions.*;
import io.refshare.tensor.*;
import java.lang.foreign.*;
import java.nio.file.*;
import java.io.*;

public class JPeer {
    public static void main(String[] a) throws Exception {
        RefshareConfig cfg = RefshareConfig.defaults().withDirectory(Path.of(a[1]));
        try (Refshare rs = Refshare.open(cfg)) {
            switch (a[0]) {
                case "produce" -> {
                    int n = Integer.parseInt(a[2]); int size = Integer.parseInt(a[3]);
                    try (ShareQueue q = rs.createQueue(16)) {
                        System.out.println("QUEUE " + q.name()); System.out.flush();
                        new BufferedReader(new InputStreamReader(System.in)).readLine();
                        for (int i = 0; i < n; i++) {
                            try (Tensor t = rs.allocate(DType.INT32, size)) {
                                for (int k = 0; k < size; k++) t.data().setAtIndex(ValueLayout.JAVA_INT, k, i * 1000 + k);
                                q.put(t);
                            }
                        }
                        System.out.println("SENT " + n); System.out.flush();
                        q.endOfStream();
                        if (a.length > 4) { new BufferedReader(new InputStreamReader(System.in)).readLine(); }
                    }
                    rs.awaitLimboEmpty(java.time.Duration.ofSeconds(10));
                    System.out.println("STATS " + rs.stats());
                }
                case "consume" -> {
                    long n = 0, bad = 0;
                    int hold = a.length > 3 ? Integer.parseInt(a[3]) : 0;
                    java.util.List<Tensor> held = new java.util.ArrayList<>();
                    try (ShareQueue q = rs.openQueue(a[2])) {
                        System.out.println("READY"); System.out.flush();
                        while (true) {
                            Tensor t;
                            try { t = q.take(); } catch (QueueClosedException e) { break; }
                            if (held.size() < hold) {
                                held.add(t); // kept open: the references this process dies holding
                                if (held.size() == hold) {
                                    System.out.println("HELD " + hold); System.out.flush();
                                    Thread.sleep(3_600_000);
                                }
                                continue;
                            }
                            try (t) {
                                long[] shape = t.shape();
                                float first = t.data().get(ValueLayout.JAVA_FLOAT, t.offsetOf(new long[shape.length]));
                                if (first != (float) n) bad++;
                                n++;
                            }
                        }
                    }
                    System.out.println("TOOK " + n + " BAD " + bad);
                }
                case "hold" -> {
                    try (SharedHolder h = rs.createHolder()) {
                        System.out.println("HOLDER " + h.name()); System.out.flush();
                        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                        String line;
                        while ((line = in.readLine()) != null && !line.equals("END")) {
                            int v = Integer.parseInt(line.trim());
                            try (Tensor t = rs.allocate(DType.FLOAT64, 3, 4)) {
                                for (int k = 0; k < 12; k++) t.data().setAtIndex(ValueLayout.JAVA_DOUBLE, k, v + k);
                                h.publish(t);
                            }
                            System.out.println("PUBLISHED " + v); System.out.flush();
                        }
                    }
                }
                case "read" -> {
                    try (SharedHolder h = rs.openHolder(a[2]); Tensor t = h.acquire()) {
                        System.out.println("READ " + t + " " + t.data().getAtIndex(ValueLayout.JAVA_FLOAT, 0));
                    }
                }
            }
        }
    }
}
