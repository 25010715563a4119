package io.refshare.ucx;

import io.refshare.exceptions.InvalidDataException;

import java.lang.foreign.MemorySegment;

/**
 * One bridge connection seen from one side, on its loop's thread: the endpoint, the
 * handshake (docs/hosts.md, "Handshake"), heartbeats both ways and the silence rule. Once
 * both sides proved the secret, messages go to the {@link Session}; before, anything but the
 * next handshake step ends the link. A link ends once: {@link Session#lost} is called exactly
 * once, whatever ended it (peer's refusal, UCX's error report, silence, a malformed message,
 * or this side's {@link #end}).
 */
final class Link implements UcxLoop.Endpoint {
    /** The side using the link: the sender (client) or the receiver (server). */
    interface Session {
        /** Authenticated; for a client, with the server's window. */
        void ready(Link link, int window);

        /** An authenticated peer's message (never a handshake or heartbeat message, never an offer). */
        void message(Link link, BridgeMessage m);

        /**
         * An authenticated peer's offer with its bytes: {@code data} are the {@code length}
         * bytes themselves, or, {@code rendezvous}, UCX's descriptor to receive them with
         * ({@link LoopUser#receive}); valid during this call only.
         */
        void offer(Link link, BridgeMessage.Offer offer, MemorySegment data, long length, boolean rendezvous);

        /**
         * The link ended for {@code reason}; called once, after which the link sends nothing.
         * {@code refusedSecret}: the secrets differ; {@code refusedHere}: this side refused the
         * peer (wrong secret or a malformed or unexpected message).
         */
        void lost(Link link, String reason, boolean refusedSecret, boolean refusedHere);
    }

    private enum State { AWAIT_HELLO, AWAIT_CHALLENGE, AWAIT_PROOF, AWAIT_WELCOME, READY, ENDED }

    private final LoopUser loop;
    private final BridgeSecret secret;
    private final Session session;
    private final String peer;
    private final int window;
    private MemorySegment ep;
    private State state;
    private byte[] clientNonce;
    private byte[] serverNonce;
    private final long createdNanos = System.nanoTime();
    private long lastHeardNanos = createdNanos;
    private long lastSentNanos = createdNanos;

    private Link(LoopUser loop, BridgeSecret secret, Session session, String peer, int window, State state) {
        this.loop = loop;
        this.secret = secret;
        this.session = session;
        this.peer = peer;
        this.window = window;
        this.state = state;
    }

    /** Connects to {@code address} and starts the handshake as the client. */
    static Link connect(LoopUser loop, java.net.InetSocketAddress address, BridgeSecret secret, Session session) {
        Link link = new Link(loop, secret, session, address.toString(), 0, State.AWAIT_CHALLENGE);
        link.ep = loop.connect(address, MemorySegment.NULL, link);
        link.clientNonce = BridgeSecret.nonce();
        link.send(new BridgeMessage.Hello(link.clientNonce));
        return link;
    }

    /** Accepts a connection request and waits for the client's hello; {@code window} goes in the welcome. */
    static Link accept(LoopUser loop, MemorySegment connRequest, BridgeSecret secret, Session session, int window,
                       String peer) {
        Link link = new Link(loop, secret, session, peer, window, State.AWAIT_HELLO);
        link.ep = loop.connect(null, connRequest, link);
        return link;
    }

    MemorySegment endpoint() {
        return ep;
    }

    String peer() {
        return peer;
    }

    boolean ready() {
        return state == State.READY;
    }

    boolean ended() {
        return state == State.ENDED;
    }

    void send(BridgeMessage m) {
        if (state == State.ENDED) {
            return;
        }
        lastSentNanos = System.nanoTime();
        loop.send(ep, ControlCodec.encode(m), status -> {
            if (status != UcpAbi.UCS_OK) {
                lose("sending to " + peer + " failed: " + loop.ucp.statusText(status), false);
            }
        });
    }

    /** Sends an offer with its bytes (a chunk of a tensor); {@code done} gets the status once UCX is done with them. */
    void sendOffer(BridgeMessage.Offer offer, MemorySegment bytes, boolean eager, java.util.function.IntConsumer done) {
        lastSentNanos = System.nanoTime();
        loop.sendData(ep, ControlCodec.encode(offer), bytes, eager, status -> {
            if (status != UcpAbi.UCS_OK) {
                lose("sending to " + peer + " failed: " + loop.ucp.statusText(status), false);
            }
            done.accept(status);
        });
    }

    /**
     * Evidence of life other than a message: a chunk of a remote read arrived. Control messages
     * queue behind bulk data on the same connection, so a long read must count as hearing
     * from the peer, or a slow link would look silent.
     */
    void heard() {
        lastHeardNanos = System.nanoTime();
    }

    /** Called by the loop's timer: heartbeats out, silence and handshake deadlines in. */
    void tick(long now) {
        if (state == State.ENDED) {
            return;
        }
        if (state != State.READY && now - createdNanos > BridgeTimings.HANDSHAKE_MILLIS * 1_000_000L) {
            lose("no handshake with " + peer + " within " + BridgeTimings.HANDSHAKE_MILLIS + " ms", false);
            return;
        }
        if (now - lastHeardNanos > BridgeTimings.SILENCE_MILLIS * 1_000_000L) {
            lose(peer + " silent for " + (now - lastHeardNanos) / 1_000_000L + " ms (link down or peer gone)", false);
            return;
        }
        if (state == State.READY && now - lastSentNanos > BridgeTimings.HEARTBEAT_MILLIS * 1_000_000L) {
            send(new BridgeMessage.Heartbeat());
        }
    }

