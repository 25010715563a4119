package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.TruncatingOpener;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.nio.file.Path;
import java.util.HexFormat;

/**
 * A receiver whose sender's segment or counter file is cut short and restored over and over
 * while it opens the file afresh each time: some opens size the file whole and find it
 * truncated at the header check. See {@link TruncatingOpener}, which prints the one line of the
 * outcome. Args: {@code directory hexMessage segment|counters maxSeconds wantedHits}.
 * <ul>
 * <li>{@code segment}: receives the message with a fresh context each time.</li>
 * <li>{@code counters}: holds the sender's counter file in a fresh receive cache each time, as
 * a receive does first ({@link ReceiveCache#holdCountersToReceive}); a refusal must leave it
 * held by nobody. The receive's next step, its claim, is a compare-and-set on the counter file,
 * which the JVM does not survive on a page cut between the read that guards it and the
 * instruction: so not the whole receive here.</li>
 * </ul>
 */
final class TruncatingReceiverMain {
    private TruncatingReceiverMain() {
    }

    static void run(String[] args) throws Exception {
        Path directory = Path.of(args[0]);
        byte[] message = HexFormat.of().parseHex(args[1]);
        Descriptor d = DescriptorCodec.decode(message);
        RefshareConfig config = RefshareConfig.defaults().withDirectory(directory);
        ShmDirectory dir = new ShmDirectory(directory, ShmDirectory.DEFAULT_PREFIX, ShmDirectory.OWNER_ONLY);
        TruncatingOpener.Attempt open;
        String cut;
        switch (args[2]) {
            case "segment" -> {
                cut = d.segmentName();
                open = () -> {
                    try (Refshare rs = Refshare.open(config); Tensor t = rs.receive(message)) {
                        return () -> { }; // received whole: the file was not cut at the time
                    }
                };
            }
            case "counters" -> {
                cut = d.counterFileName();
                open = () -> {
                    ReceiveCache cache = new ReceiveCache(dir);
                    try {
                        cache.holdCountersToReceive(cut);
                        return cache::close;
                    } catch (RuntimeException refused) {
                        if (cache.mappedCounterFiles() != 0) {
                            throw new AssertionError("a refused hold left the counter file held", refused);
                        }
                        throw refused;
                    }
                };
            }
            default -> throw new IllegalArgumentException("cut segment or counters, not " + args[2]);
        }
        TruncatingOpener.run(directory.resolve(cut), Long.parseLong(args[3]), Integer.parseInt(args[4]), open);
    }
}
