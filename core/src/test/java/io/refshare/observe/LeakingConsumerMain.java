package io.refshare.observe;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.SharedHolder;
import io.refshare.Tensor;

import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Scanner;

/**
 * Drops two tensors over the producer's memory without closing them, then collects garbage
 * until the leak detector has reported both, and prints {@code LEAKS n}: a view of a
 * received tensor (the received one itself is closed) and a version acquired from a holder.
 * Run with {@code -Drefshare.leakDetection=paranoid}. Args: directory; stdin: the message,
 * then the holder's name.
 */
public final class LeakingConsumerMain {
    public static void main(String[] args) throws Exception {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])))) {
            Scanner in = new Scanner(System.in);
            forgetAView(rs, HexFormat.of().parseHex(in.nextLine()));
            SharedHolder holder = rs.openHolder(in.nextLine());
            forgetAnAcquisition(holder);
            for (int i = 0; i < 200 && LeakDetector.leaks() < 2; i++) {
                System.gc();
                Thread.sleep(20);
            }
            System.out.println("LEAKS " + LeakDetector.leaks());
            System.out.flush();
            in.nextLine(); // stay alive: the producer must see releases, not a death
            holder.close();
        }
    }

    private static void forgetAView(Refshare rs, byte[] message) {
        try (Tensor received = rs.receive(message)) {
            Tensor view = received.narrow(0, 0, 10);
            view.data().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0);
        }
    }

    private static void forgetAnAcquisition(SharedHolder holder) {
        Tensor current = holder.acquire();
        current.data().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0);
    }
}
