package io.refshare.counter;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static io.refshare.counter.CounterFileLayout.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

class CounterFileLayoutTest {
    private static final int LINE = 64;

    @Test
    void magicReadsAsItsNameInLittleEndian() {
        byte[] bytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(MAGIC).array();
        assertEquals("RSCOUNT1", new String(bytes, StandardCharsets.US_ASCII));
    }

    @Test
    void everySharedWordIsAligned() {
        for (long offset : new long[] {MAGIC_OFFSET, OWNER_PID_OFFSET, OWNER_START_OFFSET, HANDED_OUT_OFFSET,
                FLAGS_OFFSET, RELEASES_OFFSET, COLLECTOR_WAITING_OFFSET, peerOffset(0), peerOffset(1),
                slotsOffset(256)}) {
            assertEquals(0, offset % 8, "64-bit word at " + offset);
        }
        assertEquals(0, HEADER_LENGTH % LINE, "peer entries and slots start on a line");
    }

    @Test
    void theWordsEveryReleaseTouchesShareNoLineWithTheOwnersSendWords() {
        long releaseLine = RELEASES_OFFSET / LINE;
        assertEquals(releaseLine, COLLECTOR_WAITING_OFFSET / LINE, "a release reads collector-waiting right after");
        for (long ownerWord : new long[] {HANDED_OUT_OFFSET, FLAGS_OFFSET, MAGIC_OFFSET}) {
            assertNotEquals(releaseLine, ownerWord / LINE, "owner's word at " + ownerWord);
        }
        assertNotEquals(releaseLine, peerOffset(0) / LINE, "the peer table starts after the release line");
    }
}
