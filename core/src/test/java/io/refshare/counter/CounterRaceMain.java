package io.refshare.counter;

import io.refshare.shm.ShmDirectory;

import java.nio.file.Path;

/**
 * One of several processes racing over every token of one counter file: for each slot in
 * order it tries to claim the token and, when it wins, releases it at once. Prints how
 * many it claimed and released. Args: directory, counter file name.
 */
public final class CounterRaceMain {
    static void run(String[] args) {
        ShmDirectory dir = new ShmDirectory(Path.of(args[0]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        try (CounterFile f = CounterFile.open(dir, args[1])) {
            System.out.println("READY");
            System.out.flush();
            new java.util.Scanner(System.in).nextLine(); // start together
            int n = f.handedOut();
            long claimed = 0;
            long released = 0;
            long lostClaims = 0;
            for (int s = 0; s < n; s++) {
                if (f.claim(s)) {
                    claimed++;
                    if (f.release(s)) {
                        released++;
                    }
                } else {
                    lostClaims++;
                }
            }
            System.out.println(claimed + " " + released + " " + lostClaims);
        }
    }
}
