/*
 * refshare CUDA TEST DOUBLE -- a stand-in for libcuda.so.1 in refshare's tests.
 *
 * THIS IS NOT CUDA. It is a small ABI-compatible imitation of the few CUDA driver API entry
 * points refshare binds (same names, same C signatures as cuda.h, 64-byte IPC handle structs
 * passed by value), so that refshare's FFM bindings, handle passing, offsets, events and
 * reference counts can be tested across real processes on machines without a GPU. "Device
 * memory" is host shared memory; nothing runs on a device. The tests build it with gcc into
 * target/ and point refshare at it (REFSHARE_LIBCUDA / -Drefshare.cuda.library); the same
 * tests run against the real driver on a GPU machine (scripts/test-cuda-gpu.sh).
 *
 * It never includes cuda.h: cuda.h's macros would rename the definitions below (cuMemAlloc
 * to cuMemAlloc_v2) and so hide a wrong name. CudaAbiTest checks the block between the "ABI"
 * markers (types, constants) and every exported entry point's name and prototype against
 * cuda.h in a separate, generated translation unit.
 *
 * Model:
 *  - cuMemAlloc creates a file in the double's directory (REFSHARE_CUDA_DOUBLE_DIR, default
 *    /dev/shm, or refshare_cuda_double_configure): a 4096-byte header (the importer table)
 *    followed by the bytes. The "device pointer" is an address with no host mapping behind
 *    it (reading it from the host faults, as with a GPU); copies translate it to the mapping.
 *    cuIpcGetMemHandle names the file in the handle; cuIpcOpenMemHandle maps it in another
 *    process (once per process, reference-counted like current drivers) and enters the
 *    process in the file's importer table, cuIpcCloseMemHandle leaves it at the last close.
 *  - Interprocess events are shared sequence counters in a small file, with an importer
 *    table too: cuEventRecord bumps the record sequence, the stream stores the completion
 *    sequence when it reaches the record; cuStreamWaitEvent captures the record sequence at
 *    the call and the waiting stream blocks until the completion sequence reaches it;
 *    cuEventQuery compares the two (CUDA_ERROR_NOT_READY while the record is ahead). A record
 *    its process died before completing never completes, as with the driver: a query says
 *    NOT_READY for good, and a stream's wait for it is a violation (a real driver never ends
 *    that wait; the double records it and ends it, so that a test fails instead of hanging).
 *  - Each stream is a worker thread running its queued operations in order. Asynchronous
 *    copies are really asynchronous: the source is read, and the destination written, when
 *    the stream runs the copy, so a missing cuStreamSynchronize shows as wrong bytes.
 *    refshare_cuda_double_pause(1) holds every stream of the process.
 *  - Contexts: the primary context of each device, retained and released. Every allocation,
 *    mapping, stream and event belongs to the context current when it was made; using it
 *    while another context is current, or after the primary context's last release (the
 *    driver then destroys everything in it), fails with CUDA_ERROR_INVALID_CONTEXT.
 *  - Strictness the driver has too: calls need cuInit and a current context; opening an IPC
 *    handle in its exporting process fails (CUDA_ERROR_INVALID_CONTEXT); copies must lie
 *    within one allocation or mapping; the IPC open flag must be LAZY_ENABLE_PEER_ACCESS;
 *    interprocess events need DISABLE_TIMING; destroyed streams and events are invalid
 *    handles (their structs are kept as tombstones, so a stale handle is caught, not reused).
 *  - Violations: what CUDA leaves undefined but a real driver does not report is recorded
 *    (counter "violations", text from refshare_cuda_double_last_violation, a line on
 *    stderr) so tests can assert there were none: cuMemFree of an allocation another live
 *    process still has open, cuEventDestroy of an interprocess event another live process
 *    still has open, cuIpcCloseMemHandle while queued stream work still uses the mapping,
 *    and the last release of a primary context with objects still alive in it.
 *  - Settings (refshare_cuda_double_set): driverVersion (13000), computeMode (0),
 *    unifiedAddressing (1), ipcEvents (1), legacy (0: a second cuIpcOpenMemHandle of the same
 *    handle in one process fails with CUDA_ERROR_ALREADY_MAPPED, as older drivers did),
 *    maxIpcEvents (-1: no cap; else live interprocess events per process, created or opened),
 *    copyLatencyMicros (5000: how long each stream copy takes before it moves the bytes),
 *    violations (sets the count of recorded violations, for a test that provoked some on purpose).
 *
 * Test-only entry points (not CUDA): refshare_cuda_double_configure, _set, _fail (the next
 * calls of an entry point return an error), _pause, _pending, _counter (per-process call and
 * live-object counts by name), _last_violation.
 *
 * IPC handle layout (both kinds, 64 bytes, native byte order):
 *
 *     0      4      8               16                                           64
 *     +------+------+---------------+---------------------------------------------+
 *     |magic | pid  | size (memory) | file name in the double's directory, NUL-   |
 *     |"RSDM"|      | 0 (event)     | terminated                                  |
 *     |"RSDE"|      |               |                                             |
 *     +------+------+---------------+---------------------------------------------+
 *
 * Shared event file (4096 bytes) and the header of a memory file (4096 bytes):
 *
 *     event:  magic "RSEV" u32 | creator pid u32 | recorded u64 | completed u64 | waits u64 |
 *             blocked u64 | importer pids i32[64]
 *     memory: magic "RSMH" u32 | creator pid u32 | importer pids i32[64]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- ABI: the types and constants of cuda.h the double uses (checked by CudaAbiTest) ---- */
typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_MAP_FAILED = 205,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_TOO_MANY_PEERS = 711,
    CUDA_ERROR_NOT_SUPPORTED = 801,
} CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUipcMemHandle_st { char reserved[64]; } CUipcMemHandle;
typedef struct CUipcEventHandle_st { char reserved[64]; } CUipcEventHandle;
typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
    CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = 125,
} CUdevice_attribute;
#define CU_IPC_HANDLE_SIZE 64
#define CU_EVENT_BLOCKING_SYNC 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_EVENT_INTERPROCESS 0x4
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_COMPUTEMODE_DEFAULT 0
#define CU_COMPUTEMODE_PROHIBITED 2
#define CU_COMPUTEMODE_EXCLUSIVE_PROCESS 3
/* ---- end of ABI ---- */

