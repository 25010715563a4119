package io.refshare.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.IntConsumer;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * One UCP context and worker and the one thread that owns them: every UCX call, callback
 * and request of a bridge side runs on this thread ({@code UCS_THREAD_MODE_SINGLE}). Other
 * threads hand it work with {@link #execute}. Each turn of the loop progresses the worker,
 * runs handed-over work, polls outstanding requests and, every few milliseconds, the
 * {@linkplain #every timers}. With nothing to do it spins a little (a message in flight is
 * answered at once), then parks in short steps.
 *
 * <p>Control messages arrive as active messages {@value #CONTROL_AM_ID} with the frame as
 * their data; each is copied out of UCX's buffer and given to the {@link Endpoint} registered
 * for the endpoint it came on (by its reply endpoint). A message with a header is a tensor's
 * bytes: the header is the frame (copied), the data UCX's, valid during the call only.
 * Messages on unknown endpoints are dropped.
 */
final class UcxLoop implements AutoCloseable {
    static final int CONTROL_AM_ID = 0x5253;
    /** Idle this long, the loop stops polling and sleeps on the worker's event fd (a CPU is precious). */
    private static final long SPIN_NANOS = 500_000L;
    private static final long TIMER_NANOS = 5_000_000L;

    /** What the loop tells the owner of an endpoint (on the loop thread). */
    interface Endpoint {
        void onMessage(byte[] frame);

        /**
         * A message carrying bytes: {@code header} its frame, {@code data} the bytes themselves
         * ({@code rendezvous} false) or UCX's descriptor to {@link #receive} them with; either
         * is valid during this call only. A descriptor not received is dropped.
         */
        void onData(byte[] header, MemorySegment data, long length, boolean rendezvous);

        void onError(int status, String text);
    }

    private record Pending(MemorySegment request, IntConsumer done) {
    }

    final Ucp ucp;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final Map<Long, Endpoint> endpoints = new HashMap<>();
    private final List<Pending> requests = new ArrayList<>();
    private final List<Runnable> timers = new ArrayList<>();
    private record Delayed(long dueNanos, Runnable task) {
    }
    private final List<Delayed> delayed = new ArrayList<>();
    private final CompletableFuture<Void> started = new CompletableFuture<>();
    private final Arena stubs = Arena.ofShared();
    private volatile boolean stopping;
    /** The loop is (about to be) asleep on the event fd: {@link #execute} must signal the worker. */
    private volatile boolean sleeping;
    private int eventFd = -1;
    private MemorySegment context = MemorySegment.NULL;
    private MemorySegment worker = MemorySegment.NULL;
    private MemorySegment errStub;
    private java.util.function.Consumer<MemorySegment> connectionRequests;

    private UcxLoop(String name) {
        this.ucp = Ucp.system();
        this.thread = Thread.ofPlatform().name(name).daemon(true).unstarted(this::run);
    }

    /** Starts the loop thread, which creates the context (active messages) and worker. */
    static UcxLoop start(String name) {
        UcxLoop loop = new UcxLoop(name);
        loop.thread.start();
        try {
            loop.started.join();
        } catch (java.util.concurrent.CompletionException e) {
            loop.stubs.close();
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw e;
        }
        return loop;
    }

    boolean inLoop() {
        return Thread.currentThread() == thread;
    }

    /** Runs {@code task} on the loop thread soon. */
    void execute(Runnable task) {
        tasks.add(task);
        if (sleeping && !stopping && !inLoop()) {
            ucp.signal(worker);
        }
    }

    /** Runs {@code task} on the loop thread every few milliseconds (register on the loop thread). */
    void every(Runnable task) {
        timers.add(task);
    }

    /** Runs {@code task} once on the loop thread after {@code millis} (call on the loop thread). */
    void after(long millis, Runnable task) {
        delayed.add(new Delayed(System.nanoTime() + millis * 1_000_000L, task));
    }

    MemorySegment context() {
        return context;
    }

    /** Tracks a request: {@code done} gets its final status on the loop thread, then it is freed. NULL: done now. */
    void track(MemorySegment request, IntConsumer done) {
        if (request.equals(MemorySegment.NULL)) {
            done.accept(UcpAbi.UCS_OK);
        } else {
            requests.add(new Pending(request, done));
        }
    }

    /** Listens on {@code address}; each connection request goes to {@code onRequest} (on the loop thread). */
    MemorySegment listen(InetSocketAddress address, java.util.function.Consumer<MemorySegment> onRequest) {
        connectionRequests = onRequest;
        MethodHandle h = bind("onConnectionRequest", MethodType.methodType(void.class, MemorySegment.class,
                MemorySegment.class));
        MemorySegment stub = Ucp.upcallStub(h, Ucp.CONN_HANDLER, stubs);
        return ucp.listen(worker, sockaddr(address), stub);
    }

    /** A client endpoint to {@code address}, or the server end of {@code connRequest}. */
    MemorySegment connect(InetSocketAddress address, MemorySegment connRequest, Endpoint owner) {
        MemorySegment sa = address == null ? MemorySegment.NULL : sockaddr(address);
        MemorySegment ep = ucp.connect(worker, sa, connRequest, errStub);
        endpoints.put(ep.address(), owner);
        return ep;
    }

    /** Sends a control frame; {@code done} gets the status (a failure also shows as the endpoint's error). */
    void send(MemorySegment ep, byte[] frame, IntConsumer done) {
        Arena a = Arena.ofConfined();
        MemorySegment buf = a.allocateFrom(JAVA_BYTE, frame);
        MemorySegment request;
        try {
            request = ucp.amSend(ep, CONTROL_AM_ID, buf);
        } catch (RuntimeException e) {
            a.close();
            throw e;
        }
        // the buffer must live until UCX is done with it
        track(request, status -> {
            a.close();
            done.accept(status);
        });
    }

    /**
     * Sends {@code data} with {@code header} (a frame) as one active message, inside it when
     * {@code eager}, else by rendezvous; {@code data} must stay valid until {@code done} gets
     * the status.
     */
    void sendData(MemorySegment ep, byte[] header, MemorySegment data, boolean eager, IntConsumer done) {
        Arena a = Arena.ofConfined();
        MemorySegment h = a.allocateFrom(JAVA_BYTE, header);
        MemorySegment request;
        try {
            request = ucp.amSend(ep, CONTROL_AM_ID, h, data, eager);
        } catch (RuntimeException e) {
            a.close();
            throw e;
        }
        track(request, status -> {
            a.close();
            done.accept(status);
        });
    }

    /** Receives the bytes of a rendezvous message (its descriptor from {@link Endpoint#onData}) into {@code into}. */
    void receive(MemorySegment descriptor, MemorySegment into, IntConsumer done) {
        track(ucp.amReceive(worker, descriptor, into), done);
    }

    /** Forgets and force-closes an endpoint; nothing more is reported for it. */
    void closeEndpoint(MemorySegment ep) {
        if (endpoints.remove(ep.address()) != null) {
            track(ucp.closeEndpoint(ep), status -> { });
        }
    }

    private void run() {
        try {
            context = ucp.init(UcpAbi.FEATURE_AM | UcpAbi.FEATURE_WAKEUP);
            worker = ucp.workerCreate(context);
            eventFd = ucp.eventFd(worker);
            MemorySegment amStub = Ucp.upcallStub(bind("onActiveMessage", MethodType.methodType(byte.class,
                    MemorySegment.class, MemorySegment.class, long.class, MemorySegment.class, long.class,
                    MemorySegment.class)), Ucp.AM_RECV, stubs);
            ucp.setAmHandler(worker, CONTROL_AM_ID, amStub);
            errStub = Ucp.upcallStub(bind("onEndpointError", MethodType.methodType(void.class, MemorySegment.class,
                    MemorySegment.class, byte.class)), Ucp.ERR_HANDLER, stubs);
        } catch (RuntimeException | Error e) {
            destroy();
            started.completeExceptionally(e);
            return;
        }
        started.complete(null);
        long idleSince = System.nanoTime();
        long nextTimer = idleSince;
        while (!stopping) {
            int work = ucp.progress(worker);
            Runnable task;
            while ((task = tasks.poll()) != null) {
                task.run();
                work++;
            }
            work += pollRequests();
            long now = System.nanoTime();
            if (now - nextTimer >= 0) {
                nextTimer = now + TIMER_NANOS;
                for (int i = 0; i < timers.size(); i++) {
                    timers.get(i).run();
                }
                for (int i = 0; i < delayed.size(); i++) {
                    if (now - delayed.get(i).dueNanos() >= 0) {
                        delayed.remove(i--).task().run();
                    }
                }
            }
            if (work > 0) {
                idleSince = now;
            } else if (now - idleSince > SPIN_NANOS) {
                sleepUntilEvent(nextTimer - now);
            } else {
                Thread.yield(); // other threads (the consumer, the producer) may need this CPU more
            }
        }
        // closing: finish what the owners started (endpoint closes), then tear down
        long deadline = System.nanoTime() + 2_000_000_000L;
        Runnable task;
        while ((task = tasks.poll()) != null) {
            task.run();
        }
        while (!requests.isEmpty() && System.nanoTime() - deadline < 0) {
            ucp.progress(worker);
            pollRequests();
        }
        destroy();
    }

    /**
     * Sleeps on the worker's event fd until UCX has something, another thread hands work over
     * (it signals the worker), or the next timer is due. Arming first is what makes this safe:
     * an event that came in before makes the arm fail and the loop progress again instead.
     */
    private void sleepUntilEvent(long nanosToTimer) {
        sleeping = true;
        try {
            if (!tasks.isEmpty() || stopping || !ucp.arm(worker)) {
                return;
            }
            if (!tasks.isEmpty() || stopping) {
                return;
            }
            int millis = (int) Math.max(1, Math.min(TIMER_NANOS, nanosToTimer) / 1_000_000L);
            ucp.awaitInput(pollfd, eventFd, millis);
        } finally {
            sleeping = false;
        }
    }

    private final MemorySegment pollfd = Arena.global().allocate(8);

    /** Frees the requests that ended, then tells their owners (who may start new requests meanwhile). */
    private int pollRequests() {
        List<Pending> ended = null;
        for (Iterator<Pending> it = requests.iterator(); it.hasNext(); ) {
            Pending p = it.next();
            if (ucp.requestStatus(p.request) != UcpAbi.UCS_INPROGRESS) {
                it.remove();
                if (ended == null) {
                    ended = new ArrayList<>();
                }
                ended.add(p);
            }
        }
        if (ended == null) {
            return 0;
        }
        for (Pending p : ended) {
            int status = ucp.requestStatus(p.request);
            ucp.requestFree(p.request);
            p.done.accept(status);
        }
        return ended.size();
    }

    private void destroy() {
        try {
            if (!worker.equals(MemorySegment.NULL)) {
                ucp.workerDestroy.invokeExact(worker);
            }
            if (!context.equals(MemorySegment.NULL)) {
                ucp.cleanup.invokeExact(context);
            }
        } catch (Throwable t) {
            throw new UcxException("tearing down UCX failed", t);
        }
    }

    // ---- upcalls (on the loop thread, inside ucp_worker_progress); they must never throw ----

    @SuppressWarnings("unused")
    private byte onActiveMessage(MemorySegment arg, MemorySegment header, long headerLength, MemorySegment data,
                                long length, MemorySegment param) {
        try {
            MemorySegment p = param.reinterpret(UcpAbi.AM_RECV_PARAM.byteSize());
            long attr = p.get(JAVA_LONG, 0);
            boolean rendezvous = (attr & UcpAbi.AM_RECV_ATTR_FLAG_RNDV) != 0;
            if ((attr & UcpAbi.AM_RECV_ATTR_FIELD_REPLY_EP) == 0) {
                return (byte) UcpAbi.UCS_OK; // no peer to answer: dropped unread (UCS_OK lets UCX release it)
            }
            Endpoint owner = endpoints.get(p.get(ADDRESS, 8).address());
            if (owner == null) {
                return (byte) UcpAbi.UCS_OK;
            }
            if (headerLength > 0) {
                // a tensor's bytes; a header longer than any frame is refused by the decoder all the same
                byte[] frame = header.reinterpret(Math.min(headerLength, ControlCodec.MAX_FRAME_BYTES + 1L))
                        .toArray(JAVA_BYTE);
                owner.onData(frame, data, length, rendezvous);
            } else if (!rendezvous) {
                // a control frame; of one longer than any valid frame a byte more is enough for the
                // decoder to refuse it (one sent by rendezvous is a descriptor, not bytes: dropped unread)
                owner.onMessage(data.reinterpret(Math.min(length, ControlCodec.MAX_FRAME_BYTES + 1L))
                        .toArray(JAVA_BYTE));
            }
        } catch (Throwable t) {
            System.getLogger(UcxLoop.class.getName()).log(System.Logger.Level.WARNING,
                    "control message handler failed", t);
        }
        return (byte) UcpAbi.UCS_OK;
    }

    @SuppressWarnings("unused")
    private void onEndpointError(MemorySegment arg, MemorySegment ep, byte status) {
        try {
            Endpoint owner = endpoints.remove(ep.address());
            if (owner == null) {
                return; // closed by its owner already: closing it twice would free it twice
            }
            // UCX wants an endpoint that failed closed (forcibly) by its owner
            track(ucp.closeEndpoint(ep), s -> { });
            owner.onError(status, ucp.statusText(status));
        } catch (Throwable t) {
            System.getLogger(UcxLoop.class.getName()).log(System.Logger.Level.WARNING, "endpoint error handler failed", t);
        }
    }

    @SuppressWarnings("unused")
    private void onConnectionRequest(MemorySegment request, MemorySegment arg) {
        try {
            connectionRequests.accept(request);
        } catch (Throwable t) {
            System.getLogger(UcxLoop.class.getName()).log(System.Logger.Level.WARNING, "connection handler failed", t);
        }
    }

    private MethodHandle bind(String name, MethodType type) {
        try {
            return MethodHandles.lookup().findVirtual(UcxLoop.class, name, type).bindTo(this);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }

    /** A {@code sockaddr_in} for an IPv4 address (UCX's TCP and RDMA-CM connection managers take one). */
    private MemorySegment sockaddr(InetSocketAddress address) {
        if (!(address.getAddress() instanceof Inet4Address v4)) {
            throw new IllegalArgumentException("the bridge takes an IPv4 address, not " + address);
        }
        MemorySegment sa = stubs.allocate(UcpAbi.SOCKADDR_IN);
        sa.set(JAVA_SHORT, 0, UcpAbi.AF_INET);
        sa.set(JAVA_SHORT, 2, Short.reverseBytes((short) address.getPort()));
        byte[] ip = v4.getAddress();
        sa.set(JAVA_INT, 4, (ip[0] & 0xFF) | (ip[1] & 0xFF) << 8 | (ip[2] & 0xFF) << 16 | (ip[3] & 0xFF) << 24);
        return sa;
    }

    /**
     * Stops the loop: runs the tasks handed over before, waits (at most 2 s) for outstanding
     * requests, destroys the worker and context. Callers close their endpoints first.
     */
    @Override
    public void close() {
        if (stopping) {
            return;
        }
        stopping = true;
        if (sleeping) {
            ucp.signal(worker);
        }
        if (!inLoop()) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            stubs.close();
        }
    }
}
