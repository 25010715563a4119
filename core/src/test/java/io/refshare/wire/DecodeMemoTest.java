package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static io.refshare.wire.DescriptorTest.CNT;
import static io.refshare.wire.DescriptorTest.MEMORY;
import static io.refshare.wire.DescriptorTest.SEG;
import static io.refshare.wire.DescriptorTest.SENDER;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
        for (int i = 0; i < 20_000; i++) {
            byte[] b = known.get(rng.nextInt(known.size())).clone();
            switch (i % 4) {
                case 0, 1 -> {
                    int[] slots = {0, 1, 9999, Integer.MAX_VALUE, -1, Integer.MIN_VALUE};
                    int slot = slots[rng.nextInt(slots.length)];
                    b[20] = (byte) slot;
                    b[21] = (byte) (slot >> 8);
                    b[22] = (byte) (slot >> 16);
                    b[23] = (byte) (slot >> 24);
                    hits++;
                }
                case 2 -> b[rng.nextInt(b.length)] = (byte) rng.nextInt(256);
                default -> b = Arrays.copyOf(b, rng.nextInt(b.length + 8));
            }
            assertEquals(outcome(DescriptorCodec::decode, b), outcome(m -> decodeThrough(memo, m), b), "input " + i);
        }
        assertTrue(hits > 5_000);
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
