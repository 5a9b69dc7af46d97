/* test_pool.c — src/cpu/pool.c: the persistent thread pool under stress.
 * lean-test: threads (native, and the threaded wasm build under tests/wasm_run.mjs --threads 16;
 * the single-threaded wasm build has no worker threads)
 *
 * What a lost wake-up or a double claim would look like, and what catches it:
 *   hang        the caller asleep on all_done while no worker holds a chunk, or a worker
 *               asleep through a run it should have helped with: every phase runs under an
 *               alarm() watchdog that turns a hang into a FAIL line and exit status 1 (in
 *               wasm, which has no signals, the runner's timeout is the watchdog)
 *   claims      every chunk of every run runs exactly once, on a thread ith < the pool's size,
 *               and its writes are visible to the caller when lean_pool_run returns
 * Runs are many and short (a few chunks of no work: the window between a run's last chunk
 * and the next run's start is as small as it gets), mixed with runs whose chunks sleep long
 * enough that the caller and the workers exhaust their spins and take the condition-variable
 * paths. Thread counts 2, 3, 4 and 16 (16 > the CPUs here: nobody spins, every wait sleeps);
 * pools created and freed while workers are still waking.
 */
#include "cpu/pool.h"
#include "test.h"

#ifndef __wasi__
#include <signal.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHUNKS 64
#define WATCHDOG_S 60 /* per phase; a healthy phase takes well under a second to a few seconds */

static const char *phase = "start";

#ifndef __wasi__
static void on_alarm(int sig) {
    (void)sig;
    /* async-signal-safe: write and _exit only */
    static const char msg[] = "test_pool: FAIL: a pool run did not return within the watchdog (hang) in phase ";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    if (write(2, phase, strlen(phase)) < 0) _exit(1);
    if (write(2, "\n", 1) < 0) _exit(1);
    _exit(1);
}
#endif

/* name: the phase starting (the watchdog armed); NULL: the phase is over */
static void watchdog(const char *name) {
    phase = name ? name : phase;
#ifndef __wasi__
    alarm(name ? WATCHDOG_S : 0);
#endif
}

typedef struct job {
    atomic_int hits[MAX_CHUNKS]; /* times chunk c ran in this run */
    int plain[MAX_CHUNKS];       /* written without atomics: visible to the caller after the run */
    int32_t n_threads;
    atomic_int bad_ith;
    atomic_int on_workers;       /* chunks run by a worker (ith > 0), not the caller */
    long sleep_ns;               /* > 0: every chunk sleeps this long */
} job;

static void chunk_fn(void *vj, int64_t c, int32_t ith) {
    job *j = vj;
    if (ith < 0 || ith >= j->n_threads) atomic_fetch_add(&j->bad_ith, 1);
    if (ith > 0) atomic_fetch_add(&j->on_workers, 1);
    if (j->sleep_ns > 0) {
        const struct timespec ts = {0, j->sleep_ns};
        nanosleep(&ts, NULL);
    }
    j->plain[c] = (int)c + 1;
    atomic_fetch_add_explicit(&j->hits[c], 1, memory_order_relaxed);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* One run of n chunks; returns the number of chunks that did not run exactly once. */
static int one_run(lean_pool *p, job *j, int64_t n) {
    for (int64_t c = 0; c < n; c++) atomic_store(&j->hits[c], 0), j->plain[c] = 0;
    lean_pool_run(p, n, chunk_fn, j);
    int wrong = 0;
    for (int64_t c = 0; c < n; c++) wrong += atomic_load(&j->hits[c]) != 1 || j->plain[c] != (int)c + 1;
    return wrong;
}

static void stress(int32_t n_threads, int runs) {
    char name[64];
    snprintf(name, sizeof name, "stress, %d threads", n_threads);
    watchdog(name);
    lean_pool *p = NULL;
    lean_error err;
    CHECK(lean_pool_create(n_threads, &p, &err) == LEAN_OK, "%s", err.msg);
    if (!p) return;
    CHECK(lean_pool_size(p) == n_threads, "size %d, asked %d", lean_pool_size(p), n_threads);
    job *j = calloc(1, sizeof *j);
    j->n_threads = n_threads;
    int bad_runs = 0;
    for (int r = 0; r < runs; r++) {
        /* mostly tiny runs back to back; every 64th sleeps past every spin */
        j->sleep_ns = r % 64 == 63 ? 200000 : 0;
        const int64_t n = 2 + next_u32() % (MAX_CHUNKS - 1);
        bad_runs += one_run(p, j, n) != 0;
    }
    CHECK(bad_runs == 0, "%s: %d of %d runs had a chunk run other than once", name, bad_runs, runs);
    CHECK(atomic_load(&j->bad_ith) == 0, "%s: %d chunks saw ith out of range", name, atomic_load(&j->bad_ith));
    /* one chunk, and none: the caller alone */
    CHECK(one_run(p, j, 1) == 0, "%s: a run of one chunk", name);
#if defined(__wasi__) /* the ledger (tests/run.sh's CPU_VARIANTS): wasm threads did the work */
    if (n_threads == 16 && atomic_load(&j->on_workers) > 0) printf("variant wasm-mt: ran\n");
#endif
    lean_pool_run(p, 0, chunk_fn, j);
    lean_pool_free(p);
    free(j);
    watchdog(NULL);
}

/* Create, run once or not at all, free: workers are stopped while they are still starting or
 * spinning. */
static void churn(void) {
    watchdog("create / free churn");
    job *j = calloc(1, sizeof *j);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        const int32_t n_threads = 2 + i % 7;
        lean_pool *p = NULL;
        lean_error err;
        if (lean_pool_create(n_threads, &p, &err) != LEAN_OK) {
            CHECK(0, "create %d threads: %s", n_threads, err.msg);
            break;
        }
        j->n_threads = n_threads;
        j->sleep_ns = 0;
        if (i % 2) bad += one_run(p, j, 2 + i % 31) != 0;
        lean_pool_free(p);
    }
    CHECK(bad == 0, "churn: %d runs had a chunk run other than once", bad);
    CHECK(atomic_load(&j->bad_ith) == 0, "churn: ith out of range");
    free(j);
    watchdog(NULL);
}

int main(void) {
#ifndef __wasi__
    signal(SIGALRM, on_alarm);
#endif
    CHECK(lean_cpu_count() >= 1, "cpu count %d", lean_cpu_count());
    stress(2, 100000);
    stress(3, 30000);
    stress(4, 30000);
    stress(16, 3000);
    churn();
    return test_finish("test_pool");
}
