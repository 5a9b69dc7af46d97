/* kernel_bench.c — times y = W x of every weight format with each kernel table this target
 * runs (kernels.h), one thread, against the generic table: a decode (1 token) and a prefill
 * batch (16 tokens) over a (1024, 4096) matrix of random weights; then the same for the
 * quantized formats' exact matmuls (matmul_exact, float activations; kernels.h "exact").
 *
 *   make kernel-bench && build/kernel_bench                         (this CPU's tables)
 *   make build-wasm/kernel_bench.wasm && node tests/wasm_run.mjs build-wasm/kernel_bench.wasm
 *   make wasm-relaxed-bench && node --experimental-wasm-relaxed-simd --no-liftoff tests/wasm_run.mjs \
 *       build-wasm-relaxed/kernel_bench.wasm
 *
 * Arguments, if any, are the formats to time (`kernel_bench q4_0 q8_0`), by lean_type_name;
 * every format otherwise. Prints one line per format and table: microseconds per call (the best of 5 runs of at least
 * 50 ms each) and the speed-up over generic. Measures; asserts nothing. The time is this
 * process's CPU time, not the wall clock, so that other work on a shared machine is not counted
 * (it still slows a run through the caches). Under Deno's WASI that clock is the wall clock:
 * time the wasm tables under Node (relaxed SIMD: node --experimental-wasm-relaxed-simd
 * --no-liftoff; Node 20's Liftoff computes the relaxed dot product wrongly).
 */
#include "cpu/kernels.h"
#include "dev/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS 1024
#define COLS 4096

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t rng_state = 12345;

static float uniform(void) { /* [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

/* microseconds per call of one matmul: the best of 5 runs of >= 50 ms */
static double time_matmul(lean_matmul_fn mm, const void *w, size_t wrb, const void *x, size_t xrb, int32_t n_tok,
                          float *y) {
    double best = 1e30;
    for (int run = 0; run < 5; run++) {
        int calls = 0;
        const double t0 = now_s();
        double t;
        do {
            mm(COLS, w, wrb, 0, ROWS, x, xrb, n_tok, y, ROWS);
            calls++;
        } while ((t = now_s() - t0) < 0.05);
        if (t / calls < best) best = t / calls;
    }
    return best * 1e6;
}

int main(int argc, char **argv) {
    static const uint32_t types[] = {LEAN_TYPE_F32,  LEAN_TYPE_F16,  LEAN_TYPE_BF16, LEAN_TYPE_Q8_0,
                                     LEAN_TYPE_Q4_0, LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1,
                                     LEAN_TYPE_Q4_K, LEAN_TYPE_Q5_K, LEAN_TYPE_Q6_K, LEAN_TYPE_Q2_K,
                                     LEAN_TYPE_Q3_K};
    static const char *names[] = {"avx512", "avx2", "neon", "relaxed", "simd128"};
    const int32_t toks[] = {1, 16};
    float *f = malloc(sizeof(float) * COLS * 16), *y = malloc(sizeof(float) * ROWS * 16);
    for (int i = 0; i < COLS * 16; i++) f[i] = uniform();
    printf("y = W x, W (%d, %d), one thread; us per call (speed-up over generic)\n", ROWS, COLS);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const lean_type_traits *tt = lean_type_traits_get(types[ti]);
        bool wanted = argc < 2;
        for (int i = 1; i < argc; i++) wanted |= strcmp(argv[i], tt->name) == 0;
        if (!wanted) continue;
        const lean_act_type act = (lean_act_type)lean_act_for(types[ti]);
        const size_t wrb = (size_t)COLS / tt->block_elems * tt->block_bytes, xrb = lean_act_row_bytes(act, COLS);
        uint8_t *w = malloc(wrb * ROWS), *x = malloc(xrb * 16);
        float *row = malloc(sizeof(float) * COLS);
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < COLS; i++) row[i] = uniform();
            lean_quantizer_of(types[ti])(row, w + (size_t)r * wrb, COLS);
        }
        for (int t = 0; t < 16; t++) lean_quantize_act(act, f + t * COLS, x + (size_t)t * xrb, COLS);
        /* the default kernels (8-bit activations for the quantized formats), then matmul_exact
         * (float activations) of the quantized formats */
        for (int ex = 0; ex < 1 + (act != LEAN_ACT_F32); ex++) {
            const void *xx = ex ? (const void *)f : x;
            const size_t xxrb = ex ? sizeof(float) * COLS : xrb;
            for (size_t ni = 0; ni < sizeof toks / sizeof toks[0]; ni++) {
                lean_kernels k;
                lean_kernels_select("generic", &k);
                const double base = time_matmul((ex ? k.matmul_exact : k.matmul)[types[ti]], w, wrb, xx, xxrb, toks[ni], y);
                printf("%-5s%s n_tok %2d  generic %9.1f", tt->name, ex ? " exact" : "", toks[ni], base);
                for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                    if (lean_kernels_select(names[i], &k) != 0) continue;
                    const double us = time_matmul((ex ? k.matmul_exact : k.matmul)[types[ti]], w, wrb, xx, xxrb, toks[ni], y);
                    printf("  %s %9.1f (%.2fx)", names[i], us, base / us);
                }
                printf("\n");
                fflush(stdout);
            }
        }
        free(w), free(x), free(row);
    }
    free(f), free(y);
    return 0;
}
