package io.refshare.cuda.driver;

import io.refshare.tensor.Device;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.nio.file.Path;

/**
 * A process whose CUDA driver (the test double, configured so) has no device. Prints
 * {@code HOST OK}, then {@code DEVICE <exception> <message>} for a device allocation, then
 * {@code HOST STILL OK}. Args: shm directory, test double library.
 */
public final class NoDeviceMain {
    static void run(String[] args) {
        Path dir = Path.of(args[0]);
        System.setProperty(CudaDriver.LIBRARY_PROPERTY, args[1]);
        TestDouble.load(args[1]).configure(dir, 0, -1);
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(dir))) {
            System.out.println(hostRoundTrip(rs) ? "HOST OK" : "HOST BAD");
            try (Tensor t = rs.allocate(Device.cuda(0), DType.FLOAT32, 16)) {
                System.out.println("DEVICE ALLOCATED " + t);
            } catch (RuntimeException e) {
                System.out.println("DEVICE " + e.getClass().getSimpleName() + " " + e.getMessage());
            }
            System.out.println(hostRoundTrip(rs) ? "HOST STILL OK" : "HOST BAD");
        }
    }

    private static boolean hostRoundTrip(Refshare rs) {
        try (Tensor t = rs.allocateBytes(4096)) {
            Patterns.fill(t.data(), 5);
            try (Tensor back = rs.receive(rs.share(t))) {
                return Patterns.firstMismatch(back.data(), 5) < 0;
            }
        }
    }
}
