package io.refshare.ucx;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The UCP calls the bridge uses, bound through FFM to {@code libucp.so.0} (no JNI; Debian's
 * {@code libucx0}): context, worker, listener and endpoints, memory registration with packed
 * remote keys, {@code ucp_get_nbx}, active messages, progress. Every status is checked; a
 * failure becomes a {@link UcxException} naming the call and UCX's own text for the status.
 *
 * <p><b>Versions.</b> The library must report version 1.13 or later ({@code ucp_get_version})
 * and is initialized with {@code ucp_init_version(1, 13, ...)}, the API whose struct layouts
 * {@link UcpAbi} describes (checked against the header by {@code UcpLayoutTest}); a library
 * without one of the entry points, or older, gives {@link UcxUnavailableException}.
 *
 * <p><b>Threads.</b> Workers are created {@code UCS_THREAD_MODE_SINGLE}: each worker, its
 * endpoints, requests and callbacks belong to the one thread that progresses it
 * ({@link UcxLoop}). This class holds only the bound entry points and is thread-safe.
 */
final class Ucp {
    static final String LIBRARY_ENV = "REFSHARE_LIBUCP";
    static final String DEFAULT_LIBRARY = "libucp.so.0";
    static final String UCS_LIBRARY = "libucs.so.0";

    private static final Linker LINKER = Linker.nativeLinker();
    /** {@code ucs_status_t} is a packed enum: one signed byte, in returns and arguments alike. */
    static final java.lang.foreign.ValueLayout.OfByte STATUS = java.lang.foreign.ValueLayout.JAVA_BYTE;

