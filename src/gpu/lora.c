/* lora.c — LoRA adapters on the GPU (lora.h is the contract; docs/lora.md the design).
 *
 * What it does: for each adapted weight ("site") of a context's set, stacks the terms' A into
 * one (R, cols) F32 matrix and puts their B side by side, each times its scale s, into one
 * (rows, R) F32 matrix B' (R: the terms' ranks summed), uploads both, and makes the two kernels
 * that add s * B (A x) to the weight's product: lora_down.wgsl (t = A x) and lora_up.wgsl
 * (y += B' t). Sites that read one input and add to adjacent columns of one output (Q, K, V;
 * a stacked gate, up) form a group of one A and one pair of dispatches (lora_group). One t
 * buffer, (max_tok, the largest R), serves every group: each group's down and up run one after
 * the other in the pass. The embedding's site (io.gather) keeps its terms' A as (n_vocab, R),
 * the terms side by side, and lora_gather.wgsl copies row ids[tok] into t in place of lora_down.
 * The twins on the CPU: ops_ref.c's ref_lora_down, ref_lora_embed and ref_lora_up (the same
 * sums in another order and grouping).
 * Why F32 copies: an adapter's matrices are rank long on one side (rank 8 on every weight of a
 * 0.5B model: ~1% of its weights), so two small F32 kernels serve every format an adapter may
 * come in, at 4 bytes a weight.
 * What it does not: choose where the dispatches go in the pass (forward.c), or check the set
 * against the model (core/lora.c did).
 *
 * Sections: a group's matrices and kernels · create / record / free · swiglu_rows
 */
#include "gpu/lora.h"

#include "core/formats.h"
#include "gpu/weight_kernel.h" /* gpu_max_groups, gpu_check_binding */

#include <string.h>

enum { DOWN_WG = 64, UP_WG = 64, GATHER_WG = 64 };

/* A group: up to GPU_LORA_GROUP consecutive sites that read one input and add to adjacent
 * columns of one output (Q, K, V into qkv's rows; a stacked gate, up into gu's), so that one
 * down and one up dispatch serve them all; a site alone otherwise. */
enum { GPU_LORA_GROUP = 3 };
typedef struct lora_group {
    int32_t site0, n;    /* sites site0 .. site0 + n - 1 */
    /* a: (R, cols), every term's A in site order; b: each site's B' (rows_j, R_j), one after
     * another (R_j: the ranks of site j's terms summed, R their sum over the group) */
    lean_gpu_buf *a, *b;
    lean_gpu_pipeline *down, *up;
    lean_gpu_bindgroup *down_bg, *up_bg;
    uint32_t r, down_x, up_x; /* R; lora_down's (or lora_gather's) workgroups over R; lora_up's over the rows */
} lora_group;

struct gpu_lora {
    int32_t n_sites, n_groups;
    int32_t *group_at;   /* (n_sites): the group whose first site it is; -1 for every other site */
    int32_t *group_of;   /* (n_sites): the group the site is in, -1 if none has terms */
    lora_group *groups;  /* (n_groups): those with terms */
    lean_gpu_buf *t;     /* (max_tok, the largest R) F32 */
};

/* ---- a group's matrices and kernels ---- */

/* every row of t (an adapter's A or B, any type lean reads) dequantized into dst (ne[1], ne[0]) */
static lean_status dequant_rows(const lean_tensor *t, float *dst, lean_error *err) {
    const lean_type_traits *tt = lean_type_traits_get(t->type);
    uint64_t rb;
    if (!tt || !t->data || !lean_type_bytes(t->type, (uint64_t)t->ne[0], &rb))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu lora: tensor '%s' has no data of a type lean reads", t->name);
    for (int64_t r = 0; r < t->ne[1]; r++) tt->dequant((const uint8_t *)t->data + r * rb, dst + r * t->ne[0], t->ne[0]);
    return LEAN_OK;
}

