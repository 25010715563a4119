package io.refshare.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code refshare <command>}: the command line of refshare. */
@Command(name = "refshare", mixinStandardHelpOptions = true, version = "refshare 0.1.0",
        description = "Zero-copy shared memory between processes, with cross-process reference counting.",
        subcommands = {DemoCommand.class, HotswapCommand.class, InspectCommand.class, GcCommand.class, BridgeCommand.class, io.refshare.harness.BenchCommand.class, CommandLine.HelpCommand.class})
public final class Main implements Runnable {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new Main());
        cl.setExecutionExceptionHandler((e, cmd, parsed) -> {
            cmd.getErr().println("refshare " + cmd.getCommandName() + ": " + e.getMessage());
            if (System.getenv("REFSHARE_DEBUG") != null) {
                e.printStackTrace(cmd.getErr());
            }
            return 1;
        });
        return cl;
    }
}
