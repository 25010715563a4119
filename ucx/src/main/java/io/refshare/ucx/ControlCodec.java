package io.refshare.ucx;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Encodes and strictly decodes {@link BridgeMessage}s (docs/hosts.md, "Control messages").
 * Every message is one frame, little-endian:
 * <pre>
 *   u32 magic 0x52534231 ("RSB1" read as little-endian text "1BSR"), u8 version 2, u8 type,
 *   u16 reserved 0, u32 body length, body
 * </pre>
 * The decoder reads bytes a peer chose, before or after authentication: anything malformed,
 * truncated, longer than its type allows, with trailing bytes, non-zero reserved fields, an
 * unknown type, dtype or refusal reason, or a layout that is not sane is refused with
 * {@link InvalidDataException} and nothing else; every accepted frame is the one encoding of
 * its message ({@code encode(decode(b))} equals {@code b}).
 */
public final class ControlCodec {
    public static final int MAGIC = 0x31425352;
    /** 2: an offer carries its bytes as the data of its active message (1 sent a remote key to read them with). */
    public static final int VERSION = 2;
    public static final int HEADER_BYTES = 12;
    public static final int NONCE_BYTES = 32;
    public static final int PROOF_BYTES = 32;
    public static final int MAX_WINDOW = 1024;
    /** The largest tensor an offer may carry (1 TiB): keeps every size well inside 63 bits. */
    public static final long MAX_TENSOR_BYTES = 1L << 40;
    /** No frame is longer: an offer of the highest rank (296 bytes). */
    public static final int MAX_FRAME_BYTES = HEADER_BYTES + offerBytes(TensorLayout.MAX_RANK);

    public static final int HELLO = 1;
    public static final int CHALLENGE = 2;
    public static final int PROOF = 3;
    public static final int WELCOME = 4;
    public static final int OFFER = 5;
    public static final int DELIVERED = 6;
    public static final int HEARTBEAT = 7;
    public static final int END = 8;
    public static final int REFUSED = 9;

    private ControlCodec() {
    }

    public static byte[] encode(BridgeMessage m) {
        int body = switch (m) {
            case BridgeMessage.Hello h -> NONCE_BYTES;
            case BridgeMessage.Challenge c -> NONCE_BYTES + PROOF_BYTES;
            case BridgeMessage.Proof p -> PROOF_BYTES;
            case BridgeMessage.Welcome w -> 4;
            case BridgeMessage.Offer o -> offerBytes(o.layout().rank());
            case BridgeMessage.Delivered d -> 8;
            case BridgeMessage.Heartbeat h -> 0;
            case BridgeMessage.End e -> 0;
            case BridgeMessage.Refused r -> 4;
        };
        ByteBuffer b = ByteBuffer.allocate(HEADER_BYTES + body).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(MAGIC).put((byte) VERSION).put((byte) m.type()).putShort((short) 0).putInt(body);
        switch (m) {
            case BridgeMessage.Hello h -> b.put(h.clientNonce());
            case BridgeMessage.Challenge c -> b.put(c.serverNonce()).put(c.serverProof());
            case BridgeMessage.Proof p -> b.put(p.clientProof());
            case BridgeMessage.Welcome w -> b.putInt(w.window());
            case BridgeMessage.Offer o -> {
                TensorLayout l = o.layout();
                b.putLong(o.sequence()).put((byte) l.dtype().code()).put((byte) l.rank()).putShort((short) 0);
                b.putLong(o.byteLength()).putLong(o.chunkOffset());
                for (long s : l.shape()) {
                    b.putLong(s);
                }
                for (long s : l.strides()) {
                    b.putLong(s);
                }
            }
            case BridgeMessage.Delivered d -> b.putLong(d.sequence());
            case BridgeMessage.Heartbeat h -> { }
            case BridgeMessage.End e -> { }
            case BridgeMessage.Refused r -> b.putShort((short) r.reason()).putShort((short) 0);
        }
        return b.array();
    }

    /** Sequence, dtype/rank/reserved, byte length, chunk offset, then shape and strides. */
    private static int offerBytes(int rank) {
        return 8 + 4 + 8 + 8 + 16 * rank;
    }