/* The ranks of site i's terms summed. */
static int32_t site_rank(const lora_set *set, int32_t i) {
    int32_t n, r = 0;
    const lora_term *terms = lora_terms(set, i, &n);
    for (int32_t j = 0; j < n; j++) r += terms[j].rank;
    return r;
}

/* The host copies of group G's A (R, cols) and B' (its sites' blocks), lean_malloc'd into *a, *b;
 * gather (the embedding's site, G alone): A (cols = n_vocab, R), each term's A (n_vocab, rank)
 * at its columns. */
static lean_status group_matrices(const lora_set *set, const gpu_lora_io *io, const lora_group *G, uint64_t cols,
                                  bool gather, float **a, float **b, lean_error *err) {
    uint64_t b_floats = 0;
    for (int32_t j = 0; j < G->n; j++) b_floats += (uint64_t)io[G->site0 + j].rows * (uint64_t)site_rank(set, G->site0 + j);
    *a = lean_malloc((size_t)G->r * (size_t)cols * sizeof(float));
    *b = lean_malloc((size_t)b_floats * sizeof(float));
    lean_status st = *a && *b ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %u x %llu + %llu floats", G->r,
                                                    (unsigned long long)cols, (unsigned long long)b_floats);
    float *bt = NULL; /* one term's B (rows, rank); gather: its A (n_vocab, rank) first */
    uint64_t r0 = 0, b0 = 0; /* the site's first row of A, its block's offset in B' */
    for (int32_t j = 0; !st && j < G->n; j++) {
        int32_t n;
        const int32_t site = G->site0 + j, R_j = site_rank(set, site);
        const lora_term *terms = lora_terms(set, site, &n);
        const uint64_t rows = io[site].rows;
        for (int32_t k = 0, c = 0; !st && k < n; c += terms[k].rank, k++) {
            const lora_term *tm = &terms[k];
            if ((uint64_t)tm->a->ne[gather ? 1 : 0] != cols || (uint64_t)tm->b->ne[1] != rows) {
                st = LEAN_FAIL(err, LEAN_ERR_ARG, "gpu lora: '%s' is not (%llu, %llu)", tm->b->name,
                               (unsigned long long)rows, (unsigned long long)cols);
                break;
            }
            const uint64_t bt_rows = gather && cols > rows ? cols : rows;
            lean_free(bt);
            bt = lean_malloc((size_t)bt_rows * (size_t)tm->rank * sizeof(float));
            if (!bt) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %llu x %d floats", (unsigned long long)bt_rows, tm->rank);
            if (!st && gather) st = dequant_rows(tm->a, bt, err);
            for (uint64_t v = 0; !st && gather && v < cols; v++)
                memcpy(*a + v * G->r + (uint64_t)c, bt + v * (uint64_t)tm->rank, (size_t)tm->rank * sizeof(float));
            if (!st && !gather) st = dequant_rows(tm->a, *a + (r0 + (uint64_t)c) * cols, err);
            if (!st) st = dequant_rows(tm->b, bt, err);
            for (uint64_t o = 0; !st && o < rows; o++)
                for (int32_t r = 0; r < tm->rank; r++)
                    (*b)[b0 + o * (uint64_t)R_j + (uint64_t)(c + r)] = tm->scale * bt[o * (uint64_t)tm->rank + (uint64_t)r];
        }
        r0 += (uint64_t)R_j;
        b0 += rows * (uint64_t)R_j;
    }
    lean_free(bt);
    return st;
}

