package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static io.refshare.wire.DescriptorTest.CNT;
import static io.refshare.wire.DescriptorTest.MEMORY;
import static io.refshare.wire.DescriptorTest.SEG;
import static io.refshare.wire.DescriptorTest.SENDER;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The memo must answer exactly as the codec, from memory or not, for every input. */
class DecodeMemoTest {

    /** The block's descriptor from the memo and the message's slot read apart, put together. */
    private static Descriptor decodeThrough(DecodeMemo memo, byte[] b) {
        MemorySegment src = MemorySegment.ofArray(b);
        Descriptor block = memo.decodeBlock(src, 0, b.length);
        return block.withSlot(DescriptorCodec.slot(src, 0, b.length));
    }

    /** What decoding answers: the canonical encoding of the result, or the error's class and message. */
    private static String outcome(java.util.function.Function<byte[], Descriptor> decode, byte[] b) {
        try {
            Descriptor d = decode.apply(b);
            return "ok " + d.slot() + " " + Arrays.toString(DescriptorCodec.encode(d)) + " " + d.tensor();
        } catch (InvalidDataException e) {
            return e.getClass().getName() + ": " + e.getMessage();
        }
    }

    @Test
    void answersExactlyAsTheCodecForMutatedSlotsAndEveryOtherByte() {
        List<byte[]> known = List.of(
                DescriptorCodec.encode(Descriptor.host(SEG, 1 << 20, 8192, 256, CNT, 7,
                        TensorLayout.contiguous(DType.FLOAT32, 8, 8), SENDER)),
                DescriptorCodec.encode(Descriptor.host(SEG, 4096, 0, 4096, CNT, 0, null, SENDER)),
                DescriptorCodec.encode(Descriptor.cuda(SEG, 1 << 21, 0, 1 << 20, MEMORY, CNT, 3, new byte[0],
                        TensorLayout.contiguous(DType.BFLOAT16, 1 << 19), SENDER)));
        DecodeMemo memo = new DecodeMemo();
        Random rng = new Random(5);
        int hits = 0;
        for (int i = 0; i < 25_000; i++) {
            byte[] b = known.get(rng.nextInt(known.size())).clone();
            switch (i % 5) {
                case 0, 1 -> {
                    putSlot(b, SLOTS[rng.nextInt(SLOTS.length)]);
                    hits++;
                }
                case 2 -> {
                    // another block of the segment, or an offset decoding refuses; with a slot of another message
                    long segmentSize = (long) LONGS.get(b, 24);
                    long length = (long) LONGS.get(b, 40);
                    long[] offsets = {0, 4096, 8192, segmentSize - length, segmentSize - length + 1, segmentSize,
                            segmentSize + 4096, -1, -4096, Long.MIN_VALUE, Long.MAX_VALUE, Long.MAX_VALUE - length};
                    LONGS.set(b, 32, offsets[rng.nextInt(offsets.length)]);
                    if (rng.nextBoolean()) {
                        putSlot(b, SLOTS[rng.nextInt(SLOTS.length)]);
                    }
                }
                case 3 -> b[rng.nextInt(b.length)] = (byte) rng.nextInt(256);
                default -> b = Arrays.copyOf(b, rng.nextInt(b.length + 8));
            }
            assertEquals(outcome(DescriptorCodec::decode, b), outcome(m -> decodeThrough(memo, m), b), "input " + i);
        }
        assertTrue(hits > 8_000);
    }

    private static final int[] SLOTS = {0, 1, 9999, Integer.MAX_VALUE, -1, Integer.MIN_VALUE};
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    private static void putSlot(byte[] b, int slot) {
        b[20] = (byte) slot;
        b[21] = (byte) (slot >> 8);
        b[22] = (byte) (slot >> 16);
        b[23] = (byte) (slot >> 24);
    }

    @Test
    void blocksOfOneSegmentBeyondTheBlockTableAnswerAsTheCodec() {
        // a pool cycling through more blocks than the block table holds: each is found by its segment
        DecodeMemo memo = new DecodeMemo();
        long blockBytes = 1024;
        int blocks = 4 * DecodeMemo.BLOCKS;
        Descriptor first = null;
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < blocks; i++) {
                byte[] b = DescriptorCodec.encode(Descriptor.host(SEG, blocks * blockBytes, i * blockBytes, blockBytes,
                        CNT, round * blocks + i, TensorLayout.contiguous(DType.UINT8, blockBytes), SENDER));
                assertEquals(outcome(DescriptorCodec::decode, b), outcome(m -> decodeThrough(memo, m), b), "block " + i);
                Descriptor d = memo.decodeBlock(MemorySegment.ofArray(b), 0, b.length);
                if (first == null) {
                    first = d;
                }
                // not parsed again: the names and the layout are those decoded first
                assertSame(first.segmentName(), d.segmentName(), "block " + i);
                assertSame(first.tensor(), d.tensor(), "block " + i);
            }
        }
    }

    @Test
    void blocksOfManySegmentsOfOneSizeAreRememberedEachByItsSegment() {
        // a pool of 1 MiB blocks spans many 4 MiB segments, all of one size and one counter file: the
        // tables must tell the segments apart by name, or they take turns in one bucket and every
        // message is parsed again
        DecodeMemo memo = new DecodeMemo();
        long blockBytes = 1 << 20;
        int segments = 64;
        Map<String, String> nameDecodedFirst = new HashMap<>();
        int parsedAgain = 0;
        for (int round = 0; round < 3; round++) {
            for (int block = 0; block < 4; block++) {
                for (int s = 0; s < segments; s++) {
                    String segment = "refshare-seg-" + String.format("%032x", 0x9e3779b97f4a7c15L * (s + 1));
                    byte[] b = DescriptorCodec.encode(Descriptor.host(segment, 4 * blockBytes, block * blockBytes,
                            blockBytes, CNT, round, TensorLayout.contiguous(DType.UINT8, blockBytes), SENDER));
                    assertEquals(outcome(DescriptorCodec::decode, b), outcome(m -> decodeThrough(memo, m), b));
                    String name = memo.decodeBlock(MemorySegment.ofArray(b), 0, b.length).segmentName();
                    String first = nameDecodedFirst.putIfAbsent(segment, name);
                    if (first != null && first != name) { // a parse makes new strings; a hit answers the kept ones
                        parsedAgain++;
                    }
                }
            }
        }
        // segments that share a bucket by chance take turns in it (6 of these 64 do, 64 of 704 messages);
        // before the segment name was hashed, all 64 did
        int remembered = 3 * 4 * segments - segments;
        assertTrue(parsedAgain < remembered / 4, parsedAgain + " of " + remembered + " messages parsed again");
    }

    @Test
    void aCallerChangingItsArrayAfterwardsChangesNothingRemembered() {
        byte[] b = DescriptorCodec.encode(Descriptor.host(SEG, 4096, 0, 4096, CNT, 5, null, SENDER));
        byte[] original = b.clone();
        DecodeMemo memo = new DecodeMemo();
        decodeThrough(memo, b);
        Arrays.fill(b, (byte) 0); // the memo decoded and kept its own copy
        assertEquals(outcome(DescriptorCodec::decode, original), outcome(m -> decodeThrough(memo, m), original));
    }
}
