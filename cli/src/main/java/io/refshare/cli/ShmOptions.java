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

    @Option(names = "--group-access", description = {"files are shared by the owner's group (mode 0660): create them",
            "so, and accept files of any of this user's groups (primary or supplementary)"})
    boolean groupAccess;

    RefshareConfig config() {
        return RefshareConfig.defaults().withDirectory(directory).withPrefix(prefix).withGroupAccess(groupAccess);
    }
}
