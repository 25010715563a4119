package io.refshare.counter;

import io.refshare.exceptions.ResourceLimitException;
import io.refshare.shm.ShmDirectory;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Path;

/**
 * A process using another's counter file as a peer. Args: directory, counter file name.
 * Prints READY, then answers commands on stdin:
 * <pre>
 *   CLAIM slot tag   -> CLAIMED true|false, or LIMIT message (every peer entry taken)
 *   LEAVE            -> LEFT tokens-released
 *   EXIT             exits without leaving (as a process that forgot to close)
 * </pre>
 */
public final class PeerMain {
    static void run(String[] args) throws Exception {
        ShmDirectory dir = new ShmDirectory(Path.of(args[0]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        try (CounterFile f = CounterFile.open(dir, args[1]);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            System.out.println("READY");
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                switch (w[0]) {
                    case "CLAIM" -> {
                        try {
                            System.out.println("CLAIMED " + f.claim(Integer.parseInt(w[1]), Integer.parseInt(w[2])));
                        } catch (ResourceLimitException e) {
                            System.out.println("LIMIT " + e.getMessage());
                        }
                    }
                    case "LEAVE" -> System.out.println("LEFT " + f.leave());
                    case "EXIT" -> {
                        return;
                    }
                    default -> System.out.println("ERROR unknown command " + w[0]);
                }
                System.out.flush();
            }
        }
    }
}
