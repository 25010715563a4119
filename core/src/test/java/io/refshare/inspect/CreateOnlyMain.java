package io.refshare.inspect;

import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.nio.file.Path;

/**
 * A process that dies between creating a file and writing its layout's header: it creates
 * a segment file through {@link ShmDirectory#create} (space reserved, mapped), prints its
 * name, and waits on stdin to be killed, never writing a byte itself.
 */
public final class CreateOnlyMain {
    static void run(String[] args) throws Exception {
        ShmDirectory dir = new ShmDirectory(Path.of(args[0]), ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        ShmFile f = dir.create(ShmKind.SEGMENT, Long.parseLong(args[1]));
        System.out.println("CREATED " + f.name());
        System.out.flush();
        System.in.read(); // killed here
    }
}