    /** {@code void (*)(ucp_conn_request_h, void *arg)}. */
    static final FunctionDescriptor CONN_HANDLER = FunctionDescriptor.ofVoid(ADDRESS, ADDRESS);
    /** {@code void (*)(void *arg, ucp_ep_h, ucs_status_t)}. */
    static final FunctionDescriptor ERR_HANDLER = FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, STATUS);
    /** {@code ucs_status_t (*)(void *arg, const void *header, size_t, void *data, size_t, const ucp_am_recv_param_t *)}. */
    static final FunctionDescriptor AM_RECV = FunctionDescriptor.of(STATUS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS,
            JAVA_LONG, ADDRESS);

    /** An upcall stub for {@code target}, alive as long as {@code arena}. */
    static MemorySegment upcallStub(MethodHandle target, FunctionDescriptor descriptor, Arena arena) {
        return LINKER.upcallStub(target, descriptor, arena);
    }

    final String library;
    final String version;
    private final MethodHandle statusString;
    private final MethodHandle configRead;
    private final MethodHandle configRelease;
    private final MethodHandle initVersion;
    final MethodHandle cleanup;
    private final MethodHandle workerCreate;
    final MethodHandle workerDestroy;
    final MethodHandle workerProgress;
    private final MethodHandle listenerCreate;
    final MethodHandle listenerDestroy;
    private final MethodHandle listenerReject;
    private final MethodHandle epCreate;
    private final MethodHandle epCloseNbx;
    private final MethodHandle requestCheckStatus;
    private final MethodHandle requestFree;
    private final MethodHandle setAmRecvHandler;
    private final MethodHandle amSendNbx;
    private final MethodHandle amRecvDataNbx;
    private final MethodHandle workerGetEfd;
    private final MethodHandle workerArm;
    private final MethodHandle workerSignal;
    private final MethodHandle poll;

    private Ucp(String library, SymbolLookup ucp, SymbolLookup ucs) {
        this.library = library;
        Binder b = new Binder(library, ucp);
        MethodHandle getVersion = b.bindVoid("ucp_get_version", ADDRESS, ADDRESS, ADDRESS);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT, 3);
            getVersion.invokeExact(v, v.asSlice(4), v.asSlice(8));
            int major = v.getAtIndex(JAVA_INT, 0), minor = v.getAtIndex(JAVA_INT, 1), release = v.getAtIndex(JAVA_INT, 2);
            version = major + "." + minor + "." + release;
            if (major < UcpAbi.API_MAJOR || (major == UcpAbi.API_MAJOR && minor < UcpAbi.API_MINOR)) {
                throw new UcxUnavailableException("UCX " + version + " (" + library + ") is older than the "
                        + UcpAbi.API_MAJOR + "." + UcpAbi.API_MINOR + " refshare's bridge needs");
            }
        } catch (UcxUnavailableException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxUnavailableException("ucp_get_version failed in " + library, t);
        }
        statusString = new Binder(UCS_LIBRARY, ucs).bind("ucs_status_string", ADDRESS, STATUS);
        configRead = b.bind("ucp_config_read", STATUS, ADDRESS, ADDRESS, ADDRESS);
        configRelease = b.bindVoid("ucp_config_release", ADDRESS);
        initVersion = b.bind("ucp_init_version", STATUS, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
        cleanup = b.bindVoid("ucp_cleanup", ADDRESS);
        workerCreate = b.bind("ucp_worker_create", STATUS, ADDRESS, ADDRESS, ADDRESS);
        workerDestroy = b.bindVoid("ucp_worker_destroy", ADDRESS);
        workerProgress = b.bind("ucp_worker_progress", JAVA_INT, ADDRESS);
        listenerCreate = b.bind("ucp_listener_create", STATUS, ADDRESS, ADDRESS, ADDRESS);
        listenerDestroy = b.bindVoid("ucp_listener_destroy", ADDRESS);
        listenerReject = b.bind("ucp_listener_reject", STATUS, ADDRESS, ADDRESS);
        epCreate = b.bind("ucp_ep_create", STATUS, ADDRESS, ADDRESS, ADDRESS);
        epCloseNbx = b.bind("ucp_ep_close_nbx", ADDRESS, ADDRESS, ADDRESS);
        requestCheckStatus = b.bind("ucp_request_check_status", STATUS, ADDRESS);
        requestFree = b.bindVoid("ucp_request_free", ADDRESS);
        setAmRecvHandler = b.bind("ucp_worker_set_am_recv_handler", STATUS, ADDRESS, ADDRESS);
        workerGetEfd = b.bind("ucp_worker_get_efd", STATUS, ADDRESS, ADDRESS);
        workerArm = b.bind("ucp_worker_arm", STATUS, ADDRESS);
        workerSignal = b.bind("ucp_worker_signal", STATUS, ADDRESS);
        poll = LINKER.downcallHandle(LINKER.defaultLookup().find("poll").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
        amSendNbx = b.bind("ucp_am_send_nbx", ADDRESS, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG,
                ADDRESS);
        amRecvDataNbx = b.bind("ucp_am_recv_data_nbx", ADDRESS, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS);
    }

    private record Binder(String library, SymbolLookup lib) {
        MethodHandle bind(String name, MemoryLayout result, MemoryLayout... args) {
            return LINKER.downcallHandle(find(name), FunctionDescriptor.of(result, args));
        }

        MethodHandle bindVoid(String name, MemoryLayout... args) {
            return LINKER.downcallHandle(find(name), FunctionDescriptor.ofVoid(args));
        }

        private MemorySegment find(String name) {
            Optional<MemorySegment> symbol = lib.find(name);
            if (symbol.isEmpty()) {
                throw new UcxUnavailableException(library + " has no entry point " + name
                        + ": UCX is too old (1.13 or later is needed) or this is not UCX");
            }
            return symbol.get();
        }
    }

    /**
     * UCP of this process, loaded on first use from {@value #LIBRARY_ENV} or
     * {@value #DEFAULT_LIBRARY}; a failure is remembered and thrown again on every call.
     *
     * @throws UcxUnavailableException when there is no usable UCX
     */
    static Ucp system() {
        Object loaded = SystemUcp.LOADED;
        if (loaded instanceof Ucp u) {
            return u;
        }
        UcxUnavailableException failure = (UcxUnavailableException) loaded;
        throw new UcxUnavailableException(failure.getMessage(), failure);
    }

    /** Whether UCX can be loaded here (for tests and the CLI's messages). */
    static boolean available() {
        return SystemUcp.LOADED instanceof Ucp;
    }

    private static final class SystemUcp {
        static final Object LOADED = loadOrFailure();

        private static Object loadOrFailure() {
            String env = System.getenv(LIBRARY_ENV);
            try {
                return load(env != null && !env.isBlank() ? env : DEFAULT_LIBRARY);
            } catch (UcxUnavailableException e) {
                return e;
            }
        }
    }

    /**
     * Environment UCX reads when it loads, set first. The JVM raises SIGSEGV on purpose
     * (safepoint polls, implicit null checks) and handles it; UCX's own error-signal handler
     * would take such a signal for a crash and end the process, so UCX installs none here
     * ({@code UCX_ERROR_SIGNALS} empty, always). A listener may take over the port of a bridge
     * that just died ({@code UCX_TCP_CM_REUSEADDR}, {@code UCX_RDMA_CM_REUSEADDR}), and TCP
     * segments are 64 KiB ({@code UCX_TCP_TX_SEG_SIZE}, {@code UCX_TCP_RX_SEG_SIZE}); these are
     * defaults only, a user's setting wins.
     */
    private static void prepareEnvironment() {
        try {
            MethodHandle setenv = LINKER.downcallHandle(LINKER.defaultLookup().find("setenv").orElseThrow(),
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
            try (Arena a = Arena.ofConfined()) {
                int rc = (int) setenv.invokeExact(a.allocateFrom("UCX_ERROR_SIGNALS"), a.allocateFrom(""), 1);
                rc |= (int) setenv.invokeExact(a.allocateFrom("UCX_TCP_CM_REUSEADDR"), a.allocateFrom("y"), 0);
                rc |= (int) setenv.invokeExact(a.allocateFrom("UCX_RDMA_CM_REUSEADDR"), a.allocateFrom("y"), 0);
                // TCP moves a remote read in segments of this size: UCX's 8 KiB default halves the
                // bridge's throughput for large tensors (measured: 16 MiB tensors 1.0 -> 2.3 GB/s)
                rc |= (int) setenv.invokeExact(a.allocateFrom("UCX_TCP_TX_SEG_SIZE"), a.allocateFrom("64K"), 0);
                rc |= (int) setenv.invokeExact(a.allocateFrom("UCX_TCP_RX_SEG_SIZE"), a.allocateFrom("64K"), 0);
                if (rc != 0) {
                    throw new UcxUnavailableException("setenv failed before loading UCX");
                }
            }
        } catch (UcxUnavailableException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxUnavailableException("cannot prepare the environment for UCX", t);
        }
    }

    static Ucp load(String library) {
        prepareEnvironment();
        SymbolLookup ucp;
        SymbolLookup ucs;
        try {
            ucp = SymbolLookup.libraryLookup(library, Arena.global());
            ucs = SymbolLookup.libraryLookup(UCS_LIBRARY, Arena.global());
        } catch (IllegalArgumentException e) {
            throw new UcxUnavailableException("no UCX: cannot load " + library + " (" + e.getMessage()
                    + "); install it (Debian: apt-get install libucx0) or point " + LIBRARY_ENV + " at libucp.so", e);
        }
        return new Ucp(library, ucp, ucs);
    }

    // ---- calls: each checks its status ----

    String statusText(int status) {
        try {
            MemorySegment s = (MemorySegment) statusString.invokeExact((byte) status);
            return s.reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "status " + status;
        }
    }

    void check(String call, int status) {
        if (status != UcpAbi.UCS_OK) {
            throw new UcxException(call + " failed: " + statusText(status) + " (" + status + ")");
        }
    }

    /** {@code ucp_config_read} + {@code ucp_init_version(1, 13)} + {@code ucp_config_release}. */
    MemorySegment init(long features) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment configP = a.allocate(ADDRESS);
            check("ucp_config_read", (byte) configRead.invokeExact(MemorySegment.NULL, MemorySegment.NULL, configP));
            MemorySegment config = configP.get(ADDRESS, 0);
            try {
                MemorySegment params = a.allocate(UcpAbi.PARAMS);
                params.set(JAVA_LONG, off(UcpAbi.PARAMS, "field_mask"), UcpAbi.PARAM_FIELD_FEATURES);
                params.set(JAVA_LONG, off(UcpAbi.PARAMS, "features"), features);
                MemorySegment contextP = a.allocate(ADDRESS);
                int status = (byte) initVersion.invokeExact(UcpAbi.API_MAJOR, UcpAbi.API_MINOR, params, config, contextP);
                if (status != UcpAbi.UCS_OK) {
                    throw new UcxUnavailableException("UCX " + version + " cannot start: ucp_init failed: "
                            + statusText(status));
                }
                return contextP.get(ADDRESS, 0);
            } finally {
                configRelease.invokeExact(config);
            }
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_init failed", t);
        }
    }

    MemorySegment workerCreate(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(UcpAbi.WORKER_PARAMS);
            params.set(JAVA_LONG, off(UcpAbi.WORKER_PARAMS, "field_mask"), UcpAbi.WORKER_PARAM_FIELD_THREAD_MODE);
            params.set(JAVA_INT, off(UcpAbi.WORKER_PARAMS, "thread_mode"), UcpAbi.THREAD_MODE_SINGLE);
            MemorySegment out = a.allocate(ADDRESS);
            check("ucp_worker_create", (byte) workerCreate.invokeExact(context, params, out));
            return out.get(ADDRESS, 0);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_worker_create failed", t);
        }
    }

    /** The worker's event file descriptor (the context has {@code UCP_FEATURE_WAKEUP}). */
    int eventFd(MemorySegment worker) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fd = a.allocate(JAVA_INT);
            check("ucp_worker_get_efd", (byte) workerGetEfd.invokeExact(worker, fd));
            return fd.get(JAVA_INT, 0);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_worker_get_efd failed", t);
        }
    }

    /** Arms the event fd; false when events are already pending (progress again instead of waiting). */
    boolean arm(MemorySegment worker) {
        try {
            int status = (byte) workerArm.invokeExact(worker);
            if (status == UcpAbi.UCS_ERR_BUSY) {
                return false;
            }
            check("ucp_worker_arm", status);
            return true;
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_worker_arm failed", t);
        }
    }

    /** Wakes a thread waiting on the worker's event fd (any thread may call it). */
    void signal(MemorySegment worker) {
        try {
            check("ucp_worker_signal", (byte) workerSignal.invokeExact(worker));
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_worker_signal failed", t);
        }
    }

    /** {@code poll(2)} for input on one fd, at most {@code millis}; {@code pollfd} is 8 bytes of scratch. */
    void awaitInput(MemorySegment pollfd, int fd, int millis) {
        pollfd.set(JAVA_INT, 0, fd);
        pollfd.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 4, (short) 1); // POLLIN
        pollfd.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 6, (short) 0);
        try {
            int rc = (int) poll.invokeExact(pollfd, 1L, millis);
            if (rc < 0) {
                // EINTR and the like: the loop just goes round again
                Thread.onSpinWait();
            }
        } catch (Throwable t) {
            throw new UcxException("poll failed", t);
        }
    }

    int progress(MemorySegment worker) {
        try {
            return (int) workerProgress.invokeExact(worker);
        } catch (Throwable t) {
            throw new UcxException("ucp_worker_progress failed", t);
        }
    }

    void setAmHandler(MemorySegment worker, int id, MemorySegment callback) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.AM_HANDLER_PARAM);
            p.set(JAVA_LONG, off(UcpAbi.AM_HANDLER_PARAM, "field_mask"), UcpAbi.AM_HANDLER_PARAM_FIELD_ID
                    | UcpAbi.AM_HANDLER_PARAM_FIELD_FLAGS | UcpAbi.AM_HANDLER_PARAM_FIELD_CB);
            p.set(JAVA_INT, off(UcpAbi.AM_HANDLER_PARAM, "id"), id);
            p.set(JAVA_INT, off(UcpAbi.AM_HANDLER_PARAM, "flags"), UcpAbi.AM_FLAG_WHOLE_MSG);
            p.set(ADDRESS, off(UcpAbi.AM_HANDLER_PARAM, "cb"), callback);
            check("ucp_worker_set_am_recv_handler", (byte) setAmRecvHandler.invokeExact(worker, p));
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_worker_set_am_recv_handler failed", t);
        }
    }

    /** Listens on {@code sockaddr} (a {@code sockaddr_in}); connection requests go to {@code connHandler}. */
    MemorySegment listen(MemorySegment worker, MemorySegment sockaddr, MemorySegment connHandler) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.LISTENER_PARAMS);
            p.set(JAVA_LONG, 0, UcpAbi.LISTENER_PARAM_FIELD_SOCK_ADDR | UcpAbi.LISTENER_PARAM_FIELD_CONN_HANDLER);
            long sa = off(UcpAbi.LISTENER_PARAMS, "sockaddr");
            p.set(ADDRESS, sa, sockaddr);
            p.set(JAVA_INT, sa + 8, (int) sockaddr.byteSize());
            p.set(ADDRESS, off(UcpAbi.LISTENER_PARAMS, "conn_handler"), connHandler);
            MemorySegment out = a.allocate(ADDRESS);
            check("ucp_listener_create", (byte) listenerCreate.invokeExact(worker, p, out));
            return out.get(ADDRESS, 0);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_listener_create failed", t);
        }
    }

    void reject(MemorySegment listener, MemorySegment connRequest) {
        try {
            check("ucp_listener_reject", (byte) listenerReject.invokeExact(listener, connRequest));
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_listener_reject failed", t);
        }
    }

    /**
     * An endpoint with peer error handling: to {@code sockaddr} as a client, or accepting
     * {@code connRequest} (exactly one of them is not NULL).
     */
    MemorySegment connect(MemorySegment worker, MemorySegment sockaddr, MemorySegment connRequest,
                          MemorySegment errHandler) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.EP_PARAMS);
            long mask = UcpAbi.EP_PARAM_FIELD_ERR_HANDLING_MODE | UcpAbi.EP_PARAM_FIELD_ERR_HANDLER;
            p.set(JAVA_INT, off(UcpAbi.EP_PARAMS, "err_mode"), UcpAbi.ERR_HANDLING_MODE_PEER);
            p.set(ADDRESS, off(UcpAbi.EP_PARAMS, "err_handler"), errHandler);
            if (connRequest.equals(MemorySegment.NULL)) {
                mask |= UcpAbi.EP_PARAM_FIELD_SOCK_ADDR | UcpAbi.EP_PARAM_FIELD_FLAGS;
                p.set(JAVA_INT, off(UcpAbi.EP_PARAMS, "flags"), UcpAbi.EP_PARAMS_FLAGS_CLIENT_SERVER);
                long sa = off(UcpAbi.EP_PARAMS, "sockaddr");
                p.set(ADDRESS, sa, sockaddr);
                p.set(JAVA_INT, sa + 8, (int) sockaddr.byteSize());
            } else {
                mask |= UcpAbi.EP_PARAM_FIELD_CONN_REQUEST;
                p.set(ADDRESS, off(UcpAbi.EP_PARAMS, "conn_request"), connRequest);
            }
            p.set(JAVA_LONG, 0, mask);
            MemorySegment out = a.allocate(ADDRESS);
            check("ucp_ep_create", (byte) epCreate.invokeExact(worker, p, out));
            return out.get(ADDRESS, 0);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_ep_create failed", t);
        }
    }

    /** Starts closing an endpoint (forcibly: the peer may be gone); the request to wait on, or NULL when done. */
    MemorySegment closeEndpoint(MemorySegment ep) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.REQUEST_PARAM);
            p.set(JAVA_INT, 0, UcpAbi.OP_ATTR_FIELD_FLAGS);
            p.set(JAVA_INT, 4, UcpAbi.EP_CLOSE_FLAG_FORCE);
            return request("ucp_ep_close_nbx", (MemorySegment) epCloseNbx.invokeExact(ep, p), true);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_ep_close_nbx failed", t);
        }
    }

    /** Sends {@code message} as the data of an active message {@code id}, marked so the peer can reply. */
    MemorySegment amSend(MemorySegment ep, int id, MemorySegment message) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.REQUEST_PARAM);
            p.set(JAVA_INT, 0, UcpAbi.OP_ATTR_FIELD_FLAGS);
            p.set(JAVA_INT, 4, UcpAbi.AM_SEND_FLAG_REPLY | UcpAbi.AM_SEND_FLAG_EAGER);
            return request("ucp_am_send_nbx", (MemorySegment) amSendNbx.invokeExact(ep, id, MemorySegment.NULL, 0L,
                    message, message.byteSize(), p), false);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_am_send_nbx failed", t);
        }
    }

    /**
     * Sends an active message {@code id} with {@code header} and {@code data}, marked so the
     * peer can reply: {@code eager} sends the bytes inside the message (UCX copies them, or
     * writes them from {@code data} at once), else by rendezvous (the peer fetches them from
     * {@code data} once it has a buffer: RDMA read where the transport has one, a zero-copy
     * write over TCP). Both buffers must stay valid until the request completes.
     */
    MemorySegment amSend(MemorySegment ep, int id, MemorySegment header, MemorySegment data, boolean eager) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.REQUEST_PARAM);
            p.set(JAVA_INT, 0, UcpAbi.OP_ATTR_FIELD_FLAGS);
            p.set(JAVA_INT, 4, UcpAbi.AM_SEND_FLAG_REPLY | (eager ? UcpAbi.AM_SEND_FLAG_EAGER
                    : UcpAbi.AM_SEND_FLAG_RNDV));
            return request("ucp_am_send_nbx", (MemorySegment) amSendNbx.invokeExact(ep, id, header,
                    header.byteSize(), data, data.byteSize(), p), false);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_am_send_nbx failed", t);
        }
    }

    /** Receives a rendezvous message's data (its descriptor from the callback) into {@code into}. */
    MemorySegment amReceive(MemorySegment worker, MemorySegment descriptor, MemorySegment into) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(UcpAbi.REQUEST_PARAM);
            return request("ucp_am_recv_data_nbx", (MemorySegment) amRecvDataNbx.invokeExact(worker, descriptor,
                    into, into.byteSize(), p), false);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new UcxException("ucp_am_recv_data_nbx failed", t);
        }
    }

    /** {@code UCS_INPROGRESS}, {@code UCS_OK} or an error status of a request. */
    int requestStatus(MemorySegment request) {
        try {
            return (byte) requestCheckStatus.invokeExact(request);
        } catch (Throwable t) {
            throw new UcxException("ucp_request_check_status failed", t);
        }
    }

    void requestFree(MemorySegment request) {
        try {
            requestFree.invokeExact(request);
        } catch (Throwable t) {
            throw new UcxException("ucp_request_free failed", t);
        }
    }

    /**
     * A {@code ucs_status_ptr_t}: NULL (done at once), an error status (pointer values
     * -1..-255, UCS_PTR_IS_ERR) thrown unless {@code errorsAreDone}, or a request.
     */
    private MemorySegment request(String call, MemorySegment statusPtr, boolean errorsAreDone) {
        long v = statusPtr.address();
        if (v == 0) {
            return MemorySegment.NULL;
        }
        if (Long.compareUnsigned(v, -256L) > 0) {
            if (errorsAreDone) {
                return MemorySegment.NULL;
            }
            throw new UcxException(call + " failed: " + statusText((int) v) + " (" + (int) v + ")");
        }
        return statusPtr;
    }

    static long off(java.lang.foreign.GroupLayout layout, String field) {
        return layout.byteOffset(MemoryLayout.PathElement.groupElement(field));
    }
}
