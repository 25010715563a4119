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

/*
 * The queue's hot paths (docs/protocol.md section 9), each in one call: from Python every
 * atomic costs a foreign call of a few hundred nanoseconds, and a take made of a dozen of them
 * cost more than the rest of the message. The logic is queue.py's, which keeps the slow paths
 * (waiting, recovery, leaving) and documents the rules; offsets are the layout's (section 9.1).
 */
#define Q_CLOSED 48
#define Q_TAIL 128
#define Q_HEAD 256
#define Q_NOT_EMPTY_SEQ 384
#define Q_CONSUMERS_SLEEPING 388
#define Q_NOT_FULL_SEQ 512
#define Q_PRODUCERS_SLEEPING 516
#define Q_POS_BITS 46
#define Q_POS_MASK ((1ULL << Q_POS_BITS) - 1)
#define Q_FREE 0ULL
#define Q_WRITING 1ULL
#define Q_FULL 2ULL
#define Q_READING 3ULL

typedef struct {
    uintptr_t base;     /* the mapped queue file */
    int64_t cells;      /* offset of cell 0 */
    int64_t capacity;
    int64_t cell_length;
    int64_t entry;      /* this handle's participant index (the claimant number) */
    int64_t counter;    /* offset of the entry's offered or taken count */
} rs_queue;

#define Q64(q, off) ((uint64_t *) ((q)->base + (off)))
#define Q32(q, off) ((int32_t *) ((q)->base + (off)))

static inline uint64_t q_word(uint64_t pos, uint64_t state, uint64_t claimant) {
    return (pos & Q_POS_MASK) | state << Q_POS_BITS | claimant << (Q_POS_BITS + 2);
}

static inline int64_t q_dist(uint64_t w, uint64_t p) {
    uint64_t x = (w - p) & Q_POS_MASK;
    return x >= (1ULL << (Q_POS_BITS - 1)) ? (int64_t) x - (int64_t) (1ULL << Q_POS_BITS) : (int64_t) x;
}

static inline int64_t q_cell(const rs_queue *q, uint64_t pos) {
    return q->cells + (int64_t) (pos % (uint64_t) q->capacity) * q->cell_length;
}

static inline int q_cas(uint64_t *w, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(w, &expected, desired, 0, SC, SC);
}

