package io.refshare;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A consumer whose heap runs out while it takes (start it with a small heap, no thread-local
 * allocation buffers and the serial collector, so that the space left is what is free): takes
 * two messages normally (loading and initialising every class the rest needs: a class whose
 * initialiser meets a full heap is unusable for good), then, for each of the {@code count}
 * messages after them, fills the heap to the last object and polls, freeing <i>n</i> small
 * objects after its <i>n</i>th {@link OutOfMemoryError}, until the poll returns. So each take
 * fails at each allocation of its path in turn, before and after the token's claim, until it
 * has room to finish. Prints {@code VALUE <long> OOMS <failures>} per message (or
 * {@code NOTHING} when a poll found none for 10 s), then {@code BACKGROUND <n>} (refshare's
 * collector and housekeeper still running), {@code REJECTED <count>}, and waits
 * for a line before closing. Args: directory, queue name, count.
 */
public final class OutOfHeapConsumerMain {
    private OutOfHeapConsumerMain() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        int count = Integer.parseInt(args[2]);
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
             ShareQueue q = rs.openQueue(args[1])) {
            for (int i = 0; i < 2; i++) { // the second takes the paths of a block seen before
                try (Tensor warmUp = q.take()) {
                    System.out.println("VALUE " + warmUp.data().get(ValueLayout.JAVA_LONG, 0) + " OOMS 0");
                }
            }
            for (int i = 0; i < count; i++) {
                List<Object> ballast = new ArrayList<>(1 << 16);
                fill(ballast);
                int failures = 0;
                Tensor t;
                while (true) {
                    try {
                        t = q.poll(10, TimeUnit.SECONDS);
                        break;
                    } catch (OutOfMemoryError e) {
                        failures++;
                        // a few bytes at first, so that each allocation of the path fails in turn; more
                        // as the failures go on, for the waits' own allocations
                        for (int k = 0; k < failures && !ballast.isEmpty(); k++) {
                            ballast.removeLast();
                        }
                    }
                }
                ballast = null; // room again, for the report and the close
                if (t == null) {
                    System.out.println("NOTHING");
                    break;
                }
                try (Tensor taken = t) {
                    System.out.println("VALUE " + taken.data().get(ValueLayout.JAVA_LONG, 0) + " OOMS " + failures);
                }
            }
            System.out.println("BACKGROUND " + Thread.getAllStackTraces().keySet().stream()
                    .filter(t -> t.getName().equals("refshare-collector") || t.getName().equals("refshare-housekeeper"))
                    .count());
            System.out.println("REJECTED " + q.rejected());
            System.out.flush();
            in.readLine(); // the producer has looked at its references
        }
    }

    /**
     * Allocates until nothing more fits: arrays of falling sizes down to 16 KiB, then plain
     * objects, the last ones in {@code into} the smallest, so freeing from its end gives back a
     * few bytes at a time.
     */
    private static void fill(List<Object> into) {
        for (int size = 1 << 20; size >= 16 << 10; size >>= 2) {
            try {
                while (into.size() < (1 << 16) - 4096) {
                    into.add(new byte[size]);
                }
            } catch (OutOfMemoryError next) {
                // a smaller size may still fit
            }
        }
        try {
            while (into.size() < 1 << 16) {
                into.add(new Object());
            }
        } catch (OutOfMemoryError full) {
            // nothing more fits
        }
    }
}
