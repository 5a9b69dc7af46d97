/* pool.c — persistent worker threads and one parallel region at a time (see pool.h).
 *
 * Protocol. One 64-bit atomic word, `claim`, holds a run's number, its chunk count and the
 * next chunk to hand out (RUN | N | NEXT, 20 + 22 + 22 bits): the caller stores (fn, arg),
 * sets `done` to 0 and claim to (run, n, 0), then bumps the generation `gen` (waking
 * sleepers). Every thread, the caller included, claims chunks by
 * compare-and-swap of NEXT -> NEXT + 1 while NEXT < N, which fails if the word changed (a
 * newer run): a thread only ever runs a chunk of the run whose word it read. N must stay in
 * the word and NEXT < N be checked on the value the CAS compares: with N in a field read after
 * the claim, a worker that claims past the end of run r and is preempted can read run r + 1's
 * larger N, run that chunk a second time and push `done` past n_chunks, and the caller then
 * waits for done == n_chunks forever (tests/test_pool_stress.c). After each chunk a thread adds 1
 * to `done`; the caller returns once done == n_chunks.
 * A worker that wakes late (its run over, or a newer one started) finds NEXT == N or another
 * run number and goes back to waiting, so the caller never waits for a worker that holds no
 * chunk. fn and arg are read after a successful claim of a chunk that is not done yet, and the
 * caller does not rewrite them until every chunk is done, so they are the claimed run's.
 * Memory order: the store of claim (release) publishes the run's fields and everything the
 * caller wrote before (a worker may see the new claim before the generation bump); each
 * `done` increment publishes a chunk's writes, and the caller's acquire load of the final
 * count makes them visible.
 * Waiting: both sides spin on the atomics for a while, then sleep and re-check, so no wake-up
 * is lost. With more threads than CPUs nobody spins (a spinner would steal the CPU it waits
 * for). Sleeping is the one part that differs between the two threaded builds: pthreads sleep
 * on condition variables under a mutex; wasm threads (wasm32 with atomics, memory shared
 * between instances) sleep on the words themselves with memory.atomic.wait32/wait64, which
 * return at once when the word no longer holds the value the sleeper saw.
 *
 * Sections: single-thread build · threaded builds: state · pthreads (sleeping, threads) ·
 * wasm threads (host threads, sleeping) · claiming, workers, create / free, run
 */
#include "cpu/pool.h"

#if defined(__wasi__) && !defined(__wasm_atomics__)

/* ---- single-thread build: wasm32-wasi without atomics has no threads ---- */

struct lean_pool {
    int32_t n;
};

int32_t lean_cpu_count(void) { return 1; }

lean_status lean_pool_create(int32_t n_threads, lean_pool **out, lean_error *err) {
    (void)n_threads;
    *out = NULL;
    lean_pool *p = lean_calloc(1, sizeof *p);
    if (!p) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the thread pool");
    p->n = 1;
    *out = p;
    return LEAN_OK;
}

void lean_pool_free(lean_pool *p) { lean_free(p); }
int32_t lean_pool_size(const lean_pool *p) { return p->n; }

void lean_pool_run(lean_pool *p, int64_t n_chunks, lean_pool_fn fn, void *arg) {
    (void)p;
    for (int64_t c = 0; c < n_chunks; c++) fn(arg, c, 0);
}

#else

/* ---- threaded builds: state ---- */

#include <stdatomic.h>
#ifndef __wasi__
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

/* Spin iterations before sleeping: tens of microseconds, longer than the serial work between
 * two regions of a decode step, shorter than a sampling step between tokens. */
#define SPIN_ITERS 4096
#define RUN_SHIFT 44 /* claim = run << 44 | n_chunks << 22 | next */
#define N_SHIFT 22
#define FIELD_MASK (((uint64_t)1 << N_SHIFT) - 1)
#define RUN_MASK (((uint64_t)1 << 20) - 1)

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

typedef struct worker {
    struct lean_pool *pool;
    int32_t ith;
#ifdef __wasi__
    int32_t host; /* the host thread running it (hosts[host]) */
#else
    pthread_t thread;
#endif
} worker;

struct lean_pool {
    int32_t n;       /* threads, the caller included */
    int32_t spin;    /* spin iterations before sleeping (0 when oversubscribed) */
    worker *workers; /* n - 1 */
    int32_t n_started;
#ifndef __wasi__
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* workers wait here for a new generation */
    pthread_cond_t all_done; /* the caller waits here for done == n_chunks */
#endif
    atomic_uint gen;        /* bumped once per run (that wakes workers) */
    atomic_uint_fast64_t claim; /* RUN | N | NEXT, see above */
    atomic_int_fast64_t done;   /* chunks finished in the current run */
    atomic_bool caller_sleeps;  /* the caller is (about to be) waiting for done == n_chunks */
    atomic_bool stop;
    uint64_t run;           /* the current run's number (the caller's copy) */
    _Atomic(lean_pool_fn) fn;
    _Atomic(void *) arg;
};

