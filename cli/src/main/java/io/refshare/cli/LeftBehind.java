package io.refshare.cli;

import io.refshare.shm.FileHeader;
import io.refshare.shm.ShmDirectory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The leak check of the multi-process commands: which refshare files that appeared while
 * a command ran still belong to one of its processes once they all closed. Only those
 * count, since other refshare users may share the directory.
 */
final class LeftBehind {
    private LeftBehind() {
    }

    /** Names of refshare files in the directory (files of other tools, or test directories, are not ours). */
    static Set<String> refshareFiles(ShmDirectory dir) throws IOException {
        try (Stream<Path> s = Files.list(dir.path())) {
            Set<String> names = new HashSet<>();
            s.map(p -> p.getFileName().toString()).filter(dir::isOurs).forEach(names::add);
            return names;
        }
    }

    /** Of the files that appeared ({@code now} less {@code before}), those owned by one of {@code pids}. */
    static Set<String> ownedBy(ShmDirectory dir, Set<String> before, Set<String> now, Set<Long> pids) {
        Set<String> left = new HashSet<>();
        for (String name : now) {
            if (before.contains(name)) {
                continue;
            }
            try {
                if (pids.contains(FileHeader.read(dir, dir.path().resolve(name)).owner().pid())) {
                    left.add(name);
                }
            } catch (NoSuchFileException gone) {
                // removed meanwhile
            } catch (IOException | RuntimeException unreadable) {
                left.add(name); // a file we cannot read the owner of is reported rather than ignored
            }
        }
        return left;
    }
}