    @Override
    public void onMessage(byte[] frame) {
        if (state == State.ENDED) {
            return;
        }
        lastHeardNanos = System.nanoTime();
        BridgeMessage m;
        try {
            m = ControlCodec.decode(frame);
        } catch (InvalidDataException e) {
            refuse(BridgeMessage.Refused.BAD_MESSAGE, "malformed control message from " + peer + ": " + e.getMessage());
            return;
        }
        if (m instanceof BridgeMessage.Refused r) {
            lose(peer + " refused the connection: " + r.explain(), r.reason() == BridgeMessage.Refused.BAD_SECRET);
            return;
        }
        switch (state) {
            case AWAIT_HELLO -> {
                if (!(m instanceof BridgeMessage.Hello h)) {
                    refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " sent " + name(m) + " before hello");
                    return;
                }
                clientNonce = h.clientNonce();
                serverNonce = BridgeSecret.nonce();
                state = State.AWAIT_PROOF;
                send(new BridgeMessage.Challenge(serverNonce, secret.serverProof(clientNonce, serverNonce)));
            }
            case AWAIT_CHALLENGE -> {
                if (!(m instanceof BridgeMessage.Challenge c)) {
                    refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " sent " + name(m) + " instead of a challenge");
                    return;
                }
                serverNonce = c.serverNonce();
                if (!BridgeSecret.matches(secret.serverProof(clientNonce, serverNonce), c.serverProof())) {
                    refuse(BridgeMessage.Refused.BAD_SECRET, peer + " does not hold our secret (its proof is wrong)");
                    return;
                }
                state = State.AWAIT_WELCOME;
                send(new BridgeMessage.Proof(secret.clientProof(clientNonce, serverNonce)));
            }
            case AWAIT_PROOF -> {
                if (!(m instanceof BridgeMessage.Proof p)) {
                    refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " sent " + name(m) + " instead of a proof");
                    return;
                }
                if (!BridgeSecret.matches(secret.clientProof(clientNonce, serverNonce), p.clientProof())) {
                    refuse(BridgeMessage.Refused.BAD_SECRET, peer + " does not hold our secret (its proof is wrong)");
                    return;
                }
                state = State.READY;
                send(new BridgeMessage.Welcome(window));
                session.ready(this, window);
            }
            case AWAIT_WELCOME -> {
                if (!(m instanceof BridgeMessage.Welcome w)) {
                    refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " sent " + name(m) + " instead of a welcome");
                    return;
                }
                state = State.READY;
                session.ready(this, w.window());
            }
            case READY -> {
                if (m instanceof BridgeMessage.Heartbeat) {
                    return;
                }
                if (m instanceof BridgeMessage.Offer) {
                    refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " sent an offer without its bytes");
                    return;
                }
                if (m instanceof BridgeMessage.Hello || m instanceof BridgeMessage.Challenge
                        || m instanceof BridgeMessage.Proof || m instanceof BridgeMessage.Welcome) {
                    refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " repeated the handshake (" + name(m) + ")");
                    return;
                }
                session.message(this, m);
            }
            case ENDED -> { }
        }
    }

    @Override
    public void onData(byte[] header, MemorySegment data, long length, boolean rendezvous) {
        if (state == State.ENDED) {
            return;
        }
        lastHeardNanos = System.nanoTime();
        BridgeMessage m;
        try {
            m = ControlCodec.decode(header);
        } catch (InvalidDataException e) {
            refuse(BridgeMessage.Refused.BAD_MESSAGE, "malformed offer from " + peer + ": " + e.getMessage());
            return;
        }
        if (state != State.READY || !(m instanceof BridgeMessage.Offer o)) {
            refuse(BridgeMessage.Refused.BAD_MESSAGE, peer + " sent bytes with " + name(m)
                    + (state == State.READY ? "" : " before the handshake ended"));
            return;
        }
        session.offer(this, o, data, length, rendezvous);
    }

    @Override
    public void onError(int status, String text) {
        if (state != State.ENDED) {
            endQuietly(peer + " disconnected: " + text, false);
        }
    }

    /** Refuses the peer (it is told why), then ends the link. */
    void refuse(int reason, String why) {
        if (state == State.ENDED) {
            return;
        }
        State was = state;
        state = State.ENDED;
        MemorySegment endpoint = ep;
        // the endpoint closes once the refusal has left (or after a second, if it cannot leave)
        boolean[] closed = {false};
        Runnable close = () -> {
            if (!closed[0]) {
                closed[0] = true;
                loop.closeEndpoint(endpoint);
            }
        };
        try {
            loop.send(endpoint, ControlCodec.encode(new BridgeMessage.Refused(reason)), status -> close.run());
        } catch (UcxException e) {
            close.run();
        }
        loop.after(1000, close);
        session.lost(this, why, reason == BridgeMessage.Refused.BAD_SECRET && was != State.READY, true);
    }

    /** Ends the link from this side (closing, or a session-level failure). */
    void end(String why) {
        lose(why, false);
    }

    private void lose(String why, boolean refusedSecret) {
        if (state == State.ENDED) {
            return;
        }
        state = State.ENDED;
        loop.closeEndpoint(ep);
        session.lost(this, why, refusedSecret, false);
    }

    private void endQuietly(String why, boolean refusedSecret) {
        state = State.ENDED; // the loop already closed the failed endpoint
        session.lost(this, why, refusedSecret, false);
    }

    private static String name(BridgeMessage m) {
        return m.getClass().getSimpleName().toLowerCase(java.util.Locale.ROOT);
    }
}
