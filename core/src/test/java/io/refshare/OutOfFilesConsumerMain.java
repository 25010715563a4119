package io.refshare;

import io.refshare.exceptions.ResourceLimitException;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.SimpleFormatter;

/**
 * A consumer that runs out of open files (start it with a low limit: {@code ulimit -n 256}): takes the
 * first message (and loads every class it will need), then, at "FILL", opens {@code /dev/null}
 * until the process may open no more and polls for the second message, which comes from files
 * it has not opened yet; at "FREE" it closes them and polls again. Prints what each poll gave:
 * {@code VALUE <long>}, {@code LIMIT <message>}, {@code NOTHING}, or {@code OTHER <exception>}, and
 * {@code REJECTED <count>}. Args: directory, queue name.
 */
public final class OutOfFilesConsumerMain {
    private OutOfFilesConsumerMain() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])))) {
            ShareQueue q = rs.openQueue(args[1]);
            try (Tensor first = q.take()) {
                // load now what the rest needs, while files can be opened (a class path of
                // directories opens a file per class): a wait with its sweeps, the failure's
                // classes, and what a warning needs (the log formatter, the time zone data)
                if (q.poll(300, TimeUnit.MILLISECONDS) != null) {
                    throw new IllegalStateException("a message before it was sent");
                }
                Class.forName("io.refshare.shm.FileFailure");
                Class.forName(ResourceLimitException.class.getName());
                new SimpleFormatter().format(new LogRecord(Level.WARNING, "warm-up"));
                System.out.println("VALUE " + first.data().get(ValueLayout.JAVA_LONG, 0));
            }
            System.out.flush();
            in.readLine(); // FILL: the second message is queued
            List<FileInputStream> held = new ArrayList<>();
            try {
                while (true) {
                    held.add(new FileInputStream("/dev/null"));
                }
            } catch (IOException limitReached) {
                // as many open as this process may have
            }
            report(q);
            for (FileInputStream f : held) {
                f.close();
            }
            in.readLine(); // FREE
            report(q);
            q.close();
        }
    }

    private static void report(ShareQueue q) {
        try (Tensor t = q.poll(5, TimeUnit.SECONDS)) {
            System.out.println(t == null ? "NOTHING" : "VALUE " + t.data().get(ValueLayout.JAVA_LONG, 0));
        } catch (ResourceLimitException e) {
            System.out.println("LIMIT " + e.getMessage());
        } catch (Throwable t) {
            System.out.println("OTHER " + t);
        }
        System.out.println("REJECTED " + q.rejected());
        System.out.flush();
    }
}
