package io.refshare.counter;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/** A token is bound to the exact range it was handed out for (docs/protocol.md 8.3). */
class RangeTagTest {
    private static final String SEGMENT = "refshare-seg-0123456789abcdef0123456789abcdef";

    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void theTagIsTheCrc32OfOffsetLengthAndNameAsPythonsZlibComputesIt() {
        // zlib.crc32(struct.pack('<qq', 4096, 100000) + b'refshare-seg-0123...') and of (0, 0, 'a')
        assertEquals(0xdc64774f, RangeTag.of(4096, 100_000, SEGMENT));
        assertEquals(0xf35aa073, RangeTag.of(0, 0, "a"));
        assertNotEquals(RangeTag.of(4096, 100_000, SEGMENT), RangeTag.of(4096, 100_001, SEGMENT));
        assertNotEquals(RangeTag.of(4096, 100_000, SEGMENT), RangeTag.of(4104, 100_000, SEGMENT));
    }

    @Test
    void aGenuineTokenPresentedWithAnotherRangeTakesNothing() {
        try (CounterFile f = CounterFile.create(shm.directory(), 8, 2)) {
            int tag = RangeTag.of(4096, 100_000, SEGMENT);
            int slot = f.handOut(tag);
            assertEquals(tag, f.tag(slot));
            SplittableRandom random = new SplittableRandom(15);
            for (int i = 0; i < 1_000; i++) {
                long offset = random.nextLong(0, 1L << 40);
                long length = random.nextLong(0, 1L << 30);
                int other = RangeTag.of(offset, length, SEGMENT);
                if (other != tag) {
                    assertFalse(f.claim(slot, other), "range " + offset + "+" + length);
                    assertFalse(f.cancel(slot, other));
                }
            }
            assertFalse(f.claim(slot, RangeTag.of(4096, 100_000, SEGMENT.replace('0', '1'))), "another segment");
            assertEquals(CounterFileLayout.IN_FLIGHT, f.state(slot), "nothing was taken");
            assertEquals(0, f.peersInUse(), "a refused claim does not even register");
            assertTrue(f.claim(slot, tag));
            assertFalse(f.isReturned(slot, tag));
            assertTrue(f.release(slot));
            assertEquals(tag, f.tag(slot), "released under the same tag");
            assertTrue(f.isReturned(slot, tag));
            int next = f.handOut(tag);
            assertTrue(f.cancel(next, tag), "cancelled with the right range");
            assertEquals(tag, f.tag(next));
            assertEquals(0, f.leave(), "nothing left to give back");
            assertEquals(0, f.peersInUse(), "its entry is free again");
            f.unlink();
        }
    }

    @Test
    void theOwnerTakesASlotWordNoTransitionProducesForDamage() {
        try (CounterFile f = CounterFile.create(shm.directory(), 8, 2)) {
            int tag = RangeTag.of(64, 8, SEGMENT);
            int slot = f.handOut(tag);
            InvalidDataException e = assertThrows(InvalidDataException.class, () -> f.isReturned(slot, tag + 1));
            assertTrue(e.getMessage().contains("damaged"), e.getMessage());
            assertThrows(InvalidDataException.class, () -> f.isReturned(slot + 1, tag), "a slot never handed out");
            f.unlink();
        }
    }
}
