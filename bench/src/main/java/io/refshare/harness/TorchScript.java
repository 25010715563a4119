package io.refshare.harness;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The Python side of the torch.multiprocessing comparison ({@code torch_peer.py}, a resource
 * beside this class), written to a temporary file for
 * {@code /usr/bin/python3}. It measures torch the way the Java side measures refshare:
 * same payload, same reads by the consumer (first and last element and 64 bytes), same
 * ping-pong and streaming shapes, timestamps from {@code time.monotonic_ns()}, which is
 * the CLOCK_MONOTONIC that Java's {@code System.nanoTime()} reads. Both sharing strategies,
 * reuse and fresh. Each measurement runs between this process and a forked consumer.
 *
 * <p>Arguments: one {@code size:pingPongWarmup:rounds:streamWarmup:messages:window} per size.
 * Output lines: {@code PINGPONG strategy mode size warmup bad} followed by
 * {@code SEND t...}, {@code READ t...}, {@code ACK t...}; {@code STREAM strategy mode size
 * messages bad nanos}; {@code END}.
 */
final class TorchScript {
    private TorchScript() {
    }

    /** The script, {@code torch_peer.py} beside this class in the jar. */
    static String source() {
        try (InputStream in = TorchScript.class.getResourceAsStream("torch_peer.py")) {
            if (in == null) {
                throw new IllegalStateException("torch_peer.py is missing from the refshare CLI's resources");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