#define MAX_DEVICES 8
#define NAME_BYTES 48
#define HEADER_BYTES 4096
#define IMPORTER_SLOTS 64
static const char MEM_MAGIC[4] = {'R', 'S', 'D', 'M'};
static const char EVENT_MAGIC[4] = {'R', 'S', 'D', 'E'};
static const uint32_t SHARED_EVENT_MAGIC = 0x56455352; /* "RSEV" */
static const uint32_t SHARED_MEM_MAGIC = 0x484d5352;   /* "RSMH" */
static const uint32_t CTX_MAGIC = 0x58544344, STREAM_MAGIC = 0x4d525453, EVENT_OBJ_MAGIC = 0x544e5645;
static const uint32_t DEAD_MAGIC = 0x44414544;
/* device addresses: far from anything the host maps, so reading one from the host faults */
static const CUdeviceptr DEVICE_ALIGNMENT = 2u << 20;

/* ---- counters (per process), read by tests through refshare_cuda_double_counter ---------- */

enum counter {
    C_MEM_ALLOC, C_MEM_FREE, C_IPC_GET_MEM, C_IPC_OPEN_MEM, C_IPC_CLOSE_MEM, C_EVENT_CREATE, C_EVENT_RECORD,
    C_EVENT_DESTROY, C_IPC_GET_EVENT, C_IPC_OPEN_EVENT, C_STREAM_WAIT_EVENT, C_STREAM_SYNCHRONIZE, C_MEMCPY_HTOD,
    C_MEMCPY_DTOH, C_STREAM_CREATE, C_STREAM_DESTROY, C_CTX_SET_CURRENT, C_BLOCKED_WAITS, C_EVENT_QUERY,
    C_EVENT_NOT_READY, C_VIOLATIONS,
    C_LIVE_ALLOCATIONS, C_LIVE_MAPPINGS, C_LIVE_EVENTS, C_LIVE_IPC_EVENTS, C_LIVE_STREAMS, C_LIVE_CONTEXT_RETAINS,
    N_COUNTERS
};
static const char *const COUNTER_NAMES[N_COUNTERS] = {
    "cuMemAlloc", "cuMemFree", "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle", "cuEventCreate",
    "cuEventRecord", "cuEventDestroy", "cuIpcGetEventHandle", "cuIpcOpenEventHandle", "cuStreamWaitEvent",
    "cuStreamSynchronize", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuStreamCreate", "cuStreamDestroy",
    "cuCtxSetCurrent", "blockedWaits", "cuEventQuery", "eventNotReady", "violations",
    "liveAllocations", "liveMappings", "liveEvents", "liveIpcEvents", "liveStreams", "livePrimaryContextRetains",
};
static long long counters[N_COUNTERS];

static void count(enum counter c, long long delta) {
    __atomic_add_fetch(&counters[c], delta, __ATOMIC_RELAXED);
}

/* ---- configuration and global state ---------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards everything below but the counters */
static char directory[512];
static int device_count = -1;
static long long memory_limit = -1; /* bytes of live allocations allowed; -1: no limit */
static long long memory_in_use;
static int initialized;
static unsigned long name_sequence;
static CUdeviceptr next_device_address = 0x200000000000ULL;

static struct {
    int driver_version, compute_mode, unified_addressing, ipc_events, legacy;
    long long max_ipc_events;
    long long copy_latency_micros;
} settings = {13000, CU_COMPUTEMODE_DEFAULT, 1, 1, 0, -1, 5000};

static char fail_entry[64];
static CUresult fail_code;
static int fail_times;
static char last_violation[512];

struct CUctx_st {
    uint32_t magic;
    int device;
    int retains;
    unsigned generation; /* bumped at the last release: the driver destroys what the context held */
    int live;            /* allocations, mappings, streams and events made in this generation */
};
static struct CUctx_st contexts[MAX_DEVICES];
static __thread CUcontext current;

/* an allocation of this process (own) or another process's allocation mapped here */
struct region {
    CUdeviceptr base; /* the device address: nothing is mapped there on the host */
    char *mapping;    /* the whole file: header, then the bytes */
    size_t size;
    int own;
    int refs;  /* IPC opens in this process */
    int pins;  /* queued stream operations using it */
    int gone;  /* freed or closed: unmapped once the last pin goes */
    int device;
    unsigned generation;
    char name[NAME_BYTES];
    struct region *next;
};
static struct region *regions;

struct mem_header {
    uint32_t magic;
    uint32_t creator;
    int32_t importers[IMPORTER_SLOTS];
};

static void configure_from_environment_locked(void) {
    if (directory[0] == 0) {
        const char *d = getenv("REFSHARE_CUDA_DOUBLE_DIR");
        snprintf(directory, sizeof directory, "%s", d != NULL && d[0] != 0 ? d : "/dev/shm");
    }
    if (device_count < 0) {
        const char *n = getenv("REFSHARE_CUDA_DOUBLE_DEVICES");
        device_count = n != NULL && n[0] != 0 ? atoi(n) : 1;
        if (device_count > MAX_DEVICES) {
            device_count = MAX_DEVICES;
        }
    }
}

/* Test-only: where files go, how many devices there are (negative: unchanged), and how many
 * bytes cuMemAlloc may hold at once (negative: no limit). */
EXPORT void refshare_cuda_double_configure(const char *dir, int devices, long long memory_bytes) {
    pthread_mutex_lock(&mu);
    if (dir != NULL) {
        snprintf(directory, sizeof directory, "%s", dir);
    }
    if (devices >= 0) {
        device_count = devices > MAX_DEVICES ? MAX_DEVICES : devices;
    }
    memory_limit = memory_bytes;
    pthread_mutex_unlock(&mu);
}

