/* bandwidth.c — how fast this machine streams memory into the cores: the denominator of
 * decode's roofline (`lean bench --bandwidth GBPS`).
 *
 * What it does: fills a buffer much larger than the caches (default 2 GiB; the last-level
 * cache of the project's machine reports 260 MiB), then times T threads each summing its
 * contiguous share of it, read only, several times; prints the best and the median rate in
 * GB/s (10^9 bytes a second) for every thread count asked for. Decode of a model that
 * does not fit in the caches reads every weight once per token, so
 *   roofline tok/s = bandwidth / bytes read per token.
 * What it does not: writes, copies or latency (a decode streams reads), NUMA placement.
 * --huge asks for transparent huge pages (madvise): lean's repacked CPU weights sit on them
 * (cpu/repack.c), and a 4 KiB-page read can be slower (a KVM guest's TLB misses; docs/runs/
 * 2026-12-06-cpu-decode-q4.md), so quote --huge as those weights' roofline.
 * With -s smaller than the last-level cache it measures that cache instead (a
 * model that fits there can beat the DRAM roofline; say which one you quote).
 *
 * Sections: options -> the kernel (8 independent vector accumulators, so one core issues
 * loads as fast as it can) -> threads and timing -> main.
 *
 *   make bandwidth && build/bandwidth                 # threads 1..nproc, 2 GiB, 10 passes
 *   build/bandwidth -t 2 -s 4096 -r 20 --json
 *
 * Built alone (no lean code): cc -O2 -march=native -pthread tools/bandwidth.c -o build/bandwidth.
 * -march=native matters: with x86-64's baseline SSE2 one core of the project's machine
 * reads ~8 GB/s, with its AVX-512 ~14 GB/s (2026-12-02); the probe should find the most
 * the memory gives, as a tuned decode kernel would.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <time.h>
#include <unistd.h>

static const char *const usage =
    "usage: bandwidth [-s MIB] [-t THREADS[,THREADS...]] [-r PASSES] [--huge] [--json]\n"
    "Streaming-read bandwidth: THREADS threads sum a buffer of MIB MiB (default 2048), PASSES\n"
    "times (default 10); prints the best and the median GB/s (10^9 bytes/s) per thread count\n"
    "(default: 1 up to the number of online CPUs). --huge: the buffer on transparent huge pages\n"
    "(Linux madvise; lean's repacked CPU weights are), else on whatever pages malloc gives.\n";

#define MAX_THREADS 256

/* ---- the kernel ---- */

/* 32-byte vectors (GCC/clang vector extension): one AVX register, or two SSE2 ones. */
typedef uint64_t v4u64 __attribute__((vector_size(32)));

/* Sums n_vec vectors at p (32-byte aligned) with 8 independent accumulators: eight
 * loads in flight per iteration keep the core's load ports, not the add chain, the limit. */
static uint64_t sum_vectors(const v4u64 *p, size_t n_vec) {
    v4u64 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    size_t i = 0;
    for (; i + 8 <= n_vec; i += 8) {
        a0 += p[i + 0];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
        a4 += p[i + 4];
        a5 += p[i + 5];
        a6 += p[i + 6];
        a7 += p[i + 7];
    }
    for (; i < n_vec; i++) a0 += p[i];
    v4u64 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return s[0] + s[1] + s[2] + s[3];
}

/* ---- threads and timing ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct worker {
    pthread_t thread;
    const v4u64 *p;   /* this thread's share */
    size_t n_vec;
    uint64_t sum;     /* kept, so the loads cannot be optimized away */
    double t0_s, t1_s; /* when this thread began and ended its reads */
    pthread_barrier_t *start;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->start);
    w->t0_s = now_s();
    w->sum = sum_vectors(w->p, w->n_vec);
    w->t1_s = now_s();
    return NULL;
}

/* One pass: n_threads threads, released together, read their shares of buf; seconds from
 * the first thread's first read to the last thread's last (each thread times itself: the
 * main thread may not run again until they are done, on a busy machine). -1 on error. */
