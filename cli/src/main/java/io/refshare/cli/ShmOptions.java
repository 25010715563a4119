package io.refshare.cli;

import io.refshare.RefshareConfig;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/** Where refshare's files are: shared by every command. */
final class ShmOptions {
    @Option(names = "--dir", paramLabel = "DIR", description = "shared-memory directory (default: ${DEFAULT-VALUE})",
            defaultValue = "/dev/shm")
    Path directory;

    @Option(names = "--prefix", paramLabel = "PREFIX", description = "file name prefix (default: ${DEFAULT-VALUE})",
            defaultValue = "refshare")
    String prefix;

    RefshareConfig config() {
        return RefshareConfig.defaults().withDirectory(directory).withPrefix(prefix);
    }
}
