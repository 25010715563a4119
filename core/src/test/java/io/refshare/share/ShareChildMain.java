package io.refshare.share;

import java.util.Arrays;

/**
 * The one child-process entry of this package's tests: {@code <role> <args...>}, where the
 * role is the simple name of the class whose {@code run(args)} the child runs. Tests start it
 * through {@code ChildJvm.start(ShareChildMain.class, "<role>", ...)}.
 */
public final class ShareChildMain {
    private ShareChildMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: ShareChildMain <role> <args...>");
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "ConsumerMain" -> ConsumerMain.run(rest);
            case "ProducerMain" -> ProducerMain.run(rest);
            case "TruncatingReceiverMain" -> TruncatingReceiverMain.run(rest);
            default -> throw new IllegalArgumentException("no child role " + args[0]);
        }
    }
}
