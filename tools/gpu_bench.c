/* gpu_bench.c — what the WebGPU runtime (src/gpu/gpu.h) costs per call on this adapter.
 *
 *   make gpu-bench && build/gpu_bench [REPEATS]
 *   build/gpu_bench matrix [REPEATS]
 *
 * Measures, median of REPEATS (default 20) each:
 *   dispatch    1000 tiny dispatches (fill.wgsl, one workgroup of 64) in one compute pass,
 *               submitted and waited for; per dispatch = (t(1000) - t(1)) / 999
 *   submit      an empty command buffer: submit (inside its error scope) + finish
 *   round trip  write 16 bytes, one dispatch, read 16 bytes back (what a decode step that
 *               needs its result on the host pays at least)
 * `matrix`: for every subgroup-matrix shape the adapter offers (docs/gpu.md), in TFLOP/s
 * (medians of REPEATS timed dispatches after a warm-up): shaders/matrix_peak.wgsl's
 * multiply-accumulates on register-held matrices (2 M N K per product; the ceiling), and
 * matrix_gemm.wgsl on 512 x 2048 x 2048 (a prefill matmul's size). The device is opened with
 * nvidia_f16, so NVIDIA's f16 shapes can run.
 * Not a test: nothing is asserted. */
#include "gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

typedef struct bench {
    lean_gpu *g;
    lean_gpu_buf *buf;
    lean_gpu_pipeline *fill;
    lean_gpu_bindgroup *bg;
} bench;

/* n dispatches in one pass, submitted and finished: ms. */
static double time_dispatches(bench *b, int n) {
    lean_error err;
    lean_gpu_cmd *c;
    double t0 = now_ms();
    if (lean_gpu_begin(b->g, &c, &err) != LEAN_OK) return fprintf(stderr, "%s\n", err.msg), -1;
    for (int i = 0; i < n; i++) lean_gpu_dispatch(c, b->fill, b->bg, 1, 1, 1);
    if (lean_gpu_submit(c, &err) != LEAN_OK || lean_gpu_finish(b->g, &err) != LEAN_OK)
        return fprintf(stderr, "%s\n", err.msg), -1;
    return now_ms() - t0;
}

static double time_round_trip(bench *b) {
    lean_error err;
    uint32_t v[4] = {1, 2, 3, 4};
    lean_gpu_cmd *c;
    double t0 = now_ms();
    if (lean_gpu_buf_write(b->g, b->buf, 0, v, sizeof v, &err) != LEAN_OK || lean_gpu_begin(b->g, &c, &err) != LEAN_OK)
        return fprintf(stderr, "%s\n", err.msg), -1;
    lean_gpu_dispatch(c, b->fill, b->bg, 1, 1, 1);
    if (lean_gpu_submit(c, &err) != LEAN_OK || lean_gpu_buf_read(b->g, b->buf, 0, v, sizeof v, &err) != LEAN_OK)
        return fprintf(stderr, "%s\n", err.msg), -1;
    return now_ms() - t0;
}

static int setup(bench *b) {
    lean_error err;
    const char *src = lean_gpu_shader("fill");
    lean_gpu_const c[] = {{"WG", 'u', 64}, {"N", 'u', 64}, {"VALUE", 'u', 1}, {"STEP", 'u', 1}};
    lean_gpu_bind bind;
    if (lean_gpu_open(&b->g, NULL, &err) != LEAN_OK || lean_gpu_buf_create(b->g, 256, LEAN_GPU_STORAGE, "bench", &b->buf, &err) ||
        lean_gpu_pipeline_create(b->g, "fill", &src, 1, c, 4, &b->fill, &err))
        return fprintf(stderr, "gpu_bench: %s\n", err.msg), 1;
    bind = (lean_gpu_bind){b->buf, 0, 0};
    if (lean_gpu_bindgroup_create(b->g, b->fill, &bind, 1, "bench", &b->bg, &err))
        return fprintf(stderr, "gpu_bench: %s\n", err.msg), 1;
    return 0;
}

