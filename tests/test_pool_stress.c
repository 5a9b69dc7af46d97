/* test_pool_stress.c — the thread pool under the timings that break pools: chunks of random
 * length (nothing, a spin, a yield, a short sleep) so that workers wake late and runs follow
 * each other while a worker is still between two of them; more threads than chunks; several
 * pools alive and driven at once; pools created, run and freed in a churn (freed before their
 * workers ran, right after a run). Every run checks that each chunk ran exactly once, with
 * its own run's fn and arg. A hang is what this hunts, so an alarm ends the program with a
 * failure line instead of waiting forever. Each phase runs for a fixed time, not a fixed
 * count, so the test stays short under the sanitizers.
 * lean-test: native-only (pthreads) */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/pool.h"
#include "test.h"

#define WATCHDOG_S 20    /* far above the phases' total (about 4 s); only a hang reaches it */
#define PHASE_S 0.6      /* seconds per phase */
#define MAX_CHUNKS 64
#define N_POOLS 4

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *volatile phase = "start"; /* what runs now, for the watchdog's line */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_pool_stress: FAIL: a run did not finish within the watchdog (hang) in: ";
    const char *ph = phase;
    if (write(2, msg, sizeof msg - 1) < 0 || write(2, ph, strlen(ph)) < 0 || write(2, "\n", 1) < 0) _exit(2);
    _exit(1);
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* One run's arguments. Two of these alternate, so a chunk that ran with the previous run's
 * arg, or twice, or not at all, shows in the counts. */
typedef struct job {
    atomic_int hits[MAX_CHUNKS];
    atomic_int bad;   /* chunks out of [0, n) or ith out of [0, size) */
    int64_t n;
    int32_t size;
    uint64_t seed;    /* picks each chunk's delay */
} job;

/* Mostly nothing or a short spin; now and then a yield or a sleep of tens of microseconds,
 * long enough for the caller to finish the run and start the next one. */
static void delay(uint64_t r) {
    switch (r % 16) {
    case 0: sched_yield(); break;
    case 1: usleep((useconds_t)(r >> 8) % 60); break;
    case 2: case 3: case 4: {
        volatile uint64_t x = 0;
        for (uint64_t i = 0; i < (r >> 8) % 2000; i++) x = x + i;
        break;
    }
    default: break;
    }
}

static void chunk_fn(void *arg, int64_t c, int32_t ith) {
    job *j = arg;
    if (c < 0 || c >= j->n || ith < 0 || ith >= j->size) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    delay(mix(j->seed ^ (uint64_t)c));
    atomic_fetch_add(&j->hits[c], 1);
}

/* One run of n chunks on p through job j; nonzero if some chunk did not run exactly once. */
static int run_once(lean_pool *p, job *j, int64_t n, uint64_t seed) {
    for (int64_t c = 0; c < MAX_CHUNKS; c++) atomic_store(&j->hits[c], 0);
    atomic_store(&j->bad, 0);
    j->n = n, j->size = lean_pool_size(p), j->seed = seed;
    lean_pool_run(p, n, chunk_fn, j);
    int wrong = atomic_load(&j->bad);
    for (int64_t c = 0; c < MAX_CHUNKS; c++) wrong += atomic_load(&j->hits[c]) != (c < n);
    return wrong;
}

static lean_pool *make_pool(int32_t n_threads) {
    lean_pool *p = NULL;
    lean_error err;
    CHECK(lean_pool_create(n_threads, &p, &err) == LEAN_OK, "pool of %d: %s", n_threads, err.msg);
    return p;
}

/* Runs back to back on one pool for PHASE_S seconds, chunk counts in [lo, hi]. */
static void back_to_back(int32_t n_threads, int64_t lo, int64_t hi) {
    lean_pool *p = make_pool(n_threads);
    if (!p) return;
    static job jobs[2];
    int64_t runs = 0, wrong = 0;
    for (const double end = now_s() + PHASE_S; now_s() < end; runs++) {
        const uint64_t r = mix((uint64_t)runs * 7919 + (uint64_t)n_threads);
        wrong += run_once(p, &jobs[runs & 1], lo + (int64_t)(r % (uint64_t)(hi - lo + 1)), r) != 0;
    }
    CHECK(wrong == 0, "%d threads, %lld..%lld chunks: %lld of %lld runs wrong", n_threads, (long long)lo,
          (long long)hi, (long long)wrong, (long long)runs);
    lean_pool_free(p);
}

/* Several pools alive at once, each driven by its own thread. */
typedef struct driver {
    lean_pool *p;
    job jobs[2];
    int64_t runs, wrong;
    double end;
} driver;

static void *drive(void *arg) {
    driver *d = arg;
    for (; now_s() < d->end; d->runs++) {
        const uint64_t r = mix((uint64_t)d->runs ^ (uint64_t)(uintptr_t)d);
        d->wrong += run_once(d->p, &d->jobs[d->runs & 1], 2 + (int64_t)(r % 6), r) != 0;
    }
    return NULL;
}

static void pools_at_once(void) {
    static driver ds[N_POOLS];
    pthread_t th[N_POOLS];
    const double end = now_s() + PHASE_S;
    for (int i = 0; i < N_POOLS; i++) {
        ds[i] = (driver){.p = make_pool(2 + i % 3), .end = end};
        if (!ds[i].p || pthread_create(&th[i], NULL, drive, &ds[i]) != 0) {
            CHECK(0, "starting driver %d", i);
            ds[i].end = 0;
            th[i] = pthread_self();
        }
    }
    for (int i = 0; i < N_POOLS; i++) {
        if (!pthread_equal(th[i], pthread_self())) pthread_join(th[i], NULL);
        CHECK(ds[i].wrong == 0, "pool %d of %d alive at once: %lld of %lld runs wrong", i, N_POOLS,
              (long long)ds[i].wrong, (long long)ds[i].runs);
        lean_pool_free(ds[i].p);
    }
}

/* Pools created and freed over and over: freed before a worker started, right after a run,
 * with other pools alive and one driven in between. */
static void churn(void) {
    static job j;
    lean_pool *alive = make_pool(3);
    if (!alive) return;
    int64_t rounds = 0, wrong = 0;
    for (const double end = now_s() + PHASE_S; now_s() < end; rounds++) {
        const uint64_t r = mix((uint64_t)rounds + 12345);
        lean_pool *p = make_pool(2 + (int32_t)(r % 7));
        if (!p) break;
        for (uint64_t k = 0; k < (r >> 8) % 3; k++) wrong += run_once(p, &j, 2 + (int64_t)((r >> 12) % 5), r + k) != 0;
        wrong += run_once(alive, &j, 3, r) != 0;
        lean_pool_free(p);
    }
    CHECK(wrong == 0, "create / run / free churn: %lld wrong runs in %lld rounds", (long long)wrong, (long long)rounds);
    lean_pool_free(alive);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    phase = "2 threads, 2..3 chunks back to back"; /* the decode shape at -t 2 */
    back_to_back(2, 2, 3);
    phase = "3 threads, 2 chunks back to back"; /* one worker more than chunks to hand out */
    back_to_back(3, 2, 2);
    phase = "16 threads, 2..3 chunks back to back"; /* more threads than chunks and CPUs: no spinning */
    back_to_back(16, 2, 3);
    phase = "4 threads, 2..64 chunks back to back";
    back_to_back(4, 2, MAX_CHUNKS);
    phase = "pools alive and driven at once";
    pools_at_once();
    phase = "create / run / free churn";
    churn();
    alarm(0);
    return test_finish("test_pool_stress");
}