/* Test-only: one setting by name (see the header comment); 0, or -1 for an unknown name. */
EXPORT int refshare_cuda_double_set(const char *key, long long value) {
    int known = 1;
    pthread_mutex_lock(&mu);
    if (strcmp(key, "driverVersion") == 0) {
        settings.driver_version = (int) value;
    } else if (strcmp(key, "computeMode") == 0) {
        settings.compute_mode = (int) value;
    } else if (strcmp(key, "unifiedAddressing") == 0) {
        settings.unified_addressing = (int) value;
    } else if (strcmp(key, "ipcEvents") == 0) {
        settings.ipc_events = (int) value;
    } else if (strcmp(key, "legacy") == 0) {
        settings.legacy = (int) value;
    } else if (strcmp(key, "maxIpcEvents") == 0) {
        settings.max_ipc_events = value;
    } else if (strcmp(key, "copyLatencyMicros") == 0) {
        settings.copy_latency_micros = value;
    } else if (strcmp(key, "violations") == 0) {
        /* a test that provoked violations on purpose starts the count again */
        __atomic_store_n(&counters[C_VIOLATIONS], value, __ATOMIC_RELAXED);
        last_violation[0] = 0;
    } else {
        known = 0;
    }
    pthread_mutex_unlock(&mu);
    return known ? 0 : -1;
}

/* Test-only: the next `times` calls of entry point `entry` (e.g. "cuStreamSynchronize") fail with `code`. */
EXPORT void refshare_cuda_double_fail(const char *entry, int code, int times) {
    pthread_mutex_lock(&mu);
    snprintf(fail_entry, sizeof fail_entry, "%s", entry);
    fail_code = (CUresult) code;
    fail_times = times;
    pthread_mutex_unlock(&mu);
}

/* Test-only: a counter by name (see COUNTER_NAMES), or -1 for an unknown name. */
EXPORT long long refshare_cuda_double_counter(const char *name) {
    for (int i = 0; i < N_COUNTERS; i++) {
        if (strcmp(name, COUNTER_NAMES[i]) == 0) {
            return __atomic_load_n(&counters[i], __ATOMIC_RELAXED);
        }
    }
    return -1;
}

/* Test-only: the text of the last violation (empty if none) into buf. */
EXPORT void refshare_cuda_double_last_violation(char *buf, int len) {
    pthread_mutex_lock(&mu);
    snprintf(buf, (size_t) len, "%s", last_violation);
    pthread_mutex_unlock(&mu);
}

/* records a misuse the real driver would not report; mu must NOT be held */
static void violation(const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&mu);
    snprintf(last_violation, sizeof last_violation, "%s", text);
    pthread_mutex_unlock(&mu);
    count(C_VIOLATIONS, 1);
    fprintf(stderr, "refshare CUDA test double: VIOLATION (pid %d): %s\n", (int) getpid(), text);
}

static void path_of(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", directory, name);
}

