package io.refshare.channel;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A process holding a queue whose file another process cuts to nothing: creates a queue (the
 * producer's handle) and attaches a consumer's handle to it, prints its name, waits for "GO"
 * (the file has been cut), then closes the consumer's handle, the producer's and refshare, and
 * reports each close by the class of what it threw ({@code ok} when nothing). A crash of the
 * JVM shows as no answer and a non-zero exit. Args: directory.
 */
final class CutQueueCloseMain {
    private CutQueueCloseMain() {
    }

    private interface Close {
        void run();
    }

    static void run(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
        ShareQueue producer = rs.createQueue(8);
        ShareQueue consumer = rs.openQueue(producer.name());
        System.out.println("NAME " + producer.name());
        System.out.flush();
        in.readLine();
        report("CONSUMER", consumer::close);
        report("PRODUCER", () -> producer.close(Duration.ZERO));
        report("REFSHARE", rs::close);
        System.out.flush();
    }

    private static void report(String what, Close close) {
        String outcome;
        try {
            close.run();
            outcome = "ok";
        } catch (Throwable t) {
            outcome = (t instanceof io.refshare.exceptions.RefshareException ? "refshare " : "other ")
                    + t.getClass().getSimpleName() + ": " + t.getMessage();
        }
        System.out.println(what + " " + outcome);
    }
}