    /** @throws InvalidDataException for anything but exactly one well-formed frame */
    public static BridgeMessage decode(byte[] frame) {
        if (frame.length < HEADER_BYTES) {
            throw bad("frame of " + frame.length + " bytes is shorter than the " + HEADER_BYTES + "-byte header");
        }
        if (frame.length > MAX_FRAME_BYTES) {
            throw bad("frame of " + frame.length + " bytes exceeds the maximum of " + MAX_FRAME_BYTES);
        }
        ByteBuffer b = ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC) {
            throw bad(String.format("bad magic 0x%08x (not a refshare bridge message)", magic));
        }
        int version = b.get() & 0xFF;
        if (version != VERSION) {
            throw bad("unsupported version " + version + " (this side speaks " + VERSION + ")");
        }
        int type = b.get() & 0xFF;
        if (b.getShort() != 0) {
            throw bad("reserved header field is not zero");
        }
        long bodyLength = Integer.toUnsignedLong(b.getInt());
        if (bodyLength != frame.length - HEADER_BYTES) {
            throw bad("body length " + bodyLength + " but the frame carries " + (frame.length - HEADER_BYTES));
        }
        try {
            BridgeMessage m = switch (type) {
                case HELLO -> new BridgeMessage.Hello(bytes(b, exact(bodyLength, NONCE_BYTES, "hello")));
                case CHALLENGE -> {
                    exact(bodyLength, NONCE_BYTES + PROOF_BYTES, "challenge");
                    yield new BridgeMessage.Challenge(bytes(b, NONCE_BYTES), bytes(b, PROOF_BYTES));
                }
                case PROOF -> new BridgeMessage.Proof(bytes(b, exact(bodyLength, PROOF_BYTES, "proof")));
                case WELCOME -> {
                    exact(bodyLength, 4, "welcome");
                    yield new BridgeMessage.Welcome(b.getInt());
                }
                case OFFER -> offer(b, bodyLength);
                case DELIVERED -> {
                    exact(bodyLength, 8, "delivered");
                    yield new BridgeMessage.Delivered(b.getLong());
                }
                case HEARTBEAT -> {
                    exact(bodyLength, 0, "heartbeat");
                    yield new BridgeMessage.Heartbeat();
                }
                case END -> {
                    exact(bodyLength, 0, "end");
                    yield new BridgeMessage.End();
                }
                case REFUSED -> {
                    exact(bodyLength, 4, "refused");
                    int reason = b.getShort() & 0xFFFF;
                    if (b.getShort() != 0) {
                        throw bad("reserved field of a refusal is not zero");
                    }
                    yield new BridgeMessage.Refused(reason);
                }
                default -> throw bad("unknown message type " + type);
            };
            if (b.hasRemaining()) {
                throw bad(b.remaining() + " trailing bytes after a " + m.getClass().getSimpleName());
            }
            return m;
        } catch (IllegalArgumentException e) {
            throw new InvalidDataException("bridge control message refused: " + e.getMessage(), e);
        }
    }

    private static BridgeMessage.Offer offer(ByteBuffer b, long bodyLength) {
        if (bodyLength < offerBytes(0)) {
            throw bad("offer body of " + bodyLength + " bytes is too short");
        }
        long sequence = b.getLong();
        int dtypeCode = b.get() & 0xFF;
        int rank = b.get() & 0xFF;
        if (b.getShort() != 0) {
            throw bad("reserved field of an offer is not zero");
        }
        if (rank > TensorLayout.MAX_RANK) {
            throw bad("rank " + rank + " exceeds " + TensorLayout.MAX_RANK);
        }
        long byteLength = b.getLong();
        long chunkOffset = b.getLong();
        if (bodyLength != offerBytes(rank)) {
            throw bad("offer body of " + bodyLength + " bytes is not the " + offerBytes(rank) + " of rank " + rank);
        }
        long[] shape = new long[rank];
        long[] strides = new long[rank];
        for (int i = 0; i < rank; i++) {
            shape[i] = b.getLong();
        }
        for (int i = 0; i < rank; i++) {
            strides[i] = b.getLong();
        }
        DType dtype = DType.fromCode(dtypeCode);
        return new BridgeMessage.Offer(sequence, new TensorLayout(dtype, shape, strides, 0), byteLength, chunkOffset);
    }

    private static int exact(long bodyLength, int expected, String what) {
        if (bodyLength != expected) {
            throw bad(what + " body must have " + expected + " bytes, not " + bodyLength);
        }
        return expected;
    }

    private static byte[] bytes(ByteBuffer b, int n) {
        byte[] out = new byte[n];
        b.get(out);
        return out;
    }

    private static InvalidDataException bad(String why) {
        return new InvalidDataException("bridge control message refused: " + why);
    }
}
