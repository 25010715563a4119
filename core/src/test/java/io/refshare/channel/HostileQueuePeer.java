package io.refshare.channel;

import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.nio.file.Path;
import java.util.Random;

/**
 * A misbehaving peer: on a refshare queue it offers garbage bytes, tries an oversized
 * frame, and sends a well-formed descriptor of a real block that lies about its sender's
 * pid. Prints {@code SENT oversizedRefused}, then waits for a line on stdin before it
 * exits (so its files still exist while the victim reads).
 * Args: directory, queue.
 */
public final class HostileQueuePeer {
    static void run(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0]));
        try (Refshare rs = Refshare.open(config);
             ShmQueue raw = ShmQueue.open(Internals.sharing(rs).directory(), args[1]);
             Tensor t = rs.allocateBytes(4096)) {
            byte[] garbage = new byte[200];
            new Random(1).nextBytes(garbage);
            raw.offer(garbage);
            boolean oversizedRefused;
            try {
                raw.offer(new byte[raw.maxMessageBytes() + 1]);
                oversizedRefused = false;
            } catch (IllegalArgumentException expected) {
                oversizedRefused = true;
            }
            Descriptor honest = Internals.shareDescriptor(rs, t);
            Descriptor liar = new Descriptor(honest.backend(), honest.segmentName(), honest.segmentSize(),
                    honest.offset(), honest.length(), honest.counterFileName(), honest.slot(), honest.eventHandle(),
                    honest.tensor(), 1, honest.senderStartTicks());
            raw.offer(DescriptorCodec.encode(liar));
            System.out.println("SENT " + oversizedRefused);
            System.out.flush();
            System.in.read();
            rs.cancel(DescriptorCodec.encode(honest)); // our own token: return it before leaving
        }
    }
}
