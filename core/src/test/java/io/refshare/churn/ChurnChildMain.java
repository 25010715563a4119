package io.refshare.churn;

import java.util.Arrays;

/**
 * The one child-process entry of this package's tests: {@code <role> <args...>}, where the
 * role is the simple name of the class whose {@code run(args)} the child runs. Tests start it
 * through {@code ChildJvm.start(ChurnChildMain.class, "<role>", ...)}.
 */
public final class ChurnChildMain {
    private ChurnChildMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: ChurnChildMain <role> <args...>");
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "ChurnConsumerMain" -> ChurnConsumerMain.run(rest);
            case "QueueChurnConsumerMain" -> QueueChurnConsumerMain.run(rest);
            default -> throw new IllegalArgumentException("no child role " + args[0]);
        }
    }
}
