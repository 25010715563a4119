/*
 * refshare's native helper: real atomic read-modify-write operations and futex calls on
 * words of shared mappings, for the Python package. Python has no atomics; struct reads and
 * writes of a mapped file are neither atomic nor ordered, so every access to a word that
 * another process may change goes through here (docs/protocol.md section 14).
 *
 * Every operation is sequentially consistent (__ATOMIC_SEQ_CST), which the protocol allows
 * everywhere. Addresses are plain integers (the caller computes base + offset); the caller
 * guarantees natural alignment and that the address lies inside a live mapping.
 *
 * Built by refshare/native.py with the machine's C compiler and loaded with ctypes.
 */
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#define SC __ATOMIC_SEQ_CST

int64_t rs_load64(uintptr_t a) { return __atomic_load_n((int64_t *) a, SC); }
void rs_store64(uintptr_t a, int64_t v) { __atomic_store_n((int64_t *) a, v, SC); }
int64_t rs_exchange64(uintptr_t a, int64_t v) { return __atomic_exchange_n((int64_t *) a, v, SC); }
int64_t rs_fetch_add64(uintptr_t a, int64_t d) { return __atomic_fetch_add((int64_t *) a, d, SC); }
int64_t rs_fetch_or64(uintptr_t a, int64_t v) { return __atomic_fetch_or((int64_t *) a, v, SC); }

/* Strong compare-and-set; 1 when the word held `expected` and now holds `desired`. */
int rs_cas64(uintptr_t a, int64_t expected, int64_t desired) {
    return __atomic_compare_exchange_n((int64_t *) a, &expected, desired, 0, SC, SC);
}

int32_t rs_load32(uintptr_t a) { return __atomic_load_n((int32_t *) a, SC); }
void rs_store32(uintptr_t a, int32_t v) { __atomic_store_n((int32_t *) a, v, SC); }
int32_t rs_exchange32(uintptr_t a, int32_t v) { return __atomic_exchange_n((int32_t *) a, v, SC); }
int32_t rs_fetch_add32(uintptr_t a, int32_t d) { return __atomic_fetch_add((int32_t *) a, d, SC); }
int32_t rs_fetch_or32(uintptr_t a, int32_t v) { return __atomic_fetch_or((int32_t *) a, v, SC); }
int rs_cas32(uintptr_t a, int32_t expected, int32_t desired) {
    return __atomic_compare_exchange_n((int32_t *) a, &expected, desired, 0, SC, SC);
}

/*
 * FUTEX_WAIT on a shared (not private) word: the mapping is of a file, so waiters of other
 * processes are keyed on the same page. Returns 0 when woken (or spuriously), else errno
 * (EAGAIN: the word no longer held `expected`; ETIMEDOUT; EINTR).
 */
int rs_futex_wait(uintptr_t a, int32_t expected, int64_t timeout_ns) {
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000LL;
        ts.tv_nsec = timeout_ns % 1000000000LL;
        tp = &ts;
    }
    long r = syscall(SYS_futex, (int32_t *) a, FUTEX_WAIT, expected, tp, NULL, 0);
    return r == 0 ? 0 : errno;
}

/* FUTEX_WAKE of up to n waiters (shared); the number woken, or -errno. */
int rs_futex_wake(uintptr_t a, int32_t n) {
    long r = syscall(SYS_futex, (int32_t *) a, FUTEX_WAKE, n, NULL, NULL, 0);
    return r >= 0 ? (int) r : -errno;
}

/*
 * A counter file's reclaim scan in one call (there may be a million slots): for every slot
 * word whose low 32 bits equal `held_low`, CAS it to RELEASED (3) keeping the range tag in
 * the upper 32 bits. Returns how many this call moved; each move is one CAS, so racing
 * releasers never count a token twice.
 */
int64_t rs_release_all_held(uintptr_t slots, int64_t count, int64_t held_low) {
    int64_t moved = 0;
    for (int64_t s = 0; s < count; s++) {
        int64_t *w = (int64_t *) slots + s;
        int64_t v = __atomic_load_n(w, SC);
        while ((v & 0xFFFFFFFFLL) == held_low) {
            int64_t released = (v & (int64_t) 0xFFFFFFFF00000000ULL) | 3;
            if (__atomic_compare_exchange_n(w, &v, released, 0, SC, SC)) {
                moved++;
                break;
            }
        }
    }
    return moved;
}

/* Number of slot words among `count` whose low 32 bits equal `low` (statistics, janitor). */
int64_t rs_count_low(uintptr_t slots, int64_t count, int64_t low) {
    int64_t n = 0;
    for (int64_t s = 0; s < count; s++) {
        if ((__atomic_load_n((int64_t *) slots + s, SC) & 0xFFFFFFFFLL) == low) {
            n++;
        }
    }
    return n;
}

/* Copies n bytes; used for payloads around which the atomics above give the ordering. */
void rs_copy(uintptr_t dst, uintptr_t src, int64_t n) { memcpy((void *) dst, (const void *) src, (size_t) n); }

/* Touches one byte per page of [a, a + n) for writing so the pages are faulted in now. */
void rs_prefault(uintptr_t a, int64_t n, int64_t page) {
    for (int64_t o = 0; o < n; o += page) {
        volatile char *p = (volatile char *) (a + o);
        *p = *p;
    }
}
