package io.refshare.cli;

import io.refshare.tensor.Device;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * A consumer process of {@code refshare demo}: takes tensors until the stream ends,
 * verifies every byte, closes each, and reports on stdout:
 * {@code PROGRESS received bytes bad} a few times a second, {@code DONE received bytes bad} at the end.
 * Args: directory, prefix, queue name, and optionally the device ({@code host}, {@code cuda:N}).
 */
public final class DemoConsumer {
    public static void main(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0])).withPrefix(args[1]);
        Device device = args.length > 3 ? Device.parse(args[3]) : Device.HOST;
        if (!device.isHost()) {
            config = config.withCudaDevice(device.index());
        }
        MemorySegment staging = null; // device tensors are verified from a host copy
        long received = 0;
        long bytes = 0;
        long bad = 0;
        long lastReport = System.nanoTime();
        try (Refshare rs = Refshare.open(config); ShareQueue queue = rs.openQueue(args[2])) {
            System.out.println("READY");
            System.out.flush();
            while (true) {
                Tensor t;
                try {
                    t = queue.take();
                } catch (QueueClosedException end) {
                    break;
                }
                try (t) {
                    MemorySegment data;
                    if (t.isCuda()) {
                        long n = t.layout().byteSpan();
                        if (staging == null || staging.byteSize() != n) {
                            staging = Arena.ofAuto().allocate(n);
                        }
                        rs.cuda().copyToHost(t, staging);
                        data = staging;
                    } else {
                        data = t.data();
                    }
                    if (DemoPattern.verify(data) < 0) {
                        bad++;
                    }
                    received++;
                    bytes += data.byteSize();
                }
                if (System.nanoTime() - lastReport > 100_000_000L) {
                    System.out.println("PROGRESS " + received + " " + bytes + " " + bad);
                    System.out.flush();
                    lastReport = System.nanoTime();
                }
            }
        }
        System.out.println("DONE " + received + " " + bytes + " " + bad);
        System.out.flush();
    }
}
