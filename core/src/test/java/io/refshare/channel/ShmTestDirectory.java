package io.refshare.channel;

import io.refshare.shm.ShmDirectory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.UUID;
import java.util.stream.Stream;

/** A fresh directory under /dev/shm for one test, removed with everything in it afterwards. */
final class ShmTestDirectory implements AutoCloseable {
    private final Path path;
    private final ShmDirectory directory;

    ShmTestDirectory() throws IOException {
        path = Files.createDirectory(Path.of("/dev/shm", "refshare-channel-test-" + UUID.randomUUID()));
        directory = new ShmDirectory(path, "rstest", ShmDirectory.OWNER_ONLY);
    }

    ShmDirectory directory() {
        return directory;
    }

    Path path() {
        return path;
    }

    /** Names of the files left in the directory. */
    long fileCount() throws IOException {
        try (Stream<Path> files = Files.list(path)) {
            return files.count();
        }
    }

    @Override
    public void close() throws IOException {
        try (Stream<Path> files = Files.walk(path)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
