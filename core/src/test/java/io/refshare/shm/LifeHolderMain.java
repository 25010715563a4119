package io.refshare.shm;

import java.nio.file.Path;

/**
 * A process that takes its life lock in a directory, prints the identity it recorded
 * (as its own PID namespace sees it) and waits on stdin: to be killed, or to leave cleanly
 * on "LEAVE".
 */
public final class LifeHolderMain {
    static void run(String[] args) throws Exception {
        ShmDirectory dir = new ShmDirectory(Path.of(args[0]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        dir.holdLifeLock();
        ProcessIdentity me = ProcessIdentity.current();
        System.out.println("IDENTITY " + me.pid() + " " + me.startTicks());
        System.out.flush();
        var in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        String line = in.readLine();
        if ("LEAVE".equals(line)) {
            dir.releaseLifeLock();
            System.out.println("LEFT");
            System.out.flush();
            in.readLine();
        }
    }
}
