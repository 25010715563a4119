package io.refshare.ucx;

import io.refshare.tensor.TensorLayout;

import java.util.Arrays;

/**
 * The bridge's control messages (docs/hosts.md, "Control messages"): the handshake that
 * proves both sides hold the shared secret, offers of tensors to read, delivery receipts,
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
     * Sender to receiver: read {@code byteLength} bytes at {@code remoteAddress} with
     * {@code rkey}; they are a tensor of {@code layout} (storage offset 0).
     */
    record Offer(long sequence, TensorLayout layout, long byteLength, long remoteAddress, byte[] rkey)
            implements BridgeMessage {
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
            if (rkey.length < 1 || rkey.length > ControlCodec.MAX_RKEY_BYTES) {
                throw new IllegalArgumentException("remote key of " + rkey.length + " bytes outside 1.."
                        + ControlCodec.MAX_RKEY_BYTES);
            }
            rkey = rkey.clone();
        }

        @Override
        public int type() {
            return ControlCodec.OFFER;
        }

        @Override
        public byte[] rkey() {
            return rkey.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Offer f && sequence == f.sequence && layout.equals(f.layout)
                    && byteLength == f.byteLength && remoteAddress == f.remoteAddress && Arrays.equals(rkey, f.rkey);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(sequence) * 31 + layout.hashCode();
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
