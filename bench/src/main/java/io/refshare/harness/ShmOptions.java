package io.refshare.harness;

import io.refshare.shm.ShmDirectory;
import io.refshare.RefshareConfig;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/** Where refshare's files are: shared by every command. */
public final class ShmOptions {
    @Option(names = "--dir", paramLabel = "DIR", description = "shared-memory directory (default: ${DEFAULT-VALUE})",
            defaultValue = "/dev/shm")
    Path directory;

    @Option(names = "--prefix", paramLabel = "PREFIX", description = "file name prefix (default: ${DEFAULT-VALUE})",
            defaultValue = "refshare")
    String prefix;

    @Option(names = "--group-access", description = {"files are shared by the owner's group (mode 0660): create them",
            "so, and accept files of any of this user's groups (primary or supplementary)"})
    boolean groupAccess;

    /** The shared-memory directory {@code config} names, for the commands that read its files. */
    public static ShmDirectory directory(RefshareConfig config) {
        return ShmDirectory.of(config.directory(), config.prefix(), config.groupAccess());
    }

    public RefshareConfig config() {
        return RefshareConfig.defaults().withDirectory(directory).withPrefix(prefix).withGroupAccess(groupAccess);
    }
}
