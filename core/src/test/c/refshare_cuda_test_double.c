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
 * Model:
 *  - cuMemAlloc creates a file in the double's directory (REFSHARE_CUDA_DOUBLE_DIR, default
 *    /dev/shm, or refshare_cuda_double_configure) and maps it; the "device pointer" is the
 *    mapping's address. cuMemFree unmaps it and removes the name. cuIpcGetMemHandle names the
 *    file in the handle; cuIpcOpenMemHandle maps it in another process (once per process,
 *    reference-counted like the driver), cuIpcCloseMemHandle unmaps it at the last close.
 *  - Interprocess events are shared flags in a small file: a record sequence (bumped when
 *    cuEventRecord is called) and a completion sequence (stored when the stream reaches
 *    the record). cuStreamWaitEvent captures the record sequence at the call, and the
 *    waiting stream blocks until the completion sequence reaches it.
 *  - Each stream is a worker thread running its queued operations in order: copies
 *    (host-to-device ones staged at the call, like the driver does for pageable memory),
 *    records and waits. refshare_cuda_double_pause(1) holds every stream of the process,
 *    so a test can prove a consumer really waits for a producer's event.
 *  - Strictness the driver has too: calls need cuInit and a current context; opening an IPC
 *    handle in its exporting process fails (CUDA_ERROR_INVALID_CONTEXT); copies must lie
 *    within one allocation or mapping; the IPC open flag must be LAZY_ENABLE_PEER_ACCESS;
 *    interprocess events need DISABLE_TIMING.
 *
 * Test-only entry points (not CUDA): refshare_cuda_double_configure, _pause, _pending,
 * _counter (per-process call and live-object counts by name).
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
 * Shared event file (first 48 bytes of a 4096-byte file):
 *
 *     0      4        8            16            24        32         40
 *     +------+--------+------------+-------------+---------+----------+
 *     |magic |creator | recorded   | completed   | waits   | blocked  |
 *     |"RSEV"| pid    | (u64 seq)  | (u64 seq)   | (u64)   | (u64)    |
 *     +------+--------+------------+-------------+---------+----------+
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#ifdef REFSHARE_CHECK_AGAINST_CUDA_H
/* Compiled this way (gcc -fsyntax-only -I<cuda>/include), the compiler checks every entry point
 * below against the real declarations in cuda.h: the double's ABI is the driver's. */
#include <cuda.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUipcMemHandle_st { char reserved[64]; } CUipcMemHandle;
typedef struct CUipcEventHandle_st { char reserved[64]; } CUipcEventHandle;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_MAP_FAILED = 205,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
};

#define CU_EVENT_BLOCKING_SYNC 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_EVENT_INTERPROCESS 0x4
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CU_STREAM_NON_BLOCKING 0x1
#endif

#define MAX_DEVICES 8
#define NAME_BYTES 48
#define EVENT_FILE_BYTES 4096
static const char MEM_MAGIC[4] = {'R', 'S', 'D', 'M'};
static const char EVENT_MAGIC[4] = {'R', 'S', 'D', 'E'};
static const uint32_t SHARED_EVENT_MAGIC = 0x56455352; /* "RSEV" */
static const uint32_t CTX_MAGIC = 0x58544344, STREAM_MAGIC = 0x4d525453, EVENT_OBJ_MAGIC = 0x544e5645;

/* ---- counters (per process), read by tests through refshare_cuda_double_counter ---------- */