/* Uploads group G and makes its kernels; io[G->site0] says where it reads and adds. */
static lean_status group_create(lean_gpu *g, const lora_set *set, const gpu_lora_io *io, lean_gpu_buf *t,
                                lora_group *G, lean_error *err) {
    const gpu_lora_io *first = &io[G->site0];
    uint64_t cols = 0, rows = 0, b_floats = 0;
    uint32_t E[GPU_LORA_GROUP] = {0}, R[GPU_LORA_GROUP] = {0}, B[GPU_LORA_GROUP] = {0}; /* row ends, ranks, B' offsets */
    for (int32_t j = 0; j < G->n; j++) {
        const int32_t site = G->site0 + j;
        int32_t n;
        const lora_term *terms = lora_terms(set, site, &n);
        if (n > 0) cols = (uint64_t)terms[0].a->ne[first->gather ? 1 : 0]; /* gather: n_vocab */
        R[j] = (uint32_t)site_rank(set, site);
        B[j] = (uint32_t)b_floats;
        rows += io[site].rows;
        b_floats += (uint64_t)io[site].rows * R[j];
        E[j] = (uint32_t)rows;
        G->r += R[j];
    }
    for (int32_t j = G->n; j < GPU_LORA_GROUP; j++) E[j] = (uint32_t)rows; /* empty segments past the last */
    G->up_x = (uint32_t)lean_div_up(rows, UP_WG);
    G->down_x = first->gather ? (uint32_t)lean_div_up(G->r, GATHER_WG) : G->r;
    const uint32_t max = gpu_max_groups(g);
    if (G->r > max || G->up_x > max || first->max_tok < 1 || (uint32_t)first->max_tok > max)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu lora: rank %u over %llu rows for %d tokens passes %u "
                         "workgroups", G->r, (unsigned long long)rows, first->max_tok, max);
    const uint64_t max_tok = (uint64_t)first->max_tok;
    lean_status st = gpu_check_binding(g, first->x, 0, max_tok * (first->gather ? 1 : first->x_stride) * 4, "lora x", err);
    if (!st) st = gpu_check_binding(g, first->y, 0, max_tok * first->y_stride * 4, "lora y", err);
    if (!st && ((!first->gather && first->x_stride < cols) || first->y_col + rows > first->y_stride))
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "gpu lora: %llu x %llu weights into rows of %u at column %u from rows of %u",
                       (unsigned long long)rows, (unsigned long long)cols, first->y_stride, first->y_col,
                       first->x_stride);
    float *a = NULL, *b = NULL;
    if (!st) st = group_matrices(set, io, G, cols, first->gather, &a, &b, err);
    if (!st) st = lean_gpu_buf_create(g, (uint64_t)G->r * cols * 4, LEAN_GPU_STORAGE, "lora A", &G->a, err);
    if (!st) st = lean_gpu_buf_create(g, b_floats * 4, LEAN_GPU_STORAGE, "lora B", &G->b, err);
    if (!st) st = lean_gpu_buf_write(g, G->a, 0, a, (uint64_t)G->r * cols * 4, err);
    if (!st) st = lean_gpu_buf_write(g, G->b, 0, b, b_floats * 4, err);
    lean_free(a);
    lean_free(b);
    const lean_gpu_const kd[] = {{"WG", 'u', DOWN_WG}, {"COLS", 'u', (double)cols}, {"R", 'u', G->r},
                                 {"X_STRIDE", 'u', first->x_stride}},
                         kg[] = {{"WG", 'u', GATHER_WG}, {"R", 'u', G->r}};
    const lean_gpu_const ku[] = {{"WG", 'u', UP_WG},  {"ROWS", 'u', (double)rows},  {"R", 'u', G->r},
                                 {"Y_STRIDE", 'u', first->y_stride}, {"Y_COL", 'u', first->y_col},
                                 {"E0", 'u', E[0]},   {"E1", 'u', E[1]},  {"R0", 'u', R[0]}, {"R1", 'u', R[1]},
                                 {"R2", 'u', R[2]},   {"B1", 'u', B[1]},  {"B2", 'u', B[2]}};
    const char *down_name = first->gather ? "lora_gather" : "lora_down";
    const char *down_src[] = {lean_gpu_shader(down_name)}, *up_src[] = {lean_gpu_shader("lora_up")};
    if (!st) st = lean_gpu_pipeline_create(g, down_name, down_src, 1, first->gather ? kg : kd, first->gather ? 2 : 4,
                                           &G->down, err);
    if (!st) st = lean_gpu_pipeline_create(g, "lora_up", up_src, 1, ku, 12, &G->up, err);
    const lean_gpu_bind bd[] = {{G->a, 0, 0}, {first->x, 0, 0}, {t, 0, 0}}, bu[] = {{G->b, 0, 0}, {t, 0, 0}, {first->y, 0, 0}};
    if (!st) st = lean_gpu_bindgroup_create(g, G->down, bd, 3, down_name, &G->down_bg, err);
    if (!st) st = lean_gpu_bindgroup_create(g, G->up, bu, 3, "lora_up", &G->up_bg, err);
    return st;
}

