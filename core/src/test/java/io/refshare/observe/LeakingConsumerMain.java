package io.refshare.observe;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;

import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Scanner;

/**
 * Receives a message and drops the tensor without closing it, then collects garbage until
 * the leak detector has reported it. Prints {@code LEAKS n}. Run with
 * {@code -Drefshare.leakDetection=paranoid}. Args: directory; the message comes on stdin.
 */
public final class LeakingConsumerMain {
    public static void main(String[] args) throws Exception {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])))) {
            String message = new Scanner(System.in).nextLine();
            receiveAndForget(rs, HexFormat.of().parseHex(message));
            for (int i = 0; i < 200 && LeakDetector.leaks() == 0; i++) {
                System.gc();
                Thread.sleep(20);
            }
            System.out.println("LEAKS " + LeakDetector.leaks());
            System.out.flush();
            new Scanner(System.in).nextLine(); // stay alive: the producer must see a release, not a death
        }
    }

    private static void receiveAndForget(Refshare rs, byte[] message) {
        Tensor t = rs.receive(message);
        t.data().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0);
    }
}
