package io.refshare.fuzz;

import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.counter.CounterFileLayout;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.BackgroundThreads;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.logging.Level;
import java.util.logging.Logger;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Garbage written into live counter files (slot words, peer entries, header counters and
 * flags) while messages are shared, received and released and the producer's collector
 * runs. Whatever a caller sees is a {@link RefshareException}; a message either arrives
 * with every byte intact or is refused; sharing never wedges (a damaged file is replaced),
 * and the collector thread survives every round.
 */
class CounterFileDamageFuzzTest {
    private static final int ROUNDS = 150;

    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void garbageInLiveCounterFilesNeverEscapesAsAnythingButARefshareException() throws Exception {
        Logger quiet = Logger.getLogger("io.refshare");
        Level before = quiet.getLevel();
        quiet.setLevel(Level.OFF); // every quarantine logs its cause once; hundreds are expected here
        SplittableRandom random = new SplittableRandom(0x15);
        int arrived = 0;
        int refused = 0;
        try (Refshare producer = Refshare.open(shm.config().withSlotsPerCounterFile(8).withPeersPerCounterFile(2));
             Refshare consumer = Refshare.open(shm.config())) {
            for (int round = 0; round < ROUNDS; round++) {
                List<byte[]> messages = new ArrayList<>();
                for (int i = 0; i < 3; i++) {
                    try (Tensor t = producer.allocateBytes(256 + random.nextInt(4096))) {
                        Patterns.fill(t.data(), round * 3L + i);
                        messages.add(producer.share(t));
                    }
                }
                damage(DescriptorCodec.decode(messages.get(random.nextInt(3))).counterFileName(), random);
                for (int i = 0; i < messages.size(); i++) {
                    try (Tensor t = consumer.receive(messages.get(i))) {
                        assertEquals(-1, Patterns.firstMismatch(t.data(), round * 3L + i), "intact or refused");
                        arrived++;
                    } catch (RefshareException e) {
                        refused++;
                    }
                }
                producer.collect();
            }
            BackgroundThreads.assertAlive();
            try (Tensor t = producer.allocateBytes(100)) {
                Patterns.fill(t.data(), 7);
                try (Tensor back = consumer.receive(producer.share(t))) {
                    assertEquals(-1, Patterns.firstMismatch(back.data(), 7), "sharing still works at the end");
                }
            }
        } finally {
            quiet.setLevel(before);
        }
        System.out.println("counter file damage fuzz: " + arrived + " messages arrived, " + refused + " refused");
        assertTrue(arrived > 0 && refused > 0, "both outcomes were exercised");
    }

    /** One random word of the file's header counters, peer table or slots, set to garbage. */
    private void damage(String counterFile, SplittableRandom random) {
        try (ShmFile f = shm.directory().open(counterFile, ShmKind.COUNTERS, CounterFileLayout.HEADER_LENGTH)) {
            int peers = f.segment().get(ValueLayout.JAVA_INT, CounterFileLayout.PEER_CAPACITY_OFFSET);
            int slots = f.segment().get(ValueLayout.JAVA_INT, CounterFileLayout.SLOT_CAPACITY_OFFSET);
            long offset = switch (random.nextInt(4)) {
                case 0 -> CounterFileLayout.HANDED_OUT_OFFSET + 8L * random.nextInt(3); // handed out, flags, releases
                case 1 -> CounterFileLayout.peerOffset(random.nextInt(peers)) + 8L * random.nextInt(2);
                default -> CounterFileLayout.slotsOffset(peers) + 8L * random.nextInt(slots);
            };
            long garbage = switch (random.nextInt(4)) {
                case 0 -> random.nextLong();
                case 1 -> random.nextInt(8); // a small state, untagged
                case 2 -> -1L;
                default -> 0L;
            };
            f.segment().set(ValueLayout.JAVA_LONG, offset, garbage);
        }
    }
}
