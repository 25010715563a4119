package io.refshare.ucx;

/**
 * The bridge's clocks, in one place because the failure model rests on them
 * (docs/hosts.md, "Failure model"): each side sends a heartbeat at least every
 * {@link #HEARTBEAT_MILLIS}; a peer silent for {@link #SILENCE_MILLIS} is lost (a cut cable
 * never closes a TCP connection, so UCX's own error report cannot be waited for), and the
 * handshake must finish within {@link #HANDSHAKE_MILLIS}.
 */
public final class BridgeTimings {
    public static final long HEARTBEAT_MILLIS = 150;
    public static final long SILENCE_MILLIS = 900;
    public static final long HANDSHAKE_MILLIS = 3000;
    /** Between connection attempts of a sender whose peer is gone. */
    public static final long RECONNECT_MILLIS = 300;

    private BridgeTimings() {
    }
}
