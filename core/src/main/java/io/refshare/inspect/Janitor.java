package io.refshare.inspect;

import io.refshare.channel.QueueParticipant;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Removes refshare files left behind by processes that died: a file goes when every
 * process it belongs to is dead — its owner, and for a counter file every process that
 * holds one of its tokens now, for a queue every attached process. It never touches a file whose
 * name is not ours, that another user owns, whose header it cannot read (it may be being
 * created), or that any live process still belongs to. Removing a name does not disturb
 * processes that still map the file.
 */
public final class Janitor {

    /** What a sweep did: names removed, and names it left with the reason. */
    public record Report(List<String> removed, List<String> kept) {
    }

    private Janitor() {
    }

    /** Sweeps the directory; with {@code dryRun} it only reports what it would remove. */
    public static Report sweep(ShmDirectory dir, boolean dryRun) throws IOException {
        List<String> removed = new ArrayList<>();
        List<String> kept = new ArrayList<>();
        List<Path> files;
        try (Stream<Path> s = Files.list(dir.path())) {
            files = s.sorted().toList();
        }
        for (Path p : files) {
            String name = p.getFileName().toString();
            ShmKind kind = dir.kindOf(name);
            if (kind == null || !Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                continue; // not ours
            }
            String live = liveUser(dir, p, name, kind);
            if (live != null) {
                kept.add(name + " (" + live + ")");
            } else {
                if (!dryRun) {
                    Files.deleteIfExists(p);
                }
                removed.add(name);
            }
        }
        return new Report(removed, kept);
    }

    /** Why the file must stay, or null when every process it belongs to is dead. */
    private static String liveUser(ShmDirectory dir, Path p, String name, ShmKind kind) {
        if (!dir.isMine(p)) {
            return "another user's";
        }
        ProcessIdentity owner;
        try {
            owner = FileHeader.read(p).owner();
        } catch (IOException | RuntimeException e) {
            return "header unreadable, left alone";
        }
        if (owner.isAlive()) {
            return "owner " + owner.pid() + " alive";
        }
        try {
            switch (kind) {
                case COUNTERS -> {
                    try (CounterFile f = CounterFile.open(dir, name)) {
                        for (ProcessIdentity holder : f.currentHolders()) {
                            if (holder.isAlive()) {
                                return "holder " + holder.pid() + " alive";
                            }
                        }
                    }
                }
                case QUEUE -> {
                    for (QueueParticipant q : ShmQueue.inspect(dir, name).participants()) {
                        if (q.process().isAlive()) {
                            return "participant " + q.process().pid() + " alive";
                        }
                    }
                }
                default -> {
                    // the owner is the only process a segment, status or holder file belongs to
                }
            }
        } catch (RuntimeException e) {
            // a dead owner's file that is also corrupt: nobody can use it
        }
        return null;
    }
}
