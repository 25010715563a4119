package io.refshare.ucx;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The bindings' struct layouts and constants against the installed {@code <ucp/api/ucp.h>}:
 * a C program (src/test/c/ucp_layout.c) prints what the compiler makes of each, and every
 * line must match {@link UcpAbi}. Needs gcc and libucx-dev (./run-tests installs them).
 */
class UcpLayoutTest {
    @TempDir
    Path tmp;

    @Test
    void layoutsAndConstantsMatchTheHeader() throws Exception {
        Map<String, Long> c = compiled();
        Map<String, Long> java = new LinkedHashMap<>();
        java.put("sizeof.ucs_status_t", Ucp.STATUS.byteSize());
        struct(java, "ucp_params_t", UcpAbi.PARAMS, "field_mask", "features");
        struct(java, "ucp_worker_params_t", UcpAbi.WORKER_PARAMS, "field_mask", "thread_mode");
        struct(java, "ucs_sock_addr_t", UcpAbi.SOCK_ADDR, "addr", "addrlen");
        struct(java, "ucp_listener_params_t", UcpAbi.LISTENER_PARAMS, "field_mask", "sockaddr", "accept_handler",
                "conn_handler");
        struct(java, "ucp_listener_conn_handler_t", UcpAbi.HANDLER, "cb", "arg");
        struct(java, "ucp_err_handler_t", UcpAbi.HANDLER, "cb", "arg");
        struct(java, "ucp_ep_params_t", UcpAbi.EP_PARAMS, "field_mask", "address", "err_mode", "err_handler",
                "user_data", "flags", "sockaddr", "conn_request");
        struct(java, "ucp_request_param_t", UcpAbi.REQUEST_PARAM, "op_attr_mask", "flags", "request", "cb",
                "datatype", "user_data", "memory_type", "memh");
        struct(java, "ucp_am_handler_param_t", UcpAbi.AM_HANDLER_PARAM, "field_mask", "id", "flags", "cb", "arg");
        struct(java, "ucp_am_recv_param_t", UcpAbi.AM_RECV_PARAM, "recv_attr", "reply_ep");
        for (var f : UcpAbi.class.getDeclaredFields()) {
            if (f.getType() == int.class || f.getType() == long.class || f.getType() == short.class) {
                f.setAccessible(true);
                String name = f.getName();
                String cName = name.startsWith("UCS_") || name.equals("AF_INET") ? name
                        : name.startsWith("THREAD_MODE") ? "UCS_" + name
                        : name.startsWith("API_") ? "UCP_API_" + name.substring(4) : "UCP_" + name;
                java.put("const." + cName, ((Number) f.get(null)).longValue());
            }
        }
        for (var e : java.entrySet()) {
            assertTrue(c.containsKey(e.getKey()), "the C program does not print " + e.getKey());
            assertEquals(c.get(e.getKey()), e.getValue(), e.getKey() + " differs from the header");
        }
        assertEquals(c.keySet(), java.keySet(), "every fact the C program prints is checked");
    }

    private static void struct(Map<String, Long> out, String name, StructLayout layout, String... fields) {
        out.put("sizeof." + name, layout.byteSize());
        for (String f : fields) {
            out.put("offsetof." + name + "." + f, layout.byteOffset(MemoryLayout.PathElement.groupElement(f)));
        }
    }

    private Map<String, Long> compiled() throws IOException, InterruptedException {
        Path source = Path.of("src/test/c/ucp_layout.c").toAbsolutePath();
        assertTrue(Files.isRegularFile(Path.of("/usr/include/ucp/api/ucp.h")),
                "<ucp/api/ucp.h> is missing: install libucx-dev (./run-tests does, as root)");
        Path exe = tmp.resolve("ucp_layout");
        Process gcc = new ProcessBuilder("gcc", "-O0", "-o", exe.toString(), source.toString())
                .redirectErrorStream(true).start();
        String gccOut = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, gcc.waitFor(), "gcc failed:\n" + gccOut);
        Process run = new ProcessBuilder(exe.toString()).redirectErrorStream(true).start();
        String out = new String(run.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, run.waitFor(), out);
        Map<String, Long> facts = new LinkedHashMap<>();
        for (String line : out.split("\n")) {
            String[] kv = line.trim().split(" ");
            facts.put(kv[0], Long.parseLong(kv[1]));
        }
        return facts;
    }
}
