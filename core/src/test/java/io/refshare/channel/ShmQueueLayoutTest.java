package io.refshare.channel;

import io.refshare.shm.ProcessIdentity;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import io.refshare.channel.ShmQueueLayout.Geometry;

import static io.refshare.channel.ShmQueueLayout.*;
import static org.junit.jupiter.api.Assertions.*;

class ShmQueueLayoutTest {

    @Test
    void magicReadsAsItsNameInLittleEndian() {
        byte[] bytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(MAGIC).array();
        assertEquals("RSQUEUE1", new String(bytes, StandardCharsets.US_ASCII));
    }

    @Test
    void cellsAreWholeCacheLinesHoldingTheLargestMessage() {
        assertEquals(64, cellLength(1));
        assertEquals(64, cellLength(48));
        assertEquals(128, cellLength(49));
        assertEquals(576, cellLength(DEFAULT_MAX_MESSAGE_BYTES));
        Geometry g = Geometry.of(3, 100, 2);
        assertEquals(HEADER_LENGTH + 2 * PARTICIPANT_LENGTH, g.cellsOffset());
        assertEquals(g.cellsOffset() + 2L * 128, g.cellOffset(2));
        assertEquals(g.cellsOffset() + 3L * 128, g.fileLength());
    }

    @Test
    void everySharedWordIsAlignedAndHotWordsHaveTheirOwnLines() {
        for (long offset : new long[] {MAGIC_OFFSET, OWNER_PID_OFFSET, OWNER_START_OFFSET, OFFERED_BY_DEPARTED_OFFSET,
                TAKEN_BY_DEPARTED_OFFSET, REJECTED_OFFSET, TAIL_OFFSET, HEAD_OFFSET}) {
            assertEquals(0, offset % 8, "64-bit word at " + offset);
        }
        assertEquals(0, CLOSED_OFFSET % 4);
        assertEquals(0, NOT_EMPTY_SEQ_OFFSET % 4);
        assertEquals(0, NOT_FULL_SEQ_OFFSET % 4);
        long[] hot = {TAIL_OFFSET, HEAD_OFFSET, NOT_EMPTY_SEQ_OFFSET, NOT_FULL_SEQ_OFFSET};
        for (int i = 0; i < hot.length; i++) {
            assertEquals(0, hot[i] % 128, "hot word at " + hot[i] + " starts a line pair");
        }
        assertEquals(HEADER_LENGTH, NOT_FULL_SEQ_OFFSET + 128);
    }

    @Test
    void cellWordsCarryPositionStateAndClaimant() {
        long p = 123_456_789L;
        assertEquals(FREE, state(free(p)));
        assertEquals(WRITING, state(writing(p, 65_535)));
        assertEquals(65_535, claimant(writing(p, 65_535)));
        assertEquals(FULL, state(full(p)));
        assertEquals(READING, state(reading(p, 7)));
        assertEquals(7, claimant(reading(p, 7)));
        for (long w : new long[] {free(p), writing(p, 3), full(p), reading(p, 9)}) {
            assertEquals(p, position(w));
            assertEquals(0, distance(w, p));
            assertEquals(-1, distance(w, p + 1));
            assertEquals(1, distance(w, p - 1));
        }
    }

    @Test
    void positionsCompareAcrossTheWrap() {
        long last = POSITION_MASK; // the last position before the cell words wrap to 0
        assertEquals(0, position(free(last + 1)));
        assertEquals(1, distance(free(last + 1), last));
        assertEquals(-1, distance(free(last), last + 1));
        assertEquals(-5, distance(full(last - 2), last + 3));
        assertEquals(0, distance(reading(last + 10, 1), last + 10));
    }

    @Test
    void identitiesPackIntoOneWordAndBack() {
        ProcessIdentity me = ProcessIdentity.current();
        long packed = me.packed();
        assertNotEquals(0, packed);
        assertEquals(me, ProcessIdentity.unpack(packed));
        long mark = reclaimMark(packed);
        assertTrue(isReclaimMark(mark));
        assertFalse(isReclaimMark(packed));
        assertEquals(packed, withoutReclaimMark(mark));
        ProcessIdentity extreme = new ProcessIdentity((1 << 22) - 1, (1L << 41) - 1);
        assertEquals(extreme, ProcessIdentity.unpack(extreme.packed()));
        assertThrows(RuntimeException.class, () -> (new ProcessIdentity(1 << 22, 1)).packed());
        assertThrows(RuntimeException.class, () -> (new ProcessIdentity(5, 1L << 41)).packed());
    }

    @Test
    void geometryRefusesImpossibleSizes() {
        assertThrows(IllegalArgumentException.class, () -> Geometry.of(0, 16, 4));
        assertThrows(IllegalArgumentException.class, () -> Geometry.of(MAX_CAPACITY + 1, 16, 4));
        assertThrows(IllegalArgumentException.class, () -> Geometry.of(8, 0, 4));
        assertThrows(IllegalArgumentException.class, () -> Geometry.of(8, MAX_MESSAGE_BYTES + 1, 4));
        assertThrows(IllegalArgumentException.class, () -> Geometry.of(8, 16, 0));
    }
}
