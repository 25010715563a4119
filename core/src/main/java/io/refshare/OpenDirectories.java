package io.refshare;

import io.refshare.shm.ShmDirectory;

import java.util.HashMap;
import java.util.Map;

/**
 * The {@link Refshare} instances open in this process, per directory and prefix, so that
 * the last one to close leaves the directory ({@link ShmDirectory#leave()}: the process gives
 * up its life lock there unless a file still names it as owner). Each instance has given
 * back its tokens and freed its counter peer entries before it counts as closed here.
 */
final class OpenDirectories {
    private static final Map<String, Integer> OPEN = new HashMap<>();

    private OpenDirectories() {
    }

    private static String key(ShmDirectory dir) {
        return dir.path().toAbsolutePath().normalize() + "\0" + dir.prefix();
    }

    static synchronized void opened(ShmDirectory dir) {
        OPEN.merge(key(dir), 1, Integer::sum);
    }

    /** One instance of {@code dir} closed; the last one leaves the directory. */
    static synchronized void closed(ShmDirectory dir) {
        String key = key(dir);
        Integer left = OPEN.merge(key, -1, Integer::sum);
        if (left != null && left > 0) {
            return;
        }
        OPEN.remove(key);
        dir.leave();
    }
}
