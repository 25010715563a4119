package io.refshare.memory;

import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/** A fresh subdirectory of /dev/shm for one test, removed with everything in it on close. */
final class TestShmDirectory implements AutoCloseable {
    private final Path path;
    private final ShmDirectory directory;

    TestShmDirectory() {
        this(createUnderDevShm());
    }

    /** Wraps an existing empty directory (a tmpfs mount point, for instance). */
    TestShmDirectory(Path path) {
        this.path = path;
        this.directory = new ShmDirectory(path, "memtest", ShmDirectory.OWNER_ONLY);
    }

    private static Path createUnderDevShm() {
        try {
            return Files.createTempDirectory(Path.of("/dev/shm"), "refshare-memory-test-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    Path path() {
        return path;
    }

    ShmDirectory directory() {
        return directory;
    }

    /** How many files the directory holds right now, besides this process's life file. */
    long fileCount() {
        try (Stream<Path> files = Files.list(path)) {
            return files.filter(f -> directory.kindOf(f.getFileName().toString()) != ShmKind.LIFE).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        directory.releaseLifeLock();
        try (Stream<Path> walk = Files.walk(path)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
