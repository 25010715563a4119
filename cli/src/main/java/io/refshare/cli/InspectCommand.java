package io.refshare.cli;

import io.refshare.inspect.Inventory;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Verdict;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.List;
import java.util.concurrent.Callable;

/** {@code refshare inspect}: every refshare file, its owner, and what it holds. */
@Command(name = "inspect", mixinStandardHelpOptions = true,
        description = {"List every refshare file in the shared-memory directory and what it holds.",
                "",
                "For each file: kind, owner pid and whether it is alive, dead or unknown (no evidence either way: "
                        + "another PID namespace), size, live counts, limbo; for a holder, versions published, retired "
                        + "and alive, references reclaimed from dead readers, reader processes; life files with the "
                        + "state of their lock. Reads only; changes nothing."})
final class InspectCommand implements Callable<Integer> {
    @Mixin
    ShmOptions shm;

    @Option(names = {"-w", "--watch"}, paramLabel = "SECONDS", description = "repeat every SECONDS until interrupted")
    double watchSeconds;

    @Override
    public Integer call() throws Exception {
        ShmDirectory dir = shm.config().shmDirectory();
        do {
            print(dir, Inventory.list(dir));
            if (watchSeconds > 0) {
                Thread.sleep((long) (watchSeconds * 1000));
                System.out.println();
            }
        } while (watchSeconds > 0);
        return 0;
    }

    private static void print(ShmDirectory dir, List<Inventory.Entry> entries) {
        if (entries.isEmpty()) {
            System.out.println("no refshare files in " + dir);
            return;
        }
        System.out.printf("%-8s %-45s %10s %-18s %s%n", "KIND", "NAME", "SIZE", "OWNER", "DETAILS");
        for (Inventory.Entry e : entries) {
            System.out.printf("%-8s %-45s %10s %-18s %s%n", e.kind().tag(), e.name(), Inventory.bytes(e.size()),
                    owner(e), e.details());
        }
        long dead = entries.stream().filter(e -> e.ownerVerdict() == Verdict.DEAD).count();
        long unknown = entries.stream().filter(e -> e.ownerVerdict() == Verdict.UNKNOWN).count();
        System.out.println(entries.size() + " files" + (dead > 0 ? ", " + dead + " of dead processes" : "")
                + (unknown > 0 ? ", " + unknown + " of processes that cannot be seen from here (unknown)" : ""));
    }

    /** "1234 alive", "1234 dead", "1234 unknown" (no evidence either way, e.g. another PID namespace), or "?". */
    static String owner(Inventory.Entry e) {
        if (e.owner() == null) {
            return "?";
        }
        return e.owner().pid() + " " + e.ownerVerdict().name().toLowerCase(java.util.Locale.ROOT);
    }
}
