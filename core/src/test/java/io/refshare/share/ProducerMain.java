package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.Patterns;

import java.nio.file.Path;
import java.util.HexFormat;

/**
 * A producer process: shares one tensor of {@code bytes} bytes filled with the pattern of
 * {@code seed}, prints the message as hex, drops its handle and waits to be killed.
 * Args: directory, bytes, seed.
 */
public final class ProducerMain {
    static void run(String[] args) throws Exception {
        Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
        try (Tensor t = rs.allocate(DType.UINT8, Long.parseLong(args[1]))) {
            Patterns.fill(t.data(), Long.parseLong(args[2]));
            System.out.println(HexFormat.of().formatHex(rs.share(t)));
            System.out.flush();
        }
        Thread.sleep(Long.MAX_VALUE);
    }
}