enum { MATRIX_GROUPS = 8192, MATRIX_ITER = 2048 };

/* The rate of p over 3 buffers of these sizes on (gx, gy) workgroups doing `flops` in all:
 * TFLOP/s, median of reps after a warm-up; -1 when st (p's creation) or a step failed (the
 * reason on stderr). */
static double matrix_rate(lean_gpu *g, lean_status st, lean_gpu_pipeline *p, const uint64_t bytes[3], uint32_t gx,
                          uint32_t gy, double flops, int reps, lean_error *perr) {
    lean_error err = *perr;
    lean_gpu_buf *buf[3] = {NULL};
    lean_gpu_bindgroup *bg = NULL;
    double *t = malloc(sizeof(double) * reps), rate = -1;
    if (st == LEAN_OK && !t) st = LEAN_FAIL(&err, LEAN_ERR_NOMEM, "no memory");
    for (int i = 0; i < 3 && st == LEAN_OK; i++)
        st = lean_gpu_buf_create(g, bytes[i], LEAN_GPU_STORAGE, "matrix bench", &buf[i], &err);
    const lean_gpu_bind binds[3] = {{buf[0], 0, 0}, {buf[1], 0, 0}, {buf[2], 0, 0}};
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, p, binds, 3, "matrix bench", &bg, &err);
    for (int r = -1; r < reps && st == LEAN_OK; r++) { /* r = -1: the warm-up */
        lean_gpu_cmd *cmd;
        const double t0 = now_ms();
        st = lean_gpu_begin(g, &cmd, &err);
        if (st != LEAN_OK) break;
        lean_gpu_dispatch(cmd, p, bg, gx, gy, 1);
        st = lean_gpu_submit(cmd, &err);
        if (st == LEAN_OK) st = lean_gpu_finish(g, &err);
        if (r >= 0) t[r] = now_ms() - t0;
    }
    if (st == LEAN_OK) rate = flops / (median(t, reps) * 1e-3) / 1e12;
    else fprintf(stderr, "gpu_bench matrix: %s\n", err.msg);
    lean_gpu_bindgroup_free(bg);
    for (int i = 0; i < 3; i++) lean_gpu_buf_free(buf[i]);
    free(t);
    return rate;
}

/* One shape's matrix_peak rate (register-held matrices: the ceiling). */
static double matrix_peak(lean_gpu *g, const lean_gpu_matrix_config *c, int reps) {
    lean_error err = {0};
    const lean_gpu_const iter = {"ITER", 'u', MATRIX_ITER};
    lean_gpu_pipeline *p = NULL;
    const uint64_t bytes[3] = {64 * 64 * 4, 64 * 64 * 4, (uint64_t)MATRIX_GROUPS * 4 * c->m * c->n * 4};
    lean_status st = lean_gpu_matrix_pipeline(g, c, "matrix_peak", &iter, 1, &p, &err);
    const double flops = 2.0 * c->m * c->n * c->k * 4.0 * MATRIX_ITER * MATRIX_GROUPS;
    return matrix_rate(g, st, p, bytes, MATRIX_GROUPS, 1, flops, reps, &err);
}

/* matrix_gemm.wgsl's rate on one matmul of prefill's size: 512 tokens through a 2048 x 2048
 * weight, in blocks of 2 x 2 matrices. */
static double matrix_gemm(lean_gpu *g, const lean_gpu_matrix_config *c, int reps) {
    lean_error err = {0};
    const lean_gpu_gemm m = {.rows = 512, .cols = 2048, .depth = 2048, .tm = 2, .tn = 2};
    lean_gpu_pipeline *p = NULL;
    uint32_t groups[2] = {0, 0};
    const uint32_t tb = strcmp(c->type, "f16") ? 4 : 2, rb = strcmp(c->result, "f16") ? 4 : 2;
    const uint64_t bytes[3] = {(uint64_t)m.rows * m.depth * tb, (uint64_t)m.cols * m.depth * tb,
                               (uint64_t)m.rows * m.cols * rb};
    lean_status st = lean_gpu_matrix_gemm_pipeline(g, c, &m, &p, groups, &err);
    return matrix_rate(g, st, p, bytes, groups[0], groups[1], 2.0 * m.rows * m.cols * m.depth, reps, &err);
}