/* ---- create / record / free ---- */

/* Whether site j (after i, the group's last so far) joins i's group: the same input, its
 * columns right after i's in the same output rows. */
static bool joins(const gpu_lora_io *i, const gpu_lora_io *j) {
    return !i->gather && !j->gather && j->x == i->x && j->x_stride == i->x_stride && j->y == i->y && j->y_stride == i->y_stride &&
           j->y_col == i->y_col + i->rows && j->max_tok == i->max_tok;
}

lean_status gpu_lora_create(lean_gpu *g, const lora_set *set, const gpu_lora_io *io, gpu_lora **out, lean_error *err) {
    *out = NULL;
    gpu_lora *l = lean_calloc(1, sizeof *l);
    if (l) {
        l->n_sites = set->n_sites;
        l->group_at = lean_calloc((size_t)set->n_sites, sizeof *l->group_at);
        l->group_of = lean_calloc((size_t)set->n_sites, sizeof *l->group_of);
        l->groups = lean_calloc((size_t)set->n_sites, sizeof *l->groups);
    }
    lean_status st = l && l->group_at && l->group_of && l->groups
                         ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %d sites", set->n_sites);
    uint64_t t_floats = 1; /* the most max_tok x R of any group */
    for (int32_t i = 0, end; !st && i < set->n_sites; i = end) {
        int32_t r = site_rank(set, i);
        for (end = i + 1; end < set->n_sites && end - i < GPU_LORA_GROUP && joins(&io[end - 1], &io[end]); end++)
            r += site_rank(set, end);
        for (int32_t k = i; k < end; k++) l->group_at[k] = l->group_of[k] = -1;
        if (r == 0) continue;
        lora_group *G = &l->groups[l->n_groups];
        G->site0 = i, G->n = end - i;
        l->group_at[i] = l->n_groups;
        for (int32_t k = i; k < end; k++) l->group_of[k] = l->n_groups;
        l->n_groups++;
        const uint64_t tf = (uint64_t)io[i].max_tok * (uint64_t)r;
        t_floats = tf > t_floats ? tf : t_floats;
    }
    if (!st) st = lean_gpu_buf_create(g, t_floats * 4, LEAN_GPU_STORAGE, "lora t", &l->t, err);
    for (int32_t k = 0; !st && k < l->n_groups; k++) st = group_create(g, set, io, l->t, &l->groups[k], err);
    if (st) {
        gpu_lora_free(l);
        return st;
    }
    *out = l;
    return LEAN_OK;
}

bool gpu_lora_on(const gpu_lora *l, int32_t site) { return l && l->group_of[site] >= 0; }

void gpu_lora_record(lean_gpu_cmd *c, const gpu_lora *l, int32_t site, int32_t n_tok) {
    if (!l || l->group_at[site] < 0) return;
    const lora_group *G = &l->groups[l->group_at[site]];
    lean_gpu_dispatch(c, G->down, G->down_bg, G->down_x, (uint32_t)n_tok, 1);
    lean_gpu_dispatch(c, G->up, G->up_bg, G->up_x, (uint32_t)n_tok, 1);
}

void gpu_lora_free(gpu_lora *l) {
    if (!l) return;
    for (int32_t i = 0; l->groups && i < l->n_groups; i++) {
        lora_group *G = &l->groups[i];
        lean_gpu_bindgroup_free(G->down_bg);
        lean_gpu_bindgroup_free(G->up_bg);
        lean_gpu_buf_free(G->a);
        lean_gpu_buf_free(G->b);
    }
    lean_free(l->groups);
    lean_free(l->group_at);
    lean_free(l->group_of);
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
