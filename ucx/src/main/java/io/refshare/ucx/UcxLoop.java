package io.refshare.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
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
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The process's one UCP context and worker and the one thread that owns them: every UCX
 * call, callback and request of every bridge side in the process runs on this thread
 * ({@code UCS_THREAD_MODE_SINGLE}). Receivers and senders each hold a {@link LoopUser}; the
 * loop starts with the first and stops when the last closes. One worker, not one per side:
 * UCX 1.13 keeps one process-wide table of async event handlers keyed by file descriptor, and
 * with two workers a socket closed by one whose fd the other reuses trips its
 * {@code handler->async == async} assertion and aborts the process.
 *
 * <p>Other threads hand work over with {@link #execute}. Each turn of the loop progresses the
 * worker, runs handed-over work, polls outstanding requests and, every few milliseconds, the
 * users' timers. With nothing to do it spins a little (a message in flight is answered at
 * once), then sleeps on the worker's event fd; while a rendezvous is under way it sleeps at once.
 *
 * <p>Control messages arrive as active messages {@value #CONTROL_AM_ID} with the frame as
 * their data; each is copied out of UCX's buffer and given to the {@link Endpoint} registered
 * for the endpoint it came on (by its reply endpoint). A message with a header is a tensor's
 * bytes: the header is the frame (copied), the data UCX's, valid during the call only.
 * Messages on unknown endpoints are dropped.
 */
final class UcxLoop {
    static final int CONTROL_AM_ID = 0x5253;
    /**
     * Idle this long, the loop stops polling and sleeps on the worker's event fd (a CPU is
     * precious). Waking it costs tens of microseconds here, on both sides of a link: a stream of
     * messages a millisecond or so apart finds it still polling (1 KiB one-way p50 about 95
     * against 130 us with 500 us, the socket's about 50), while an idle link's heartbeat every
     * 150 ms costs it 2 ms of yielding polls.
     */
    private static final long SPIN_NANOS = 2_000_000L;
    private static final long TIMER_NANOS = 5_000_000L;
    /** How long stopping waits for requests still out before the worker is destroyed. */
    private static final long DRAIN_NANOS = 2_000_000_000L;
    private static final System.Logger LOG = System.getLogger(UcxLoop.class.getName());

    /** What the loop tells the owner of an endpoint (on the loop thread). */
    interface Endpoint {
        void onMessage(byte[] frame);

        /**
         * A message carrying bytes: {@code header} its frame, {@code data} the bytes themselves
         * ({@code rendezvous} false) or UCX's descriptor to {@linkplain LoopUser#receive receive}
         * them with; either is valid during this call only. A descriptor not received is dropped.
         */
        void onData(byte[] header, MemorySegment data, long length, boolean rendezvous);

        void onError(int status, String text);
    }

    private record Pending(MemorySegment request, IntConsumer done) {
    }

    /** An endpoint and the user that opened it (only that user may close it). */
    private record Registered(LoopUser user, Endpoint endpoint) {
    }

    // the process's loop and how many users hold it (guarded by UcxLoop.class)
    private static UcxLoop current;
    private static int userCount;

    final Ucp ucp;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    // loop thread only
    private final Map<Long, Registered> endpoints = new HashMap<>();
    private final List<Pending> requests = new ArrayList<>();
    private final List<LoopUser> users = new ArrayList<>();
    private final CompletableFuture<Void> started = new CompletableFuture<>();
    private final Arena stubs = Arena.ofShared();
    private final MemorySegment pollfd = stubs.allocate(8);
    private volatile boolean stopping;
    /** The loop is (about to be) asleep on the event fd: {@link #execute} must signal the worker. */
    private volatile boolean sleeping;
    /**
     * Rendezvous sends and receives under way (loop thread only). While there are any, a poll
     * that finds nothing sleeps on the event fd at once: the bytes come in large pieces, each
     * of which wakes the loop, and the 2 ms of yielding polls cost more than the transfer (at
     * 1 MiB the receiving loop spent about half its CPU in {@code sched_yield} and
     * {@code epoll_wait}, against a fifth in the socket copy).
     */
    private int bulk;

    void bulkStarted() {
        bulk++;
    }

    void bulkEnded() {
        bulk--;
    }

    private int eventFd = -1;
    private MemorySegment context = MemorySegment.NULL;
    private MemorySegment worker = MemorySegment.NULL;
    private MemorySegment errStub;

    private UcxLoop() {
        this.ucp = Ucp.system();
        this.thread = Thread.ofPlatform().name("refshare-ucx").daemon(true).unstarted(this::run);
    }

    /** The process's loop, started (context and worker created) if no user holds it; one more user. */
    static UcxLoop acquire() {
        synchronized (UcxLoop.class) {
            if (current == null) {
                current = start();
            }
            userCount++;
            return current;
        }
    }

    /**
     * One user fewer; the last stops the loop. Stopping holds the lock, so a user arriving
     * meanwhile waits and gets a fresh loop once this one's worker is gone (never two at once).
     */
    void release() {
        synchronized (UcxLoop.class) {
            if (--userCount > 0) {
                return;
            }
            current = null;
            stop();
        }
    }

    private static UcxLoop start() {
        UcxLoop loop = new UcxLoop();
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

    // ---- loop thread ----

    MemorySegment worker() {
        return worker;
    }

    MemorySegment errorHandler() {
        return errStub;
    }

    /** {@code user}'s timers run from now on, until {@link #removeUser}. */
    void addUser(LoopUser user) {
        users.add(user);
    }

    void removeUser(LoopUser user) {
        users.remove(user);
    }

    void register(MemorySegment ep, LoopUser user, Endpoint owner) {
        endpoints.put(ep.address(), new Registered(user, owner));
    }

    /** Forgets {@code ep} if {@code user} opened it: a stale handle of one user never touches another's endpoint. */
    boolean unregister(MemorySegment ep, LoopUser user) {
        Registered r = endpoints.get(ep.address());
        if (r == null || r.user() != user) {
            return false;
        }
        endpoints.remove(ep.address());
        return true;
    }

    boolean isOpen(MemorySegment ep, LoopUser user) {
        Registered r = endpoints.get(ep.address());
        return r != null && r.user() == user;
    }

    List<MemorySegment> endpointsOf(LoopUser user) {
        List<MemorySegment> own = new ArrayList<>();
        endpoints.forEach((address, r) -> {
            if (r.user() == user) {
                own.add(MemorySegment.ofAddress(address));
            }
        });
        return own;
    }

    /** Tracks a request: {@code done} gets its final status on the loop thread, then it is freed. NULL: done now. */
    void track(MemorySegment request, IntConsumer done) {
        if (request.equals(MemorySegment.NULL)) {
            done.accept(UcpAbi.UCS_OK);
        } else {
            requests.add(new Pending(request, done));
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
                runGuarded(task);
                work++;
            }
            work += pollRequests();
            long now = System.nanoTime();
            if (now - nextTimer >= 0) {
                nextTimer = now + TIMER_NANOS;
                for (int i = 0; i < users.size(); i++) {
                    LoopUser user = users.get(i);
                    runGuarded(() -> user.runTimers(now));
                }
            }
            if (work > 0) {
                idleSince = now;
            } else if (bulk > 0 || now - idleSince > SPIN_NANOS) {
                sleepUntilEvent(nextTimer - now);
            } else {
                Thread.yield(); // other threads (the consumer, the producer) may need this CPU more
            }
        }
        // stopping: the users closed their endpoints; finish what they handed over, then tear down
        long deadline = System.nanoTime() + DRAIN_NANOS;
        Runnable task;
        while ((task = tasks.poll()) != null) {
            runGuarded(task);
        }
        while (!requests.isEmpty() && System.nanoTime() - deadline < 0) {
            ucp.progress(worker);
            pollRequests();
        }
        destroy();
    }

    /** One user's failing task must not end the loop every other user of the process depends on. */
    private static void runGuarded(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "a task on the UCX loop failed", e);
        }
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
            runGuarded(() -> p.done.accept(status));
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
            Registered r = endpoints.get(p.get(ADDRESS, 8).address());
            if (r == null) {
                return (byte) UcpAbi.UCS_OK;
            }
            if (headerLength > 0) {
                // a tensor's bytes; a header longer than any frame is refused by the decoder all the same
                byte[] frame = header.reinterpret(Math.min(headerLength, ControlCodec.MAX_FRAME_BYTES + 1L))
                        .toArray(JAVA_BYTE);
                r.endpoint().onData(frame, data, length, rendezvous);
            } else if (!rendezvous) {
                // a control frame; of one longer than any valid frame a byte more is enough for the
                // decoder to refuse it (one sent by rendezvous is a descriptor, not bytes: dropped unread)
                r.endpoint().onMessage(data.reinterpret(Math.min(length, ControlCodec.MAX_FRAME_BYTES + 1L))
                        .toArray(JAVA_BYTE));
            }
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.WARNING, "control message handler failed", t);
        }
        return (byte) UcpAbi.UCS_OK;
    }

    @SuppressWarnings("unused")
    private void onEndpointError(MemorySegment arg, MemorySegment ep, byte status) {
        try {
            Registered r = endpoints.get(ep.address());
            if (r == null) {
                return; // closed by its owner already: closing it twice would free it twice
            }
            // UCX wants an endpoint that failed closed (forcibly) by its owner
            r.user().closeEndpoint(ep);
            r.endpoint().onError(status, ucp.statusText(status));
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.WARNING, "endpoint error handler failed", t);
        }
    }

    private MethodHandle bind(String name, MethodType type) {
        try {
            return MethodHandles.lookup().findVirtual(UcxLoop.class, name, type).bindTo(this);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }

    /**
     * Stops the loop (the last user closed): runs the tasks handed over before, waits (at most
     * 2 s) for outstanding requests, destroys the worker and context.
     */
    private void stop() {
        stopping = true;
        if (sleeping) {
            ucp.signal(worker);
        }
        boolean interrupted = false;
        while (thread.isAlive()) {
            try {
                thread.join(); // the stubs must outlive the thread's last upcall
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        stubs.close();
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
