package io.refshare.wire;

import io.refshare.shm.ProcessIdentity;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static io.refshare.wire.DescriptorTest.CNT;
import static io.refshare.wire.DescriptorTest.SEG;
import static io.refshare.wire.DescriptorTest.SENDER;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class HostEncoderTest {
    private static final byte[] SEG_BYTES = ascii(SEG);
    private static final byte[] CNT_BYTES = ascii(CNT);

    /**
     * Messages whose fields change as a sender's do (the slot always; the block offset often;
     * segment, counter file, layout and sender now and then, names as equal arrays of another
     * identity, layouts as equal objects and as views), each written over what the cell held: the last message, another
     * encoder's, or garbage. The cell then holds exactly the descriptor's encoding, and nothing
     * past it changed.
     */
    @Test
    void everyMessageLeavesExactlyItsEncodingWhateverTheCellHeld() {
        Random random = new Random(16);
        byte[][] segments = {SEG_BYTES, ascii(SEG), ascii(SEG.substring(0, SEG.length() - 3) + "zzz"), ascii("s")};
        byte[][] counters = {CNT_BYTES, ascii(CNT), ascii(CNT.substring(0, CNT.length() - 2) + "q9")};
        TensorLayout matrix = TensorLayout.contiguous(DType.FLOAT32, 4, 8);
        List<TensorLayout> layouts = Arrays.asList(TensorLayout.contiguous(DType.UINT8, 1024), matrix,
                new TensorLayout(DType.FLOAT32, new long[] {4, 8}, new long[] {8, 1}, 0), // equal, another object
                matrix.transpose(0, 1), new TensorLayout(DType.FLOAT32, new long[] {4, 8}, new long[] {8, 1}, 8),
                TensorLayout.contiguous(DType.BFLOAT16, 2, 3, 4), null);
        ProcessIdentity[] senders = {SENDER, new ProcessIdentity(SENDER.pid() + 1, SENDER.startTicks())};
        HostEncoder encoder = new HostEncoder();
        HostEncoder other = new HostEncoder();
        MemorySegment cell = MemorySegment.ofArray(new byte[1024]);
        int[] offsets = {0, 8, 16, 3}; // cells are word-aligned; the encoder must not depend on it
        int at = 16;
        for (int i = 0; i < 20_000; i++) {
            int change = random.nextInt(10);
            byte[] seg = change == 0 ? segments[random.nextInt(segments.length)] : SEG_BYTES;
            byte[] cnt = change == 1 ? counters[random.nextInt(counters.length)] : CNT_BYTES;
            TensorLayout layout = layouts.get(change == 2 ? random.nextInt(layouts.size()) : 0);
            ProcessIdentity sender = senders[change == 3 ? 1 : 0];
            long segmentSize = change == 4 ? 1 << 21 : 1 << 20;
            long length = change == 5 ? 8192 : 4096;
            long offset = 4096L * random.nextInt(change >= 6 ? 200 : 2);
            int slot = random.nextInt(4) == 0 ? random.nextInt() & Integer.MAX_VALUE : random.nextInt(3);
            switch (random.nextInt(8)) {
                case 0 -> {
                    byte[] garbage = new byte[(int) cell.byteSize()];
                    random.nextBytes(garbage);
                    MemorySegment.copy(garbage, 0, cell, ValueLayout.JAVA_BYTE, 0, garbage.length);
                }
                case 1 -> other.write(segments[2], 1 << 20, 0, 4096, CNT_BYTES, 5, layouts.get(2), SENDER.pid(),
                        SENDER.startTicks(), cell, at);
                case 2 -> at = offsets[random.nextInt(offsets.length)];
                default -> { } // the cell holds the last message, as a queue's a lap later mostly does
            }
            byte[] expected = DescriptorCodec.encode(Descriptor.host(new String(seg, StandardCharsets.US_ASCII),
                    segmentSize, offset, length, new String(cnt, StandardCharsets.US_ASCII), slot, layout, sender));
            byte[] after = cell.asSlice(at + expected.length).toArray(ValueLayout.JAVA_BYTE);
            int written = encoder.write(seg, segmentSize, offset, length, cnt, slot, layout, sender.pid(),
                    sender.startTicks(), cell, at);
            assertEquals(expected.length, written);
            int round = i;
            assertArrayEquals(expected, cell.asSlice(at, written).toArray(ValueLayout.JAVA_BYTE), () -> "message " + round);
            assertArrayEquals(after, cell.asSlice(at + written).toArray(ValueLayout.JAVA_BYTE),
                    () -> "nothing written past message " + round);
        }
    }

    /** What the cell already holds is not written again: a read-only cell takes an equal message, and refuses a change. */
    @Test
    void bytesEqualToTheCellsAreLeftAlone() {
        HostEncoder encoder = new HostEncoder();
        TensorLayout layout = TensorLayout.contiguous(DType.FLOAT32, 4, 8);
        MemorySegment cell = MemorySegment.ofArray(new byte[512]);
        encoder.write(SEG_BYTES, 1 << 20, 8192, 4096, CNT_BYTES, 7, layout, SENDER.pid(), SENDER.startTicks(), cell, 16);
        MemorySegment readOnly = cell.asReadOnly();
        encoder.write(SEG_BYTES, 1 << 20, 8192, 4096, CNT_BYTES, 7, layout, SENDER.pid(), SENDER.startTicks(),
                readOnly, 16);
        new HostEncoder().write(SEG_BYTES, 1 << 20, 8192, 4096, CNT_BYTES, 7, layout, SENDER.pid(),
                SENDER.startTicks(), readOnly, 16);
        assertThrows(IllegalArgumentException.class, () -> encoder.write(SEG_BYTES, 1 << 20, 12288, 4096, CNT_BYTES, 7,
                layout, SENDER.pid(), SENDER.startTicks(), readOnly, 16));
        assertThrows(IllegalArgumentException.class, () -> encoder.write(SEG_BYTES, 1 << 20, 8192, 4096, CNT_BYTES, 8,
                layout, SENDER.pid(), SENDER.startTicks(), readOnly, 16));
    }

    /** A message that does not fit writes nothing, and the encoder goes on as before. */
    @Test
    void aMessageThatDoesNotFitWritesNothing() {
        HostEncoder encoder = new HostEncoder();
        TensorLayout layout = TensorLayout.contiguous(DType.FLOAT32, 4, 8);
        int size = DescriptorCodec.encodedHostSize(SEG_BYTES.length, CNT_BYTES.length, layout);
        MemorySegment cell = MemorySegment.ofArray(new byte[size + 8]);
        cell.fill((byte) 0x5A);
        byte[] before = cell.toArray(ValueLayout.JAVA_BYTE);
        assertThrows(IndexOutOfBoundsException.class, () -> encoder.write(SEG_BYTES, 1 << 20, 8192, 4096, CNT_BYTES, 7,
                layout, SENDER.pid(), SENDER.startTicks(), cell, 9));
        assertArrayEquals(before, cell.toArray(ValueLayout.JAVA_BYTE));
        assertEquals(size, encoder.write(SEG_BYTES, 1 << 20, 8192, 4096, CNT_BYTES, 7, layout, SENDER.pid(),
                SENDER.startTicks(), cell, 8));
        assertArrayEquals(DescriptorCodec.encode(Descriptor.host(SEG, 1 << 20, 8192, 4096, CNT, 7, layout, SENDER)),
                cell.asSlice(8, size).toArray(ValueLayout.JAVA_BYTE));
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}
