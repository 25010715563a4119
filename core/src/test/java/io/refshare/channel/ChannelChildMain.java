package io.refshare.channel;

import java.util.Arrays;

/**
 * The one child-process entry of this package's tests: {@code <role> <args...>}, where the
 * role is the simple name of the class whose {@code run(args)} the child runs. Tests start it
 * through {@code ChildJvm.start(ChannelChildMain.class, "<role>", ...)}.
 */
public final class ChannelChildMain {
    private ChannelChildMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: ChannelChildMain <role> <args...>");
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "ChaosConsumerMain" -> ChaosConsumerMain.run(rest);
            case "CutQueueCloseMain" -> CutQueueCloseMain.run(rest);
            case "HostileQueuePeer" -> HostileQueuePeer.run(rest);
            case "LimitedConsumerMain" -> LimitedConsumerMain.run(rest);
            case "QueueChild" -> QueueChild.run(rest);
            case "QueueConsumerMain" -> QueueConsumerMain.run(rest);
            case "QueueCreatorMain" -> QueueCreatorMain.run(rest);
            case "QueueProducerMain" -> QueueProducerMain.run(rest);
            case "ShmQueuePingPong" -> ShmQueuePingPong.run(rest);
            case "TruncatedQueueMain" -> TruncatedQueueMain.run(rest);
            case "TruncatingQueueOpenerMain" -> TruncatingQueueOpenerMain.run(rest);
            default -> throw new IllegalArgumentException("no child role " + args[0]);
        }
    }
}
