package io.refshare.wire;

import io.refshare.shm.ProcessIdentity;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.testing.ChildJvm;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DescriptorTest {
    static final String SEG = "refshare-seg-0123456789abcdef0123456789abcdef";
    static final String CNT = "refshare-cnt-fedcba9876543210fedcba9876543210";
    static final ProcessIdentity SENDER = new ProcessIdentity(4242, 987654321L);
    /** A memory handle whose bytes are all distinct from an event's, so a mix-up shows. */
    static final byte[] MEMORY = memory(7);

    static byte[] memory(int seed) {
        byte[] m = new byte[Descriptor.MEMORY_HANDLE_BYTES];
        for (int i = 0; i < m.length; i++) {
            m[i] = (byte) (0x80 | (seed * 7 + i));
        }
        return m;
    }

    private static byte[] event(int seed) {
        byte[] e = new byte[Descriptor.EVENT_HANDLE_BYTES];
        for (int i = 0; i < e.length; i++) {
            e[i] = (byte) (seed * 31 + i);
        }
        return e;
    }

    @Test
    void factoriesFillEveryField() {
        TensorLayout t = TensorLayout.contiguous(DType.FLOAT32, 4, 4);
        Descriptor h = Descriptor.host(SEG, 1 << 20, 4096, 64, CNT, 17, t, SENDER);
        assertEquals(Backend.HOST, h.backend());
        assertEquals(SEG, h.segmentName());
        assertEquals(1 << 20, h.segmentSize());
        assertEquals(4096, h.offset());
        assertEquals(64, h.length());
        assertEquals(CNT, h.counterFileName());
        assertEquals(17, h.slot());
        assertEquals(0, h.eventHandle().length);
        assertEquals(0, h.memoryHandle().length);
        assertFalse(h.hasEvent());
        assertEquals(t, h.tensor());
        assertFalse(h.isRawBlock());
        assertEquals(SENDER, h.sender());

        Descriptor c = Descriptor.cuda(SEG, 1 << 20, 0, 1 << 20, MEMORY, CNT, 0, event(1), null, SENDER);
        assertEquals(Backend.CUDA, c.backend());
        assertTrue(c.hasEvent());
        assertArrayEquals(event(1), c.eventHandle());
        assertArrayEquals(MEMORY, c.memoryHandle());
        assertTrue(c.isRawBlock());
        assertNull(c.tensor());
    }

    @Test
    void handlesAreCopiedInAndOut() {
        byte[] e = event(2);
        byte[] m = memory(2);
        Descriptor d = Descriptor.cuda(SEG, 100, 0, 100, m, CNT, 0, e, null, SENDER);
        e[0] ^= 1;
        m[0] ^= 1;
        d.eventHandle()[1] ^= 1;
        d.memoryHandle()[1] ^= 1;
        assertArrayEquals(event(2), d.eventHandle());
        assertArrayEquals(memory(2), d.memoryHandle());
    }

    @Test
    void equalityUsesContents() {
        Descriptor a = Descriptor.cuda(SEG, 100, 0, 100, MEMORY, CNT, 0, event(3), TensorLayout.contiguous(DType.INT8, 10), SENDER);
        Descriptor b = Descriptor.cuda(SEG, 100, 0, 100, MEMORY, CNT, 0, event(3), TensorLayout.contiguous(DType.INT8, 10), SENDER);
        assertEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode());
        assertNotEquals(a, Descriptor.cuda(SEG, 100, 0, 100, MEMORY, CNT, 0, event(4), a.tensor(), SENDER));
        assertNotEquals(a, a.withTensor(null));
        assertNotEquals(a, Descriptor.cuda(SEG, 100, 0, 100, MEMORY, CNT, 1, event(3), a.tensor(), SENDER));
        assertNotEquals(a, Descriptor.cuda(SEG, 100, 0, 100, memory(8), CNT, 0, event(3), a.tensor(), SENDER));
        assertEquals(a.withTensor(null).hashCode(), a.withTensor(null).hashCode());
        assertTrue(a.toString().contains("memory b1b2b3b4b5b6b7b8..."), a.toString());
        assertEquals(a, a.withTensor(null).withTensor(TensorLayout.contiguous(DType.INT8, 10)));
        assertTrue(a.toString().contains(SEG) && a.toString().contains("#0") && a.toString().contains("int8"),
                a.toString());
    }

    @Test
    void inconsistentFieldsAreRefusedWithTheFieldName() {
        TensorLayout t = TensorLayout.contiguous(DType.FLOAT64, 8);
        refused("segment size must be positive", () -> Descriptor.host(SEG, 0, 0, 0, CNT, 0, null, SENDER));
        refused("offset is negative", () -> Descriptor.host(SEG, 100, -1, 0, CNT, 0, null, SENDER));
        refused("length is negative", () -> Descriptor.host(SEG, 100, 0, -1, CNT, 0, null, SENDER));
        refused("does not lie within the segment size 100", () -> Descriptor.host(SEG, 100, 50, 51, CNT, 0, null, SENDER));
        refused("does not lie within the segment size 100", () -> Descriptor.host(SEG, 100, 101, 0, CNT, 0, null, SENDER));
        refused("does not lie within", () -> Descriptor.host(SEG, Long.MAX_VALUE, Long.MAX_VALUE - 1, 2, CNT, 0, null,
                SENDER));
        refused("slot is negative", () -> Descriptor.host(SEG, 100, 0, 1, CNT, -1, null, SENDER));
        refused("needs 64 bytes but the block length is 63", () -> Descriptor.host(SEG, 100, 0, 63, CNT, 0, t, SENDER));
        refused("event handle must be empty or 64 bytes, was 63",
                () -> Descriptor.cuda(SEG, 100, 0, 1, MEMORY, CNT, 0, new byte[63], null, SENDER));
        refused("a CUDA block needs a 64-byte memory handle, was 0 bytes",
                () -> Descriptor.cuda(SEG, 100, 0, 1, new byte[0], CNT, 0, new byte[0], null, SENDER));
        refused("a CUDA block needs a 64-byte memory handle, was 65 bytes",
                () -> Descriptor.cuda(SEG, 100, 0, 1, new byte[65], CNT, 0, new byte[0], null, SENDER));
        refused("a CUDA block needs a 64-byte memory handle", () -> new Descriptor(Backend.CUDA, SEG, 100, 0, 1, CNT, 0,
                new byte[0], null, 1, 0));
        refused("memory handle on a HOST block", () -> new Descriptor(Backend.HOST, SEG, 100, 0, 1, MEMORY, CNT, 0,
                new byte[0], null, 1, 0));
        assertThrows(NullPointerException.class, () -> new Descriptor(Backend.HOST, SEG, 100, 0, 1, null, CNT, 0,
                new byte[0], null, 1, 0));
        refused("event handle on a HOST block", () -> new Descriptor(Backend.HOST, SEG, 100, 0, 1, CNT, 0, event(0),
                null, 1, 0));
        refused("sender pid must be positive", () -> new Descriptor(Backend.HOST, SEG, 100, 0, 1, CNT, 0, new byte[0],
                null, 0, 0));
        refused("sender start ticks is negative", () -> new Descriptor(Backend.HOST, SEG, 100, 0, 1, CNT, 0,
                new byte[0], null, 1, -1));
        assertThrows(NullPointerException.class, () -> new Descriptor(Backend.HOST, SEG, 100, 0, 1, CNT, 0, null,
                null, 1, 0));
        // the block may be exactly the whole segment, or empty at its end
        Descriptor.host(SEG, 100, 0, 100, CNT, 0, null, SENDER);
        Descriptor.host(SEG, 100, 100, 0, CNT, Integer.MAX_VALUE, null, SENDER);
    }

    @Test
    void namesFollowTheWireRule() {
        refused("segment name '' is empty", () -> Descriptor.host("", 100, 0, 1, CNT, 0, null, SENDER));
        refused("segment name null is missing", () -> Descriptor.host(null, 100, 0, 1, CNT, 0, null, SENDER));
        refused("counter file name '../etc' contains a path separator",
                () -> Descriptor.host(SEG, 100, 0, 1, "../etc", 0, null, SENDER));
        refused("contains '..'", () -> Descriptor.host(SEG, 100, 0, 1, "a..b", 0, null, SENDER));
        refused("contains a path separator", () -> Descriptor.host("a\\b", 100, 0, 1, CNT, 0, null, SENDER));
        refused("non-ASCII character U+00E9 at index 1",
                () -> Descriptor.host("s\u00e9g", 100, 0, 1, CNT, 0, null, SENDER));
        refused("control character 0x00 at index 3", () -> Descriptor.host("seg\0", 100, 0, 1, CNT, 0, null, SENDER));
        refused("character '.' at index 3", () -> Descriptor.host("seg.x", 100, 0, 1, CNT, 0, null, SENDER));
        refused("129 characters long", () -> Descriptor.host("a".repeat(129), 100, 0, 1, CNT, 0, null, SENDER));
        assertEquals(128, Descriptor.host("a".repeat(128), 100, 0, 1, "-_zZ09", 0, null, SENDER).segmentName().length());
    }

    /** The names' caches start empty in a new JVM: its first descriptor is checked like any other. */
    @Test
    void aNullNameIsRefusedInTheFirstDescriptorOfAJvm() {
        try (ChildJvm child = ChildJvm.start(FirstDescriptorMain.class)) {
            assertEquals("segment name null is missing", child.expect("REFUSED ").trim());
            assertEquals(0, child.waitFor());
        }
    }

    private static void refused(String expected, Runnable action) {
        var e = assertThrows(IllegalArgumentException.class, action::run);
        assertTrue(e.getMessage().contains(expected), () -> "'" + e.getMessage() + "' should contain '" + expected + "'");
    }
}
