package io.refshare.testing;

import io.refshare.RefshareConfig;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

/**
 * A fresh directory under /dev/shm for one test, so tests never see each other's files
 * and a leak is attributable. {@link #close()} fails the test if anything is left in it,
 * then removes it either way. As a field registered with
 * {@code @RegisterExtension final TempShm shm = new TempShm();} it closes itself after each
 * test (JUnit makes a new instance, so a new directory, for every test).
 */
public final class TempShm implements AutoCloseable, AfterEachCallback {
    private final Path path;

    public TempShm() {
        try {
            path = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-test-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public Path path() {
        return path;
    }

    public ShmDirectory directory() {
        return new ShmDirectory(path, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
    }

    public RefshareConfig config() {
        return RefshareConfig.defaults().withDirectory(path);
    }

    public List<String> files() {
        try (Stream<Path> s = Files.list(path)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public long count(String kindTag) {
        return files().stream().filter(n -> n.contains("-" + kindTag + "-")).count();
    }

    private void removeLifeFilesOfTheDead() {
        ShmDirectory dir = directory();
        dir.releaseLifeLock();
        for (String name : files()) {
            if (dir.kindOf(name) == ShmKind.LIFE) {
                String hex = name.substring(name.length() - 32);
                ProcessIdentity id = new ProcessIdentity(Long.parseUnsignedLong(hex.substring(0, 16), 16),
                        Long.parseUnsignedLong(hex.substring(16), 16));
                dir.removeLifeFileIfDead(id);
            }
        }
    }

    @Override
    public void afterEach(ExtensionContext context) {
        close();
    }

    /**
     * Removes the directory; throws AssertionError if files were left behind. Idempotent.
     * Life files are not leaks when the janitor would remove them: this process's own (it
     * gives its lock up here) and those of processes that died (a killed child's).
     */
    @Override
    public void close() {
        if (!Files.isDirectory(path)) {
            return;
        }
        removeLifeFilesOfTheDead();
        List<String> left = files();
        for (String f : left) {
            try {
                Files.deleteIfExists(path.resolve(f));
            } catch (IOException ignored) {
                // reported below
            }
        }
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (!left.isEmpty()) {
            throw new AssertionError("test left files in " + path + ": " + left);
        }
    }
}
