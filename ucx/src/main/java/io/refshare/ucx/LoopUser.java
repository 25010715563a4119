package io.refshare.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.IntConsumer;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * One bridge side's share of the process's {@link UcxLoop} (a receiver, a sender): its
 * endpoints, its listener, its timers and its requests. {@link #close()} ends what is its own
 * and waits for its requests, leaving other users' endpoints alone; the last user to close
 * stops the loop. {@link #execute} and {@link #close} may be called from any thread, every
 * other method on the loop thread only.
 */
final class LoopUser implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(LoopUser.class.getName());
    /** How long {@link #close()} waits for this user's requests still with UCX. */
    private static final long CLOSE_WAIT_MILLIS = 2_000;

    private record Delayed(long dueNanos, Runnable task) {
    }

    final Ucp ucp;
    private final UcxLoop loop;
    private final String name;
    /** The listener's upcall stub and the socket addresses given to UCX live as long as this user. */
    private final Arena arena = Arena.ofShared();
    private final AtomicBoolean closing = new AtomicBoolean();
    // loop thread only
    private final List<Runnable> timers = new ArrayList<>();
    private final List<Delayed> delayed = new ArrayList<>();
    private MemorySegment listener = MemorySegment.NULL;
    private int requests;
    private boolean closed;
    /** Completed once this user is closed and none of its requests is left. */
    private CompletableFuture<Void> drained;

    private LoopUser(UcxLoop loop, String name) {
        this.loop = loop;
        this.ucp = loop.ucp;
        this.name = name;
    }

    /**
     * A new user of the process's loop (started if none runs).
     *
     * @throws UcxUnavailableException when UCX cannot be loaded
     */
    static LoopUser open(String name) {
        UcxLoop loop = UcxLoop.acquire();
        LoopUser user = new LoopUser(loop, name);
        loop.execute(() -> loop.addUser(user));
        return user;
    }

    /** Runs {@code task} on the loop thread soon (any thread). */
    void execute(Runnable task) {
        loop.execute(task);
    }

    // ---- loop thread ----

    /** Runs {@code task} every few milliseconds until this user closes. */
    void every(Runnable task) {
        timers.add(task);
    }

    /** Runs {@code task} once after {@code millis}, unless this user closes first. */
    void after(long millis, Runnable task) {
        delayed.add(new Delayed(System.nanoTime() + millis * 1_000_000L, task));
    }

    /** Called by the loop every few milliseconds. */
    void runTimers(long now) {
        for (int i = 0; i < timers.size(); i++) {
            timers.get(i).run();
        }
        for (int i = 0; i < delayed.size(); i++) {
            if (now - delayed.get(i).dueNanos() >= 0) {
                delayed.remove(i--).task().run();
            }
        }
    }

    /** Listens on {@code address}; each connection request goes to {@code onRequest}. One listener a user. */
    void listen(InetSocketAddress address, Consumer<MemorySegment> onRequest) {
        requireOpen();
        if (!listener.equals(MemorySegment.NULL)) {
            throw new IllegalStateException(name + " listens already");
        }
        MethodHandle handler = MethodHandles.insertArguments(CONNECTION_REQUEST, 0, onRequest);
        listener = ucp.listen(loop.worker(), sockaddr(address), Ucp.upcallStub(handler, Ucp.CONN_HANDLER, arena));
    }

    /** Turns a connection request away. */
    void reject(MemorySegment connRequest) {
        ucp.reject(listener, connRequest);
    }

    /** A client endpoint to {@code address}, or the server end of {@code connRequest}. */
    MemorySegment connect(InetSocketAddress address, MemorySegment connRequest, UcxLoop.Endpoint owner) {
        requireOpen();
        MemorySegment sa = address == null ? MemorySegment.NULL : sockaddr(address);
        MemorySegment ep = ucp.connect(loop.worker(), sa, connRequest, loop.errorHandler());
        loop.register(ep, this, owner);
        return ep;
    }

    /** Sends a control frame; {@code done} gets the status (a failure also shows as the endpoint's error). */
    void send(MemorySegment ep, byte[] frame, IntConsumer done) {
        requireEndpoint(ep);
        sendHolding(frame, buf -> ucp.amSend(ep, UcxLoop.CONTROL_AM_ID, buf), done);
    }

    /**
     * Sends {@code data} with {@code header} (a frame) as one active message, inside it when
     * {@code eager}, else by rendezvous; {@code data} must stay valid until {@code done} gets
     * the status.
     */
    void sendData(MemorySegment ep, byte[] header, MemorySegment data, boolean eager, IntConsumer done) {
        requireEndpoint(ep);
        if (eager) {
            sendHolding(header, h -> ucp.amSend(ep, UcxLoop.CONTROL_AM_ID, h, data, true), done);
            return;
        }
        loop.bulkStarted();
        try {
            sendHolding(header, h -> ucp.amSend(ep, UcxLoop.CONTROL_AM_ID, h, data, false), status -> {
                loop.bulkEnded();
                done.accept(status);
            });
        } catch (RuntimeException e) {
            loop.bulkEnded();
            throw e;
        }
    }

    /** Starts a send of {@code bytes} copied to native memory, which lives until UCX is done with them. */
    private void sendHolding(byte[] bytes, Function<MemorySegment, MemorySegment> start, IntConsumer done) {
        Arena a = Arena.ofConfined();
        MemorySegment request;
        try {
            request = start.apply(a.allocateFrom(JAVA_BYTE, bytes));
        } catch (RuntimeException e) {
            a.close();
            throw e;
        }
        track(request, status -> {
            a.close();
            done.accept(status);
        });
    }

    /** Receives the bytes of a rendezvous message (its descriptor from {@link UcxLoop.Endpoint#onData}) into {@code into}. */
    void receive(MemorySegment descriptor, MemorySegment into, IntConsumer done) {
        MemorySegment request = ucp.amReceive(loop.worker(), descriptor, into);
        loop.bulkStarted();
        track(request, status -> {
            loop.bulkEnded();
            done.accept(status);
        });
    }

    /** Forgets and force-closes an endpoint of this user; nothing more is reported for it. */
    void closeEndpoint(MemorySegment ep) {
        if (loop.unregister(ep, this)) {
            track(ucp.closeEndpoint(ep), status -> { });
        }
    }

    private void track(MemorySegment request, IntConsumer done) {
        requests++;
        loop.track(request, status -> {
            requests--;
            try {
                done.accept(status);
            } finally {
                if (drained != null && requests == 0) {
                    drained.complete(null);
                }
            }
        });
    }

    private void requireOpen() {
        if (closed) {
            throw new UcxException(name + " is closed");
        }
    }

    /** A handle this user closed (or never had) must not reach UCX: its memory may be another endpoint's now. */
    private void requireEndpoint(MemorySegment ep) {
        if (!loop.isOpen(ep, this)) {
            throw new UcxException(name + ": endpoint closed");
        }
    }

    /** A {@code sockaddr_in} for an IPv4 address (UCX's TCP and RDMA-CM connection managers take one). */
    private MemorySegment sockaddr(InetSocketAddress address) {
        if (!(address.getAddress() instanceof Inet4Address v4)) {
            throw new IllegalArgumentException("the bridge takes an IPv4 address, not " + address);
        }
        MemorySegment sa = arena.allocate(UcpAbi.SOCKADDR_IN);
        sa.set(JAVA_SHORT, 0, UcpAbi.AF_INET);
        sa.set(JAVA_SHORT, 2, Short.reverseBytes((short) address.getPort()));
        byte[] ip = v4.getAddress();
        sa.set(JAVA_INT, 4, (ip[0] & 0xFF) | (ip[1] & 0xFF) << 8 | (ip[2] & 0xFF) << 16 | (ip[3] & 0xFF) << 24);
        return sa;
    }

    private static final MethodHandle CONNECTION_REQUEST;

    static {
        try {
            CONNECTION_REQUEST = MethodHandles.lookup().findStatic(LoopUser.class, "onConnectionRequest",
                    MethodType.methodType(void.class, Consumer.class, MemorySegment.class, MemorySegment.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Upcall (loop thread, inside progress): it must never throw. */
    private static void onConnectionRequest(Consumer<MemorySegment> handler, MemorySegment request, MemorySegment arg) {
        try {
            handler.accept(request);
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.WARNING, "connection handler failed", t);
        }
    }

    /**
     * Stops this user's timers, destroys its listener, force-closes the endpoints it still has
     * and waits (at most 2 s) for its requests; then the loop has one user fewer. Owners end
     * their links first (so that their peers are told); what is left is closed here. Call from
     * any thread but the loop's. Idempotent.
     */
    @Override
    public void close() {
        if (loop.inLoop()) {
            throw new IllegalStateException(name + ": a loop user cannot close on the loop thread (it waits for it)");
        }
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        CompletableFuture<Void> tidied = new CompletableFuture<>();
        CompletableFuture<Void> done = new CompletableFuture<>();
        loop.execute(() -> {
            closed = true;
            loop.removeUser(this);
            timers.clear();
            delayed.clear();
            if (!listener.equals(MemorySegment.NULL)) {
                try {
                    ucp.listenerDestroy.invokeExact(listener);
                } catch (Throwable t) {
                    LOG.log(System.Logger.Level.WARNING, name + ": ucp_listener_destroy failed", t);
                }
                listener = MemorySegment.NULL;
            }
            for (MemorySegment ep : loop.endpointsOf(this)) {
                closeEndpoint(ep);
            }
            drained = done;
            if (requests == 0) {
                done.complete(null);
            }
            tidied.complete(null);
        });
        boolean interrupted = false;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_WAIT_MILLIS);
        while (true) {
            try {
                // the listener's stub may be freed only once the listener is gone
                tidied.get();
                done.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            } catch (java.util.concurrent.TimeoutException e) {
                LOG.log(System.Logger.Level.WARNING, "{0}: requests still with UCX after {1} ms", name,
                        CLOSE_WAIT_MILLIS);
                break;
            } catch (java.util.concurrent.ExecutionException e) {
                throw new AssertionError(e);
            }
        }
        arena.close();
        loop.release();
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "LoopUser[" + name + "]";
    }
}