enum counter {
    C_MEM_ALLOC, C_MEM_FREE, C_IPC_GET_MEM, C_IPC_OPEN_MEM, C_IPC_CLOSE_MEM, C_EVENT_CREATE, C_EVENT_RECORD,
    C_EVENT_DESTROY, C_IPC_GET_EVENT, C_IPC_OPEN_EVENT, C_STREAM_WAIT_EVENT, C_STREAM_SYNCHRONIZE, C_MEMCPY_HTOD,
    C_MEMCPY_DTOH, C_STREAM_CREATE, C_STREAM_DESTROY, C_CTX_SET_CURRENT, C_BLOCKED_WAITS,
    C_LIVE_ALLOCATIONS, C_LIVE_MAPPINGS, C_LIVE_EVENTS, C_LIVE_STREAMS, C_LIVE_CONTEXT_RETAINS, N_COUNTERS
};
static const char *const COUNTER_NAMES[N_COUNTERS] = {
    "cuMemAlloc", "cuMemFree", "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle", "cuEventCreate",
    "cuEventRecord", "cuEventDestroy", "cuIpcGetEventHandle", "cuIpcOpenEventHandle", "cuStreamWaitEvent",
    "cuStreamSynchronize", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuStreamCreate", "cuStreamDestroy",
    "cuCtxSetCurrent", "blockedWaits",
    "liveAllocations", "liveMappings", "liveEvents", "liveStreams", "livePrimaryContextRetains",
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

struct CUctx_st {
    uint32_t magic;
    int device;
    int retains;
};
static struct CUctx_st contexts[MAX_DEVICES];
static __thread CUcontext current;

/* an allocation of this process (own) or another process's allocation mapped here */
struct region {
    CUdeviceptr base;
    size_t size;
    int own;
    int refs;
    char name[NAME_BYTES];
    struct region *next;
};
static struct region *regions;

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

/* Test-only: a counter by name (see COUNTER_NAMES), or -1 for an unknown name. */
EXPORT long long refshare_cuda_double_counter(const char *name) {
    for (int i = 0; i < N_COUNTERS; i++) {
        if (strcmp(name, COUNTER_NAMES[i]) == 0) {
            return __atomic_load_n(&counters[i], __ATOMIC_RELAXED);
        }
    }
    return -1;
}

static void path_of(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", directory, name);
}

static CUresult check_context(void) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (current == NULL || current->magic != CTX_MAGIC || __atomic_load_n(&current->retains, __ATOMIC_RELAXED) <= 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return CUDA_SUCCESS;
}

#define REQUIRE_CONTEXT()                     \
    do {                                      \
        CUresult rc_ = check_context();       \
        if (rc_ != CUDA_SUCCESS) return rc_;  \
    } while (0)

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
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
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

EXPORT CUresult cuDriverGetVersion(int *version) {
    if (version == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *version = 13000;
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

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (device == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    int n = device_count;
    pthread_mutex_unlock(&mu);
    if (ordinal < 0 || ordinal >= n) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (name == NULL || len <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (device < 0 || device >= MAX_DEVICES) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    snprintf(name, (size_t) len, "refshare CUDA test double #%d (not a GPU)", device);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice device) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (device < 0 || device >= MAX_DEVICES) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    __atomic_add_fetch(&contexts[device].retains, 1, __ATOMIC_RELAXED);
    count(C_LIVE_CONTEXT_RETAINS, 1);
    *pctx = &contexts[device];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    if (device < 0 || device >= MAX_DEVICES) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    int left = __atomic_sub_fetch(&contexts[device].retains, 1, __ATOMIC_RELAXED);
    if (left < 0) {
        __atomic_add_fetch(&contexts[device].retains, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    count(C_LIVE_CONTEXT_RETAINS, -1);
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

/* ---- memory ---------------------------------------------------------------------------------- */

/* the region containing [address, address + bytes), or NULL; mu held */
static struct region *region_containing_locked(CUdeviceptr address, size_t bytes) {
    for (struct region *r = regions; r != NULL; r = r->next) {
        if (address >= r->base && address - r->base <= r->size && bytes <= r->size - (address - r->base)) {
            return r;
        }
    }
    return NULL;
}

static struct region *region_at_locked(CUdeviceptr base, int own) {
    for (struct region *r = regions; r != NULL; r = r->next) {
        if (r->base == base && r->own == own) {
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

/* maps an existing file of exactly `size` bytes (0: any size, returned in *size_out) */
static void *open_mapping_locked(const char *name, size_t size, size_t *size_out, CUresult *error) {
    char path[600];
    path_of(path, sizeof path, name);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        *error = CUDA_ERROR_INVALID_HANDLE; /* the exporter freed it, or the handle is garbage */
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0 || (size != 0 && (size_t) st.st_size != size)) {
        close(fd);
        *error = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    void *p = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        *error = CUDA_ERROR_MAP_FAILED;
        return NULL;
    }
    *size_out = (size_t) st.st_size;
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
    void *p = r == NULL ? NULL : create_mapping_locked("mem", bytesize, r->name, &error);
    if (p == NULL) {
        pthread_mutex_unlock(&mu);
        free(r);
        return error;
    }
    r->base = (CUdeviceptr) (uintptr_t) p;
    r->size = bytesize;
    r->own = 1;
    r->refs = 1;
    r->next = regions;
    regions = r;
    memory_in_use += (long long) bytesize;
    pthread_mutex_unlock(&mu);
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
    unlink_region_locked(r);
    memory_in_use -= (long long) r->size;
    char path[600];
    path_of(path, sizeof path, r->name);
    unlink(path);
    pthread_mutex_unlock(&mu);
    munmap((void *) (uintptr_t) r->base, r->size);
    free(r);
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
    if (pbase != NULL) {
        *pbase = r->base;
    }
    if (psize != NULL) {
        *psize = r->size;
    }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    REQUIRE_CONTEXT();
    if (handle == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    struct region *r = region_at_locked(dptr, 1);
    if (r == NULL) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(handle, 0, sizeof *handle);
    int32_t pid = (int32_t) getpid();
    uint64_t size = r->size;
    memcpy(handle->reserved, MEM_MAGIC, 4);
    memcpy(handle->reserved + 4, &pid, 4);
    memcpy(handle->reserved + 8, &size, 8);
    memcpy(handle->reserved + 16, r->name, strlen(r->name) + 1);
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

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
    REQUIRE_CONTEXT();
    if (pdptr == NULL || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
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
        if (!r->own && strcmp(r->name, name) == 0) {
            r->refs++; /* opened before: same address, one more reference, as the driver does */
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
    size_t mapped;
    void *p = open_mapping_locked(name, (size_t) size, &mapped, &error);
    if (p == NULL) {
        pthread_mutex_unlock(&mu);
        free(r);
        return error;
    }
    r->base = (CUdeviceptr) (uintptr_t) p;
    r->size = mapped;
    r->own = 0;
    r->refs = 1;
    memcpy(r->name, name, NAME_BYTES);
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&mu);
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
    count(C_IPC_CLOSE_MEM, 1);
    if (--r->refs > 0) {
        pthread_mutex_unlock(&mu);
        return CUDA_SUCCESS;
    }
    unlink_region_locked(r);
    pthread_mutex_unlock(&mu);
    munmap((void *) (uintptr_t) r->base, r->size);
    free(r);
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
};

struct CUevent_st {
    uint32_t magic;
    int interprocess;
    int owner;
    int refs; /* the handle's own, plus one per queued operation; guarded by mu */
    char name[NAME_BYTES];
    struct event_shared *shared;
};

static int valid_event(CUevent e) {
    return e != NULL && e->magic == EVENT_OBJ_MAGIC;
}

static void event_unref(CUevent e) {
    pthread_mutex_lock(&mu);
    int left = --e->refs;
    pthread_mutex_unlock(&mu);
    if (left == 0) {
        if (e->interprocess) {
            munmap(e->shared, EVENT_FILE_BYTES);
        } else {
            free(e->shared);
        }
        e->magic = 0;
        free(e);
    }
}

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int flags) {
    REQUIRE_CONTEXT();
    if (phEvent == NULL || (flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)) != 0
        || ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->interprocess = (flags & CU_EVENT_INTERPROCESS) != 0;
    e->owner = 1;
    e->refs = 1;
    CUresult error = CUDA_ERROR_OUT_OF_MEMORY;
    if (e->interprocess) {
        pthread_mutex_lock(&mu);
        e->shared = create_mapping_locked("ev", EVENT_FILE_BYTES, e->name, &error);
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
    e->magic = EVENT_OBJ_MAGIC;
    count(C_EVENT_CREATE, 1);
    count(C_LIVE_EVENTS, 1);
    *phEvent = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    REQUIRE_CONTEXT();
    if (!valid_event(e)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (e->owner && e->interprocess) {
        char path[600];
        pthread_mutex_lock(&mu);
        path_of(path, sizeof path, e->name);
        pthread_mutex_unlock(&mu);
        unlink(path); /* no process can open it any more; those that did keep their mapping */
    }
    count(C_EVENT_DESTROY, 1);
    count(C_LIVE_EVENTS, -1);
    event_unref(e); /* queued operations still using it keep it until they have run, as the driver does */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *handle, CUevent e) {
    REQUIRE_CONTEXT();
    if (handle == NULL || !valid_event(e)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!e->interprocess || !e->owner) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(handle, 0, sizeof *handle);
    int32_t pid = (int32_t) getpid();
    memcpy(handle->reserved, EVENT_MAGIC, 4);
    memcpy(handle->reserved + 4, &pid, 4);
    memcpy(handle->reserved + 16, e->name, strlen(e->name) + 1);
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
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult error = CUDA_SUCCESS;
    size_t mapped;
    pthread_mutex_lock(&mu);
    e->shared = open_mapping_locked(name, EVENT_FILE_BYTES, &mapped, &error);
    pthread_mutex_unlock(&mu);
    if (e->shared == NULL || __atomic_load_n(&e->shared->magic, __ATOMIC_ACQUIRE) != SHARED_EVENT_MAGIC) {
        if (e->shared != NULL) {
            munmap(e->shared, EVENT_FILE_BYTES);
            error = CUDA_ERROR_INVALID_HANDLE;
        }
        free(e);
        return error;
    }
    e->interprocess = 1;
    e->owner = 0;
    e->refs = 1;
    memcpy(e->name, name, NAME_BYTES);
    e->magic = EVENT_OBJ_MAGIC;
    count(C_IPC_OPEN_EVENT, 1);
    count(C_LIVE_EVENTS, 1);
    *phEvent = e;
    return CUDA_SUCCESS;
}

static void complete_record(struct event_shared *s, uint64_t seq) {
    uint64_t c = __atomic_load_n(&s->completed, __ATOMIC_RELAXED);
    while (c < seq && !__atomic_compare_exchange_n(&s->completed, &c, seq, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

/* waits until the event's completion reaches `seq`; a dead recorder never completes, so it stops waiting */
static void wait_for_record(struct event_shared *s, uint64_t seq) {
    if (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >= seq) {
        return;
    }
    __atomic_add_fetch(&s->blocked, 1, __ATOMIC_RELAXED);
    count(C_BLOCKED_WAITS, 1);
    struct timespec pause = {0, 50 * 1000};
    while (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) < seq) {
        if (kill((pid_t) s->creator, 0) != 0 && errno == ESRCH) {
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
    void *src;
    size_t bytes;
    int free_src;
    CUevent event;
    uint64_t seq;
    struct op *next;
};

struct CUstream_st {
    uint32_t magic;
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
        case OP_COPY:
            memcpy(op->dst, op->src, op->bytes);
            if (op->free_src) {
                free(op->src);
            }
            break;
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
    return s != NULL && s->magic == STREAM_MAGIC;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int flags) {
    REQUIRE_CONTEXT();
    if (phStream == NULL || (flags & ~CU_STREAM_NON_BLOCKING) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->magic = STREAM_MAGIC;
    count(C_STREAM_CREATE, 1);
    count(C_LIVE_STREAMS, 1);
    *phStream = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
    REQUIRE_CONTEXT();
    if (!valid_stream(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&s->m);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
    pthread_join(s->thread, NULL); /* the worker runs what is queued first */
    s->magic = 0;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->m);
    free(s);
    count(C_STREAM_DESTROY, 1);
    count(C_LIVE_STREAMS, -1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
    REQUIRE_CONTEXT();
    count(C_STREAM_SYNCHRONIZE, 1);
    if (s == NULL) {
        return CUDA_SUCCESS; /* the NULL stream runs everything at once in the double */
    }
    if (!valid_stream(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    drain(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
    REQUIRE_CONTEXT();
    if (!valid_event(e) || (s != NULL && !valid_stream(s))) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    uint64_t seq = __atomic_add_fetch(&e->shared->recorded, 1, __ATOMIC_ACQ_REL);
    count(C_EVENT_RECORD, 1);
    if (s == NULL) {
        complete_record(e->shared, seq);
        return CUDA_SUCCESS;
    }
    struct op *op = calloc(1, sizeof *op);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    e->refs++;
    pthread_mutex_unlock(&mu);
    op->kind = OP_RECORD;
    op->event = e;
    op->seq = seq;
    enqueue(s, op);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
    REQUIRE_CONTEXT();
    if (!valid_event(e) || (s != NULL && !valid_stream(s))) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the wait is for the record made most recently before this call (none: nothing to wait for) */
    uint64_t seq = __atomic_load_n(&e->shared->recorded, __ATOMIC_ACQUIRE);
    __atomic_add_fetch(&e->shared->waits, 1, __ATOMIC_RELAXED);
    count(C_STREAM_WAIT_EVENT, 1);
    if (s == NULL) {
        wait_for_record(e->shared, seq);
        return CUDA_SUCCESS;
    }
    struct op *op = calloc(1, sizeof *op);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    e->refs++;
    pthread_mutex_unlock(&mu);
    op->kind = OP_WAIT;
    op->event = e;
    op->seq = seq;
    enqueue(s, op);
    return CUDA_SUCCESS;
}

/* ---- copies ---------------------------------------------------------------------------------- */

static int device_range_ok(CUdeviceptr address, size_t bytes) {
    pthread_mutex_lock(&mu);
    int ok = region_containing_locked(address, bytes) != NULL;
    pthread_mutex_unlock(&mu);
    return ok;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    REQUIRE_CONTEXT();
    if (s != NULL && !valid_stream(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (bytes == 0) {
        return CUDA_SUCCESS;
    }
    if (src == NULL || !device_range_ok(dst, bytes)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    count(C_MEMCPY_HTOD, 1);
    if (s == NULL) {
        memcpy((void *) (uintptr_t) dst, src, bytes);
        return CUDA_SUCCESS;
    }
    /* pageable source: staged now, so the caller may reuse it at once (as with the driver) */
    struct op *op = calloc(1, sizeof *op);
    void *staged = malloc(bytes);
    if (op == NULL || staged == NULL) {
        free(op);
        free(staged);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(staged, src, bytes);
    op->kind = OP_COPY;
    op->dst = (void *) (uintptr_t) dst;
    op->src = staged;
    op->bytes = bytes;
    op->free_src = 1;
    enqueue(s, op);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    REQUIRE_CONTEXT();
    if (s != NULL && !valid_stream(s)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (bytes == 0) {
        return CUDA_SUCCESS;
    }
    if (dst == NULL || !device_range_ok(src, bytes)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    count(C_MEMCPY_DTOH, 1);
    if (s == NULL) {
        memcpy(dst, (void *) (uintptr_t) src, bytes);
        return CUDA_SUCCESS;
    }
    struct op *op = calloc(1, sizeof *op);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->kind = OP_COPY;
    op->dst = dst;
    op->src = (void *) (uintptr_t) src;
    op->bytes = bytes;
    enqueue(s, op);
    drain(s); /* into pageable memory the driver returns once the copy is done */
    return CUDA_SUCCESS;
}
