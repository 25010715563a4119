package io.refshare.share;

import io.refshare.Internals;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.HexFormat;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/**
 * What a receiver refuses, and how: a genuine token presented with another range of the
 * same segment (a forged or mixed-up descriptor) takes nothing, and a null message is a
 * {@link NullPointerException} naming the argument, as documented.
 */
class ReceiveRefusalsTest {
    private static final long BYTES = 4096;

    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void aGenuineTokenWithAnotherRangeIsRefusedAndTheMessageStaysReceivable() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            Tensor a = producer.allocateBytes(BYTES);
            Tensor b = producer.allocateBytes(BYTES);
            Patterns.fill(a.data(), 1);
            Patterns.fill(b.data(), 2);
            Descriptor da = DescriptorCodec.decode(producer.share(a));
            Descriptor db = DescriptorCodec.decode(producer.share(b));
            a.close();
            b.close();
            assertEquals(da.segmentName(), db.segmentName(), "both blocks lie in one segment");
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            try {
                // a's token with b's range: the bytes of b would be read under a's count
                Descriptor forged = new Descriptor(da.backend(), da.segmentName(), da.segmentSize(), db.offset(),
                        db.length(), da.counterFileName(), da.slot(), new byte[0], null, da.senderPid(),
                        da.senderStartTicks());
                assertRefused(producer, forged);
                SplittableRandom random = new SplittableRandom(10);
                for (int i = 0; i < 200; i++) {
                    long offset = random.nextLong(4096, da.segmentSize() - 1);
                    long length = random.nextLong(0, da.segmentSize() - offset);
                    if (offset == da.offset() && length == da.length()) {
                        continue;
                    }
                    assertRefused(producer, new Descriptor(da.backend(), da.segmentName(), da.segmentSize(), offset,
                            length, da.counterFileName(), da.slot(), new byte[0], null, da.senderPid(),
                            da.senderStartTicks()));
                }
                assertEquals(2, Internals.sharing(producer).liveCounts(), "nothing was taken or returned");
                consumer.send("RECV a 1 " + HexFormat.of().formatHex(DescriptorCodec.encode(da)));
                assertEquals("OK a", consumer.read(), "the genuine descriptor still works");
                consumer.send("RECV b 2 " + HexFormat.of().formatHex(DescriptorCodec.encode(db)));
                assertEquals("OK b", consumer.read());
                consumer.send("EXIT");
                assertEquals("BYE", consumer.read());
                assertEquals(0, consumer.waitFor());
            } finally {
                consumer.kill();
            }
            assertTrue(producer.awaitLimboEmpty(java.time.Duration.ofSeconds(10)));
        }
    }

    private void assertRefused(Refshare producer, Descriptor forged) {
        try (Refshare receiver = Refshare.open(shm.config())) {
            RefshareException e = assertThrows(RefshareException.class, () -> Internals.receive(receiver, forged));
            assertInstanceOf(InvalidDataException.class, e, e.getMessage());
            assertTrue(e.getMessage().contains("another block"), e.getMessage());
        }
    }

    @Test
    void aNullMessageIsANullPointerExceptionNamingIt() {
        try (Refshare rs = Refshare.open(shm.config())) {
            NullPointerException e = assertThrows(NullPointerException.class, () -> rs.receive((byte[]) null));
            assertTrue(e.getMessage().contains("message"), e.getMessage());
            assertThrows(NullPointerException.class, () -> Internals.receive(rs, null));
            assertThrows(NullPointerException.class, () -> rs.cancel(null));
        }
    }
}