static void *worker_main(void *vw);

#ifndef __wasi__

/* ---- pthreads: sleeping, threads ---- */

int32_t lean_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > LEAN_POOL_MAX_THREADS ? LEAN_POOL_MAX_THREADS : (int32_t)n;
}

static void sleep_init(lean_pool *p) {
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->all_done, NULL);
}

static void sleep_destroy(lean_pool *p) {
    pthread_cond_destroy(&p->all_done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
}

/* A new generation (a run, or stop when `stop`), and every sleeping worker woken. */
static void wake_workers(lean_pool *p, bool stop) {
    pthread_mutex_lock(&p->mu);
    if (stop)
        atomic_store_explicit(&p->stop, true, memory_order_release);
    else
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

/* Returns the generation once it is not `seen`, or once stop is set. */
static unsigned sleep_while_gen(lean_pool *p, unsigned seen) {
    unsigned g;
    pthread_mutex_lock(&p->mu);
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&p->stop, memory_order_acquire))
        pthread_cond_wait(&p->wake, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return g;
}

/* The last worker of a run whose caller sleeps: under the mutex the caller holds until it waits. */
static void wake_caller(lean_pool *p) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->all_done);
    pthread_mutex_unlock(&p->mu);
}

/* Sleep until done == n_chunks. The re-check reads done by a read-modify-write (adding 0),
 * not a load: RMWs of one atomic are totally ordered, so it and the last worker's increment
 * cannot both miss each other (work() below). A seq_cst store then a seq_cst load would do in
 * C11, but that store-load pair is the one ordering emulators drop: qemu-user 7.2 on x86
 * runs aarch64's STLR; LDAR without a fence between them: test_pool_stress, two copies
 * at a time on 2 cores, hung in 9 runs of 9 with that pair and in none of 123 with this. */
static void sleep_until_done(lean_pool *p, int64_t n_chunks) {
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->caller_sleeps, true, memory_order_relaxed);
    while (atomic_fetch_add_explicit(&p->done, 0, memory_order_acq_rel) != n_chunks)
        pthread_cond_wait(&p->all_done, &p->mu);
    atomic_store_explicit(&p->caller_sleeps, false, memory_order_relaxed);
    pthread_mutex_unlock(&p->mu);
}

static bool start_worker(worker *w) { return pthread_create(&w->thread, NULL, worker_main, w) == 0; }
static void join_worker(worker *w) { pthread_join(w->thread, NULL); }
/* n_threads, capped where threads are missing: pthreads are created on demand */
static int32_t threads_to_have(int32_t n_threads) { return n_threads; }

#else

/* ---- wasm threads: host threads, sleeping ----
 * Debian's wasi-libc has no pthreads (its libpthread.a is a stub), so the JavaScript host
 * starts the threads (web/threads.mjs): before the program runs it starts workers, each an
 * instance of this module over the same shared memory, waiting in JavaScript. The first time
 * the library wants threads it gives each a stack (every instance starts on the main
 * instance's) and has the host start it in lean_thread_serve, which never returns: host thread
 * i waits until a pool hands it a worker, runs that worker until the pool is freed, and waits
 * again. The entry goes by function table index, not by export: a command module's exports
 * run the C constructors first. A host thread runs only pool chunks: the library's chunks call
 * no malloc and no stdio, which this libc (built without atomics) does not lock. */

#define HOST_STACK_BYTES (1 << 20) /* the kernels' frames are small; native threads get 8 MB */
enum { HOST_IDLE, HOST_TAKEN, HOST_BUSY }; /* TAKEN: an owner is handing it a job */

typedef struct host_thread {
    atomic_int state;        /* HOST_*; the futex word its waits are on */
    _Atomic(worker *) job;   /* what it runs while busy */
} host_thread;

/* From the host (threads.mjs): its ready workers, the machine's CPUs, and the call that starts
 * worker i on the stack below tops[i] in serve(i) (serve: a function table index). */
__attribute__((import_module("lean_thread"), import_name("count"))) int32_t lean_thread_count(void);
__attribute__((import_module("lean_thread"), import_name("cpus"))) int32_t lean_thread_cpus(void);
__attribute__((import_module("lean_thread"), import_name("start"))) void lean_thread_start(
    int32_t n, const uint32_t *tops, void (*serve)(int32_t));

