package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The receiving end of a bridge: listens where it is told, accepts senders that prove the
 * shared secret, reads each offered tensor by RMA get into this host's refshare shared memory
 * ({@code rs}) and puts it on a local {@link ShareQueue}, where local consumers (Java or
 * Python) take it as from any producer. A tensor is confirmed to its sender ({@code delivered})
 * only once it is on the local queue, so a full local queue holds the sender back (its window
 * fills) and nothing is lost.
 *
 * <p>When a sender's link fails, reads still running are let finish (UCX owns the memory until
 * they end) and their tensors released; copies already complete still go on the queue. The
 * receiver keeps listening: a sender that reconnects is served again.
 */
public final class BridgeReceiver implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(BridgeReceiver.class.getName());
    /** How long {@link #listen} retries an address that is still busy. */
    private static final long LISTEN_RETRY_NANOS = 10_000_000_000L;
    /**
     * A large tensor is read in reads of this size: each one's arrival is proof the sender
     * lives (its heartbeats wait behind the data), and several reads keep the link busy.
     */
    static final long READ_CHUNK_BYTES = 4L << 20;

    /** Counts since listen; {@code peersRefused}: connections refused for a wrong secret (either side found it) or by this side for malformed or unexpected messages. */
    public record Stats(long received, long delivered, long peersAccepted, long peersRefused, long endsOfStream,
                        String lastError) {
    }

    private final Refshare rs;
    private final ShareQueue target;
    private final BridgeSecret secret;
    private final int window;
    private final UcxLoop loop;
    private final InetSocketAddress address;
    // loop thread only
    private final Map<Link, Peer> peers = new HashMap<>();
    private final ArrayDeque<Copy> toDeliver = new ArrayDeque<>();
    private MemorySegment listener = MemorySegment.NULL;
    // any thread
    private final AtomicLong received = new AtomicLong();
    private final AtomicLong delivered = new AtomicLong();
    private final AtomicLong accepted = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong ends = new AtomicLong();
    private final AtomicReference<String> lastError = new AtomicReference<>();
    private volatile boolean closed;

    /** One tensor being read or waiting for room on the local queue. */
    private static final class Copy {
        final Peer from;
        final long sequence;
        final Tensor tensor;
        boolean done;

        Copy(Peer from, long sequence, Tensor tensor) {
            this.from = from;
            this.sequence = sequence;
            this.tensor = tensor;
        }
    }

    private final class Peer implements Link.Session {
        Link link;
        final List<Copy> reading = new ArrayList<>();
        boolean lost;

        @Override
        public void ready(Link l, int w) {
            accepted.incrementAndGet();
            LOG.log(System.Logger.Level.INFO, "bridge: sender {0} authenticated", l.peer());
        }

        @Override
        public void message(Link l, BridgeMessage m) {
            switch (m) {
                case BridgeMessage.Offer o -> read(this, o);
                case BridgeMessage.End e -> ends.incrementAndGet();
                default -> l.refuse(BridgeMessage.Refused.BAD_MESSAGE, l.peer() + " sent a "
                        + m.getClass().getSimpleName() + ", which only a receiver sends");
            }
        }

        @Override
        public void lost(Link l, String reason, boolean refusedSecret, boolean refusedHere) {
            lost = true;
            peers.remove(l);
            if (refusedHere || refusedSecret) {
                refused.incrementAndGet();
            }
            lastError.set(reason);
            LOG.log(refusedHere ? System.Logger.Level.WARNING : System.Logger.Level.INFO,
                    "bridge: sender {0} gone: {1}", l.peer(), reason);
        }
    }

    private BridgeReceiver(Refshare rs, ShareQueue target, InetSocketAddress address, BridgeSecret secret, int window) {
        this.rs = rs;
        this.target = target;
        this.secret = secret;
        this.window = window;
        this.address = address;
        this.loop = UcxLoop.start("refshare-bridge-receive");
    }

    /**
     * Listens on {@code address} (an IPv4 address of this host and a port) and delivers what
     * senders offer to {@code target}; at most {@code window} offers per sender are unanswered.
     *
     * @throws UcxUnavailableException when UCX cannot be loaded
     * @throws UcxException            when UCX cannot listen there (address in use, not local)
     */
    public static BridgeReceiver listen(Refshare rs, ShareQueue target, InetSocketAddress address, BridgeSecret secret,
                                        int window) {
        if (window < 1 || window > ControlCodec.MAX_WINDOW) {
            throw new IllegalArgumentException("window " + window + " outside 1.." + ControlCodec.MAX_WINDOW);
        }
        BridgeReceiver r = new BridgeReceiver(rs, target, address, secret, window);
        CompletableFuture<Void> listening = new CompletableFuture<>();
        long deadline = System.nanoTime() + LISTEN_RETRY_NANOS;
        r.loop.execute(new Runnable() {
            @Override
            public void run() {
                try {
                    r.listener = r.loop.listen(address, r::onConnectionRequest);
                    r.loop.every(r::tick);
                    listening.complete(null);
                } catch (UcxException e) {
                    // the port of a bridge that just died may linger a moment (TIME_WAIT): try again shortly
                    if (e.getMessage().contains("busy") && System.nanoTime() - deadline < 0) {
                        r.loop.after(200, this);
                    } else {
                        listening.completeExceptionally(e);
                    }
                } catch (RuntimeException e) {
                    listening.completeExceptionally(e);
                }
            }
        });
        try {
            listening.get(LISTEN_RETRY_NANOS + 5_000_000_000L, TimeUnit.NANOSECONDS);
        } catch (Exception e) {
            r.loop.close();
            Throwable cause = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
            throw new UcxException("cannot listen on " + address + ": " + cause.getMessage(), cause);
        }
        return r;
    }

    public InetSocketAddress address() {
        return address;
    }

    public Stats stats() {
        return new Stats(received.get(), delivered.get(), accepted.get(), refused.get(), ends.get(), lastError.get());
    }

    // ---- loop thread ----

    private void onConnectionRequest(MemorySegment request) {
        if (closed) {
            loop.ucp.reject(listener, request);
            return;
        }
        Peer p = new Peer();
        p.link = Link.accept(loop, request, secret, p, window, "sender#" + (accepted.get() + refused.get() + 1));
        peers.put(p.link, p);
    }

    private void read(Peer p, BridgeMessage.Offer o) {
        long length = o.byteLength();
        Tensor bytes;
        try {
            bytes = rs.allocateBytes(Math.max(length, 1));
        } catch (RuntimeException e) {
            p.link.refuse(BridgeMessage.Refused.UNUSABLE_OFFER, "cannot allocate " + length + " bytes for an offer of "
                    + p.link.peer() + ": " + e.getMessage());
            return;
        }
        Tensor t = bytes.view(o.layout());
        MemorySegment into = bytes.data().asSlice(0, length);
        bytes.close();
        Copy c = new Copy(p, o.sequence(), t);
        received.incrementAndGet();
        if (length == 0) {
            c.done = true;
            toDeliver.add(c);
            deliver();
            return;
        }
        MemorySegment rkey;
        try {
            rkey = loop.ucp.unpackRkey(p.link.endpoint(), o.rkey());
        } catch (UcxException e) {
            t.close();
            p.link.refuse(BridgeMessage.Refused.UNUSABLE_OFFER, "offer " + o.sequence() + " of " + p.link.peer()
                    + " has a remote key UCX refuses: " + e.getMessage());
            return;
        }
        int chunks = (int) ((length + READ_CHUNK_BYTES - 1) / READ_CHUNK_BYTES);
        int[] left = {chunks};
        boolean[] failed = {false};
        p.reading.add(c);
        toDeliver.add(c); // delivery keeps the senders' order
        for (int i = 0; i < chunks; i++) {
            long from = i * READ_CHUNK_BYTES;
            long n = Math.min(READ_CHUNK_BYTES, length - from);
            MemorySegment request;
            try {
                request = loop.ucp.get(p.link.endpoint(), into.asSlice(from, n), o.remoteAddress() + from, rkey);
            } catch (UcxException e) {
                // the reads already started still complete (or fail) and count down below
                failed[0] = true;
                left[0] -= chunks - i;
                if (!p.lost) {
                    p.link.refuse(BridgeMessage.Refused.UNUSABLE_OFFER, "reading offer " + o.sequence() + " of "
                            + p.link.peer() + " failed: " + e.getMessage());
                }
                if (left[0] == 0) {
                    finishRead(p, c, rkey, false);
                }
                return;
            }
            loop.track(request, status -> {
                if (status == UcpAbi.UCS_OK) {
                    if (!p.lost) {
                        p.link.heard();
                    }
                } else {
                    failed[0] = true;
                }
                if (--left[0] == 0) {
                    finishRead(p, c, rkey, !failed[0]);
                }
            });
        }
    }

    /** All reads of a copy ended: it goes on to delivery, or (any read failed) is released. */
    private void finishRead(Peer p, Copy c, MemorySegment rkey, boolean ok) {
        loop.ucp.destroyRkey(rkey);
        p.reading.remove(c);
        if (ok) {
            c.done = true;
        } else {
            toDeliver.remove(c);
            c.tensor.close();
            if (!p.lost) {
                p.link.end("reading offer " + c.sequence + " failed");
            }
        }
        deliver();
    }

    /** Puts finished copies on the local queue in order, as long as it has room. */
    private void deliver() {
        while (!toDeliver.isEmpty() && toDeliver.peek().done) {
            Copy c = toDeliver.peek();
            boolean put;
            try {
                put = target.offer(c.tensor, 0, TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            } catch (RuntimeException e) {
                // the queue is closed or broken: nobody can take this copy
                lastError.set("local queue refused a copy: " + e.getMessage());
                toDeliver.poll();
                c.tensor.close();
                continue;
            }
            if (!put) {
                return; // full: the timer tries again; the sender waits for its confirmation
            }
            toDeliver.poll();
            c.tensor.close();
            delivered.incrementAndGet();
            if (!c.from.lost) {
                c.from.link.send(new BridgeMessage.Delivered(c.sequence));
            }
        }
    }

    private void tick() {
        long now = System.nanoTime();
        for (Link l : List.copyOf(peers.keySet())) {
            l.tick(now);
        }
        deliver();
    }

    /**
     * Stops listening, disconnects every sender (their unconfirmed tensors are released on
     * their side) and releases copies not yet on the queue. The queue stays open. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        CompletableFuture<Void> done = new CompletableFuture<>();
        loop.execute(() -> {
            for (Link l : List.copyOf(peers.keySet())) {
                l.end("receiver closed");
            }
            if (!listener.equals(MemorySegment.NULL)) {
                try {
                    loop.ucp.listenerDestroy.invokeExact(listener);
                } catch (Throwable t) {
                    LOG.log(System.Logger.Level.WARNING, "ucp_listener_destroy failed", t);
                }
            }
            done.complete(null);
        });
        try {
            done.get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
        }
        // reads still running end with the endpoints; wait for them, then give back what was never queued
        long deadline = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() - deadline < 0) {
            CompletableFuture<Boolean> idle = new CompletableFuture<>();
            loop.execute(() -> idle.complete(peers.values().stream().allMatch(p -> p.reading.isEmpty())));
            try {
                if (idle.get(1, TimeUnit.SECONDS)) {
                    break;
                }
                Thread.sleep(10);
            } catch (Exception e) {
                break;
            }
        }
        CompletableFuture<Void> released = new CompletableFuture<>();
        loop.execute(() -> {
            for (Copy c : toDeliver) {
                c.tensor.close();
            }
            toDeliver.clear();
            released.complete(null);
        });
        try {
            released.get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
        }
        loop.close();
    }

    @Override
    public String toString() {
        return "BridgeReceiver[" + address + "]";
    }
}