static int bench_matrices(int reps) {
    lean_error err;
    lean_gpu *g;
    const lean_gpu_options opt = {.nvidia_f16 = true};
    if (lean_gpu_open(&g, &opt, &err) != LEAN_OK) return fprintf(stderr, "gpu_bench: %s\n", err.msg), 1;
    const lean_gpu_info *in = lean_gpu_get_info(g);
    printf("adapter: %s (%s, %s), shader-f16 %s, subgroup matrices %s, %u shapes\n", in->adapter, in->backend,
           in->feature_level, in->shader_f16 ? "yes" : "no", in->subgroup_matrix ? "yes" : "no", in->n_matrix_configs);
    for (uint32_t i = 0; i < in->n_matrix_configs; i++) {
        const lean_gpu_matrix_config *c = &in->matrix_configs[i];
        const double peak = matrix_peak(g, c, reps), gemm = matrix_gemm(g, c, reps);
        printf("matrix %s %ux%u * %ux%u -> %s: ", c->type, c->m, c->k, c->k, c->n, c->result);
        if (peak < 0) printf("peak did not run; ");
        else printf("peak %.1f TFLOP/s (%d workgroups x 4 x %d products); ", peak, MATRIX_GROUPS, MATRIX_ITER);
        if (gemm < 0) printf("gemm did not run\n");
        else printf("gemm 512x2048x2048 %.1f TFLOP/s (medians of %d)\n", gemm, reps);
    }
    lean_gpu_close(g);
    return 0;
}

int main(int argc, char **argv) {
    setenv("EGL_PLATFORM", "surfaceless", 0); /* Mesa's EGL without a display (lean.h) */
    if (argc > 1 && !strcmp(argv[1], "matrix")) {
        const int reps = argc > 2 ? atoi(argv[2]) : 10;
        if (reps < 1 || reps > 10000) return fprintf(stderr, "usage: gpu_bench matrix [REPEATS 1..10000]\n"), 2;
        return bench_matrices(reps);
    }
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 1 || reps > 10000) return fprintf(stderr, "usage: gpu_bench [REPEATS 1..10000]\n"), 2;
    bench b = {0};
    if (setup(&b)) return 1;
    const lean_gpu_info *in = lean_gpu_get_info(b.g);
    printf("adapter: %s (%s, %s)\n", in->adapter, in->backend, in->feature_level);
    double *t1 = malloc(sizeof(double) * reps), *t1000 = malloc(sizeof(double) * reps);
    double *sub = malloc(sizeof(double) * reps), *rt = malloc(sizeof(double) * reps);
    time_dispatches(&b, 1000), time_round_trip(&b); /* warm-up */
    for (int r = 0; r < reps; r++) {
        t1[r] = time_dispatches(&b, 1);
        t1000[r] = time_dispatches(&b, 1000);
        sub[r] = time_dispatches(&b, 0);
        rt[r] = time_round_trip(&b);
    }
    double m1 = median(t1, reps), m1000 = median(t1000, reps);
    printf("dispatch    %.2f us each (1000 in one pass: %.3f ms; 1: %.3f ms)\n", (m1000 - m1) / 999 * 1e3, m1000, m1);
    printf("submit      %.3f ms (empty command buffer, submit + finish)\n", median(sub, reps));
    printf("round trip  %.3f ms (write 16 B, 1 dispatch, read 16 B)\n", median(rt, reps));
    printf("(medians of %d)\n", reps);
    free(t1), free(t1000), free(sub), free(rt);
    lean_gpu_close(b.g);
    return 0;
}
