package io.refshare.conformance;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where the shared fixtures live: {@code conformance/} at the repository root. Surefire runs
 * the core module's tests with the module directory ({@code core/}) as the working
 * directory, a run from the root has the root; both are found by walking up to the first
 * directory that holds {@code conformance/README.md}.
 */
final class ConformanceFiles {
    private ConformanceFiles() {
    }

    static Path root() {
        Path dir = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        for (Path d = dir; d != null; d = d.getParent()) {
            if (Files.isRegularFile(d.resolve("conformance").resolve("README.md"))) {
                return d.resolve("conformance");
            }
        }
        throw new IllegalStateException("no conformance/README.md in " + dir + " or any directory above it");
    }
}
