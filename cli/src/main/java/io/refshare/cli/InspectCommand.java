package io.refshare.cli;

import io.refshare.harness.ShmOptions;
import io.refshare.inspect.Inventory;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.shm.Verdict;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
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

    @Option(names = {"-w", "--watch"}, paramLabel = "SECONDS",
            description = "repeat every SECONDS until interrupted, with rates: messages taken per second from each "
                    + "queue, tensors shared per second by each process")
    double watchSeconds;

    @Override
    public Integer call() throws Exception {
        ShmDirectory dir = ShmOptions.directory(shm.config());
        Map<String, long[]> before = Map.of();
        long beforeAt = 0;
        do {
            List<Inventory.Entry> entries = Inventory.list(dir);
            long now = System.nanoTime();
            Map<String, long[]> counts = new HashMap<>();
            for (Inventory.Entry e : entries) {
                long[] c = Inventory.runningCounts(dir, e);
                if (c.length > 0) {
                    counts.put(e.name(), c);
                }
            }
            print(dir, entries);
            if (watchSeconds > 0) {
                printRates(entries, before, counts, (now - beforeAt) / 1e9);
                before = counts;
                beforeAt = now;
                Thread.sleep((long) (watchSeconds * 1000));
                System.out.println();
            }
        } while (watchSeconds > 0);
        return 0;
    }

    /** Rates since the previous listing, for files seen in both (the first listing has none). */
    private static void printRates(List<Inventory.Entry> entries, Map<String, long[]> before,
                                   Map<String, long[]> now, double seconds) {
        boolean first = true;
        for (Inventory.Entry e : entries) {
            long[] was = before.get(e.name());
            long[] is = now.get(e.name());
            if (was == null || is == null || seconds <= 0) {
                continue;
            }
            if (first) {
                System.out.printf(Locale.ROOT, "rates over the last %.1f s:%n", seconds);
                first = false;
            }
            String rates = e.kind() == ShmKind.QUEUE
                    ? String.format(Locale.ROOT, "%,.0f taken/s", (is[0] - was[0]) / seconds)
                    : String.format(Locale.ROOT, "%,.0f shared/s, %,.0f received/s", (is[0] - was[0]) / seconds,
                    (is[1] - was[1]) / seconds);
            System.out.printf(Locale.ROOT, "  %-8s %-45s %s%n", e.kind().tag(), e.name(), rates);
        }
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
