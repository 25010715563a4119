package io.refshare.cli;

import io.refshare.harness.ShmOptions;
import io.refshare.inspect.Janitor;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.concurrent.Callable;

/** {@code refshare gc}: removes the files of dead processes. */
@Command(name = "gc", mixinStandardHelpOptions = true,
        description = {"Remove refshare files whose processes are all dead.",
                "",
                "Removes what crashed producers and killed consumers left. Never touches a file of a process that is "
                        + "alive or cannot be judged from here (another PID namespace without a life file), another "
                        + "user's file (with --group-access: another group's), or anything that is not refshare's."})
final class GcCommand implements Callable<Integer> {
    @Mixin
    ShmOptions shm;

    @Option(names = {"-n", "--dry-run"}, description = "only list what would be removed")
    boolean dryRun;

    @Option(names = {"-v", "--verbose"}, description = "also list the files kept, and why")
    boolean verbose;

    @Override
    public Integer call() throws Exception {
        Janitor.Report r = Janitor.sweep(ShmOptions.directory(shm.config()), dryRun);
        r.removed().forEach(n -> System.out.println((dryRun ? "would remove " : "removed ") + n));
        if (verbose) {
            r.kept().forEach(n -> System.out.println("kept " + n));
        }
        System.out.println((dryRun ? "would remove " : "removed ") + r.removed().size() + " files of dead processes; "
                + r.kept().size() + " kept");
        return 0;
    }
}
