/* lora.c — LoRA adapters on the GPU (lora.h is the contract; docs/lora.md the design).
 *
 * What it does: for each adapted weight ("site") of a context's set, stacks the terms' A into
 * one (R, cols) F32 matrix and puts their B side by side, each times its scale s, into one
 * (rows, R) F32 matrix (R: the terms' ranks summed), uploads both, and makes the two kernels
 * that add s * B (A x) to the weight's product: lora_down.wgsl (t = A x) and lora_up.wgsl
 * (y += B' t). One t buffer, (max_tok, the largest R), serves every site: each site's down
 * and up run one after the other in the pass. The twins on the CPU: ops_ref.c's ref_lora_down
 * and ref_lora_up (the same sums in another order and grouping).
 * Why F32 copies: an adapter's matrices are rank long on one side (rank 8 on every weight of a
 * 0.5B model: ~1% of its weights), so two small F32 kernels serve every format an adapter may
 * come in, at 4 bytes a weight.
 * What it does not: choose where the dispatches go in the pass (forward.c), or check the set
 * against the model (core/lora.c did).
 *
 * Sections: the site's kernels · create / record / free · swiglu_rows
 */
#include "gpu/lora.h"

#include "core/formats.h"
#include "gpu/weight_kernel.h" /* gpu_max_groups, gpu_check_binding */

#include <string.h>

enum { DOWN_WG = 64, UP_WG = 64 };

typedef struct lora_site_gpu {
    lean_gpu_buf *a, *b; /* (R, cols), (rows, R) F32 */
    lean_gpu_pipeline *down, *up;
    lean_gpu_bindgroup *down_bg, *up_bg;
    uint32_t r, up_x;    /* R; lora_up's workgroups over the rows */
} lora_site_gpu;

struct gpu_lora {
    int32_t n_sites;
    lora_site_gpu *sites; /* (n_sites): a = NULL where the site has no terms */
    lean_gpu_buf *t;      /* (max_tok, the largest R) F32 */
};

/* ---- the site's kernels ---- */

/* every row of t (an adapter's A or B, any type lean reads) dequantized into dst (ne[1], ne[0]) */
static lean_status dequant_rows(const lean_tensor *t, float *dst, lean_error *err) {
    const lean_type_traits *tt = lean_type_traits_get(t->type);
    uint64_t rb;
    if (!tt || !t->data || !lean_type_bytes(t->type, (uint64_t)t->ne[0], &rb))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu lora: tensor '%s' has no data of a type lean reads", t->name);
    for (int64_t r = 0; r < t->ne[1]; r++) tt->dequant((const uint8_t *)t->data + r * rb, dst + r * t->ne[0], t->ne[0]);
    return LEAN_OK;
}

/* The host copies of a site's A (R, cols) and B' (rows, R), lean_malloc'd into *a, *b. */
static lean_status site_matrices(const lora_term *terms, int32_t n, int64_t rows, int64_t cols, int32_t R, float **a,
                                 float **b, lean_error *err) {
    *a = lean_malloc((size_t)R * (size_t)cols * sizeof(float));
    *b = lean_malloc((size_t)rows * (size_t)R * sizeof(float));
    lean_status st = *a && *b ? LEAN_OK
                                     : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %d x (%lld + %lld) floats", R,
                                                 (long long)rows, (long long)cols);
    float *bt = NULL; /* one term's B (rows, rank) */
    for (int32_t j = 0, r0 = 0; !st && j < n; r0 += terms[j].rank, j++) {
        const lora_term *tm = &terms[j];
        st = dequant_rows(tm->a, *a + (size_t)r0 * (size_t)cols, err);
        lean_free(bt);
        bt = st ? NULL : lean_malloc((size_t)rows * (size_t)tm->rank * sizeof(float));
        if (!st && !bt) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %lld x %d floats", (long long)rows, tm->rank);
        if (!st) st = dequant_rows(tm->b, bt, err);
        for (int64_t o = 0; !st && o < rows; o++)
            for (int32_t r = 0; r < tm->rank; r++) (*b)[o * R + r0 + r] = tm->scale * bt[o * tm->rank + r];
    }
    lean_free(bt);
    return st;
}

