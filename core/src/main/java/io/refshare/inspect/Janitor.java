package io.refshare.inspect;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.channel.QueueParticipant;
import io.refshare.channel.QueueStats;
import io.refshare.channel.QueuedMessages;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.holder.HolderFile;
import io.refshare.shm.CheckedFile;
import io.refshare.shm.FileHeader;
import io.refshare.shm.Libc;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.shm.Verdict;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Removes refshare files left behind by processes that died. A file goes only when every
 * process it belongs to is {@link Verdict#DEAD} on the kernel's evidence (see
 * {@link ShmDirectory#verdict}); {@link Verdict#UNKNOWN} keeps it, so a process of another
 * PID namespace never loses a file it uses. The processes a file belongs to: its owner; for
 * a counter file every process holding one of its tokens now; for a queue every attached
 * participant; for a holder every reader with a row.
 *
 * <p>A file a queue still refers to is kept too: a dead producer's segment and counter
 * files stay while a queue holds messages naming them (see {@link QueuedMessages}) and has
 * a process that is not dead attached (or an owner that is not), since that process may
 * still receive them; they go with a later sweep, once the messages are taken or nobody is
 * left to take them.
 *
 * <p>Life files go last: one is removed once its process is dead and no file left in the
 * directory names that identity (an owner in a header, a counter file's peer entry, a
 * queue participant, a holder's reader row), since the processes reading those records
 * need the life file to learn the death. Removing one too early only turns a verdict from
 * DEAD into UNKNOWN (a leak, never a use of freed memory); so a file that cannot be read
 * does not hold back the life files.
 *
 * <p>Only a process already dead before the sweep lists the directory loses its life file
 * in that sweep. A process records its identity only while it runs, so every record a
 * process dead by then left is in a file the listing finds. One that was alive may register
 * in a file after the sweep read it and die before the life files are judged; removing its
 * life file then would leave its owner, say a producer reclaiming its references, with
 * UNKNOWN for good. Such a life file waits for the next sweep.
 *
 * <p>Never touched: a file whose name is not ours, anything that is not a regular file
 * (every file is opened with {@code O_NOFOLLOW|O_NONBLOCK} and judged by {@code fstat} of
 * its descriptor, so a FIFO or link swapped in cannot block or redirect the sweep), another
 * user's file (or, with group access, another group's), a header naming an impossible
 * owner (damage it reports and leaves to a person). Removing a name does not disturb
 * processes that still map the file.
 *
 * <p>A file that names no owner at all (shorter than a header, or a zero owner pid) is
 * what a creator killed between creating the file and its first write leaves; the
 * creator writes the owner right after the create (see {@link FileHeader}), so a live
 * creator leaves that state within microseconds. Such a file is removed once it has not
 * been modified for {@link #UNOWNED_GRACE}, and left alone before: it may be a live
 * process's file being created this moment. (A creator stopped for longer than that in
 * the few microseconds between the two steps loses its file and fails to create it,
 * cleanly: its later mapping of the removed name fails.)
 *
 * <p>Counts are exact under concurrent sweeps: a file counts as removed by the sweep whose
 * unlink removed it; one found gone is not counted (nor listed as kept).
 */
public final class Janitor {
    /** How long a file that names no owner may be in creation before it counts as abandoned. */
    public static final Duration UNOWNED_GRACE = Duration.ofSeconds(60);

    /** What a sweep did: names removed, and names it left with the reason. */
    public record Report(List<String> removed, List<String> kept) {
    }

    private final ShmDirectory dir;
    private final boolean dryRun;
    private final List<String> removed = new ArrayList<>();
    private final List<String> kept = new ArrayList<>();
    /** Identities named by the files that remain; their life files must stay. */
    private final Set<ProcessIdentity> named = new HashSet<>();
    /** Files referred to by messages of a queue someone may still take them from, with that queue. */
    private final Map<String, String> stillQueued = new HashMap<>();
    /** Verdicts other than DEAD, which cannot turn out wrong in the harmful direction. */
    private final Map<ProcessIdentity, Verdict> mayBeAlive = new HashMap<>();

    private Janitor(ShmDirectory dir, boolean dryRun) {
        this.dir = dir;
        this.dryRun = dryRun;
    }

    /** Sweeps the directory; with {@code dryRun} it only reports what it would remove. */
    public static Report sweep(ShmDirectory dir, boolean dryRun) throws IOException {
        return sweep(dir, dryRun, () -> { });
    }

    /** {@link #sweep(ShmDirectory, boolean)}, running {@code beforeLifeFiles} between the two passes (for tests). */
    static Report sweep(ShmDirectory dir, boolean dryRun, Runnable beforeLifeFiles) throws IOException {
        return new Janitor(dir, dryRun).run(beforeLifeFiles);
    }

    private Report run(Runnable beforeLifeFiles) throws IOException {
        Set<ProcessIdentity> deadBeforeListing = deadProcessesWithLifeFiles();
        List<String> files = new ArrayList<>();
        List<String> lifeFiles = new ArrayList<>();
        try (Stream<Path> s = Files.list(dir.path())) {
            for (Path p : s.sorted().toList()) {
                String name = p.getFileName().toString();
                ShmKind kind = dir.kindOf(name);
                if (kind == ShmKind.LIFE) {
                    lifeFiles.add(name);
                } else if (kind != null) {
                    files.add(name);
                }
            }
        }
        for (String name : files) {
            if (dir.kindOf(name) == ShmKind.QUEUE) {
                noteQueuedMessages(name);
            }
        }
        for (String name : files) {
            judge(name, dir.kindOf(name));
        }
        beforeLifeFiles.run();
        for (String name : lifeFiles) {
            judgeLifeFile(name, deadBeforeListing);
        }
        return new Report(List.copyOf(removed), List.copyOf(kept));
    }

    /** The processes whose life files read DEAD now. */
    private Set<ProcessIdentity> deadProcessesWithLifeFiles() throws IOException {
        Set<ProcessIdentity> dead = new HashSet<>();
        try (Stream<Path> s = Files.list(dir.path())) {
            for (Path p : s.toList()) {
                ProcessIdentity id = dir.lifeFileIdentity(p.getFileName().toString());
                if (id != null && dir.verdict(id) == Verdict.DEAD) {
                    dead.add(id);
                }
            }
        }
        return dead;
    }

    private Verdict verdict(ProcessIdentity id) {
        Verdict known = mayBeAlive.get(id);
        if (known != null) {
            return known;
        }
        Verdict v = dir.verdict(id);
        if (v != Verdict.DEAD) {
            mayBeAlive.put(id, v); // a DEAD verdict is asked again: a twin of another namespace may start
        }
        return v;
    }

    private static String state(Verdict v) {
        return v == Verdict.UNKNOWN ? "not known to be dead" : "alive";
    }

    /** Records the files a queue's messages name, if a process that may take them is left. */
    private void noteQueuedMessages(String queue) {
        List<byte[]> payloads;
        try {
            QueueStats stats = ShmQueue.inspect(dir, queue);
            boolean someoneLeft = verdict(stats.owner()).mayBeAlive()
                    || stats.participants().stream().anyMatch(q -> verdict(q.process()).mayBeAlive());
            if (!someoneLeft || stats.size() == 0) {
                return;
            }
            payloads = QueuedMessages.payloads(dir, queue);
        } catch (RuntimeException unreadable) {
            return; // judged (and reported) with the other files
        }
        for (byte[] m : payloads) {
            try {
                Descriptor d = DescriptorCodec.decode(m, 0, m.length, dir::isOurs);
                stillQueued.putIfAbsent(d.segmentName(), queue);
                stillQueued.putIfAbsent(d.counterFileName(), queue);
            } catch (InvalidDataException notADescriptor) {
                // a plain byte message: it names no file
            }
        }
    }

    private void judge(String name, ShmKind kind) {
        Path path = dir.path().resolve(name);
        try (CheckedFile f = CheckedFile.open(path, false)) {
            String reason = reasonToKeep(f, name, kind);
            if (reason != null) {
                kept.add(name + " (" + reason + ")");
            } else if (dryRun ? f.stillNamed() : removeIfStillTheSame(f)) {
                removed.add(name);
            }
        } catch (NoSuchFileException gone) {
            // removed meanwhile (by its owner, or another sweep, which counts it)
        } catch (IOException e) {
            kept.add(name + " (" + unopenable(path, e) + ")");
        }
    }

    /** Why a file could not be opened, in the words of the other reasons to keep one. */
    private String unopenable(Path path, IOException e) {
        int errno = e instanceof Libc.ErrnoException x ? x.errno() : 0;
        if (errno == Libc.ELOOP) {
            return "a symbolic link, left alone";
        }
        if (errno == Libc.EACCES) {
            try {
                Libc.FileStat st = Libc.lstat(path.toString()); // never opens: cannot block
                if (!dir.ownedByUs(st.uid(), st.gid())) {
                    return "another user's";
                }
            } catch (Libc.ErrnoException gone) {
                // fall through to the open's own error
            }
        }
        return "cannot be opened: " + e.getMessage();
    }

    /** Unlinks the name if it still denotes the file judged; true when this call removed it. */
    private static boolean removeIfStillTheSame(CheckedFile f) {
        if (!f.stillNamed()) {
            return false;
        }
        try {
            return Files.deleteIfExists(f.path());
        } catch (IOException e) {
            return false;
        }
    }

    /** Why the file must stay, or null when every process it belongs to is dead. */
    private String reasonToKeep(CheckedFile f, String name, ShmKind kind) {
        if (!f.stat().isRegularFile()) {
            return "not a regular file, left alone";
        }
        if (!dir.ownedByUs(f.stat().uid(), f.stat().gid())) {
            return "another user's";
        }
        FileHeader header;
        try {
            header = FileHeader.readOrNull(f);
        } catch (IOException | RuntimeException e) {
            return "header unreadable, left alone";
        }
        if (header == null) {
            return unownedAndYoung(f);
        }
        Users users = users(name, kind, header.owner());
        String reason = users.firstNotDead(this);
        if (reason == null && stillQueued.containsKey(name)) {
            reason = "messages naming it are queued in " + stillQueued.get(name) + ", which a live process may take";
        }
        if (reason != null) {
            named.addAll(users.named());
        }
        return reason;
    }

    /**
     * The processes a file belongs to ({@code users}: their death lets it go) and those it
     * names at all ({@code named}: a counter file's registered peers also name processes that
     * hold no token now; their life files must stay for the owner to judge them).
     */
    private record Users(ProcessIdentity owner, Set<ProcessIdentity> users, Set<ProcessIdentity> named, String role) {
        String firstNotDead(Janitor j) {
            Verdict o = j.verdict(owner);
            if (o.mayBeAlive()) {
                return "owner " + owner.pid() + " " + state(o);
            }
            for (ProcessIdentity u : users) {
                Verdict v = j.verdict(u);
                if (v.mayBeAlive()) {
                    return role + " " + u.pid() + " " + state(v);
                }
            }
            return null;
        }
    }

    private Users users(String name, ShmKind kind, ProcessIdentity owner) {
        Set<ProcessIdentity> users = new LinkedHashSet<>();
        Set<ProcessIdentity> names = new HashSet<>();
        names.add(owner);
        String role = "user";
        try {
            switch (kind) {
                case COUNTERS -> {
                    role = "holder";
                    try (CounterFile c = CounterFile.open(dir, name)) {
                        users.addAll(c.currentHolders());
                        for (int i = 0; i < c.peerCapacity(); i++) {
                            ProcessIdentity peer = c.peerOrNull(i);
                            if (peer != null) {
                                names.add(peer);
                            }
                        }
                    }
                }
                case QUEUE -> {
                    role = "participant";
                    for (QueueParticipant q : ShmQueue.inspect(dir, name).participants()) {
                        users.add(q.process());
                    }
                }
                case HOLDER -> {
                    role = "reader";
                    users.addAll(HolderFile.peek(dir, name).readers());
                }
                default -> {
                    // the owner is the only process a segment or status file belongs to
                }
            }
        } catch (RuntimeException | InternalError e) {
            // unreadable beyond its header, or cut short under our look (the JVM's InternalError):
            // judged by its owner alone (a dead owner's damaged file is of use to nobody)
        }
        names.addAll(users);
        return new Users(owner, users, names, role);
    }

    private void judgeLifeFile(String name, Set<ProcessIdentity> deadBeforeListing) {
        ProcessIdentity id = dir.lifeFileIdentity(name);
        if (id == null) {
            kept.add(name + " (its name names no process, left alone)");
            return;
        }
        Verdict v = verdict(id);
        if (v.mayBeAlive()) {
            kept.add(name + " (process " + id.pid() + " " + state(v) + ")");
        } else if (!deadBeforeListing.contains(id)) {
            kept.add(name + " (process " + id.pid() + " died during this sweep, judged by the next)");
        } else if (named.contains(id)) {
            kept.add(name + " (process " + id.pid() + " dead, still named by a file that stays)");
        } else if (dryRun ? Files.exists(dir.path().resolve(name)) : dir.removeLifeFileIfDead(id)) {
            removed.add(name);
        } else if (Files.exists(dir.path().resolve(name))) {
            Verdict now = dir.verdict(id);
            kept.add(name + " (process " + id.pid() + " " + (now == Verdict.DEAD ? "dead, its file being judged by"
                    + " another sweep" : state(now)) + ")");
        }
    }

    /** For a file that names no owner: why it stays (too young to be abandoned), or null. */
    private static String unownedAndYoung(CheckedFile f) {
        Duration age = Duration.between(Instant.ofEpochSecond(f.stat().modifiedEpochSeconds()), Instant.now());
        if (age.compareTo(UNOWNED_GRACE) >= 0) {
            return null;
        }
        return "no owner recorded yet, " + Math.max(0, age.toSeconds()) + " s old: may be being created, removed once "
                + UNOWNED_GRACE.toSeconds() + " s old";
    }
}