static double one_pass(const v4u64 *buf, size_t n_vec, int n_threads, uint64_t *sum) {
    worker w[MAX_THREADS];
    pthread_barrier_t start;
    if (pthread_barrier_init(&start, NULL, (unsigned)n_threads + 1) != 0) return -1;
    int made = 0;
    for (; made < n_threads; made++) {
        size_t lo = n_vec * (size_t)made / (size_t)n_threads, hi = n_vec * (size_t)(made + 1) / (size_t)n_threads;
        w[made] = (worker){.p = buf + lo, .n_vec = hi - lo, .start = &start};
        if (pthread_create(&w[made].thread, NULL, worker_main, &w[made]) != 0) break;
    }
    if (made < n_threads) { /* a tool, not the library: the ones that started die with it */
        fprintf(stderr, "bandwidth: cannot start thread %d of %d\n", made + 1, n_threads);
        exit(1);
    }
    pthread_barrier_wait(&start);
    double t0 = 0, t1 = 0;
    for (int i = 0; i < n_threads; i++) {
        pthread_join(w[i].thread, NULL);
        *sum += w[i].sum;
        if (i == 0 || w[i].t0_s < t0) t0 = w[i].t0_s;
        if (i == 0 || w[i].t1_s > t1) t1 = w[i].t1_s;
    }
    pthread_barrier_destroy(&start);
    return t1 - t0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- main ---- */

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int fail_usage(const char *msg, const char *arg) {
    fprintf(stderr, "bandwidth: %s '%s'\n\n%s", msg, arg, usage);
    return 2;
}

int main(int argc, char **argv) {
    long size_mib = 2048, passes = 10, threads[64];
    int n_list = 0, json = 0, huge = 0;
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpu < 1) n_cpu = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) return printf("%s", usage), 0;
        if (strcmp(o, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strcmp(o, "--huge") == 0) {
            huge = 1;
            continue;
        }
        if (i + 1 >= argc) return fail_usage("needs a value (or is unknown):", o);
        const char *v = argv[++i];
        if (strcmp(o, "-s") == 0) {
            if (parse_int(v, 1, 1L << 20, &size_mib) != 0) return fail_usage("-s expects MiB in [1, 2^20], got", v);
        } else if (strcmp(o, "-r") == 0) {
            if (parse_int(v, 1, 10000, &passes) != 0) return fail_usage("-r expects a count in [1, 10000], got", v);
        } else if (strcmp(o, "-t") == 0) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            n_list = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (n_list == 64 || parse_int(tok, 1, MAX_THREADS, &threads[n_list]) != 0)
                    return fail_usage("-t expects thread counts in [1, 256], comma-separated, got", v);
                n_list++;
            }
            if (n_list == 0) return fail_usage("-t expects thread counts, got", v);
        } else {
            return fail_usage("unknown option", o);
        }
    }
    if (n_list == 0)
        for (long t = 1; t <= n_cpu && t <= MAX_THREADS && n_list < 64; t++) threads[n_list++] = t;

    const size_t bytes = (size_t)size_mib << 20, n_vec = bytes / sizeof(v4u64);
    v4u64 *buf = NULL;
    if (posix_memalign((void **)&buf, huge ? (size_t)2 << 20 : 4096, bytes) != 0) {
        fprintf(stderr, "bandwidth: cannot allocate %ld MiB\n", size_mib);
        return 1;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge && madvise(buf, bytes, MADV_HUGEPAGE) != 0) fprintf(stderr, "bandwidth: madvise(MADV_HUGEPAGE) refused\n");
#else
    if (huge) fprintf(stderr, "bandwidth: --huge: no transparent huge pages on this system\n");
#endif
    /* Written first, with non-zero data: untouched pages would all read the one zero page. */
    uint64_t *w = (uint64_t *)buf;
    for (size_t i = 0; i < bytes / 8; i++) w[i] = i * 0x9E3779B97F4A7C15ull;

    double *t = malloc(sizeof *t * (size_t)passes);
    if (!t) return fprintf(stderr, "bandwidth: out of memory\n"), 1;
    uint64_t sum = 0;
    if (!json) printf("buffer %ld MiB%s, %ld passes, %ld CPUs online\n", size_mib, huge ? " (huge pages asked)" : "", passes, n_cpu);
    for (int k = 0; k < n_list; k++) {
        int nt = (int)threads[k];
        if (one_pass(buf, n_vec, nt, &sum) < 0) return fprintf(stderr, "bandwidth: barrier failed\n"), 1; /* warm-up */
        for (long r = 0; r < passes; r++) t[r] = one_pass(buf, n_vec, nt, &sum);
        qsort(t, (size_t)passes, sizeof *t, cmp_double);
        double med = passes % 2 ? t[passes / 2] : (t[passes / 2 - 1] + t[passes / 2]) / 2;
        double best_gbps = (double)bytes / t[0] / 1e9, med_gbps = (double)bytes / med / 1e9;
        if (json)
            printf("{\"threads\":%d,\"buffer_bytes\":%zu,\"huge\":%s,\"passes\":%ld,\"best_gbps\":%.3f,\"median_gbps\":%.3f}\n",
                   nt, bytes, huge ? "true" : "false", passes, best_gbps, med_gbps);
        else
            printf("threads %3d: best %7.2f GB/s, median %7.2f GB/s (%.1f ms a pass)\n", nt, best_gbps, med_gbps,
                   med * 1e3);
    }
    /* The sum is printed (to stderr) so no compiler may drop the loads. */
    fprintf(stderr, "checksum %016llx\n", (unsigned long long)sum);
    free(t);
    free(buf);
    return 0;
}
