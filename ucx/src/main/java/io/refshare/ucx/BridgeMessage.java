package io.refshare.ucx;

import io.refshare.tensor.TensorLayout;

import java.util.Arrays;

/**
 * The bridge's control messages (docs/hosts.md, "Control messages"): the handshake that
 * proves both sides hold the shared secret, offers carrying tensors' bytes, delivery receipts,
 * heartbeats and the end of the stream. {@link ControlCodec} encodes and strictly decodes them.
 */
public sealed interface BridgeMessage {
    /** The message's type byte on the wire. */
    int type();

    /** Client to server, first: the client's fresh nonce. */
    record Hello(byte[] clientNonce) implements BridgeMessage {
        public Hello {
            clientNonce = checkLength(clientNonce, ControlCodec.NONCE_BYTES, "client nonce");
        }

        @Override
        public int type() {
            return ControlCodec.HELLO;
        }

        @Override
        public byte[] clientNonce() {
            return clientNonce.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Hello h && Arrays.equals(clientNonce, h.clientNonce);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(clientNonce);
        }
    }

    /** Server to client: the server's nonce and its proof of the secret over both nonces. */
    record Challenge(byte[] serverNonce, byte[] serverProof) implements BridgeMessage {
        public Challenge {
            serverNonce = checkLength(serverNonce, ControlCodec.NONCE_BYTES, "server nonce");
            serverProof = checkLength(serverProof, ControlCodec.PROOF_BYTES, "server proof");
        }

        @Override
        public int type() {
            return ControlCodec.CHALLENGE;
        }

        @Override
        public byte[] serverNonce() {
            return serverNonce.clone();
        }

        @Override
        public byte[] serverProof() {
            return serverProof.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Challenge c && Arrays.equals(serverNonce, c.serverNonce)
                    && Arrays.equals(serverProof, c.serverProof);
        }

        @Override
        public int hashCode() {
            return 31 * Arrays.hashCode(serverNonce) + Arrays.hashCode(serverProof);
        }
    }

    /** Client to server: the client's proof of the secret over both nonces. */
    record Proof(byte[] clientProof) implements BridgeMessage {
        public Proof {
            clientProof = checkLength(clientProof, ControlCodec.PROOF_BYTES, "client proof");
        }

        @Override
        public int type() {
            return ControlCodec.PROOF;
        }

        @Override
        public byte[] clientProof() {
            return clientProof.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Proof p && Arrays.equals(clientProof, p.clientProof);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(clientProof);
        }
    }

    /** Server to client: authenticated; the client may have {@code window} offers unanswered at a time. */
    record Welcome(int window) implements BridgeMessage {
        public Welcome {
            if (window < 1 || window > ControlCodec.MAX_WINDOW) {
                throw new IllegalArgumentException("window " + window + " outside 1.." + ControlCodec.MAX_WINDOW);
            }
        }

        @Override
        public int type() {
            return ControlCodec.WELCOME;
        }
    }

    /**
     * Sender to receiver, as the header of an active message whose data are bytes
     * {@code [chunkOffset, chunkOffset + data length)} of a tensor of {@code layout} (storage
     * offset 0) and {@code byteLength} bytes. A tensor goes as one such message, or as several
     * in order (offsets 0, then where the previous chunk ended) when it is large.
     */
    record Offer(long sequence, TensorLayout layout, long byteLength, long chunkOffset) implements BridgeMessage {
        public Offer {
            if (layout.storageOffset() != 0) {
                throw new IllegalArgumentException("an offered layout starts at storage offset 0, not "
                        + layout.storageOffset());
            }
            if (byteLength != layout.byteSpan()) {
                throw new IllegalArgumentException("byte length " + byteLength + " is not the layout's span "
                        + layout.byteSpan());
            }
            if (byteLength > ControlCodec.MAX_TENSOR_BYTES) {
                throw new IllegalArgumentException("byte length " + byteLength + " exceeds "
                        + ControlCodec.MAX_TENSOR_BYTES);
            }
            // a chunk starts inside the tensor (a zero-byte tensor: its one message, at 0)
            if (chunkOffset < 0 || chunkOffset > byteLength || chunkOffset == byteLength && byteLength != 0) {
                throw new IllegalArgumentException("chunk offset " + chunkOffset + " outside a tensor of "
                        + byteLength + " bytes");
            }
        }

        @Override
        public int type() {
            return ControlCodec.OFFER;
        }
    }

    /** Receiver to sender: the offer {@code sequence} is copied and on the receiving queue; let it go. */
    record Delivered(long sequence) implements BridgeMessage {
        @Override
        public int type() {
            return ControlCodec.DELIVERED;
        }
    }

    /** Either way, at least every {@link BridgeTimings#HEARTBEAT_MILLIS}: this side is alive. */
    record Heartbeat() implements BridgeMessage {
        @Override
        public int type() {
            return ControlCodec.HEARTBEAT;
        }
    }

    /** Sender to receiver: the sending stream ended (its queue closed); nothing more comes. */
    record End() implements BridgeMessage {
        @Override
        public int type() {
            return ControlCodec.END;
        }
    }

    /** Either way: the connection is refused or ended for {@code reason}; the sender closes it next. */
    record Refused(int reason) implements BridgeMessage {
        public static final int BAD_SECRET = 1;
        public static final int BAD_MESSAGE = 2;
        public static final int UNUSABLE_OFFER = 3;

        public Refused {
            if (reason < BAD_SECRET || reason > UNUSABLE_OFFER) {
                throw new IllegalArgumentException("unknown refusal reason " + reason);
            }
        }

        @Override
        public int type() {
            return ControlCodec.REFUSED;
        }

        public String explain() {
            return switch (reason) {
                case BAD_SECRET -> "the peers' secrets differ";
                case BAD_MESSAGE -> "a malformed or unexpected control message";
                default -> "an offer the receiver cannot read";
            };
        }
    }

    private static byte[] checkLength(byte[] b, int length, String what) {
        if (b.length != length) {
            throw new IllegalArgumentException(what + " must have " + length + " bytes, not " + b.length);
        }
        return b.clone();
    }
}
