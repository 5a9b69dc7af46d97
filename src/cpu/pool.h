/* pool.h — a pool of persistent worker threads and its parallel-for over chunks.
 *
 *   lean_pool *p;
 *   lean_pool_create(4, &p, &err);      // the caller + 3 workers, started once
 *   lean_pool_run(p, n, fn, arg);       // fn(arg, c, ith) for every chunk c in [0, n), each
 *                                       // once, on some thread ith (0 = the caller); returns
 *                                       // when all n have returned
 *   lean_pool_free(p);
 *
 * A run is one parallel region. Its work is cut into n chunks whose bounds the caller fixes
 * (rows [16c, 16c + 16) of a matrix, token c, ...); threads claim chunks in order from one
 * atomic counter, the caller included. Which thread computes a chunk is left to timing, so
 * a chunk's result must not depend on ith (ith only picks per-thread scratch): then the
 * results are the same bits for any number of threads. Claiming instead of a fixed
 * thread -> range map means a worker the OS has not scheduled yet never stalls the step:
 * the others take its chunks, and the run ends when every chunk is done, whether or not
 * every worker has woken (a late one finds the run over and goes back to waiting).
 *
 * Workers wait for the next run by spinning a little (a decode step is many short regions
 * in a row), then sleep on a condition variable. Nothing is allocated per run.
 * Where threads do not exist (wasm32-wasi built without atomics) the pool has one thread, the
 * caller, and lean_pool_run is a loop. wasm32 built with atomics over a shared memory has no
 * pthreads either: its threads are host threads, Web Workers that web/threads.mjs starts
 * before the program runs (lean_thread_init / lean_thread_serve in pool.c), and a pool takes
 * as many of them as are idle.
 *
 * A pool is driven by one thread at a time (the one that owns the lean_ctx); fn must not call
 * lean_pool_run on the same pool.
 */
#ifndef LEAN_POOL_H
#define LEAN_POOL_H

#include "core/common.h"

typedef struct lean_pool lean_pool;

/* fn(arg, chunk, ith): chunk in [0, n_chunks); ith in [0, lean_pool_size) names the thread. */
typedef void (*lean_pool_fn)(void *arg, int64_t chunk, int32_t ith);

/* n_threads >= 1 (the caller counts as one); capped at LEAN_POOL_MAX_THREADS, at 1 where
 * threads do not exist, and at 1 + the idle host threads in wasm32 with atomics. LEAN_ERR_NOMEM if memory or a thread cannot be had (what was
 * started is stopped again). */
#define LEAN_POOL_MAX_THREADS 256
lean_status lean_pool_create(int32_t n_threads, lean_pool **out, lean_error *err);
void lean_pool_free(lean_pool *p);
int32_t lean_pool_size(const lean_pool *p);

/* The most chunks one run may have. */
#define LEAN_POOL_MAX_CHUNKS (((int64_t)1 << 22) - 1)

/* Runs fn on every chunk in [0, n_chunks) (n_chunks <= LEAN_POOL_MAX_CHUNKS) and returns
 * when all have finished. With n_chunks == 1 or a pool of one thread, the caller runs them
 * all, in order, and no worker is woken. */
void lean_pool_run(lean_pool *p, int64_t n_chunks, lean_pool_fn fn, void *arg);

/* The number of CPUs this process may use (at least 1; 1 where threads do not exist; in
 * wasm32 with atomics, what the host reported, at most 1 + its host threads). */
int32_t lean_cpu_count(void);

#endif
