/* Prints the ABI facts refshare's FFM bindings to UCP assume, one "name value" a line, as the
 * installed <ucp/api/ucp.h> defines them: struct sizes, field offsets and the constants used.
 * UcpLayoutTest compiles this with gcc, runs it and compares every line with UcpAbi. */
#include <stddef.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

#define SIZE(t) printf("sizeof.%s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offsetof.%s.%s %zu\n", #t, #f, offsetof(t, f))
#define CONST(c) printf("const.%s %lld\n", #c, (long long) (c))

int main(void) {
    SIZE(ucs_status_t);
    SIZE(ucp_params_t);
    OFF(ucp_params_t, field_mask);
    OFF(ucp_params_t, features);
    SIZE(ucp_worker_params_t);
    OFF(ucp_worker_params_t, field_mask);
    OFF(ucp_worker_params_t, thread_mode);
    SIZE(ucs_sock_addr_t);
    OFF(ucs_sock_addr_t, addr);
    OFF(ucs_sock_addr_t, addrlen);
    SIZE(ucp_listener_params_t);
    OFF(ucp_listener_params_t, field_mask);
    OFF(ucp_listener_params_t, sockaddr);
    OFF(ucp_listener_params_t, accept_handler);
    OFF(ucp_listener_params_t, conn_handler);
    SIZE(ucp_listener_conn_handler_t);
    OFF(ucp_listener_conn_handler_t, cb);
    OFF(ucp_listener_conn_handler_t, arg);
    SIZE(ucp_ep_params_t);
    OFF(ucp_ep_params_t, field_mask);
    OFF(ucp_ep_params_t, address);
    OFF(ucp_ep_params_t, err_mode);
    OFF(ucp_ep_params_t, err_handler);
    OFF(ucp_ep_params_t, user_data);
    OFF(ucp_ep_params_t, flags);
    OFF(ucp_ep_params_t, sockaddr);
    OFF(ucp_ep_params_t, conn_request);
    SIZE(ucp_err_handler_t);
    OFF(ucp_err_handler_t, cb);
    OFF(ucp_err_handler_t, arg);
    SIZE(ucp_request_param_t);
    OFF(ucp_request_param_t, op_attr_mask);
    OFF(ucp_request_param_t, flags);
    OFF(ucp_request_param_t, request);
    OFF(ucp_request_param_t, cb);
    OFF(ucp_request_param_t, datatype);
    OFF(ucp_request_param_t, user_data);
    OFF(ucp_request_param_t, memory_type);
    OFF(ucp_request_param_t, memh);
    SIZE(ucp_am_handler_param_t);
    OFF(ucp_am_handler_param_t, field_mask);
    OFF(ucp_am_handler_param_t, id);
    OFF(ucp_am_handler_param_t, flags);
    OFF(ucp_am_handler_param_t, cb);
    OFF(ucp_am_handler_param_t, arg);
    SIZE(ucp_am_recv_param_t);
    OFF(ucp_am_recv_param_t, recv_attr);
    OFF(ucp_am_recv_param_t, reply_ep);

    CONST(UCP_API_MAJOR);
    CONST(UCP_API_MINOR);
    CONST(UCP_PARAM_FIELD_FEATURES);
    CONST(UCP_FEATURE_AM);
    CONST(UCP_WORKER_PARAM_FIELD_THREAD_MODE);
    CONST(UCS_THREAD_MODE_SINGLE);
    CONST(UCP_LISTENER_PARAM_FIELD_SOCK_ADDR);
    CONST(UCP_LISTENER_PARAM_FIELD_CONN_HANDLER);
    CONST(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
    CONST(UCP_EP_PARAM_FIELD_ERR_HANDLER);
    CONST(UCP_EP_PARAM_FIELD_SOCK_ADDR);
    CONST(UCP_EP_PARAM_FIELD_FLAGS);
    CONST(UCP_EP_PARAM_FIELD_CONN_REQUEST);
    CONST(UCP_EP_PARAMS_FLAGS_CLIENT_SERVER);
    CONST(UCP_ERR_HANDLING_MODE_PEER);
    CONST(UCP_EP_CLOSE_FLAG_FORCE);
    CONST(UCP_OP_ATTR_FIELD_FLAGS);
    CONST(UCP_AM_HANDLER_PARAM_FIELD_ID);
    CONST(UCP_AM_HANDLER_PARAM_FIELD_FLAGS);
    CONST(UCP_AM_HANDLER_PARAM_FIELD_CB);
    CONST(UCP_AM_HANDLER_PARAM_FIELD_ARG);
    CONST(UCP_AM_FLAG_WHOLE_MSG);
    CONST(UCP_AM_SEND_FLAG_REPLY);
    CONST(UCP_AM_SEND_FLAG_EAGER);
    CONST(UCP_AM_SEND_FLAG_RNDV);
    CONST(UCP_AM_RECV_ATTR_FIELD_REPLY_EP);
    CONST(UCP_AM_RECV_ATTR_FLAG_DATA);
    CONST(UCP_AM_RECV_ATTR_FLAG_RNDV);
    CONST(UCS_OK);
    CONST(UCS_INPROGRESS);
    CONST(UCS_ERR_NO_ELEM);
    CONST(UCS_ERR_BUSY);
    CONST(UCP_FEATURE_WAKEUP);
    CONST(UCS_ERR_CONNECTION_RESET);
    CONST(UCS_ERR_REJECTED);
    CONST(AF_INET);
    return 0;
}
