package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.exceptions.RefshareException;
import io.refshare.memory.HostBackend;
import io.refshare.wire.DescriptorCodec;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HexFormat;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A receiver whose sender's segment is cut short and restored over and over, by a thread of its
 * own, while it receives one message with a fresh context each time (so that every receive opens
 * the segment): some receives open the file whole and find it truncated at the header check.
 * In a child JVM of its own, since faults on a mapping change what compiled code does in the
 * JVM that met them. Args: {@code directory hexMessage maxSeconds wantedHits}. Prints one line:
 * <pre>
 *   DONE attempts received refused truncatedWhileOpening mappingsLeft
 *   RAW throwable                 (anything but a RefshareException escaped a receive)
 * </pre>
 */
final class TruncatingReceiverMain {
    private TruncatingReceiverMain() {
    }

    static void run(String[] args) throws Exception {
        Path directory = Path.of(args[0]);
        byte[] message = HexFormat.of().parseHex(args[1]);
        long deadline = System.nanoTime() + Long.parseLong(args[2]) * 1_000_000_000L;
        int wantedHits = Integer.parseInt(args[3]);
        Path segment = directory.resolve(DescriptorCodec.decode(message).segmentName());
        long size = Files.size(segment);
        ByteBuffer header = ByteBuffer.wrap(Files.readAllBytes(segment), 0, HostBackend.HEADER_BYTES).slice();
        AtomicBoolean cutting = new AtomicBoolean(true);
        Thread cutter = Thread.ofPlatform().start(() -> {
            try (FileChannel ch = FileChannel.open(segment, StandardOpenOption.WRITE)) {
                while (cutting.get()) {
                    ch.truncate(0);
                    restore(ch, size, header);
                }
                restore(ch, size, header);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        RefshareConfig config = RefshareConfig.defaults().withDirectory(directory);
        long attempts = 0;
        long received = 0;
        long refused = 0;
        long hits = 0;
        try {
            while (hits < wantedHits && System.nanoTime() - deadline < 0) {
                attempts++;
                try (Refshare rs = Refshare.open(config); Tensor t = rs.receive(message)) {
                    received++;
                } catch (RefshareException e) {
                    refused++;
                    if (String.valueOf(e.getMessage()).contains("truncated while it was being opened")) {
                        hits++;
                    }
                }
            }
        } catch (Throwable raw) {
            System.out.println("RAW " + raw);
            System.out.flush();
            Runtime.getRuntime().halt(1);
        } finally {
            cutting.set(false);
            cutter.join();
        }
        long left = Files.readAllLines(Path.of("/proc/self/maps")).stream()
                .filter(l -> l.contains(segment.toString())).count();
        System.out.println("DONE " + attempts + " " + received + " " + refused + " " + hits + " " + left);
    }

    /** Grows the cut file back to {@code size} (truncate only shrinks): its header, then its last byte. */
    private static void restore(FileChannel ch, long size, ByteBuffer header) throws IOException {
        ch.write(header.duplicate(), 0);
        ch.write(ByteBuffer.wrap(new byte[1]), size - 1);
    }
}
