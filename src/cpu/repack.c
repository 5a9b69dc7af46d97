/* repack.c — the R16 layout of the legacy formats, the KS layout of Q4_K / Q5_K (repack.h's
 * tables) and a model's copies.
 *
 * Sections: the layout · a model's copies
 */
#include "cpu/repack.h"
#include "core/formats.h"
#include "cpu/kernels.h"

#include <stddef.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* ---- the layout ---- */

/* A legacy block's fields, as bytes from its start: d (2), then m (2, _1 formats), qh (4, Q5),
 * qs (16; Q8_0: 32). */
typedef struct r16_fmt {
    uint32_t type;
    int m, qh, qs, q_dwords; /* offsets in the block; -1: no such field */
} r16_fmt;

static const r16_fmt r16_fmts[] = {
    {LEAN_TYPE_Q4_0, -1, -1, 2, 4}, {LEAN_TYPE_Q4_1, 2, -1, 4, 4}, {LEAN_TYPE_Q5_0, -1, 2, 6, 4},
    {LEAN_TYPE_Q5_1, 2, 4, 8, 4},   {LEAN_TYPE_Q8_0, -1, -1, 2, 8},
};

static const r16_fmt *r16_of(uint32_t type) {
    for (size_t i = 0; i < sizeof r16_fmts / sizeof r16_fmts[0]; i++)
        if (r16_fmts[i].type == type) return &r16_fmts[i];
    return NULL;
}

static bool is_ks(uint32_t type) { return type == LEAN_TYPE_Q4_K || type == LEAN_TYPE_Q5_K; }

bool lean_repack_has(uint32_t type) { return r16_of(type) != NULL || is_ks(type); }

uint64_t lean_repack_bytes(uint32_t type, int64_t rows, int64_t cols) {
    uint64_t rb = 0;
    lean_type_bytes(type, (uint64_t)cols, &rb);
    if (is_ks(type)) return (uint64_t)rows * (rb + (uint64_t)cols / LEAN_QK_K * 4);
    return (uint64_t)(rows + 15) / 16 * 16 * rb;
}

/* KS: each super-block's 12 scale bytes decoded to 16 */
static void repack_ks(uint32_t type, int64_t rows, int64_t cols, const uint8_t *src, size_t row_bytes, uint8_t *dst) {
    const size_t bb = lean_type_traits_get(type)->block_bytes;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
            const uint8_t *blk = src + (size_t)r * row_bytes + (size_t)b * bb;
            uint8_t *o = dst + ((size_t)r * (size_t)(cols / LEAN_QK_K) + (size_t)b) * (bb + 4);
            memcpy(o, blk, 4);
            lean_k4_scales(blk + 4, o + 4, o + 12);
            memcpy(o + 20, blk + 16, bb - 16);
        }
}

void lean_repack(uint32_t type, int64_t rows, int64_t cols, const void *src, size_t row_bytes, void *dst) {
    if (is_ks(type)) {
        repack_ks(type, rows, cols, src, row_bytes, dst);
        return;
    }
    const r16_fmt *f = r16_of(type);
    const size_t bb = lean_type_traits_get(type)->block_bytes;
    const int64_t nb = cols / 32;
    memset(dst, 0, (size_t)lean_repack_bytes(type, rows, cols));
    for (int64_t r = 0; r < rows; r++) {
        const int i = (int)(r % 16);
        uint8_t *group = (uint8_t *)dst + (size_t)(r - i) * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = (const uint8_t *)src + (size_t)r * row_bytes + (size_t)b * bb;
            uint8_t *o = group + (size_t)b * 16 * bb;
            memcpy(o + 2 * i, blk, 2);
            o += 32;
            if (f->m >= 0) memcpy(o + 2 * i, blk + f->m, 2), o += 32;
            if (f->qh >= 0) memcpy(o + 4 * i, blk + f->qh, 4), o += 64;
            for (int j = 0; j < f->q_dwords; j++) memcpy(o + 64 * j + 4 * i, blk + f->qs + 4 * j, 4);
        }
    }
}

/* ---- a model's copies ---- */

/* The weight matrices, by index: layer il's k-th of layer_mats at 7 il + k, then the output. */
static const size_t layer_mats[] = {offsetof(lean_layer, wq),     offsetof(lean_layer, wk),
                                    offsetof(lean_layer, wv),     offsetof(lean_layer, wo),
                                    offsetof(lean_layer, w_gate), offsetof(lean_layer, w_up),
                                    offsetof(lean_layer, w_down)};
#define N_LAYER_MATS 7

struct lean_packed {
    size_t n;          /* 7 n_layer + 1 */
    void **raw;        /* (n) the allocation that starts with copy k, or NULL */
    const void **mats; /* the copies, 64-byte aligned within those */
};

