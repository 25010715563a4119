package io.refshare.inspect;

import io.refshare.channel.QueueParticipant;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.shm.Verdict;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Removes refshare files left behind by processes that died: a file goes when every
 * process it belongs to is dead — its owner, and for a counter file every process that
 * holds one of its tokens now, for a queue every attached process. It never touches a file whose
 * name is not ours, that another user owns, whose header names an impossible owner (damage
 * it reports and leaves to a person), or that any live process still belongs to. Removing a
 * name does not disturb processes that still map the file.
 *
 * <p>A file that names no owner at all (shorter than a header, or a zero owner pid) is
 * what a creator killed between creating the file and its first write leaves; the
 * creator writes the owner right after the create (see {@link FileHeader}), so a live
 * creator leaves that state within microseconds. Such a file is removed once it has not
 * been modified for {@link #UNOWNED_GRACE}, and left alone before: it may be a live
 * process's file being created this moment. (A creator stopped for longer than that in
 * the few microseconds between the two steps loses its file and fails to create it,
 * cleanly: its later mapping of the removed name fails.)
 */
public final class Janitor {
    /** How long a file that names no owner may be in creation before it counts as abandoned. */
    public static final Duration UNOWNED_GRACE = Duration.ofSeconds(60);

    /** What a sweep did: names removed, and names it left with the reason. */
    public record Report(List<String> removed, List<String> kept) {
    }

    private Janitor() {
    }

    /** Sweeps the directory; with {@code dryRun} it only reports what it would remove. */
    public static Report sweep(ShmDirectory dir, boolean dryRun) throws IOException {
        List<String> removed = new ArrayList<>();
        List<String> kept = new ArrayList<>();
        List<Path> lifeFiles = new ArrayList<>();
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
            if (kind == ShmKind.LIFE) {
                lifeFiles.add(p);
                continue; // judged once the other files are
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
        for (Path p : lifeFiles) {
            String name = p.getFileName().toString();
            FileHeader header;
            try {
                header = FileHeader.readOrNull(p);
            } catch (IOException | RuntimeException e) {
                kept.add(name + " (header unreadable, left alone)");
                continue;
            }
            if (header == null) {
                kept.add(name + " (no identity recorded)");
            } else if (dryRun ? dir.verdict(header.owner()) == Verdict.DEAD : dir.removeLifeFileIfDead(header.owner())) {
                removed.add(name);
            } else {
                kept.add(name + " (process " + header.owner().pid() + " " + dir.verdict(header.owner()) + ")");
            }
        }
        return new Report(removed, kept);
    }

    /** Why the file must stay, or null when every process it belongs to is dead. */
    private static String liveUser(ShmDirectory dir, Path p, String name, ShmKind kind) {
        if (!dir.isMine(p)) {
            return "another user's";
        }
        FileHeader header;
        try {
            header = FileHeader.readOrNull(p);
        } catch (IOException | RuntimeException e) {
            return "header unreadable, left alone";
        }
        if (header == null) {
            return unownedAndYoung(p);
        }
        ProcessIdentity owner = header.owner();
        if (dir.verdict(owner).mayBeAlive()) {
            return "owner " + owner.pid() + " alive";
        }
        try {
            switch (kind) {
                case COUNTERS -> {
                    try (CounterFile f = CounterFile.open(dir, name)) {
                        for (ProcessIdentity holder : f.currentHolders()) {
                            if (dir.verdict(holder).mayBeAlive()) {
                                return "holder " + holder.pid() + " alive";
                            }
                        }
                    }
                }
                case QUEUE -> {
                    for (QueueParticipant q : ShmQueue.inspect(dir, name).participants()) {
                        if (dir.verdict(q.process()).mayBeAlive()) {
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

    /** For a file that names no owner: why it stays (too young to be abandoned), or null. */
    private static String unownedAndYoung(Path p) {
        Duration age;
        try {
            age = Duration.between(Files.getLastModifiedTime(p, LinkOption.NOFOLLOW_LINKS).toInstant(), Instant.now());
        } catch (IOException e) {
            return "no owner recorded, age unreadable, left alone";
        }
        if (age.compareTo(UNOWNED_GRACE) >= 0) {
            return null;
        }
        return "no owner recorded yet, " + Math.max(0, age.toSeconds()) + " s old: may be being created, removed once "
                + UNOWNED_GRACE.toSeconds() + " s old";
    }
}