static host_thread hosts[LEAN_POOL_MAX_THREADS - 1];
static int32_t n_hosts, n_cpus; /* set once, by the first hosts_started that succeeds */

/* Host thread i's loop, on its own stack. */
static void lean_thread_serve(int32_t i) {
    host_thread *h = &hosts[i];
    for (;;) {
        int s;
        while ((s = atomic_load(&h->state)) != HOST_BUSY) __builtin_wasm_memory_atomic_wait32((int *)&h->state, s, -1);
        worker_main(atomic_load(&h->job));
        atomic_store(&h->state, HOST_IDLE);
        __builtin_wasm_memory_atomic_notify((int *)&h->state, 1); /* join_worker */
    }
}

/* Starts the host's threads the first time it is asked (false: none, or no memory for their
 * stacks yet: asked again next time). The stacks live as long as the module's memory. */
static bool hosts_started(void) {
    if (n_cpus) return true;
    int32_t n = lean_thread_count();
    if (n > LEAN_POOL_MAX_THREADS - 1) n = LEAN_POOL_MAX_THREADS - 1;
    if (n < 1) return false;
    uint32_t *tops = lean_malloc(sizeof *tops * (size_t)n);
    if (!tops) return false;
    for (int32_t i = 0; i < n; i++) {
        char *stack = lean_malloc(HOST_STACK_BYTES);
        if (!stack) {
            while (i--) lean_free((char *)(uintptr_t)tops[i] - HOST_STACK_BYTES);
            lean_free(tops);
            return false;
        }
        tops[i] = (uint32_t)(uintptr_t)(stack + HOST_STACK_BYTES);
    }
    lean_thread_start(n, tops, lean_thread_serve);
    lean_free(tops);
    n_hosts = n;
    n_cpus = lean_thread_cpus() < 1 ? 1 : lean_thread_cpus();
    return true;
}

/* The CPUs the host reported, but no more threads than it started (+ the caller). */
int32_t lean_cpu_count(void) {
    if (!hosts_started()) return 1;
    return n_cpus < 1 + n_hosts ? n_cpus : 1 + n_hosts;
}

static void sleep_init(lean_pool *p) { (void)p; }
static void sleep_destroy(lean_pool *p) { (void)p; }

/* stop moves gen too: a worker about to sleep on gen == seen would miss a notify sent before. */
static void wake_workers(lean_pool *p, bool stop) {
    if (stop) atomic_store(&p->stop, true);
    atomic_fetch_add(&p->gen, 1);
    __builtin_wasm_memory_atomic_notify((int *)&p->gen, UINT32_MAX);
}

static unsigned sleep_while_gen(lean_pool *p, unsigned seen) {
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
        __builtin_wasm_memory_atomic_wait32((int *)&p->gen, (int)seen, -1);
    return g;
}

static void wake_caller(lean_pool *p) { __builtin_wasm_memory_atomic_notify((int *)&p->done, 1); }

/* Every wasm atomic is sequentially consistent: either the caller's read of done sees the last
 * increment, or that worker's read of caller_sleeps sees true and it notifies; a notify that
 * comes before the wait finds done changed, so the wait returns at once. */
static void sleep_until_done(lean_pool *p, int64_t n_chunks) {
    atomic_store(&p->caller_sleeps, true);
    int64_t d;
    while ((d = atomic_fetch_add(&p->done, 0)) != n_chunks)
        __builtin_wasm_memory_atomic_wait64((int64_t *)&p->done, d, -1);
    atomic_store(&p->caller_sleeps, false);
}

/* An idle host thread takes the worker. Pools are made and freed by the thread that owns the
 * context, never by a host thread; the exchange still keeps two owners off one host. */
static bool start_worker(worker *w) {
    for (int32_t i = 0; i < n_hosts; i++) {
        int expected = HOST_IDLE;
        if (!atomic_compare_exchange_strong(&hosts[i].state, &expected, HOST_TAKEN)) continue;
        w->host = i;
        atomic_store(&hosts[i].job, w);
        atomic_store(&hosts[i].state, HOST_BUSY);
        __builtin_wasm_memory_atomic_notify((int *)&hosts[i].state, 1);
        return true;
    }
    return false;
}

/* The worker has left worker_main once its host is idle again. */
static void join_worker(worker *w) {
    host_thread *h = &hosts[w->host];
    while (atomic_load(&h->state) != HOST_IDLE) __builtin_wasm_memory_atomic_wait32((int *)&h->state, HOST_BUSY, -1);
}

