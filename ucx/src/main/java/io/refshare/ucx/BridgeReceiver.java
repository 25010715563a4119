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
 * shared secret, takes each offered tensor into this host's refshare shared memory ({@code rs}):
 * copied out of the offer's message when it came inline, else received by UCX's rendezvous
 * straight into that memory. It puts the copy on a local {@link ShareQueue}, where local consumers (Java or
 * Python) take it as from any producer. A tensor is confirmed to its sender ({@code delivered})
 * only once it is on the local queue, so a full local queue holds the sender back (its window
 * fills) and nothing is lost.
 *
 * <p>When a sender's link fails, receives still running are let finish (UCX owns the memory
 * until they end); a tensor whose bytes did not all arrive is released; copies already
 * complete still go on the queue. The
 * receiver keeps listening: a sender that reconnects is served again.
 */
public final class BridgeReceiver implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(BridgeReceiver.class.getName());
    /** How long {@link #listen} retries an address that is still busy. */
    private static final long LISTEN_RETRY_NANOS = 10_000_000_000L;

    /** Counts since listen; {@code peersRefused}: connections refused for a wrong secret (either side found it) or by this side for malformed or unexpected messages. */
    public record Stats(long received, long delivered, long peersAccepted, long peersRefused, long endsOfStream,
                        String lastError) {
    }

    private final Refshare rs;
    private final ShareQueue target;
    private final BridgeSecret secret;
    private final int window;
    private final LoopUser loop;
    private final InetSocketAddress address;
    // loop thread only
    private final Map<Link, Peer> peers = new HashMap<>();
    private final ArrayDeque<Copy> toDeliver = new ArrayDeque<>();
    // any thread
    private final AtomicLong received = new AtomicLong();
    private final AtomicLong delivered = new AtomicLong();
    private final AtomicLong accepted = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong ends = new AtomicLong();
    private final AtomicReference<String> lastError = new AtomicReference<>();
    private volatile boolean closed;

    /** One tensor being received or waiting for room on the local queue. */
    private static final class Copy {
        final Peer from;
        final long sequence;
        final Tensor tensor;
        final MemorySegment into;
        /** Bytes whose messages arrived (their rendezvous receives may still run). */
        long announced;
        int receiving;
        boolean failed;
        boolean finished;
        boolean done;

        Copy(Peer from, long sequence, Tensor tensor, MemorySegment into) {
            this.from = from;
            this.sequence = sequence;
            this.tensor = tensor;
            this.into = into;
        }

        long length() {
            return into.byteSize();
        }
    }

    private final class Peer implements Link.Session {
        Link link;
        final List<Copy> reading = new ArrayList<>();
        /** The tensor whose further chunks are still to come, if any. */
        Copy incoming;
        boolean lost;

        @Override
        public void ready(Link l, int w) {
            accepted.incrementAndGet();
            LOG.log(System.Logger.Level.INFO, "bridge: sender {0} authenticated", l.peer());
        }

        @Override
        public void message(Link l, BridgeMessage m) {
            if (m instanceof BridgeMessage.End) {
                ends.incrementAndGet();
            } else {
                l.refuse(BridgeMessage.Refused.BAD_MESSAGE, l.peer() + " sent a " + m.getClass().getSimpleName()
                        + ", which only a receiver sends");
            }
        }

        @Override
        public void offer(Link l, BridgeMessage.Offer o, MemorySegment data, long length, boolean rendezvous) {
            take(this, o, data, length, rendezvous);
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
            if (incoming != null) {
                // the rest of its bytes will never come
                Copy c = incoming;
                incoming = null;
                c.failed = true;
                settle(this, c);
            }
        }
    }

    private BridgeReceiver(Refshare rs, ShareQueue target, InetSocketAddress address, BridgeSecret secret, int window) {
        this.rs = rs;
        this.target = target;
        this.secret = secret;
        this.window = window;
        this.address = address;
        this.loop = LoopUser.open("bridge receiver on " + address);
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
                    r.loop.listen(address, r::onConnectionRequest);
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
            loop.reject(request);
            return;
        }
        Peer p = new Peer();
        p.link = Link.accept(loop, request, secret, p, window, "sender#" + (accepted.get() + refused.get() + 1));
        peers.put(p.link, p);
    }

    /**
     * One message of an offer: the first allocates the copy, each puts its bytes at their
     * offset (copied now, or received by rendezvous). Chunks of a tensor come in order, one
     * tensor after another; anything else is refused.
     */
    private void take(Peer p, BridgeMessage.Offer o, MemorySegment data, long length, boolean rendezvous) {
        long total = o.byteLength();
        if (length > total - o.chunkOffset() || length == 0 && total != 0) {
            p.link.refuse(BridgeMessage.Refused.BAD_MESSAGE, "offer " + o.sequence() + " of " + p.link.peer()
                    + " brought " + length + " bytes at " + o.chunkOffset() + " of " + total);
            return;
        }
        Copy c;
        if (o.chunkOffset() == 0) {
            if (p.incoming != null) {
                p.link.refuse(BridgeMessage.Refused.BAD_MESSAGE, p.link.peer() + " offered " + o.sequence()
                        + " before the rest of " + p.incoming.sequence);
                return;
            }
            Tensor bytes;
            try {
                bytes = rs.allocateBytes(Math.max(total, 1));
            } catch (RuntimeException e) {
                p.link.refuse(BridgeMessage.Refused.UNUSABLE_OFFER, "cannot allocate " + total
                        + " bytes for an offer of " + p.link.peer() + ": " + e.getMessage());
                return;
            }
            c = new Copy(p, o.sequence(), bytes.view(o.layout()),
                    bytes.data().asSlice(0, total));
            bytes.close();
            received.incrementAndGet();
            p.reading.add(c);
            toDeliver.add(c); // delivery keeps the senders' order
            p.incoming = c;
        } else {
            c = p.incoming;
            if (c == null || c.sequence != o.sequence() || c.length() != total || c.announced != o.chunkOffset()
                    || !c.tensor.layout().equals(o.layout())) {
                p.link.refuse(BridgeMessage.Refused.BAD_MESSAGE, p.link.peer() + " sent bytes at " + o.chunkOffset()
                        + " of offer " + o.sequence() + " out of order");
                return;
            }
        }
        MemorySegment slice = c.into.asSlice(o.chunkOffset(), length);
        c.announced += length;
        if (c.announced == total) {
            p.incoming = null;
        }
        if (!rendezvous) {
            MemorySegment.copy(data.reinterpret(length), 0, slice, 0, length);
        } else {
            c.receiving++;
            try {
                loop.receive(data, slice, status -> {
                    c.receiving--;
                    if (status != UcpAbi.UCS_OK) {
                        c.failed = true;
                    } else if (!p.lost) {
                        p.link.heard();
                    }
                    settle(p, c);
                });
            } catch (UcxException e) {
                c.receiving--;
                c.failed = true;
                p.incoming = null;
                settle(p, c);
                p.link.refuse(BridgeMessage.Refused.UNUSABLE_OFFER, "receiving offer " + o.sequence() + " of "
                        + p.link.peer() + " failed: " + e.getMessage());
                return;
            }
        }
        settle(p, c);
    }

    /**
     * Once no receive of {@code c} runs: complete (all its bytes arrived) it goes on to
     * delivery; failed (a receive failed, or its link ended before the rest came) it is
     * released, and a failure on a live link ends that link.
     */
    private void settle(Peer p, Copy c) {
        if (c.finished || c.receiving > 0 || !c.failed && c.announced < c.length()) {
            return;
        }
        c.finished = true;
        p.reading.remove(c);
        if (c.failed) {
            toDeliver.remove(c);
            c.tensor.close();
            if (!p.lost) {
                p.link.end("receiving offer " + c.sequence + " failed");
            }
        } else {
            c.done = true;
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
