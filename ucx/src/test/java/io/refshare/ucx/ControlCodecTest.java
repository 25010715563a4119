package io.refshare.ucx;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every message type round-trips; each kind of damage is refused with a reason that names it. */
class ControlCodecTest {
    static List<BridgeMessage> samples() {
        byte[] n = new byte[32];
        Arrays.fill(n, (byte) 7);
        TensorLayout l = new TensorLayout(DType.FLOAT32, new long[]{4, 3}, new long[]{1, 4}, 0);
        return List.of(new BridgeMessage.Hello(n), new BridgeMessage.Challenge(n, n), new BridgeMessage.Proof(n),
                new BridgeMessage.Welcome(16), new BridgeMessage.Offer(42, l, l.byteSpan(), 16), new BridgeMessage.Delivered(42), new BridgeMessage.Heartbeat(),
                new BridgeMessage.End(), new BridgeMessage.Refused(BridgeMessage.Refused.BAD_SECRET));
    }

    @Test
    void everyTypeRoundTrips() {
        for (BridgeMessage m : samples()) {
            byte[] b = ControlCodec.encode(m);
            assertEquals(m, ControlCodec.decode(b));
            assertArrayEquals(b, ControlCodec.encode(ControlCodec.decode(b)));
        }
    }

    @Test
    void damageIsRefusedWithItsReason() {
        byte[] offer = ControlCodec.encode(samples().get(4));
        assertRefused(Arrays.copyOf(offer, 5), "shorter than");
        assertRefused(Arrays.copyOf(offer, offer.length + 1), "body length");
        assertRefused(with(offer, 0, (byte) 0), "magic");
        assertRefused(with(offer, 4, (byte) 1), "version");
        assertRefused(with(offer, 5, (byte) 99), "unknown message type");
        assertRefused(with(offer, 6, (byte) 1), "reserved");
        assertRefused(with(offer, 12 + 8, (byte) 200), "dtype");
        assertRefused(with(offer, 12 + 9, (byte) 17), "rank");
        // a byte length that is not the layout's span
        byte[] wrongLength = offer.clone();
        ByteBuffer.wrap(wrongLength).order(ByteOrder.LITTLE_ENDIAN).putLong(12 + 12, 1);
        assertRefused(wrongLength, "span");
        // a chunk starting at or past the tensor's end
        byte[] pastEnd = offer.clone();
        ByteBuffer.wrap(pastEnd).order(ByteOrder.LITTLE_ENDIAN).putLong(12 + 20, 48);
        assertRefused(pastEnd, "chunk offset");
        // a rank whose shape and strides the body does not hold
        assertRefused(with(offer, 12 + 9, (byte) 3), "not the");
        // a window of 0
        byte[] welcome = ControlCodec.encode(new BridgeMessage.Welcome(1));
        ByteBuffer.wrap(welcome).order(ByteOrder.LITTLE_ENDIAN).putInt(12, 0);
        assertRefused(welcome, "window");
        assertRefused(new byte[ControlCodec.MAX_FRAME_BYTES + 1], "exceeds");
    }

    /** The seed corpus the fuzz test replays: one file per sample, written here so it stays in step. */
    @Test
    void seedCorpusHoldsEverySample() throws Exception {
        Path dir = Path.of("src/test/resources/io/refshare/ucx/ControlCodecFuzzTestInputs/decode");
        List<BridgeMessage> samples = samples();
        for (int i = 0; i < samples.size(); i++) {
            Path f = dir.resolve("seed-" + samples.get(i).getClass().getSimpleName().toLowerCase());
            byte[] expected = ControlCodec.encode(samples.get(i));
            if (System.getenv("REFSHARE_WRITE_CORPUS") != null) {
                Files.createDirectories(dir);
                Files.write(f, expected);
            }
            assertArrayEquals(expected, Files.readAllBytes(f), f + " is stale");
        }
    }

    private static byte[] with(byte[] b, int at, byte v) {
        byte[] c = b.clone();
        c[at] = v;
        return c;
    }

    private static void assertRefused(byte[] frame, String reason) {
        InvalidDataException e = assertThrows(InvalidDataException.class, () -> ControlCodec.decode(frame));
        assertTrue(e.getMessage().contains(reason), "expected '" + reason + "' in: " + e.getMessage());
    }
}
