package io.refshare.ucx;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The control decoder reads bytes a peer chose, before authentication too. It must refuse
 * anything malformed with {@link InvalidDataException} and nothing else, and whatever it
 * accepts must be the one encoding of its message. The committed corpus
 * (src/test/resources/io/refshare/ucx/ControlCodecFuzzTestInputs) is replayed in every run;
 * {@code JAZZER_FUZZ=1} fuzzes (docs/fuzzing.md).
 */
class ControlCodecFuzzTest {
    @FuzzTest(maxDuration = "2m")
    void decode(byte[] input) {
        BridgeMessage m;
        try {
            m = ControlCodec.decode(input);
        } catch (InvalidDataException e) {
            if (e.getMessage() == null || e.getMessage().isBlank()) {
                throw new AssertionError("a refusal without a reason", e);
            }
            return;
        }
        assertArrayEquals(input, ControlCodec.encode(m), "the accepted encoding is the only one of " + m);
        assertEquals(m, ControlCodec.decode(ControlCodec.encode(m)));
    }

    /** Offers from fuzzed fields: refused by the record (IllegalArgumentException) or round-tripped exactly. */
    @FuzzTest(maxDuration = "2m")
    void offerRoundTrip(FuzzedDataProvider data) {
        int rank = data.consumeInt(0, TensorLayout.MAX_RANK);
        long[] shape = new long[rank];
        long[] strides = new long[rank];
        for (int i = 0; i < rank; i++) {
            shape[i] = data.consumeLong(0, 1 << 12);
            strides[i] = data.consumeLong(0, 1 << 20);
        }
        DType[] types = DType.values();
        TensorLayout layout;
        BridgeMessage.Offer offer;
        try {
            layout = new TensorLayout(types[data.consumeInt(0, types.length - 1)], shape, strides, 0);
            offer = new BridgeMessage.Offer(data.consumeLong(), layout, layout.byteSpan(), data.consumeLong());
        } catch (IllegalArgumentException refused) {
            return;
        }
        byte[] encoded = ControlCodec.encode(offer);
        assertEquals(offer, ControlCodec.decode(encoded));
    }
}