static lean_status site_create(lean_gpu *g, const lora_term *terms, int32_t n, const gpu_lora_io *io,
                               lean_gpu_buf *t, lora_site_gpu *S, lean_error *err) {
    const uint64_t max_tok = (uint64_t)io->max_tok;
    const int64_t rows = terms[0].b->ne[1], cols = terms[0].a->ne[0];
    int32_t R = 0;
    for (int32_t j = 0; j < n; j++) R += terms[j].rank;
    S->r = (uint32_t)R;
    S->up_x = (uint32_t)lean_div_up((uint64_t)rows, UP_WG);
    const uint32_t max = gpu_max_groups(g);
    if ((uint32_t)R > max || S->up_x > max || io->max_tok < 1 || (uint32_t)io->max_tok > max)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu lora: rank %d over %lld rows for %d tokens passes %u "
                         "workgroups", R, (long long)rows, io->max_tok, max);
    lean_status st = gpu_check_binding(g, io->x, 0, (uint64_t)max_tok * io->x_stride * 4, "lora x", err);
    if (!st) st = gpu_check_binding(g, io->y, 0, (uint64_t)max_tok * io->y_stride * 4, "lora y", err);
    if (!st && (io->x_stride < cols || io->y_col + rows > io->y_stride))
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "gpu lora: %lld x %lld weight into rows of %u at column %u from rows of %u",
                       (long long)rows, (long long)cols, io->y_stride, io->y_col, io->x_stride);
    float *a = NULL, *b = NULL;
    if (!st) st = site_matrices(terms, n, rows, cols, R, &a, &b, err);
    if (!st) st = lean_gpu_buf_create(g, (uint64_t)R * (uint64_t)cols * 4, LEAN_GPU_STORAGE, "lora A", &S->a, err);
    if (!st) st = lean_gpu_buf_create(g, (uint64_t)rows * (uint64_t)R * 4, LEAN_GPU_STORAGE, "lora B", &S->b, err);
    if (!st) st = lean_gpu_buf_write(g, S->a, 0, a, (uint64_t)R * (uint64_t)cols * 4, err);
    if (!st) st = lean_gpu_buf_write(g, S->b, 0, b, (uint64_t)rows * (uint64_t)R * 4, err);
    lean_free(a);
    lean_free(b);
    const lean_gpu_const kd[] = {{"WG", 'u', DOWN_WG}, {"COLS", 'u', (double)cols}, {"R", 'u', R},
                                 {"X_STRIDE", 'u', io->x_stride}};
    const lean_gpu_const ku[] = {{"WG", 'u', UP_WG}, {"ROWS", 'u', (double)rows}, {"R", 'u', R},
                                 {"Y_STRIDE", 'u', io->y_stride}, {"Y_COL", 'u', io->y_col}};
    const char *down_src[] = {lean_gpu_shader("lora_down")}, *up_src[] = {lean_gpu_shader("lora_up")};
    if (!st) st = lean_gpu_pipeline_create(g, "lora_down", down_src, 1, kd, 4, &S->down, err);
    if (!st) st = lean_gpu_pipeline_create(g, "lora_up", up_src, 1, ku, 5, &S->up, err);
    const lean_gpu_bind bd[] = {{S->a, 0, 0}, {io->x, 0, 0}, {t, 0, 0}}, bu[] = {{S->b, 0, 0}, {t, 0, 0}, {io->y, 0, 0}};
    if (!st) st = lean_gpu_bindgroup_create(g, S->down, bd, 3, "lora_down", &S->down_bg, err);
    if (!st) st = lean_gpu_bindgroup_create(g, S->up, bu, 3, "lora_up", &S->up_bg, err);
    return st;
}

/* ---- create / record / free ---- */

lean_status gpu_lora_create(lean_gpu *g, const lora_set *set, const gpu_lora_io *io, gpu_lora **out, lean_error *err) {
    *out = NULL;
    int32_t max_tok = 1; /* the most any site with terms takes */
    for (int32_t i = 0; i < set->n_sites; i++) {
        int32_t n;
        lora_terms(set, i, &n);
        if (n > 0 && io[i].max_tok > max_tok) max_tok = io[i].max_tok;
    }
    gpu_lora *l = lean_calloc(1, sizeof *l);
    if (l) l->sites = lean_calloc((size_t)set->n_sites, sizeof *l->sites);
    lean_status st = l && l->sites ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %d sites", set->n_sites);
    if (!st) {
        l->n_sites = set->n_sites;
        st = lean_gpu_buf_create(g, (uint64_t)max_tok * (uint64_t)set->max_site_rank * 4, LEAN_GPU_STORAGE, "lora t",
                                 &l->t, err);
    }
    for (int32_t i = 0; !st && i < set->n_sites; i++) {
        int32_t n;
        const lora_term *terms = lora_terms(set, i, &n);
        if (n > 0) st = site_create(g, terms, n, &io[i], l->t, &l->sites[i], err);
    }
    if (st) {
        gpu_lora_free(l);
        return st;
    }
    *out = l;
    return LEAN_OK;
}

bool gpu_lora_on(const gpu_lora *l, int32_t site) { return l && l->sites[site].a; }

void gpu_lora_record(lean_gpu_cmd *c, const gpu_lora *l, int32_t site, int32_t n_tok) {
    if (!gpu_lora_on(l, site)) return;
    const lora_site_gpu *S = &l->sites[site];
    lean_gpu_dispatch(c, S->down, S->down_bg, S->r, (uint32_t)n_tok, 1);
    lean_gpu_dispatch(c, S->up, S->up_bg, S->up_x, (uint32_t)n_tok, 1);
}

void gpu_lora_free(gpu_lora *l) {
    if (!l) return;
    for (int32_t i = 0; l->sites && i < l->n_sites; i++) {
        lora_site_gpu *S = &l->sites[i];
        lean_gpu_bindgroup_free(S->down_bg);
        lean_gpu_bindgroup_free(S->up_bg);
        lean_gpu_buf_free(S->a);
        lean_gpu_buf_free(S->b);
    }
    lean_free(l->sites);
    lean_gpu_buf_free(l->t);
    lean_free(l);
}

/* ---- swiglu_rows ---- */

lean_status gpu_swiglu_rows_create(lean_gpu *g, lean_gpu_buf *gu, lean_gpu_buf *gate, int32_t n, gpu_op *op,
                                   lean_error *err) {
    *op = (gpu_op){.wg_x = (uint32_t)lean_div_up((uint64_t)n, GPU_OP_WG), .per_tok = true};
    const lean_gpu_const k[] = {{"N", 'u', n}, {"WG", 'u', GPU_OP_WG}};
    const char *src[] = {lean_gpu_shader("swiglu_rows")};
    const lean_gpu_bind b[] = {{gu, 0, 0}, {gate, 0, 0}};
    lean_status st = lean_gpu_pipeline_create(g, "swiglu_rows", src, 1, k, 2, &op->pipe, err);
    if (!st) st = lean_gpu_bindgroup_create(g, op->pipe, b, 2, "swiglu_rows", &op->bg, err);
    return st;
}
