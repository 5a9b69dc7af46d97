/* kv_bench.c — what KV snapshots cost against the prefill they save (lean.h "KV snapshots and
 * forks"): measures, asserts nothing but that the contexts agree.
 *
 *   make kv-bench && build/kv_bench MODEL [BACKEND [POSITIONS]]   (default: cpu, 512)
 *
 * What it does: prefills POSITIONS ids on context a, then times lean_kv_save of a, and
 * lean_kv_restore into b and lean_kv_fork of a into c each followed by the decode of the next
 * id, beside that decode alone on a (on the GPU a restore or fork only queues its writes or
 * copies: the decode after it waits for them, so "+ decode" is the honest number). Prints
 * the snapshot's size, each time in ms, and whether b and c give a's logits bit for bit.
 * What it does not: repeat or take medians (one shot each: quote it with the load it ran under).
 */
#include "lean.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [BACKEND [POSITIONS]]\n", argv[0]);
        return 2;
    }
    const char *backend = argc > 2 ? argv[2] : "cpu";
    const int32_t n = argc > 3 ? atoi(argv[3]) : 512;
    lean_error err = {0};
    lean_model *m = NULL;
    lean_ctx *a = NULL, *b = NULL, *c = NULL;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
    float *la = NULL, *lb = NULL;
    void *snap = NULL;
    size_t size = 0;
    double t_prefill = 0, t_save = 0, t_decode = 0, t_restore = 0, t_fork = 0;
    bool same = false;
    lean_status st = n > 0 && ids ? lean_model_load_file(argv[1], &m, &err) : LEAN_ERR_ARG;
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = backend;
    p.n_ctx = n + 1;
    if (!st) st = lean_ctx_create(m, &p, &a, &err);
    if (!st) st = lean_ctx_create(m, &p, &b, &err);
    if (!st) st = lean_ctx_create(m, &p, &c, &err);
    if (!st) {
        const size_t V = (size_t)lean_model_n_vocab(m);
        la = malloc(sizeof(float) * V), lb = malloc(sizeof(float) * V);
        for (int32_t i = 0; i <= n; i++) ids[i] = (int32_t)(((int64_t)i * 7919 + 13) % (int64_t)V);
        double t0 = now_ms();
        st = lean_prefill(a, ids, n, NULL, &err);
        t_prefill = now_ms() - t0;
        if (!st) st = lean_kv_save(a, NULL, 0, &size, &err);
        snap = st ? NULL : malloc(size);
        t0 = now_ms();
        if (!st) st = snap && la && lb ? lean_kv_save(a, snap, size, &size, &err) : LEAN_ERR_NOMEM;
        t_save = now_ms() - t0;
        t0 = now_ms();
        if (!st) st = lean_kv_restore(b, snap, size, &err);
        if (!st) st = lean_decode(b, ids[n], lb, &err);
        t_restore = now_ms() - t0;
        t0 = now_ms();
        if (!st) st = lean_decode(a, ids[n], la, &err);
        t_decode = now_ms() - t0;
        same = !st && memcmp(la, lb, sizeof(float) * V) == 0;
        t0 = now_ms();
        if (!st) st = lean_kv_fork(c, a, n, &err);
        if (!st) st = lean_decode(c, ids[n], lb, &err);
        t_fork = now_ms() - t0;
        same = same && !st && memcmp(la, lb, sizeof(float) * V) == 0;
    }
    if (st) {
        fprintf(stderr, "kv_bench: %s\n", err.msg);
    } else {
        char what[160];
        printf("%s: %d positions, snapshot %.2f MB; prefill %.1f ms; save %.1f ms; decode %.1f ms; restore + "
               "decode %.1f ms; fork + decode %.1f ms; the same logits: %s\n",
               lean_ctx_backend_str(a, what, sizeof what), n, (double)size / 1e6, t_prefill, t_save, t_decode,
               t_restore, t_fork, same ? "yes" : "NO");
    }
    lean_ctx_free(a), lean_ctx_free(b), lean_ctx_free(c);
    lean_model_free(m);
    free(ids), free(la), free(lb), free(snap);
    return st || !same;
}
