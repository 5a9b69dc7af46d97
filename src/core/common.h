/* common.h — what every lean source file shares: error reporting, the allocation
 * table (so tests can fail the n-th allocation), and overflow-checked size arithmetic.
 * Nothing here knows about models or backends. */
#ifndef LEAN_COMMON_H
#define LEAN_COMMON_H

#include "lean.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sets *err (nullable) to status + a printf-style message and returns status.
 * Every failure in the library goes through here: one place for a breakpoint. */
lean_status lean_fail(lean_error *err, lean_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define LEAN_FAIL(err, status, ...) lean_fail((err), (status), __VA_ARGS__)

/* Allocation goes through these so a test can fail the n-th call (see lean_alloc_fail_at).
 * lean_malloc(0) returns a unique non-NULL pointer. Sizes are bytes. */
void *lean_malloc(size_t bytes);
void *lean_calloc(size_t n, size_t elem_bytes); /* fails (NULL) if n * elem_bytes overflows */
void *lean_realloc(void *p, size_t bytes);
void lean_free(void *p);
char *lean_strndup(const char *s, size_t n);

/* Test hook: the n-th allocation from now (1-based) fails; 0 disables. When sticky,
 * every allocation after it fails too. Returns how many allocations were counted since
 * the last call (to size an OOM loop). Not thread-safe; tests only. */
uint64_t lean_alloc_fail_at(uint64_t n, bool sticky);
/* Test hook: the bytes asked of lean_malloc / lean_calloc / lean_realloc since the last
 * lean_alloc_fail_at, summed (frees are not subtracted: it bounds the peak). */
uint64_t lean_alloc_bytes(void);

/* Overflow-checked arithmetic on sizes read from files: return false on overflow. */
static inline bool lean_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool lean_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
/* a / b rounded up (b > 0; a + b - 1 must not overflow): workgroups, tiles, blocks */
static inline uint64_t lean_div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* A mutex for what contexts of one model share across threads (model.h, gpu/forward.c);
 * nothing in the single-threaded wasm32-wasi build, which has no pthread.h (pool.c's test). */
#if defined(__wasi__) && !defined(_REENTRANT)
typedef struct lean_mutex { char unused; } lean_mutex;
static inline bool lean_mutex_init(lean_mutex *mu) { (void)mu; return true; }
static inline void lean_mutex_destroy(lean_mutex *mu) { (void)mu; }
static inline void lean_mutex_lock(lean_mutex *mu) { (void)mu; }
static inline void lean_mutex_unlock(lean_mutex *mu) { (void)mu; }
#else
#include <pthread.h>
typedef pthread_mutex_t lean_mutex;
static inline bool lean_mutex_init(lean_mutex *mu) { return pthread_mutex_init(mu, NULL) == 0; }
static inline void lean_mutex_destroy(lean_mutex *mu) { pthread_mutex_destroy(mu); }
static inline void lean_mutex_lock(lean_mutex *mu) { pthread_mutex_lock(mu); }
static inline void lean_mutex_unlock(lean_mutex *mu) { pthread_mutex_unlock(mu); }
#endif

#endif
