package io.refshare.channel;

import io.refshare.shm.ShmDirectory;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A process using a queue file that another process truncates under it: creates a queue,
 * fills it, prints its name, waits for "GO" (the file has been cut), then polls and offers
 * with timeouts and reports what each call did, by exception class. A crash of the JVM
 * shows as no answer and a non-zero exit.
 */
public final class TruncatedQueueMain {
    static void run(String[] args) throws Exception {
        ShmDirectory dir = new ShmDirectory(Path.of(args[0]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try (ShmQueue q = ShmQueue.create(dir, 64, 32)) {
            for (int i = 0; i < 40; i++) {
                q.offer(new byte[] {(byte) i});
            }
            System.out.println("NAME " + q.name());
            System.out.flush();
            in.readLine();
            System.out.println("POLL " + outcome(() -> q.poll(200, TimeUnit.MILLISECONDS)));
            System.out.println("OFFER " + outcome(() -> q.offer(new byte[] {1}, 200, TimeUnit.MILLISECONDS)));
            System.out.println("STATS " + outcome(q::stats));
            System.out.flush();
        } catch (Throwable t) {
            System.out.println("CLOSE " + t.getClass().getSimpleName()); // the close of a cut file
        }
        System.out.println("END");
        System.out.flush();
    }

    private interface Call {
        Object run() throws Exception;
    }

    private static String outcome(Call call) {
        long start = System.nanoTime();
        String what;
        try {
            call.run();
            what = "returned";
        } catch (Throwable t) {
            what = (t instanceof io.refshare.exceptions.RefshareException ? "refshare " : "other ") + t.getClass().getSimpleName();
        }
        return what + " " + (System.nanoTime() - start) / 1_000_000 + "ms";
    }
}