/* n_threads, capped at the caller + the host threads idle now */
static int32_t threads_to_have(int32_t n_threads) {
    if (n_threads > 1 && !hosts_started()) return 1;
    int32_t idle = 0;
    for (int32_t i = 0; i < n_hosts; i++) idle += atomic_load(&hosts[i].state) == HOST_IDLE;
    return n_threads < 1 + idle ? n_threads : 1 + idle;
}

#endif

/* ---- claiming, workers, create / free, run ---- */

/* Claims and runs chunks of run `run` until none are left. */
static void work(lean_pool *p, uint64_t run, int32_t ith) {
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        const int64_t chunk = (int64_t)(c & FIELD_MASK), n = (int64_t)((c >> N_SHIFT) & FIELD_MASK);
        if (c >> RUN_SHIFT != run || chunk >= n) return; /* a newer run, or nothing left */
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* c was reloaded */
        atomic_load_explicit(&p->fn, memory_order_relaxed)(atomic_load_explicit(&p->arg, memory_order_relaxed),
                                                            chunk, ith);
        /* Either the caller's re-check (an RMW on done) comes after this increment in done's
         * order and sees it, or this increment reads from that RMW and so sees caller_sleeps
         * (stored before it): then the caller is asleep or about to be, and wake_caller reaches
         * it (see sleep_until_done). */
        if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == n &&
            atomic_load_explicit(&p->caller_sleeps, memory_order_acquire))
            wake_caller(p);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *vw) {
    worker *w = vw;
    lean_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int32_t i = 0; g == seen && i < p->spin; i++) {
            cpu_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) g = sleep_while_gen(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        seen = g;
        /* the run number of generation g is in claim's high bits (set before gen moved) */
        work(p, atomic_load_explicit(&p->claim, memory_order_acquire) >> RUN_SHIFT, w->ith);
    }
    return NULL;
}

void lean_pool_free(lean_pool *p) {
    if (!p) return;
    if (p->n_started) {
        wake_workers(p, true);
        for (int32_t i = 0; i < p->n_started; i++) join_worker(&p->workers[i]);
    }
    sleep_destroy(p);
    lean_free(p->workers);
    lean_free(p);
}

lean_status lean_pool_create(int32_t n_threads, lean_pool **out, lean_error *err) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > LEAN_POOL_MAX_THREADS) n_threads = LEAN_POOL_MAX_THREADS;
    n_threads = threads_to_have(n_threads);
    lean_pool *p = lean_calloc(1, sizeof *p);
    if (!p) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the thread pool");
    p->n = n_threads;
    p->spin = n_threads <= lean_cpu_count() ? SPIN_ITERS : 0;
    atomic_init(&p->gen, 0);
    atomic_init(&p->claim, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->caller_sleeps, false);
    atomic_init(&p->stop, false);
    atomic_init(&p->fn, NULL);
    atomic_init(&p->arg, NULL);
    sleep_init(p);
    if (n_threads > 1) {
        p->workers = lean_calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            lean_pool_free(p);
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %d worker threads", n_threads - 1);
        }
        for (int32_t i = 0; i < n_threads - 1; i++) {
            worker *w = &p->workers[i];
            w->pool = p;
            w->ith = i + 1;
            if (!start_worker(w)) {
                lean_pool_free(p);
                return LEAN_FAIL(err, LEAN_ERR_NOMEM, "starting worker thread %d of %d", i + 1, n_threads - 1);
            }
            p->n_started++;
        }
    }
    *out = p;
    return LEAN_OK;
}

int32_t lean_pool_size(const lean_pool *p) { return p->n; }

void lean_pool_run(lean_pool *p, int64_t n_chunks, lean_pool_fn fn, void *arg) {
    if (p->n == 1 || n_chunks <= 1 || n_chunks > LEAN_POOL_MAX_CHUNKS) {
        for (int64_t c = 0; c < n_chunks; c++) fn(arg, c, 0);
        return;
    }
    const uint64_t run = ++p->run & RUN_MASK;
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    /* release: after the fields above */
    atomic_store_explicit(&p->claim, run << RUN_SHIFT | (uint64_t)n_chunks << N_SHIFT, memory_order_release);
    wake_workers(p, false);

    work(p, run, 0);

    for (int32_t i = 0; i < p->spin; i++) {
        if (atomic_load_explicit(&p->done, memory_order_acquire) == n_chunks) return;
        cpu_relax();
    }
    sleep_until_done(p, n_chunks);
}

#endif
