package io.refshare.fuzz;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.ShmDirectory;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.function.Predicate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The descriptor is the one message every transport carries between processes, so its
 * decoder reads bytes a hostile peer chose. It must refuse anything malformed with
 * {@link InvalidDataException} and nothing else, and what it accepts must be the one
 * encoding of a valid descriptor: {@code encode(decode(b))} gives {@code b} back.
 */
class DescriptorCodecFuzzTest {
    /** A name check of the shape {@link DescriptorCodec#namesOf} gives, over a directory of prefix "refshare". */
    private static final Predicate<String> OUR_NAMES =
            DescriptorCodec.namesOf(new ShmDirectory(ShmDirectory.DEFAULT_DIRECTORY, "refshare", 0600));

    /** Raw bytes from a peer: decoded from an array, and from the middle of a segment with a name check. */
    @FuzzTest(maxDuration = "2m")
    void decode(byte[] input) {
        Descriptor d;
        try {
            d = DescriptorCodec.decode(input);
        } catch (InvalidDataException e) {
            Hostile.refused(e);
            return;
        }
        assertArrayEquals(input, DescriptorCodec.encode(d), "the accepted encoding is the only one of " + d);
        assertEquals(input.length, DescriptorCodec.encodedSize(d));

        // the same bytes inside shared memory, between other bytes, read with our name rule
        MemorySegment cell = MemorySegment.ofArray(new byte[input.length + 16]).fill((byte) 0x5A);
        MemorySegment.copy(input, 0, cell, ValueLayout.JAVA_BYTE, 8, input.length);
        try {
            Descriptor again = DescriptorCodec.decode(cell, 8, input.length, OUR_NAMES);
            assertEquals(d, again);
            assertTrue(OUR_NAMES.test(d.segmentName()) && OUR_NAMES.test(d.counterFileName()));
        } catch (InvalidDataException e) {
            Hostile.refused(e);
            assertTrue(!OUR_NAMES.test(d.segmentName()) || !OUR_NAMES.test(d.counterFileName()),
                    "refused a descriptor whose names are ours: " + e.getMessage());
        }
    }

    /**
     * Descriptors built from fuzzed fields: the constructor refuses inconsistent ones with
     * {@link IllegalArgumentException} (documented), and every one it accepts survives the
     * round trip, also when written into a larger segment at an offset.
     */
    @FuzzTest(maxDuration = "2m")
    void roundTrip(FuzzedDataProvider data) {
        Backend backend = data.consumeBoolean() ? Backend.CUDA : Backend.HOST;
        String segmentName = name(data);
        String counterName = name(data);
        long segmentSize = data.consumeLong(1, Long.MAX_VALUE);
        long offset = data.consumeLong(0, segmentSize);
        long length = data.consumeLong(0, segmentSize - offset);
        int slot = data.consumeInt(0, Integer.MAX_VALUE);
        byte[] memory = backend == Backend.CUDA
                ? Hostile.slice(data.consumeBytes(Descriptor.MEMORY_HANDLE_BYTES), 0, Descriptor.MEMORY_HANDLE_BYTES)
                : new byte[0];
        byte[] event = backend == Backend.CUDA && data.consumeBoolean()
                ? Hostile.slice(data.consumeBytes(Descriptor.EVENT_HANDLE_BYTES), 0, Descriptor.EVENT_HANDLE_BYTES)
                : new byte[0];
        TensorLayout tensor = null;
        if (data.consumeBoolean()) {
            DType dtype = data.pickValue(DType.values());
            int rank = data.consumeInt(0, TensorLayout.MAX_RANK);
            long[] shape = new long[rank];
            long[] strides = new long[rank];
            for (int i = 0; i < rank; i++) {
                shape[i] = data.consumeLong(0, 1 << 20);
                strides[i] = data.consumeLong(-(1 << 20), 1 << 20);
            }
            try {
                tensor = new TensorLayout(dtype, shape, strides, data.consumeLong(0, 1 << 30));
            } catch (IllegalArgumentException refused) {
                return;
            }
        }
        long pid = data.consumeLong(1, Long.MAX_VALUE);
        long start = data.consumeLong(0, Long.MAX_VALUE);
        Descriptor d;
        try {
            d = new Descriptor(backend, segmentName, segmentSize, offset, length, memory, counterName, slot, event,
                    tensor, pid, start);
        } catch (IllegalArgumentException refused) {
            return;
        }
        byte[] bytes = DescriptorCodec.encode(d);
        assertTrue(bytes.length <= DescriptorCodec.MAX_ENCODED_BYTES, "encoding of " + bytes.length + " bytes");
        assertEquals(d, DescriptorCodec.decode(bytes));

        int at = data.consumeInt(0, 64);
        MemorySegment cell = MemorySegment.ofArray(new byte[at + bytes.length + 3]);
        assertEquals(bytes.length, DescriptorCodec.encode(d, cell, at));
        assertEquals(d, DescriptorCodec.decode(cell, at, bytes.length));
        assertArrayEquals(bytes, Arrays.copyOfRange(cell.toArray(ValueLayout.JAVA_BYTE), at, at + bytes.length));
    }

    /** Mostly names that follow the wire rule (so the round trip gets past the constructor), sometimes any string. */
    private static String name(FuzzedDataProvider data) {
        if (data.consumeBoolean()) {
            return data.consumeString(200);
        }
        int n = data.consumeInt(1, Descriptor.MAX_NAME_LENGTH);
        String alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
        StringBuilder b = new StringBuilder(n);
        for (int i = 0; i < n; i++) {
            b.append(alphabet.charAt(data.consumeInt(0, alphabet.length() - 1)));
        }
        return b.toString();
    }
}
