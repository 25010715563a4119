package io.refshare.ucx;

import io.refshare.Tensor;
import io.refshare.tensor.TensorLayout;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The sending end of a bridge: a queue on another host, reached over UCX. {@link #put} hands
 * a tensor to the remote {@link BridgeReceiver}, which takes its bytes into its own shared
 * memory and puts them on its local queue. Small tensors (up to {@link #INLINE_MAX_BYTES})
 * travel inside the offer's active message; larger ones by UCX's rendezvous, in chunks of at
 * most {@link #CHUNK_BYTES}: the receiver fetches them straight from this tensor's memory
 * (an RDMA read where the transport has one; over TCP, UCX writes them from it without a copy
 * of its own).
 *
 * <h2>References</h2>
 * {@code put} takes a reference of its own to the tensor's storage (the caller may close its
 * tensor at once, as with a local queue). That reference is released when the receiver
 * reports the copy on its queue ({@code delivered}), or, if the link fails first, when the
 * failure is seen (within about a second: {@link BridgeTimings}): such tensors are counted
 * as {@linkplain Stats#unconfirmed() unconfirmed} and are not sent again (at most once).
 * Either way never before UCX is done with the bytes (every send of the tensor completed):
 * an inline tensor's bytes are copied into the message at once, so only the confirmation
 * holds it; a rendezvous tensor is read by the receiver until its sends complete.
 * Tensors not yet offered when the link failed wait and go out after the automatic reconnect.
 * Each reference is released exactly once.
 *
 * <h2>Back-pressure</h2>
 * At most {@code window} tensors are held at a time (offered and not yet delivered, or
 * waiting for the link); {@code put} waits while that many are held, so a full remote queue
 * (whose receiver delivers nothing) slows the sender and loses nothing.
 *
 * <h2>Threads</h2>
 * {@code put} and {@code close} may be called from any thread; the UCX work runs on the
 * process's one UCX loop thread, which every sender and receiver in the process shares.
 */
public final class RemoteQueue implements AutoCloseable, SendingBridge.Destination {
    private static final System.Logger LOG = System.getLogger(RemoteQueue.class.getName());
    public static final int DEFAULT_WINDOW = 16;
    /**
     * Tensors up to this size travel inside the offer (UCX's eager protocol: no round trip
     * before the bytes move, but UCX copies them through its buffers on both sides); larger
     * ones by rendezvous (a round trip first, then no copy in user space). Measured over TCP
     * here: at 64 KiB eager moved 556 MiB/s at 0.82 s of sender CPU per GiB, rendezvous 467 MiB/s
     * at 1.16 s; at 256 KiB and 1 MiB the two were within the noise, so the copy-free one wins.
     */
    public static final long INLINE_MAX_BYTES = 64L << 10;
    /**
     * A larger tensor goes as rendezvous messages of at most this size, in order: each one's
     * arrival is proof the sender lives (its heartbeats wait behind the bytes on the same
     * connection), and several in flight keep the link busy.
     */
    public static final long CHUNK_BYTES = 4L << 20;
    /**
     * At most this many bytes are with UCX at a time (sent and not yet acknowledged): enough
     * chunks in flight to cover each one's rendezvous round trip, few enough that this side's
     * control messages and the peer's answers do not wait behind gigabytes of data.
     */
    static final long MAX_BYTES_IN_FLIGHT = 32L << 20;

    /** Counts since connect. */
    public record Stats(long offered, long delivered, long unconfirmed, long connects, String lastError) {
    }

    /**
     * A tensor this side holds for the peer: its own reference, released once it is settled
     * (delivered, or its link lost) and none of its sends is still with UCX.
     */
    private static final class Held {
        final long sequence;
        final Tensor tensor;
        /** The layout the offers describe and the bytes they carry. */
        TensorLayout wire;
        MemorySegment data;
        /** Where its next chunk starts; sends of it still with UCX. */
        long nextChunk;
        int sending;
        boolean settled;

        Held(long sequence, Tensor tensor) {
            this.sequence = sequence;
            this.tensor = tensor;
        }
    }

    private final InetSocketAddress address;
    private final BridgeSecret secret;
    private final LoopUser loop;
    private final Semaphore window;
    // loop thread only
    private final ArrayDeque<Held> waiting = new ArrayDeque<>();
    private final Map<Long, Held> offered = new HashMap<>();
    /** Offered tensors whose chunks are not all sent yet, in order (chunks go one tensor after another). */
    private final ArrayDeque<Held> unsent = new ArrayDeque<>();
    private long bytesInFlight;
    private Link link;
    private int peerWindow;
    private long nextSequence;
    private boolean closing;
    // any thread
    private final AtomicLong offeredCount = new AtomicLong();
    private final AtomicLong deliveredCount = new AtomicLong();
    private final AtomicLong unconfirmedCount = new AtomicLong();
    private final AtomicLong connects = new AtomicLong();
    private final AtomicReference<String> lastError = new AtomicReference<>();
    private final CompletableFuture<Void> firstConnect = new CompletableFuture<>();
    private volatile CompletableFuture<Void> drained;

    private RemoteQueue(InetSocketAddress address, BridgeSecret secret, int window) {
        this.address = address;
        this.secret = secret;
        this.window = new Semaphore(window);
        this.loop = LoopUser.open("bridge to " + address);
    }

    /**
     * Connects to the receiver at {@code address} and proves the shared secret, waiting at
     * most {@code timeout}; afterwards the handle reconnects by itself whenever the link fails.
     *
     * @throws UcxUnavailableException when UCX cannot be loaded
     * @throws UcxException            when the peer refuses (wrong secret) or cannot be reached in time
     */
    public static RemoteQueue connect(InetSocketAddress address, BridgeSecret secret, int window, Duration timeout) {
        if (window < 1 || window > ControlCodec.MAX_WINDOW) {
            throw new IllegalArgumentException("window " + window + " outside 1.." + ControlCodec.MAX_WINDOW);
        }
        RemoteQueue q = new RemoteQueue(address, secret, window);
        q.loop.execute(() -> {
            q.loop.every(q::tick);
            q.dial();
        });
        try {
            q.firstConnect.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            return q;
        } catch (java.util.concurrent.ExecutionException e) {
            q.close();
            throw e.getCause() instanceof UcxException u ? new UcxException(u.getMessage(), u) : new UcxException(
                    "connecting to " + address + " failed", e.getCause());
        } catch (java.util.concurrent.TimeoutException e) {
            q.close();
            throw new UcxException("no bridge answered at " + address + " within " + timeout.toMillis() + " ms"
                    + (q.lastError.get() == null ? "" : " (last: " + q.lastError.get() + ")"));
        } catch (InterruptedException e) {
            q.close();
            Thread.currentThread().interrupt();
            throw new UcxException("interrupted while connecting to " + address);
        }
    }

    /** {@link #connect(InetSocketAddress, BridgeSecret, int, Duration)} with the default window and 10 s. */
    public static RemoteQueue connect(InetSocketAddress address, BridgeSecret secret) {
        return connect(address, secret, DEFAULT_WINDOW, Duration.ofSeconds(10));
    }

    /**
     * Sends {@code tensor} to the remote queue, waiting while {@code window} tensors are held.
     * The caller keeps its tensor (and may close it at once).
     *
     * @throws IllegalStateException when this handle is closed
     */
    public void put(Tensor tensor) throws InterruptedException {
        if (drained != null) {
            throw new IllegalStateException("remote queue to " + address + " is closed");
        }
        Tensor own = tensor.view(tensor.layout());
        try {
            window.acquire();
        } catch (InterruptedException e) {
            own.close();
            throw e;
        }
        loop.execute(() -> {
            waiting.add(new Held(nextSequence++, own));
            pump();
        });
    }

    public Stats stats() {
        return new Stats(offeredCount.get(), deliveredCount.get(), unconfirmedCount.get(), connects.get(),
                lastError.get());
    }

    public InetSocketAddress address() {
        return address;
    }

    // ---- loop thread ----

    private void dial() {
        if (closing && waiting.isEmpty()) {
            return;
        }
        try {
            link = Link.connect(loop, address, secret, session);
        } catch (UcxException e) {
            failedAttempt("connecting to " + address + " failed: " + e.getMessage(), false);
        }
    }

    private final Link.Session session = new Link.Session() {
        @Override
        public void ready(Link l, int w) {
            peerWindow = w;
            connects.incrementAndGet();
            if (connects.get() > 1) {
                LOG.log(System.Logger.Level.INFO, "bridge to {0}: connected again", address);
            }
            firstConnect.complete(null);
            pump();
        }

        @Override
        public void message(Link l, BridgeMessage m) {
            if (m instanceof BridgeMessage.Delivered d) {
                Held h = offered.remove(d.sequence());
                if (h == null) {
                    l.refuse(BridgeMessage.Refused.BAD_MESSAGE, address + " confirmed an offer never made ("
                            + d.sequence() + ")");
                    return;
                }
                settle(h);
                deliveredCount.incrementAndGet();
                pump();
            } else {
                l.refuse(BridgeMessage.Refused.BAD_MESSAGE, address + " sent a "
                        + m.getClass().getSimpleName() + ", which only a sender sends");
            }
        }

        @Override
        public void offer(Link l, BridgeMessage.Offer o, MemorySegment data, long length, boolean rendezvous) {
            l.refuse(BridgeMessage.Refused.BAD_MESSAGE, address + " sent an offer, which only a sender sends");
        }

        @Override
        public void lost(Link l, String reason, boolean refusedSecret, boolean refusedHere) {
            lastError.set(reason);
            int returned = offered.size();
            for (Held h : List.copyOf(offered.values())) {
                settle(h);
            }
            offered.clear();
            unsent.clear(); // the receiver drops a tensor whose bytes did not all come
            unconfirmedCount.addAndGet(returned);
            boolean wasReady = connects.get() > 0 && firstConnect.isDone();
            if (returned > 0 || wasReady && !closing) {
                LOG.log(System.Logger.Level.WARNING, "bridge to {0} lost: {1}; {2} tensors offered and not confirmed "
                        + "were released", address, reason, returned);
            }
            link = null;
            failedAttempt(reason, refusedSecret);
        }
    };

    private void failedAttempt(String reason, boolean fatal) {
        lastError.set(reason);
        if (fatal && !firstConnect.isDone()) {
            firstConnect.completeExceptionally(new UcxException(reason));
            return;
        }
        if (!closing || !waiting.isEmpty()) {
            loop.after(BridgeTimings.RECONNECT_MILLIS, this::dial);
        }
        checkDrained();
    }

    private void tick() {
        if (link != null) {
            link.tick(System.nanoTime());
        }
    }

    /** Offers waiting tensors while the peer's window has room. */
    private void pump() {
        while (link != null && link.ready() && !waiting.isEmpty() && offered.size() < peerWindow) {
            Held h = waiting.poll();
            try {
                offer(h);
            } catch (RuntimeException e) {
                // no message can describe this tensor: give it back rather than lose the reference
                LOG.log(System.Logger.Level.ERROR, "cannot offer a tensor to " + address + "; released", e);
                release(h);
                unconfirmedCount.incrementAndGet();
            }
        }
        checkDrained();
    }

    /** Commits the tensor to this link: its bytes go out as {@link #sendChunks} finds room. */
    private void offer(Held h) {
        TensorLayout l = h.tensor.layout();
        // the bytes from the first element to one past the last, as a layout starting at 0
        h.wire = new TensorLayout(l.dtype(), l.shape(), l.strides(), 0);
        h.data = h.tensor.data();
        new BridgeMessage.Offer(h.sequence, h.wire, h.data.byteSize(), 0); // refuses what no offer can describe
        offered.put(h.sequence, h);
        offeredCount.incrementAndGet();
        unsent.add(h);
        sendChunks();
    }

    /**
     * Sends chunks in order while fewer than {@link #MAX_BYTES_IN_FLIGHT} bytes are with UCX:
     * a small tensor as one inline message, a larger one as rendezvous chunks of at most
     * {@link #CHUNK_BYTES}.
     */
    private void sendChunks() {
        while (link != null && link.ready() && !unsent.isEmpty()
                && (bytesInFlight < MAX_BYTES_IN_FLIGHT || bytesInFlight == 0)) {
            Held h = unsent.peek();
            long length = h.data.byteSize();
            long from = h.nextChunk;
            long n = Math.min(CHUNK_BYTES, length - from);
            boolean eager = length <= INLINE_MAX_BYTES;
            h.nextChunk = from + n;
            if (h.nextChunk >= length) {
                unsent.poll();
            }
            h.sending++;
            bytesInFlight += n;
            Link l = link;
            try {
                l.sendOffer(new BridgeMessage.Offer(h.sequence, h.wire, length, from), h.data.asSlice(from, n), eager,
                        status -> sent(h, n, status == UcpAbi.UCS_OK && !eager));
            } catch (UcxException e) {
                h.sending--;
                bytesInFlight -= n;
                // the link cannot carry it: ending it settles this tensor with the others offered
                l.end("sending offer " + h.sequence + " to " + address + " failed: " + e.getMessage());
                return;
            }
        }
    }

    /** One send of {@code h} ({@code n} bytes) is done with its bytes; {@code fetched}: the peer took them. */
    private void sent(Held h, long n, boolean fetched) {
        h.sending--;
        bytesInFlight -= n;
        if (fetched && link != null) {
            // a rendezvous completes when the peer has the bytes: it lives, though its heartbeats may wait behind ours
            link.heard();
        }
        if (h.settled && h.sending == 0) {
            release(h);
        }
        sendChunks();
    }

    /** {@code h} is delivered or its link lost: released now, or when UCX is done with its bytes. */
    private void settle(Held h) {
        h.settled = true;
        if (h.sending == 0) {
            release(h);
        }
    }

    private void release(Held h) {
        h.tensor.close();
        window.release();
    }

    private void checkDrained() {
        CompletableFuture<Void> d = drained;
        if (closing && d != null && waiting.isEmpty() && offered.isEmpty()) {
            d.complete(null);
        }
    }

    /**
     * Waits (at most {@code timeout}) until every tensor put is delivered or released, tells
     * the receiver the stream ended, and disconnects. Tensors still held after the timeout are
     * released (counted unconfirmed). Idempotent.
     */
    public void close(Duration timeout) {
        CompletableFuture<Void> d;
        synchronized (this) {
            if (drained != null) {
                return;
            }
            d = drained = new CompletableFuture<>();
        }
        loop.execute(() -> {
            closing = true;
            checkDrained();
        });
        try {
            d.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
        }
        CompletableFuture<Void> ended = new CompletableFuture<>();
        loop.execute(() -> {
            if (link != null && link.ready() && waiting.isEmpty() && offered.isEmpty()) {
                link.send(new BridgeMessage.End());
            }
            for (Held h : waiting) {
                release(h);
                unconfirmedCount.incrementAndGet();
            }
            waiting.clear();
            if (link != null) {
                Link l = link;
                // let the end message leave, then disconnect (lost() releases what is still offered)
                loop.after(50, () -> {
                    l.end("closed by this side");
                    ended.complete(null);
                });
            } else {
                ended.complete(null);
            }
        });
        try {
            ended.get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
        }
        loop.close();
    }

    /** {@link #close(Duration)} waiting at most 30 s for deliveries. */
    @Override
    public void close() {
        close(Duration.ofSeconds(30));
    }

    @Override
    public String toString() {
        return "RemoteQueue[" + address + "]";
    }
}
