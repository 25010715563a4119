package io.refshare;

import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The {@link Refshare} instances open in this process, per directory and prefix, so that
 * the last one to close gives up the process's life lock there (DESIGN: a process removes
 * its own life file when its last handle of a directory closes and no file there names it).
 *
 * <p>"Names it" is checked here by the owner field of every file's header: a file this
 * process still owns (a queue or holder it created and has not closed, say) keeps the lock.
 * Entries that name this process inside other processes' files (counter peers, queue
 * participants, holder readers) are not seen by this check; refshare frees its counter peer
 * entries when the instance closes, before this runs.
 */
final class OpenDirectories {
    private static final System.Logger LOG = System.getLogger(OpenDirectories.class.getName());
    private static final Map<String, Integer> OPEN = new HashMap<>();

    private OpenDirectories() {
    }

    private static String key(ShmDirectory dir) {
        return dir.path().toAbsolutePath().normalize() + "\0" + dir.prefix();
    }

    static synchronized void opened(ShmDirectory dir) {
        OPEN.merge(key(dir), 1, Integer::sum);
    }

    /** One instance of {@code dir} closed; the last one gives up the life lock if nothing there is ours. */
    static synchronized void closed(ShmDirectory dir) {
        String key = key(dir);
        Integer left = OPEN.merge(key, -1, Integer::sum);
        if (left != null && left > 0) {
            return;
        }
        OPEN.remove(key);
        if (ownsNoFile(dir)) {
            dir.releaseLifeLock();
        }
    }

    /** True when no file of {@code dir} (its own life file aside) names this process as its owner. */
    private static boolean ownsNoFile(ShmDirectory dir) {
        ProcessIdentity me = ProcessIdentity.current();
        List<Path> files;
        try (Stream<Path> s = Files.list(dir.path())) {
            files = s.toList();
        } catch (IOException e) {
            return false; // cannot tell: keep the lock (a leak of one small file at worst)
        }
        for (Path p : files) {
            ShmKind kind = dir.kindOf(p.getFileName().toString());
            if (kind == null || kind == ShmKind.LIFE || !Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                continue;
            }
            try {
                FileHeader h = FileHeader.readOrNull(p);
                if (h != null && h.owner().equals(me)) {
                    return false;
                }
            } catch (IOException | RuntimeException e) {
                if (Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
                    LOG.log(System.Logger.Level.DEBUG, "cannot read the header of " + p + "; keeping the life lock", e);
                    return false;
                }
            }
        }
        return true;
    }
}