/* Wakes one waiter of `seq` if any sleeps (the sleeper counts itself before it re-checks). */
static void q_signal(const rs_queue *q, int64_t seq, int64_t sleeping) {
    if (__atomic_load_n(Q32(q, sleeping), SC) > 0) {
        __atomic_fetch_add(Q32(q, seq), 1, SC);
        syscall(SYS_futex, Q32(q, seq), FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

static int q_message_at_head(const rs_queue *q) {
    uint64_t h = __atomic_load_n(Q64(q, Q_HEAD), SC);
    uint64_t w = __atomic_load_n(Q64(q, q_cell(q, h)), SC);
    return (q_dist(w, h) == 0 && ((w >> Q_POS_BITS) & 3) == Q_FULL) || __atomic_load_n(Q32(q, Q_CLOSED), SC) != 0;
}

static int q_room_at_tail(const rs_queue *q) {
    uint64_t t = __atomic_load_n(Q64(q, Q_TAIL), SC);
    uint64_t w = __atomic_load_n(Q64(q, q_cell(q, t)), SC);
    return (q_dist(w, t) == 0 && ((w >> Q_POS_BITS) & 3) == Q_FREE) || __atomic_load_n(Q32(q, Q_CLOSED), SC) != 0;
}

/*
 * Claims the message at the head (FULL -> READING by us). Returns 1 with out[0] = the cell's
 * offset, out[1] = its position, out[2] = the stored length; 0 when empty, 2 when the stream
 * ended and nothing is left to take, -1 when cells lie ahead of the head by two laps (corrupt).
 */
int rs_queue_claim(const rs_queue *q, int64_t *out) {
    int64_t skipped = 0;
    for (;;) {
        int32_t closed = __atomic_load_n(Q32(q, Q_CLOSED), SC);
        uint64_t h = __atomic_load_n(Q64(q, Q_HEAD), SC) & Q_POS_MASK;
        int64_t cell = q_cell(q, h);
        uint64_t w = __atomic_load_n(Q64(q, cell), SC);
        int64_t d = q_dist(w, h);
        uint64_t s = (w >> Q_POS_BITS) & 3;
        if (d == 0 && s == Q_FULL) {
            if (q_cas(Q64(q, cell), w, q_word(h, Q_READING, (uint64_t) q->entry))) {
                q_cas(Q64(q, Q_HEAD), h, h + 1);
                out[0] = cell;
                out[1] = (int64_t) h;
                out[2] = __atomic_load_n(Q32(q, cell + 8), SC);
                return 1;
            }
        } else if (d < 0 || (d == 0 && s != Q_READING)) {
            return closed != 0 && !(d == 0 && s == Q_WRITING) ? 2 : 0;
        } else if (q_cas(Q64(q, Q_HEAD), h, h + 1) && d > 0) {
            if (++skipped > 2 * q->capacity) {
                return -1;
            }
        }
    }
}

/* Frees the cell we claimed at `pos` (READING -> FREE one lap on), counts the take, wakes. */
void rs_queue_free(const rs_queue *q, int64_t cell, int64_t pos) {
    __atomic_store_n(Q64(q, cell), q_word((uint64_t) pos + (uint64_t) q->capacity, Q_FREE, 0), SC);
    q_signal(q, Q_NOT_FULL_SEQ, Q_PRODUCERS_SLEEPING);
    __atomic_fetch_add((int64_t *) (q->base + q->counter), 1, SC);
    if (__atomic_load_n(Q32(q, Q_CONSUMERS_SLEEPING), SC) > 0 && q_message_at_head(q)) {
        q_signal(q, Q_NOT_EMPTY_SEQ, Q_CONSUMERS_SLEEPING);
    }
}

/*
 * Puts one message of n bytes at the tail (FREE -> WRITING by us -> FULL). Returns 1 when put,
 * 0 when the queue is full, 2 when the stream has ended (before or while claiming: a claimed
 * cell is freed again), -1 when cells lie ahead of the tail by two laps (corrupt).
 */
int rs_queue_offer(const rs_queue *q, const void *payload, int64_t n) {
    if (__atomic_load_n(Q32(q, Q_CLOSED), SC) != 0) {
        return 2;
    }
    int64_t skipped = 0;
    for (;;) {
        uint64_t t = __atomic_load_n(Q64(q, Q_TAIL), SC) & Q_POS_MASK;
        int64_t cell = q_cell(q, t);
        uint64_t w = __atomic_load_n(Q64(q, cell), SC);
        int64_t d = q_dist(w, t);
        if (d == 0 && ((w >> Q_POS_BITS) & 3) == Q_FREE) {
            if (q_cas(Q64(q, cell), w, q_word(t, Q_WRITING, (uint64_t) q->entry))) {
                q_cas(Q64(q, Q_TAIL), t, t + 1);
                if (__atomic_load_n(Q32(q, Q_CLOSED), SC) != 0) {
                    __atomic_store_n(Q64(q, cell), q_word(t + (uint64_t) q->capacity, Q_FREE, 0), SC);
                    q_signal(q, Q_NOT_EMPTY_SEQ, Q_CONSUMERS_SLEEPING);
                    return 2;
                }
                __atomic_store_n(Q32(q, cell + 8), (int32_t) n, SC);
                memcpy((void *) (q->base + cell + 16), payload, (size_t) n);
                __atomic_store_n(Q64(q, cell), q_word(t, Q_FULL, 0), SC);
                __atomic_fetch_add((int64_t *) (q->base + q->counter), 1, SC);
                q_signal(q, Q_NOT_EMPTY_SEQ, Q_CONSUMERS_SLEEPING);
                if (__atomic_load_n(Q32(q, Q_PRODUCERS_SLEEPING), SC) > 0 && q_room_at_tail(q)) {
                    q_signal(q, Q_NOT_FULL_SEQ, Q_PRODUCERS_SLEEPING);
                }
                return 1;
            }
        } else if (d < 0) {
            return 0;
        } else if (q_cas(Q64(q, Q_TAIL), t, t + 1) && d > 0) {
            if (++skipped > 2 * q->capacity) {
                return -1;
            }
        }
    }
}

/*
 * A counter file's token move by one CAS, then the release count and the collector's wake-up
 * (section 8.6): 1 when the slot held `expected` and now holds `desired`.
 */
int rs_counter_release(uintptr_t file, int64_t slot_offset, int64_t expected, int64_t desired, int64_t releases,
                       int64_t collector_waiting) {
    if (!__atomic_compare_exchange_n((int64_t *) (file + slot_offset), &expected, desired, 0, SC, SC)) {
        return 0;
    }
    __atomic_fetch_add((int64_t *) (file + releases), 1, SC);
    /* whoever clears the collector's waiting flag wakes it; the other releasers skip the call */
    int64_t waiting = __atomic_load_n((int64_t *) (file + collector_waiting), SC);
    if (waiting != 0
        && __atomic_compare_exchange_n((int64_t *) (file + collector_waiting), &waiting, 0, 0, SC, SC)) {
        syscall(SYS_futex, (int32_t *) (file + releases), FUTEX_WAKE, 0x7FFFFFFF, NULL, NULL, 0);
    }
    return 1;
}

/* What a waiting consumer (producer) polls for: a message at the head (room at the tail), or the end. */
int rs_queue_message_at_head(const rs_queue *q) { return q_message_at_head(q); }
int rs_queue_room_at_tail(const rs_queue *q) { return q_room_at_tail(q); }