static const lean_tensor *mat_at(const lean_model *m, int64_t k) {
    if (k == (int64_t)N_LAYER_MATS * m->hp.n_layer) return &m->output;
    return (const lean_tensor *)((const char *)&m->layers[k / N_LAYER_MATS] + layer_mats[k % N_LAYER_MATS]);
}

/* The copies of one packed_add go in one allocation, aligned to 2 MiB and marked for
 * transparent huge pages where the OS has them (Linux: madvise, a hint that may be refused):
 * decode streams every copy once a token, and on 4 KiB pages its TLB misses cost (a KVM guest
 * walks two page tables; docs/runs/2026-12-06-cpu-decode-q4.md). */
#define HUGE_PAGE ((size_t)2 << 20)
#define COPY_ALIGN 64

static bool want_copy(const lean_packed *p, const lean_tensor *t, int64_t k, const bool *want) {
    return !p->mats[k] && t->data && t->type < LEAN_N_TYPE_IDS && want[t->type] && lean_repack_has(t->type);
}

static uint64_t copy_bytes(const lean_tensor *t) {
    return (lean_repack_bytes(t->type, t->ne[1], t->ne[0]) + COPY_ALIGN - 1) & ~(uint64_t)(COPY_ALIGN - 1);
}

/* Copies the matrices of the types in want that p lacks. */
static lean_status packed_add(const lean_model *m, lean_packed *p, const bool *want, lean_error *err) {
    const int64_t n_mats = (int64_t)N_LAYER_MATS * m->hp.n_layer + 1;
    uint64_t total = 0;
    int64_t first = -1;
    for (int64_t k = 0; k < n_mats; k++)
        if (want_copy(p, mat_at(m, k), k, want)) total += copy_bytes(mat_at(m, k)), first = first < 0 ? k : first;
    if (first < 0) return LEAN_OK;
    void *raw = total + HUGE_PAGE <= SIZE_MAX ? lean_malloc((size_t)(total + HUGE_PAGE)) : NULL;
    if (!raw)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "cpu: allocating the repacked copies of the weights (%llu bytes)",
                         (unsigned long long)total);
    uint8_t *at = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(at, (size_t)total & ~(size_t)4095, MADV_HUGEPAGE); /* before the copies touch it */
#endif
    p->raw[first] = raw; /* the allocation is freed through the first copy in it */
    for (int64_t k = first; k < n_mats; k++) {
        const lean_tensor *t = mat_at(m, k);
        if (!want_copy(p, t, k, want)) continue;
        uint64_t rb = 0;
        lean_type_bytes(t->type, (uint64_t)t->ne[0], &rb);
        lean_repack(t->type, t->ne[1], t->ne[0], t->data, (size_t)rb, at);
        p->mats[k] = at;
        at += copy_bytes(t);
    }
    return LEAN_OK;
}

lean_status lean_packed_get(const lean_model *m, const bool want[LEAN_N_TYPE_IDS], const lean_packed **out,
                            lean_error *err) {
    lean_model_share *sh = m->share;
    const size_t n = (size_t)N_LAYER_MATS * (size_t)m->hp.n_layer + 1;
    lean_status st = LEAN_OK;
    lean_mutex_lock(&sh->lock);
    if (!sh->packed) {
        lean_packed *p = lean_calloc(1, sizeof *p);
        if (p) p->n = n, p->raw = lean_calloc(n, sizeof *p->raw), p->mats = lean_calloc(n, sizeof *p->mats);
        if (!p || !p->raw || !p->mats) {
            lean_packed_free(p);
            st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "cpu: allocating the repacked weights' table");
        } else {
            sh->packed = p;
        }
    }
    if (st == LEAN_OK) st = packed_add(m, sh->packed, want, err); /* a failure keeps the copies made */
    *out = sh->packed;
    lean_mutex_unlock(&sh->lock);
    return st;
}

const void *lean_packed_of(const lean_packed *p, const lean_model *m, const lean_tensor *t) {
    if (t == &m->output) return p->mats[(int64_t)N_LAYER_MATS * m->hp.n_layer];
    const char *base = (const char *)m->layers, *at = (const char *)t;
    if (at < base || at >= base + sizeof(lean_layer) * (size_t)m->hp.n_layer) return NULL;
    const size_t il = (size_t)(at - base) / sizeof(lean_layer), off = (size_t)(at - base) % sizeof(lean_layer);
    for (int k = 0; k < N_LAYER_MATS; k++)
        if (layer_mats[k] == off) return p->mats[il * N_LAYER_MATS + (size_t)k];
    return NULL;
}

void lean_packed_free(lean_packed *p) {
    if (!p) return;
    if (p->raw)
        for (size_t k = 0; k < p->n; k++) lean_free(p->raw[k]);
    lean_free(p->raw);
    lean_free(p->mats);
    lean_free(p);
}