static CUresult injected_failure(const char *entry) {
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    if (fail_times > 0 && strcmp(entry, fail_entry) == 0) {
        fail_times--;
        rc = fail_code;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static CUresult check_context(const char *entry) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (current == NULL || current->magic != CTX_MAGIC || __atomic_load_n(&current->retains, __ATOMIC_RELAXED) <= 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return injected_failure(entry);
}

#define REQUIRE_CONTEXT()                         \
    do {                                          \
        CUresult rc_ = check_context(__func__);   \
        if (rc_ != CUDA_SUCCESS) return rc_;      \
    } while (0)

/* whether an object made on `device` in `generation` may be used now: its context is current and alive */
static int in_current_context(int device, unsigned generation) {
    return current != NULL && current->device == device
           && __atomic_load_n(&current->generation, __ATOMIC_ACQUIRE) == generation;
}

static int context_alive(int device, unsigned generation) {
    return __atomic_load_n(&contexts[device].generation, __ATOMIC_ACQUIRE) == generation;
}

static void context_object(int device, int delta) {
    __atomic_add_fetch(&contexts[device].live, delta, __ATOMIC_RELAXED);
}

/* ---- importer tables: which other processes have an allocation or event open ---------------- */

static int pid_alive(int32_t pid) {
    return kill((pid_t) pid, 0) == 0 || errno == EPERM;
}

static int add_importer(int32_t *slots) {
    int32_t self = (int32_t) getpid();
    for (int i = 0; i < IMPORTER_SLOTS; i++) {
        int32_t expected = 0;
        if (__atomic_compare_exchange_n(&slots[i], &expected, self, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            return 1;
        }
    }
    return 0;
}

static void remove_importer(int32_t *slots) {
    int32_t self = (int32_t) getpid();
    for (int i = 0; i < IMPORTER_SLOTS; i++) {
        int32_t expected = self;
        if (__atomic_compare_exchange_n(&slots[i], &expected, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            return;
        }
    }
}

/* other live processes in the table (a dead one's mapping is gone with it, as with the driver) */
static int live_importers(int32_t *slots) {
    int n = 0;
    int32_t self = (int32_t) getpid();
    for (int i = 0; i < IMPORTER_SLOTS; i++) {
        int32_t pid = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
        if (pid != 0 && pid != self && pid_alive(pid)) {
            n++;
        }
    }
    return n;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static const struct { CUresult code; const char *name; const char *text; } ERRORS[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

static CUresult error_text(CUresult error, const char **out, int name) {
    if (out == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++) {
        if (ERRORS[i].code == error) {
            *out = name ? ERRORS[i].name : ERRORS[i].text;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
    return error_text(error, pStr, 1);
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
    return error_text(error, pStr, 0);
}

/* ---- initialization, devices, contexts ------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags) {
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    configure_from_environment_locked();
    int devices = device_count;
    for (int i = 0; i < MAX_DEVICES; i++) {
        contexts[i].magic = CTX_MAGIC;
        contexts[i].device = i;
    }
    pthread_mutex_unlock(&mu);
    if (devices == 0) {
        return CUDA_ERROR_NO_DEVICE;
    }
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
    if (driverVersion == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    *driverVersion = settings.driver_version;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count_out) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (count_out == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    *count_out = device_count;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

static int valid_device(CUdevice device) {
    pthread_mutex_lock(&mu);
    int n = device_count;
    pthread_mutex_unlock(&mu);
    return device >= 0 && device < n;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (device == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(ordinal)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (name == NULL || len <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    snprintf(name, (size_t) len, "refshare CUDA test double #%d (not a GPU)", dev);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pi == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    switch (attrib) {
        case CU_DEVICE_ATTRIBUTE_INTEGRATED:
            *pi = 0;
            break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
            *pi = settings.compute_mode;
            break;
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
            *pi = settings.unified_addressing;
            break;
        case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
            /* a CUDA 12 attribute: older drivers do not know it */
            if (settings.driver_version < 12000) {
                rc = CUDA_ERROR_INVALID_VALUE;
            } else {
                *pi = settings.ipc_events;
            }
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    __atomic_add_fetch(&contexts[dev].retains, 1, __ATOMIC_RELAXED);
    count(C_LIVE_CONTEXT_RETAINS, 1);
    *pctx = &contexts[dev];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&mu);
    if (contexts[dev].retains <= 0) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    int left = __atomic_sub_fetch(&contexts[dev].retains, 1, __ATOMIC_RELAXED);
    int live = 0;
    if (left == 0) {
        /* the driver destroys the context and everything in it */
        __atomic_add_fetch(&contexts[dev].generation, 1, __ATOMIC_RELEASE);
        live = __atomic_exchange_n(&contexts[dev].live, 0, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&mu);
    count(C_LIVE_CONTEXT_RETAINS, -1);
    if (live > 0) {
        violation("cuDevicePrimaryCtxRelease_v2(%d): last release with %d allocations, mappings, streams or events"
                  " still alive in the context (the driver destroys them)", dev, live);
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ctx != NULL && ctx->magic != CTX_MAGIC) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    current = ctx;
    count(C_CTX_SET_CURRENT, 1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pctx = current;
    return CUDA_SUCCESS;
}

/* ---- memory ---------------------------------------------------------------------------------- */

static char *host_of(struct region *r) {
    return r->mapping + HEADER_BYTES;
}

static struct mem_header *header_of(struct region *r) {
    return (struct mem_header *) r->mapping;
}

/* the live region containing [address, address + bytes), or NULL; mu held */
static struct region *region_containing_locked(CUdeviceptr address, size_t bytes) {
    for (struct region *r = regions; r != NULL; r = r->next) {
        if (!r->gone && address >= r->base && address - r->base <= r->size && bytes <= r->size - (address - r->base)) {
            return r;
        }
    }
    return NULL;
}

static struct region *region_at_locked(CUdeviceptr base, int own) {
    for (struct region *r = regions; r != NULL; r = r->next) {
        if (!r->gone && r->base == base && r->own == own) {
            return r;
        }
    }
    return NULL;
}

static void unlink_region_locked(struct region *gone) {
    for (struct region **p = &regions; *p != NULL; p = &(*p)->next) {
        if (*p == gone) {
            *p = gone->next;
            return;
        }
    }
}

/* marks a region freed or closed; unmaps it now unless stream work still uses it (then the last unpin does) */
static void retire_region(struct region *r) {
    pthread_mutex_lock(&mu);
    r->gone = 1;
    int unmap_now = r->pins == 0;
    if (unmap_now) {
        unlink_region_locked(r);
    }
    pthread_mutex_unlock(&mu);
    if (unmap_now) {
        munmap(r->mapping, HEADER_BYTES + r->size);
        free(r);
    }
}

static void unpin_region(struct region *r) {
    pthread_mutex_lock(&mu);
    int unmap_now = --r->pins == 0 && r->gone;
    if (unmap_now) {
        unlink_region_locked(r);
    }
    pthread_mutex_unlock(&mu);
    if (unmap_now) {
        munmap(r->mapping, HEADER_BYTES + r->size);
        free(r);
    }
}

static CUdeviceptr new_device_address_locked(size_t size) {
    CUdeviceptr base = next_device_address;
    next_device_address += (size + DEVICE_ALIGNMENT - 1) / DEVICE_ALIGNMENT * DEVICE_ALIGNMENT + DEVICE_ALIGNMENT;
    return base;
}

/* creates and maps a new file of `size` bytes; its name goes to `name`. A full directory is
 * "out of memory"; a directory that cannot be written is an operating system error. */
static void *create_mapping_locked(const char *kind, size_t size, char *name, CUresult *error) {
    char path[600];
    snprintf(name, NAME_BYTES, "rscudadbl-%s-%d-%lu", kind, (int) getpid(), ++name_sequence);
    path_of(path, sizeof path, name);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        *error = CUDA_ERROR_OPERATING_SYSTEM;
        return NULL;
    }
    void *p = MAP_FAILED;
    int rc = posix_fallocate(fd, 0, (off_t) size);
    if (rc == 0) {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (p == MAP_FAILED) {
        unlink(path);
        *error = rc == ENOSPC || rc == 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_OPERATING_SYSTEM;
        return NULL;
    }
    return p;
}

/* maps an existing file of exactly `size` bytes */
static void *open_mapping_locked(const char *name, size_t size, CUresult *error) {
    char path[600];
    path_of(path, sizeof path, name);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        *error = CUDA_ERROR_INVALID_HANDLE; /* the exporter freed it, or the handle is garbage */
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t) st.st_size != size) {
        close(fd);
        *error = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        *error = CUDA_ERROR_MAP_FAILED;
        return NULL;
    }
    return p;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    REQUIRE_CONTEXT();
    if (dptr == NULL || bytesize == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    if (memory_limit >= 0 && memory_in_use + (long long) bytesize > memory_limit) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult error = CUDA_ERROR_OUT_OF_MEMORY;
    struct region *r = calloc(1, sizeof *r);
    char *p = r == NULL ? NULL : create_mapping_locked("mem", HEADER_BYTES + bytesize, r->name, &error);
    if (p == NULL) {
        pthread_mutex_unlock(&mu);
        free(r);
        return error;
    }
    r->mapping = p;
    r->base = new_device_address_locked(bytesize);
    r->size = bytesize;
    r->own = 1;
    r->refs = 1;
    r->device = current->device;
    r->generation = current->generation;
    header_of(r)->creator = (uint32_t) getpid();
    __atomic_store_n(&header_of(r)->magic, SHARED_MEM_MAGIC, __ATOMIC_RELEASE);
    r->next = regions;
    regions = r;
    memory_in_use += (long long) bytesize;
    pthread_mutex_unlock(&mu);
    context_object(r->device, 1);
    count(C_MEM_ALLOC, 1);
    count(C_LIVE_ALLOCATIONS, 1);
    *dptr = r->base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    REQUIRE_CONTEXT();
    pthread_mutex_lock(&mu);
    struct region *r = region_at_locked(dptr, 1);
    if (r == NULL) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!in_current_context(r->device, r->generation)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    memory_in_use -= (long long) r->size;
    char path[600];
    path_of(path, sizeof path, r->name);
    unlink(path);
    char name[NAME_BYTES];
    memcpy(name, r->name, NAME_BYTES);
    int importers = live_importers(header_of(r)->importers);
    pthread_mutex_unlock(&mu);
    if (importers > 0) {
        violation("cuMemFree_v2(0x%llx): allocation %s freed while %d other process(es) still have it open", dptr,
                  name, importers);
    }
    retire_region(r);
    context_object(current->device, -1);
    count(C_MEM_FREE, 1);
    count(C_LIVE_ALLOCATIONS, -1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    REQUIRE_CONTEXT();
    pthread_mutex_lock(&mu);
    struct region *r = region_containing_locked(dptr, 0);
    if (r == NULL || dptr == r->base + r->size) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!in_current_context(r->device, r->generation)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (pbase != NULL) {
        *pbase = r->base;
    }
    if (psize != NULL) {
        *psize = r->size;
    }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
    REQUIRE_CONTEXT();
    if (pHandle == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    struct region *r = region_at_locked(dptr, 1);
    if (r == NULL) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!in_current_context(r->device, r->generation)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    memset(pHandle, 0, sizeof *pHandle);
    int32_t pid = (int32_t) getpid();
    uint64_t size = r->size;
    memcpy(pHandle->reserved, MEM_MAGIC, 4);
    memcpy(pHandle->reserved + 4, &pid, 4);
    memcpy(pHandle->reserved + 8, &size, 8);
    memcpy(pHandle->reserved + 16, r->name, strlen(r->name) + 1);
    pthread_mutex_unlock(&mu);
    count(C_IPC_GET_MEM, 1);
    return CUDA_SUCCESS;
}

/* checks a handle's magic and name; returns the exporter's pid, or 0 when malformed */
static int parse_handle(const char *h, const char magic[4], uint64_t *size, char *name) {
    if (memcmp(h, magic, 4) != 0 || memchr(h + 16, 0, NAME_BYTES) == NULL) {
        return 0;
    }
    int32_t pid;
    memcpy(&pid, h + 4, 4);
    memcpy(size, h + 8, 8);
    memcpy(name, h + 16, NAME_BYTES);
    if (pid <= 0 || name[0] == 0 || strchr(name, '/') != NULL) {
        return 0;
    }
    return pid;
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
    REQUIRE_CONTEXT();
    if (pdptr == NULL || Flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t size;
    char name[NAME_BYTES];
    int pid = parse_handle(handle.reserved, MEM_MAGIC, &size, name);
    if (pid == 0 || size == 0) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (pid == getpid()) {
        return CUDA_ERROR_INVALID_CONTEXT; /* the driver refuses handles in their exporting process too */
    }
    count(C_IPC_OPEN_MEM, 1);
    pthread_mutex_lock(&mu);
    for (struct region *r = regions; r != NULL; r = r->next) {
        if (!r->own && !r->gone && strcmp(r->name, name) == 0 && r->device == current->device) {
            if (settings.legacy) {
                pthread_mutex_unlock(&mu);
                return CUDA_ERROR_ALREADY_MAPPED; /* drivers before reference-counted opens */
            }
            r->refs++; /* opened before: same address, one more reference, as current drivers do */
            *pdptr = r->base;
            pthread_mutex_unlock(&mu);
            return CUDA_SUCCESS;
        }
    }
    struct region *r = calloc(1, sizeof *r);
    if (r == NULL) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult error = CUDA_SUCCESS;
    char *p = open_mapping_locked(name, HEADER_BYTES + (size_t) size, &error);
    if (p == NULL) {
        pthread_mutex_unlock(&mu);
        free(r);
        return error;
    }
    r->mapping = p;
    if (__atomic_load_n(&header_of(r)->magic, __ATOMIC_ACQUIRE) != SHARED_MEM_MAGIC) {
        pthread_mutex_unlock(&mu);
        munmap(p, HEADER_BYTES + (size_t) size);
        free(r);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!add_importer(header_of(r)->importers)) {
        pthread_mutex_unlock(&mu);
        munmap(p, HEADER_BYTES + (size_t) size);
        free(r);
        return CUDA_ERROR_TOO_MANY_PEERS;
    }
    r->base = new_device_address_locked((size_t) size);
    r->size = (size_t) size;
    r->own = 0;
    r->refs = 1;
    r->device = current->device;
    r->generation = current->generation;
    memcpy(r->name, name, NAME_BYTES);
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&mu);
    context_object(r->device, 1);
    count(C_LIVE_MAPPINGS, 1);
    *pdptr = r->base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    REQUIRE_CONTEXT();
    pthread_mutex_lock(&mu);
    struct region *r = region_at_locked(dptr, 0);
    if (r == NULL) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!in_current_context(r->device, r->generation)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    count(C_IPC_CLOSE_MEM, 1);
    if (--r->refs > 0) {
        pthread_mutex_unlock(&mu);
        return CUDA_SUCCESS;
    }
    int pins = r->pins;
    char name[NAME_BYTES];
    memcpy(name, r->name, NAME_BYTES);
    remove_importer(header_of(r)->importers);
    pthread_mutex_unlock(&mu);
    if (pins > 0) {
        violation("cuIpcCloseMemHandle(0x%llx): mapping of %s closed while %d queued stream operation(s) still use it"
                  " (a missing synchronize)", dptr, name, pins);
    }
    retire_region(r);
    context_object(current->device, -1);
    count(C_LIVE_MAPPINGS, -1);
    return CUDA_SUCCESS;
}

/* ---- events ---------------------------------------------------------------------------------- */

struct event_shared {
    uint32_t magic;
    uint32_t creator;
    uint64_t recorded;
    uint64_t completed;
    uint64_t waits;
    uint64_t blocked;
    int32_t importers[IMPORTER_SLOTS];
};

struct CUevent_st {
    uint32_t magic; /* DEAD_MAGIC once destroyed: the struct stays, so a stale handle is caught */
    int interprocess;
    int owner;
    int refs; /* the handle's own, plus one per queued operation; guarded by mu */
    int device;
    unsigned generation;
    char name[NAME_BYTES];
    struct event_shared *shared;
};

static int valid_event(CUevent e) {
    return e != NULL && __atomic_load_n(&e->magic, __ATOMIC_ACQUIRE) == EVENT_OBJ_MAGIC;
}

static void event_unref(CUevent e) {
    pthread_mutex_lock(&mu);
    int left = --e->refs;
    pthread_mutex_unlock(&mu);
    if (left == 0) {
        if (e->interprocess) {
            if (!e->owner) {
                remove_importer(e->shared->importers);
            }
            munmap(e->shared, HEADER_BYTES);
        } else {
            free(e->shared);
        }
        e->shared = NULL;
    }
}

/* room for one more interprocess event in this process (the legacy cap) */
static int ipc_event_room(void) {
    pthread_mutex_lock(&mu);
    long long cap = settings.max_ipc_events;
    pthread_mutex_unlock(&mu);
    return cap < 0 || __atomic_load_n(&counters[C_LIVE_IPC_EVENTS], __ATOMIC_RELAXED) < cap;
}

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
    REQUIRE_CONTEXT();
    if (phEvent == NULL || (Flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)) != 0
        || ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((Flags & CU_EVENT_INTERPROCESS) && !ipc_event_room()) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->interprocess = (Flags & CU_EVENT_INTERPROCESS) != 0;
    e->owner = 1;
    e->refs = 1;
    e->device = current->device;
    e->generation = current->generation;
    CUresult error = CUDA_ERROR_OUT_OF_MEMORY;
    if (e->interprocess) {
        pthread_mutex_lock(&mu);
        e->shared = create_mapping_locked("ev", HEADER_BYTES, e->name, &error);
        pthread_mutex_unlock(&mu);
    } else {
        e->shared = calloc(1, sizeof *e->shared);
    }
    if (e->shared == NULL) {
        free(e);
        return error;
    }
    e->shared->creator = (uint32_t) getpid();
    __atomic_store_n(&e->shared->magic, SHARED_EVENT_MAGIC, __ATOMIC_RELEASE);
    __atomic_store_n(&e->magic, EVENT_OBJ_MAGIC, __ATOMIC_RELEASE);
    context_object(e->device, 1);
    count(C_EVENT_CREATE, 1);
    count(C_LIVE_EVENTS, 1);
    if (e->interprocess) {
        count(C_LIVE_IPC_EVENTS, 1);
    }
    *phEvent = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    REQUIRE_CONTEXT();
    CUevent e = hEvent;
    if (!valid_event(e)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!in_current_context(e->device, e->generation)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (!__atomic_compare_exchange_n(&e->magic, &(uint32_t) {EVENT_OBJ_MAGIC}, DEAD_MAGIC, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED)) {
        return CUDA_ERROR_INVALID_HANDLE; /* destroyed concurrently */
    }
    if (e->owner && e->interprocess) {
        char path[600];
        pthread_mutex_lock(&mu);
        path_of(path, sizeof path, e->name);
        pthread_mutex_unlock(&mu);
        unlink(path); /* no process can open it any more */
        int importers = live_importers(e->shared->importers);
        if (importers > 0) {
            violation("cuEventDestroy_v2: interprocess event %s destroyed while %d other process(es) still have it"
                      " open", e->name, importers);
        }
    }
    context_object(e->device, -1);
    count(C_EVENT_DESTROY, 1);
    count(C_LIVE_EVENTS, -1);
    if (e->interprocess) {
        count(C_LIVE_IPC_EVENTS, -1);
    }
    event_unref(e); /* queued operations still using it keep it until they have run, as the driver does */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event) {
    REQUIRE_CONTEXT();
    if (pHandle == NULL || !valid_event(event)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!in_current_context(event->device, event->generation)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (!event->interprocess || !event->owner) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(pHandle, 0, sizeof *pHandle);
    int32_t pid = (int32_t) getpid();
    memcpy(pHandle->reserved, EVENT_MAGIC, 4);
    memcpy(pHandle->reserved + 4, &pid, 4);
    memcpy(pHandle->reserved + 16, event->name, strlen(event->name) + 1);
    count(C_IPC_GET_EVENT, 1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle) {
    REQUIRE_CONTEXT();
    if (phEvent == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t unused;
    char name[NAME_BYTES];
    int pid = parse_handle(handle.reserved, EVENT_MAGIC, &unused, name);
    if (pid == 0) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (pid == getpid()) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (!ipc_event_room()) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult error = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    e->shared = open_mapping_locked(name, HEADER_BYTES, &error);
    pthread_mutex_unlock(&mu);
    if (e->shared == NULL || __atomic_load_n(&e->shared->magic, __ATOMIC_ACQUIRE) != SHARED_EVENT_MAGIC
        || !add_importer(e->shared->importers)) {
        if (e->shared != NULL) {
            munmap(e->shared, HEADER_BYTES);
            error = CUDA_ERROR_INVALID_HANDLE;
        }
        free(e);
        return error;
    }
    e->interprocess = 1;
    e->owner = 0;
    e->refs = 1;
    e->device = current->device;
    e->generation = current->generation;
    memcpy(e->name, name, NAME_BYTES);
    __atomic_store_n(&e->magic, EVENT_OBJ_MAGIC, __ATOMIC_RELEASE);
    context_object(e->device, 1);
    count(C_IPC_OPEN_EVENT, 1);
    count(C_LIVE_EVENTS, 1);
    count(C_LIVE_IPC_EVENTS, 1);
    *phEvent = e;
    return CUDA_SUCCESS;
}

static void complete_record(struct event_shared *s, uint64_t seq) {
    uint64_t c = __atomic_load_n(&s->completed, __ATOMIC_RELAXED);
    while (c < seq && !__atomic_compare_exchange_n(&s->completed, &c, seq, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

/* waits until the event's completion reaches `seq`; a dead recorder never completes it, which the driver
   answers with a wait for good: recorded as a violation here, and the wait ends */
static void wait_for_record(struct event_shared *s, uint64_t seq) {
    if (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >= seq) {
        return;
    }
    __atomic_add_fetch(&s->blocked, 1, __ATOMIC_RELAXED);
    count(C_BLOCKED_WAITS, 1);
    struct timespec pause = {0, 50 * 1000};
    while (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) < seq) {
        if (!pid_alive((int32_t) s->creator)) {
            violation("cuStreamWaitEvent: a stream waits for an interprocess event whose process (pid %u) died"
                      " before the work it recorded was done; a real driver never ends this wait", s->creator);
            return;
        }
        nanosleep(&pause, NULL);
    }
}

/* ---- streams --------------------------------------------------------------------------------- */

enum op_kind { OP_COPY, OP_RECORD, OP_WAIT };

struct op {
    enum op_kind kind;
    void *dst;
    const void *src;
    size_t bytes;
    struct region *region; /* pinned while the copy is queued */
    CUevent event;
    uint64_t seq;
    struct op *next;
};

struct CUstream_st {
    uint32_t magic; /* DEAD_MAGIC once destroyed: the struct stays, so a stale handle is caught */
    int device;
    unsigned generation;
    pthread_t thread;
    pthread_mutex_t m;
    pthread_cond_t cv; /* signalled when work arrives, when an operation ends and on stop */
    struct op *head, *tail;
    int running;
    int stop;
};

static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cv = PTHREAD_COND_INITIALIZER;
static int paused;
static long long pending_ops;

/* Test-only: holds (1) or releases (0) every stream of this process before its next operation. */
EXPORT void refshare_cuda_double_pause(int on) {
    pthread_mutex_lock(&pause_mu);
    paused = on;
    pthread_cond_broadcast(&pause_cv);
    pthread_mutex_unlock(&pause_mu);
}

/* Test-only: operations queued or running on the streams of this process. */
EXPORT long long refshare_cuda_double_pending(void) {
    return __atomic_load_n(&pending_ops, __ATOMIC_ACQUIRE);
}

static void run(struct op *op) {
    switch (op->kind) {
        case OP_COPY: {
            /* a copy takes a while, as on a device: a host that reads without synchronizing sees old bytes */
            pthread_mutex_lock(&mu);
            long long latency = settings.copy_latency_micros;
            pthread_mutex_unlock(&mu);
            struct timespec t = {latency / 1000000, latency % 1000000 * 1000};
            nanosleep(&t, NULL);
            memcpy(op->dst, op->src, op->bytes);
            unpin_region(op->region);
            break;
        }
        case OP_RECORD:
            complete_record(op->event->shared, op->seq);
            break;
        case OP_WAIT:
            wait_for_record(op->event->shared, op->seq);
            break;
    }
    if (op->event != NULL) {
        event_unref(op->event);
    }
}

static void *stream_worker(void *arg) {
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->m);
    for (;;) {
        while (s->head == NULL && !s->stop) {
            pthread_cond_wait(&s->cv, &s->m);
        }
        if (s->head == NULL) {
            break; /* stopped, and everything queued has run */
        }
        struct op *op = s->head;
        s->head = op->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->running = 1;
        pthread_mutex_unlock(&s->m);

        pthread_mutex_lock(&pause_mu);
        while (paused) {
            pthread_cond_wait(&pause_cv, &pause_mu);
        }
        pthread_mutex_unlock(&pause_mu);
        run(op);
        free(op);
        __atomic_sub_fetch(&pending_ops, 1, __ATOMIC_RELEASE);

        pthread_mutex_lock(&s->m);
        s->running = 0;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->m);
    return NULL;
}

static void enqueue(CUstream s, struct op *op) {
    __atomic_add_fetch(&pending_ops, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&s->m);
    op->next = NULL;
    if (s->tail == NULL) {
        s->head = op;
    } else {
        s->tail->next = op;
    }
    s->tail = op;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
}

static void drain(CUstream s) {
    pthread_mutex_lock(&s->m);
    while (s->head != NULL || s->running) {
        pthread_cond_wait(&s->cv, &s->m);
    }
    pthread_mutex_unlock(&s->m);
}

static int valid_stream(CUstream s) {
    return s != NULL && __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) == STREAM_MAGIC;
}

/* CUDA_SUCCESS when `s` (NULL: the context's default stream) can be used now */
static CUresult check_stream(CUstream s) {
    if (s == NULL) {
        return CUDA_SUCCESS;
    }
    if (!valid_stream(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return in_current_context(s->device, s->generation) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    REQUIRE_CONTEXT();
    if (phStream == NULL || (Flags & ~CU_STREAM_NON_BLOCKING) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->device = current->device;
    s->generation = current->generation;
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    __atomic_store_n(&s->magic, STREAM_MAGIC, __ATOMIC_RELEASE);
    context_object(s->device, 1);
    count(C_STREAM_CREATE, 1);
    count(C_LIVE_STREAMS, 1);
    *phStream = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    REQUIRE_CONTEXT();
    CUstream s = hStream;
    CUresult rc = s == NULL ? CUDA_ERROR_INVALID_HANDLE : check_stream(s);
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (!__atomic_compare_exchange_n(&s->magic, &(uint32_t) {STREAM_MAGIC}, DEAD_MAGIC, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED)) {
        return CUDA_ERROR_INVALID_HANDLE; /* destroyed concurrently */
    }
    pthread_mutex_lock(&s->m);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
    pthread_join(s->thread, NULL); /* the worker runs what is queued first */
    context_object(s->device, -1);
    count(C_STREAM_DESTROY, 1);
    count(C_LIVE_STREAMS, -1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    REQUIRE_CONTEXT();
    count(C_STREAM_SYNCHRONIZE, 1);
    CUresult rc = check_stream(hStream);
    if (rc != CUDA_SUCCESS || hStream == NULL) {
        return rc; /* the NULL stream runs everything at once in the double */
    }
    drain(hStream);
    return CUDA_SUCCESS;
}

static struct op *new_op(enum op_kind kind, CUevent e, uint64_t seq) {
    struct op *op = calloc(1, sizeof *op);
    if (op != NULL && e != NULL) {
        pthread_mutex_lock(&mu);
        e->refs++;
        pthread_mutex_unlock(&mu);
    }
    if (op != NULL) {
        op->kind = kind;
        op->event = e;
        op->seq = seq;
    }
    return op;
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    REQUIRE_CONTEXT();
    CUresult rc = check_stream(hStream);
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (!valid_event(hEvent)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!in_current_context(hEvent->device, hEvent->generation)) {
        return CUDA_ERROR_INVALID_CONTEXT; /* event and stream must be of the current context */
    }
    uint64_t seq = __atomic_add_fetch(&hEvent->shared->recorded, 1, __ATOMIC_ACQ_REL);
    count(C_EVENT_RECORD, 1);
    if (hStream == NULL) {
        complete_record(hEvent->shared, seq);
        return CUDA_SUCCESS;
    }
    struct op *op = new_op(OP_RECORD, hEvent, seq);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    enqueue(hStream, op);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent hEvent) {
    REQUIRE_CONTEXT();
    /* as cuStreamWaitEvent: an event of another context may be queried, not one of a destroyed one */
    if (!valid_event(hEvent) || !context_alive(hEvent->device, hEvent->generation)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    count(C_EVENT_QUERY, 1);
    /* the work captured by the most recent record before this call */
    uint64_t seq = __atomic_load_n(&hEvent->shared->recorded, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&hEvent->shared->completed, __ATOMIC_ACQUIRE) >= seq) {
        return CUDA_SUCCESS;
    }
    count(C_EVENT_NOT_READY, 1);
    return CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    REQUIRE_CONTEXT();
    CUresult rc = check_stream(hStream);
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    /* the event may belong to another context (the driver allows it), but not to a destroyed one */
    if (!valid_event(hEvent) || !context_alive(hEvent->device, hEvent->generation)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (Flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the wait is for the record made most recently before this call (none: nothing to wait for) */
    uint64_t seq = __atomic_load_n(&hEvent->shared->recorded, __ATOMIC_ACQUIRE);
    __atomic_add_fetch(&hEvent->shared->waits, 1, __ATOMIC_RELAXED);
    count(C_STREAM_WAIT_EVENT, 1);
    if (hStream == NULL) {
        wait_for_record(hEvent->shared, seq);
        return CUDA_SUCCESS;
    }
    struct op *op = new_op(OP_WAIT, hEvent, seq);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    enqueue(hStream, op);
    return CUDA_SUCCESS;
}

/* ---- copies ---------------------------------------------------------------------------------- */

/* the host address of [address, address + bytes) of one allocation or mapping of the current
 * context, with the region pinned (the caller unpins), or an error */
static CUresult device_range(CUdeviceptr address, size_t bytes, char **host, struct region **pinned) {
    pthread_mutex_lock(&mu);
    struct region *r = region_containing_locked(address, bytes);
    CUresult rc = CUDA_SUCCESS;
    if (r == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (!in_current_context(r->device, r->generation)) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        r->pins++;
        *host = host_of(r) + (address - r->base);
        *pinned = r;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static CUresult copy(void *dst, const void *src, size_t bytes, struct region *r, CUstream s) {
    if (s == NULL) {
        memcpy(dst, src, bytes);
        unpin_region(r);
        return CUDA_SUCCESS;
    }
    /* asynchronous for real: the host side is read or written when the stream gets there */
    struct op *op = new_op(OP_COPY, NULL, 0);
    if (op == NULL) {
        unpin_region(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->dst = dst;
    op->src = src;
    op->bytes = bytes;
    op->region = r;
    enqueue(s, op);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream) {
    REQUIRE_CONTEXT();
    CUresult rc = check_stream(hStream);
    if (rc != CUDA_SUCCESS || ByteCount == 0) {
        return rc;
    }
    if (srcHost == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    char *dst;
    struct region *r;
    if ((rc = device_range(dstDevice, ByteCount, &dst, &r)) != CUDA_SUCCESS) {
        return rc;
    }
    count(C_MEMCPY_HTOD, 1);
    return copy(dst, srcHost, ByteCount, r, hStream);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
    REQUIRE_CONTEXT();
    CUresult rc = check_stream(hStream);
    if (rc != CUDA_SUCCESS || ByteCount == 0) {
        return rc;
    }
    if (dstHost == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    char *src;
    struct region *r;
    if ((rc = device_range(srcDevice, ByteCount, &src, &r)) != CUDA_SUCCESS) {
        return rc;
    }
    count(C_MEMCPY_DTOH, 1);
    return copy(dstHost, src, ByteCount, r, hStream);
}
