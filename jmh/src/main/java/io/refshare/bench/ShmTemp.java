package io.refshare.bench;

import io.refshare.shm.ShmDirectory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * A private directory under /dev/shm for one benchmark trial, removed with everything in it
 * by {@link #delete()} (called from every benchmark's trial tear-down), so a run leaves no
 * file behind.
 */
public final class ShmTemp {
    private final Path path;

    private ShmTemp(Path path) {
        this.path = path;
    }

    public static ShmTemp create() throws IOException {
        return new ShmTemp(Files.createTempDirectory(Path.of("/dev/shm"), "refshare-jmh-bench-"));
    }

    public Path path() {
        return path;
    }

    /** A refshare directory (owner-only files, default prefix) inside this one. */
    public ShmDirectory directory() {
        return new ShmDirectory(path, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
    }

    public void delete() throws IOException {
        if (!Files.exists(path)) {
            return;
        }
        List<Path> all;
        try (Stream<Path> s = Files.walk(path)) {
            all = s.sorted(Comparator.reverseOrder()).toList();
        }
        for (Path p : all) {
            Files.deleteIfExists(p);
        }
    }
}
