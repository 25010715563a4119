package io.refshare.ucx;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The parts of UCP's ABI (API 1.13, {@code <ucp/api/ucp.h>}, x86-64/aarch64 LP64) the bindings
 * use: the parameter structs as FFM layouts, and the enum values. Only the fields refshare
 * sets are named; the rest is padding of the exact size. {@code UcpLayoutTest} compiles a C
 * program against the installed header and compares every offset, size and constant here
 * with the compiler's, so a header that moved a field fails the build instead of corrupting
 * memory at run time.
 */
final class UcpAbi {
    private UcpAbi() {
    }

    static final int API_MAJOR = 1;
    static final int API_MINOR = 13;

    static final int UCS_OK = 0;
    static final int UCS_INPROGRESS = 1;
    static final int UCS_ERR_NO_ELEM = -12;
    static final int UCS_ERR_BUSY = -15;
    static final int UCS_ERR_REJECTED = -23;
    static final int UCS_ERR_CONNECTION_RESET = -25;

    static final long PARAM_FIELD_FEATURES = 1;
    static final long FEATURE_AM = 64;
    static final long FEATURE_WAKEUP = 16;
    static final long WORKER_PARAM_FIELD_THREAD_MODE = 1;
    static final int THREAD_MODE_SINGLE = 0;
    static final long LISTENER_PARAM_FIELD_SOCK_ADDR = 1;
    static final long LISTENER_PARAM_FIELD_CONN_HANDLER = 4;
    static final long EP_PARAM_FIELD_ERR_HANDLING_MODE = 2;
    static final long EP_PARAM_FIELD_ERR_HANDLER = 4;
    static final long EP_PARAM_FIELD_SOCK_ADDR = 16;
    static final long EP_PARAM_FIELD_FLAGS = 32;
    static final long EP_PARAM_FIELD_CONN_REQUEST = 64;
    static final int EP_PARAMS_FLAGS_CLIENT_SERVER = 1;
    static final int ERR_HANDLING_MODE_PEER = 1;
    static final int EP_CLOSE_FLAG_FORCE = 1;
    static final int OP_ATTR_FIELD_FLAGS = 16;
    static final long AM_HANDLER_PARAM_FIELD_ID = 1;
    static final long AM_HANDLER_PARAM_FIELD_FLAGS = 2;
    static final long AM_HANDLER_PARAM_FIELD_CB = 4;
    static final long AM_HANDLER_PARAM_FIELD_ARG = 8;
    static final int AM_FLAG_WHOLE_MSG = 1;
    static final int AM_SEND_FLAG_REPLY = 1;
    static final int AM_SEND_FLAG_EAGER = 2;
    static final int AM_SEND_FLAG_RNDV = 4;
    static final long AM_RECV_ATTR_FIELD_REPLY_EP = 1;
    static final long AM_RECV_ATTR_FLAG_DATA = 65536;
    static final long AM_RECV_ATTR_FLAG_RNDV = 131072;
    static final short AF_INET = 2;

    private static MemoryLayout pad(long bytes) {
        return MemoryLayout.paddingLayout(bytes);
    }

    /** {@code ucp_params_t}: field_mask, features, then fields refshare leaves unset. */
    static final StructLayout PARAMS = MemoryLayout.structLayout(
            JAVA_LONG.withName("field_mask"), JAVA_LONG.withName("features"), pad(64)).withName("ucp_params_t");

    static final StructLayout WORKER_PARAMS = MemoryLayout.structLayout(
            JAVA_LONG.withName("field_mask"), JAVA_INT.withName("thread_mode"), pad(188)).withName("ucp_worker_params_t");

    /** {@code ucs_sock_addr_t}: a pointer to a {@code struct sockaddr} and its length. */
    static final StructLayout SOCK_ADDR = MemoryLayout.structLayout(
            ADDRESS.withName("addr"), JAVA_INT.withName("addrlen"), pad(4)).withName("ucs_sock_addr_t");

    /** A callback and its argument: {@code ucp_listener_conn_handler_t}, {@code ucp_err_handler_t}. */
    static final StructLayout HANDLER = MemoryLayout.structLayout(
            ADDRESS.withName("cb"), ADDRESS.withName("arg")).withName("handler");

    static final StructLayout LISTENER_PARAMS = MemoryLayout.structLayout(
            JAVA_LONG.withName("field_mask"), SOCK_ADDR.withName("sockaddr"),
            HANDLER.withName("accept_handler"), HANDLER.withName("conn_handler")).withName("ucp_listener_params_t");

    static final StructLayout EP_PARAMS = MemoryLayout.structLayout(
            JAVA_LONG.withName("field_mask"), ADDRESS.withName("address"), JAVA_INT.withName("err_mode"), pad(4),
            HANDLER.withName("err_handler"), ADDRESS.withName("user_data"), JAVA_INT.withName("flags"), pad(4),
            SOCK_ADDR.withName("sockaddr"), ADDRESS.withName("conn_request"), pad(24)).withName("ucp_ep_params_t");

    static final StructLayout REQUEST_PARAM = MemoryLayout.structLayout(
            JAVA_INT.withName("op_attr_mask"), JAVA_INT.withName("flags"), ADDRESS.withName("request"),
            ADDRESS.withName("cb"), JAVA_LONG.withName("datatype"), ADDRESS.withName("user_data"), pad(8),
            JAVA_INT.withName("memory_type"), pad(12), ADDRESS.withName("memh")).withName("ucp_request_param_t");

    static final StructLayout AM_HANDLER_PARAM = MemoryLayout.structLayout(
            JAVA_LONG.withName("field_mask"), JAVA_INT.withName("id"), JAVA_INT.withName("flags"),
            ADDRESS.withName("cb"), ADDRESS.withName("arg")).withName("ucp_am_handler_param_t");

    static final StructLayout AM_RECV_PARAM = MemoryLayout.structLayout(
            JAVA_LONG.withName("recv_attr"), ADDRESS.withName("reply_ep")).withName("ucp_am_recv_param_t");

    /** {@code struct sockaddr_in}: family, port (network order), IPv4 address (network order), zero. */
    static final StructLayout SOCKADDR_IN = MemoryLayout.structLayout(
            java.lang.foreign.ValueLayout.JAVA_SHORT.withName("sin_family"),
            java.lang.foreign.ValueLayout.JAVA_SHORT.withName("sin_port"),
            JAVA_INT.withName("sin_addr"), pad(8)).withName("sockaddr_in");
}
