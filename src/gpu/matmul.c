/* matmul.c — W x on the GPU for a weight in its own block format (weights.h is the contract):
 * decode's one-token kernel (shaders/matmul_vec.wgsl), prefill's tiled kernel
 * (matmul_tiled.wgsl, or matmul_tiled_i8.wgsl on 8-bit dot products) and, for a prefill split
 * over the columns, the dispatch that adds the parts (matmul_combine.wgsl). For each: which
 * variant and shape a weight takes, the constants, the bindings and the workgroup counts.
 * What it does not: lay out or upload the weight (weight_upload.c) or assemble the shader
 * sources (weight_kernel.c, which compiles every kernel over a weight).
 *
 * Sections: 1. kernel shapes  2. outputs and bindings  3. matmul_vec (decode)
 *           4. matmul_tiled (prefill) and its split  5. checks, create, record
 */
#include "gpu/weight_kernel.h"

#include "gpu/ops.h" /* GPU_OP_WG: rmsnorm's workgroup, whose order a normed matmul keeps */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. kernel shapes ---- */

/* Every shape is the fastest of a sweep on the H200 (scripts/h200_tile_sweep.sh), bounded by
 * the compat defaults (<= 128 invocations, <= 16 KiB workgroup memory); the measurements are in
 * docs/runs/ (2026-12-04-moved-from-src.md names each constant's). The shape never changes the
 * bits.
 * matmul_vec: VEC_WG lanes, VEC_RPW outputs a workgroup (more workgroups for latency-bound
 * decode), but VEC_RPW_SHORT where a lane has at most VEC_SHORT_CPL chunks of a row: with
 * little work a workgroup, more rows share its start and its reduction. */
enum { VEC_WG = 128, VEC_RPW = 2, VEC_RPW_SHORT = 4, VEC_SHORT_CPL = 1 };
/* the rows of a batch a matmul_vec workgroup takes where the matmul has a rows uniform
 * (gpu_matmul_create_rows): each weight chunk loaded once for them */
enum { VEC_TPW = 4 };
/* a normed matmul_vec whose lanes take several chunks: 4 outputs share a workgroup's norm */
enum { VEC_RPW_NORMED = 4 };
/* Prefetch (vec_prefetch): a normed matmul_vec decodes its lanes' first chunk of every row
 * before it sums the row's squares (matmul_vec.wgsl's PRE; the same sums), in formats of
 * chunks up to VEC_PREFETCH_CH weights (the K-quants' 16 would hold 2 x RPW_NORMED x 16
 * registers). */
enum { VEC_PREFETCH_CH = 8 };
/* the logits' matrix, a row a vocabulary entry: VEC_RPW_VOCAB outputs a workgroup from
 * VEC_VOCAB_OUTS outputs on, where 2 made tens of thousands of workgroups of a few KiB each */
enum { VEC_RPW_VOCAB = 8, VEC_VOCAB_OUTS = 16384 };
_Static_assert(VEC_RPW % 2 == 0 && VEC_RPW_SHORT % 2 == 0 && VEC_RPW_NORMED % 2 == 0,
               "the q|k|v epilogue: a workgroup holds whole RoPE pairs");
_Static_assert(VEC_WG >= GPU_OP_WG && (VEC_WG & (VEC_WG - 1)) == 0, "matmul_in.wgsl sums as rmsnorm's GPU_OP_WG lanes");
/* matmul_tiled: TILE_GR x TILE_GT invocations, each TILE_TR outputs (an output's NW rows: 2 for
 * SwiGLU) x TILE_TT tokens: tiles of 128 outputs x 32 tokens, so a weight chunk is decoded once
 * per 16 tokens; TILE_KSTEP columns of the 32 tokens staged per step (16 KiB). Matrices of
 * TILE_WIDE_MIN outputs and columns or more take TILE_WIDE_GR x 1 invocations of 2 outputs x 32
 * tokens (a chunk decoded once per 32 tokens; shorter rows lose more to the halved workgroup
 * count than they gain); outside SwiGLU (whose 2 outputs are 4 rows already) a wide invocation
 * takes TILE_WIDE_TR = 4 outputs, so each x the workgroup stages is read from workgroup memory
 * once for 4 rows, not 2 — those reads, not the multiply-adds, bound the kernel. */
enum { TILE_GR = 64, TILE_GT = 2, TILE_TR = 2, TILE_TT = 16, TILE_KSTEP = 128 };
enum { TILE_WIDE_GR = 128, TILE_WIDE_MIN = 2048, TILE_WIDE_TR = 4 };
enum { TILE_T = TILE_GT * TILE_TT }; /* tokens a tile, both shapes (the wide one has GT = 1) */
/* A matrix whose output tiles give max_tok tokens (at most TILE_SPLIT_TOK: a prefill chunk)
 * fewer than TILE_SPLIT_WG workgroups is split over its columns into enough parts to reach it,
 * each of at least TILE_SPLIT_MIN_STEPS 128-column steps, or of one step where max_tok is less
 * than TILE_SPLIT_TOK (the batched pass's few rows: docs/runs/2026-12-07-gpu-batch-split.md)
 * (matmul_tiled.wgsl's KSPLIT; the partial sums are added by matmul_combine.wgsl, COMBINE_WG
 * outputs x COMBINE_CT tokens a workgroup): a few output tiles leave most of a large GPU's
 * multiprocessors idle. The rule reads the matrix's shape and max_tok, fixed when the matmul is
 * made, so the bits never depend on n_tok. */
enum { TILE_SPLIT_WG = 1024, TILE_SPLIT_TOK = 512, TILE_SPLIT_MIN_STEPS = 2 };
enum { COMBINE_WG = 64, COMBINE_CT = 8 };

/* ---- 2. the matmul, its outputs, bindings and workgroups ---- */

/* n workgroups over x and y (each <= the device's per-dimension limit): *nx * *ny >= n; the
 * kernels index workgroup wid.y * nx + wid.x and skip those >= n. */
static lean_status split_groups(lean_gpu *g, uint64_t n, const char *what, uint32_t *nx, uint32_t *ny,
                                lean_error *err) {
    const uint32_t max = gpu_max_groups(g);
    const uint64_t x = n < max ? n : max, y = (n + x - 1) / x;
    if (y > max)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: %llu workgroups exceed %u x %u", what,
                         (unsigned long long)n, max, max);
    *nx = (uint32_t)x;
    *ny = (uint32_t)y;
    return LEAN_OK;
}

struct gpu_matmul {
    lean_gpu_pipeline *vec, *tiled, *combine; /* tiled: NULL when max_tok is 1; combine: unless split */
    lean_gpu_bindgroup *vec_bg, *tiled_bg, *combine_bg;
    uint32_t vec_x, vec_y;   /* matmul_vec's workgroups */
    uint32_t vec_tpw;        /* the rows of a batch a matmul_vec workgroup takes */
    uint32_t tile_x, tile_y; /* matmul_tiled's output tiles x splits (tokens tiles go in z) */
    uint32_t combine_x;      /* matmul_combine's workgroups over the outputs (tokens in y) */
};

/* The output modes by gpu_mm_mode, as matmul_out_<mode>.wgsl names them (each file's y_out). */
static const char *const MODE_FN[] = {"set", "add", "bias", "swiglu"};
/* matmul_vec's output mode: the matmul's, or the Q, K, V epilogue's (with or without a bias) */
static const char *vec_out_fn(const gpu_mm_out *out) {
    if (!out->kv) return MODE_FN[out->mode];
    return out->mode == GPU_MM_BIAS ? "qkv_bias" : "qkv";
}
/* weight rows per output */
static uint32_t rows_per_out(gpu_mm_mode mode) { return mode == GPU_MM_SWIGLU ? 2 : 1; }

/* The constants both kernels take for out, w's outputs being outs; bias_at: the kernel's
 * binding for the bias; kv_at: the first of the Q, K, V epilogue's four (0: the
 * kernel does not run it). Returns how many (written to k). */
static int out_consts(const gpu_mm_out *out, uint64_t outs, uint32_t bias_at, uint32_t kv_at, lean_gpu_const *k) {
    const gpu_mm_kv *kv = kv_at ? out->kv : NULL;
    k[0] = (lean_gpu_const){"NW", 'u', rows_per_out(out->mode)};
    k[1] = (lean_gpu_const){"OUTS", 'u', (double)outs};
    k[2] = (lean_gpu_const){"Y_STRIDE", 'u', out->stride ? out->stride : (double)outs};
    k[3] = (lean_gpu_const){"Y_COL", 'u', out->col};
    k[4] = (lean_gpu_const){"BIAS_AT", 'u', bias_at};
    k[5] = (lean_gpu_const){"KV_MODE", 'u', kv != NULL};
    k[6] = (lean_gpu_const){"KV_AT", 'u', kv ? kv_at : bias_at + 1};
    k[7] = (lean_gpu_const){"NEOX", 'u', kv && kv->neox};
    k[8] = (lean_gpu_const){"HEAD_DIM", 'u', kv ? kv->head_dim : 2};
    k[9] = (lean_gpu_const){"Q_DIM", 'u', kv ? kv->q_dim : 0};
    k[10] = (lean_gpu_const){"KV_DIM", 'u', kv ? kv->kv_dim : 0};
    return 11;
}

/* The bindings a matmul may have, in this order (raw, norm: a normed input's; the last four:
 * the Q, K, V epilogue's). */
enum { B_W, B_X, B_Y, B_STEP, B_BIAS, B_RAW, B_NORM, B_KV_STEP, B_KC, B_VC, B_TABLE, B_PART, N_BINDS };

/* Binds the kernel's own (W, x, y[, step]: n_own of all, x replaced by raw when normed), then the
 * bias in BIAS mode, then (normed) the norm weight, then (kv) the epilogue's four. */
static lean_status bind_matmul(lean_gpu *g, lean_gpu_pipeline *p, const lean_gpu_bind *all, int n_own, bool normed,
                               bool kv, const gpu_mm_out *out, const char *label, lean_gpu_bindgroup **bg,
                               lean_error *err) {
    lean_gpu_bind b[N_BINDS];
    memcpy(b, all, sizeof(lean_gpu_bind) * (size_t)n_own);
    if (normed) b[B_X] = all[B_RAW];
    int n = n_own;
    if (out->mode == GPU_MM_BIAS) b[n++] = all[B_BIAS];
    if (normed) b[n++] = all[B_NORM];
    if (kv) memcpy(b + n, all + B_KV_STEP, 4 * sizeof(lean_gpu_bind)), n += 4;
    return lean_gpu_bindgroup_create(g, p, b, n, label, bg, err);
}

/* ---- 3. matmul_vec (decode) ---- */

/* Whether a normed matmul_vec of type decodes its first chunks early (VEC_PREFETCH_CH): Q5_0
 * alone gained (docs/runs/2026-12-03-gpu-h200-sweep.md). lean_gpu_options.vec_prefetch overrides it
 * (the tests run the default, and every format that can with it on). */
/* a kernel variant: as lean_gpu_options forces it (the tests), else the library's dflt */
static bool variant_on(lean_gpu_force f, bool dflt) { return f == LEAN_GPU_AUTO ? dflt : f == LEAN_GPU_ON; }

static bool vec_prefetch(lean_gpu *g, uint32_t type) {
    return variant_on(lean_gpu_options_of(g)->vec_prefetch, type == LEAN_TYPE_Q5_0) &&
           gpu_format_of(type)->chunk <= VEC_PREFETCH_CH;
}

/* matmul_vec's outputs per workgroup for w */
static uint32_t vec_rpw(const gpu_weight *w, uint64_t outs, bool normed) {
    if (outs >= VEC_VOCAB_OUTS) return VEC_RPW_VOCAB;
    if (lean_div_up(gpu_weight_row_chunks(w), VEC_WG) <= VEC_SHORT_CPL) return VEC_RPW_SHORT;
    return normed ? VEC_RPW_NORMED : VEC_RPW;
}

/* Every workgroup of a normed matmul sums the whole row's squares again, so the fusion pays
 * while the row is short (docs/runs/2026-12-03-gpu-h200-fusion.md). */
#define NORM_FUSE_MAX_COLS 2048

/* The storage buffers a matmul_vec binds: W, x, y, then the bias, the norm weight and the
 * Q, K, V epilogue's three where used. */
static uint32_t vec_storage_buffers(bool bias, bool normed, bool kv) { return 3u + bias + normed + 3u * kv; }

static bool storage_fits(lean_gpu *g, uint32_t n) { return lean_gpu_get_info(g)->max_storage_buffers_per_stage >= n; }

bool gpu_matmul_can_norm(lean_gpu *g, int32_t cols) {
    return cols > 0 && cols <= NORM_FUSE_MAX_COLS && storage_fits(g, vec_storage_buffers(true, true, false));
}

bool gpu_matmul_kv_fits(lean_gpu *g, bool bias, bool normed) {
    return storage_fits(g, vec_storage_buffers(bias, normed, true));
}

/* rows: the matmul has a rows uniform (binds[B_STEP]; then plain, no epilogue: matmul_create),
 * so a workgroup takes VEC_TPW rows of a batch */
static lean_status matmul_vec_make(lean_gpu *g, const gpu_weight *w, const lean_gpu_bind *binds, const gpu_mm_in *in,
                                   const gpu_mm_out *out, bool rows, gpu_matmul *m, lean_error *err) {
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    const bool normed = in->norm != NULL;
    const uint32_t rpw = vec_rpw(w, outs, normed), own = 3 + rows; /* W, x, y[, the rows uniform] */
    m->vec_tpw = rows ? VEC_TPW : 1;
    lean_status st = split_groups(g, lean_div_up(outs, rpw), "matmul_vec", &m->vec_x, &m->vec_y, err);
    const uint32_t norm_at = own + (out->mode == GPU_MM_BIAS);
    lean_gpu_const k[24] = {{"WG", 'u', VEC_WG}, {"RPW", 'u', rpw}, {"NX", 'u', m->vec_x}, {"TPW", 'u', m->vec_tpw}};
    int n = 4 + out_consts(out, outs, own, norm_at + normed, k + 4);
    k[n++] = (lean_gpu_const){"NORM_AT", 'u', norm_at};
    k[n++] = (lean_gpu_const){"X_VEC4", 'u', (double)((w->cols + 3) / 4)};
    k[n++] = (lean_gpu_const){"RED_ROWS", 'u', rpw * rows_per_out(out->mode)};
    k[n++] = (lean_gpu_const){"SG", 'u', lean_gpu_subgroup_size(g)};
    k[n++] = (lean_gpu_const){"NORM_LANES", 'u', GPU_OP_WG};
    k[n++] = (lean_gpu_const){"EPS", 'f', in->eps};
    k[n++] = (lean_gpu_const){"PRE", 'u', normed && vec_prefetch(g, w->type)};
    if (st == LEAN_OK)
        st = gpu_weight_pipeline(g, w, "matmul_vec", "words_u32", normed ? "normed" : "plain", vec_out_fn(out),
                                 rows ? "vec_rows" : "vec_each", k, n, &m->vec, err);
    if (st == LEAN_OK)
        st = bind_matmul(g, m->vec, binds, (int)own, normed, out->kv != NULL, out, "matmul_vec", &m->vec_bg, err);
    return st;
}

/* ---- 4. matmul_tiled (prefill) and its split ---- */

/* Whether a prefill matmul of w takes 8-bit activations and integer dot products
 * (matmul_tiled_i8.wgsl): every quantized matrix (a mixed stack's parts are) where
 * lean_gpu_int8; F32, F16 and BF16 weights keep float arithmetic. */
static bool tile_i8(lean_gpu *g, const gpu_weight *w) {
    const bool float_w = w->type == LEAN_TYPE_F32 || w->type == LEAN_TYPE_F16 || w->type == LEAN_TYPE_BF16;
    return lean_gpu_int8(g) && (w->n_parts > 0 || !float_w);
}

/* Whether w's block_step reads the first 16 quants' sum (formats.wgsl's bs_two, bs_two_min), so
 * matmul_tiled_i8 keeps it (tiled_i8_halves.wgsl; else tiled_i8_sums.wgsl). A mixed stack's
 * parts are 32-weight block formats, which do not. */
static bool i8_halves(const gpu_weight *w) {
    return w->n_parts == 0 && (w->type == LEAN_TYPE_Q2_K || w->type == LEAN_TYPE_Q3_K || w->type == LEAN_TYPE_Q6_K);
}

/* Whether matmul_tiled issues each group's loads one group ahead (matmul_tiled.wgsl's PF), for a
 * matrix of w in the wide shape or not: Q8_0 in the wide shape alone gained
 * (docs/runs/2026-12-04-gpu-h200-prefill.md). The options' tile_prefetch overrides it (the tests
 * run every format both ways). */
static bool tile_prefetch(lean_gpu *g, const gpu_weight *w, bool wide) {
    return variant_on(lean_gpu_options_of(g)->tile_prefetch, wide && w->n_parts == 0 && w->type == LEAN_TYPE_Q8_0);
}

/* Whether matmul_tiled takes the wide shape for a matrix of outs outputs and cols columns: by
 * TILE_WIDE_MIN, or for every matrix or none (the options' tile_wide), which the tests use to
 * run both shapes on every format and mode. */
static bool tile_wide(lean_gpu *g, uint64_t outs, uint64_t cols) {
    return variant_on(lean_gpu_options_of(g)->tile_wide, outs >= TILE_WIDE_MIN && cols >= TILE_WIDE_MIN);
}

/* matmul_tiled's shape for a matrix of rows x cols in mode: invocations gr x gt, output tiles,
 * and its split over the columns (ksplit parts of sps steps; 1 part where it takes no split) */
typedef struct tile_shape {
    uint32_t gr, gt, opt; /* opt: outputs an invocation */
    bool wide;
    uint64_t tiles_o, ksplit, sps;
} tile_shape;

/* The split by TILE_SPLIT_WG, or the options' tile_ksplit parts (at most one a step), which the
 * tests use to split every matrix. */
static uint64_t tile_ksplit(lean_gpu *g, uint64_t tiles_o, uint64_t steps, int32_t max_tok) {
    const uint64_t forced = lean_gpu_options_of(g)->tile_ksplit;
    if (forced > 0) return forced < steps ? forced : steps;
    const bool few = max_tok < TILE_SPLIT_TOK;
    const uint64_t wgs = tiles_o * lean_div_up(few ? (uint64_t)max_tok : TILE_SPLIT_TOK, TILE_T);
    const uint64_t most = few ? steps : steps / TILE_SPLIT_MIN_STEPS;
    const uint64_t k = wgs >= TILE_SPLIT_WG ? 1 : lean_div_up(TILE_SPLIT_WG, wgs);
    return k < most ? k : most ? most : 1;
}

/* split: whether the matmul has a part buffer (gpu_mm_out) */
static tile_shape tile_shape_of(lean_gpu *g, int64_t rows, int64_t cols, gpu_mm_mode mode, bool split,
                                int32_t max_tok) {
    const uint64_t outs = (uint64_t)rows / rows_per_out(mode), steps = lean_div_up((uint64_t)cols, TILE_KSTEP);
    tile_shape t = {.gr = TILE_GR, .gt = TILE_GT, .opt = TILE_TR};
    t.wide = tile_wide(g, outs, (uint64_t)cols);
    if (t.wide) t.gr = TILE_WIDE_GR, t.gt = 1, t.opt = mode == GPU_MM_SWIGLU ? TILE_TR : TILE_WIDE_TR;
    t.tiles_o = lean_div_up(outs, (uint64_t)t.gr * t.opt);
    t.sps = lean_div_up(steps, split ? tile_ksplit(g, t.tiles_o, steps, max_tok) : 1);
    t.ksplit = lean_div_up(steps, t.sps); /* no part left empty */
    return t;
}

uint64_t gpu_matmul_part_floats(lean_gpu *g, int64_t rows, int64_t cols, gpu_mm_mode mode, int32_t max_tok) {
    if (max_tok < 2 || rows < 1 || cols < 1) return 0;
    const tile_shape t = tile_shape_of(g, rows, cols, mode, true, max_tok);
    return t.ksplit > 1 ? t.ksplit * (uint64_t)max_tok * (uint64_t)rows : 0;
}

/* matmul_combine for a matmul split over its columns: binds part (P), y (and the bias) */
static lean_status matmul_combine_make(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const lean_gpu_bind *binds,
                                       const gpu_mm_out *out, uint64_t ksplit, gpu_matmul *m, lean_error *err) {
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    if (lean_div_up(outs, COMBINE_WG) > gpu_max_groups(g) || lean_div_up((uint64_t)max_tok, COMBINE_CT) > gpu_max_groups(g))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "matmul_combine: %llu outputs x %d tokens exceed %u x %u workgroups",
                         (unsigned long long)outs, max_tok, gpu_max_groups(g) * COMBINE_WG, gpu_max_groups(g) * COMBINE_CT);
    m->combine_x = (uint32_t)lean_div_up(outs, COMBINE_WG);
    char out_file[32], label[64];
    snprintf(out_file, sizeof out_file, "matmul_out_%s", MODE_FN[out->mode]);
    snprintf(label, sizeof label, "matmul_combine_%s", MODE_FN[out->mode]);
    const char *src[] = {lean_gpu_shader("matmul_combine"), lean_gpu_shader(out_file), lean_gpu_shader("matmul_out")};
    if (!src[0] || !src[1] || !src[2]) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "pipeline '%s': shader missing", label);
    lean_gpu_const k[24] = {{"WG", 'u', COMBINE_WG}, {"CT", 'u', COMBINE_CT}, {"KSPLIT", 'u', (double)ksplit},
                            {"ROWS", 'u', (double)w->rows}};
    const int n = 4 + out_consts(out, outs, 3, 0, k + 4);
    lean_gpu_bind b[N_BINDS]; /* P, y, step (then the bias, by bind_matmul) */
    memcpy(b, binds, sizeof b);
    b[0] = binds[B_PART], b[1] = binds[B_Y], b[2] = binds[B_STEP];
    lean_status st = lean_gpu_pipeline_create(g, label, src, 3, k, n, &m->combine, err);
    if (st == LEAN_OK) st = bind_matmul(g, m->combine, b, 3, false, false, out, label, &m->combine_bg, err);
    return st;
}

static lean_status matmul_tiled_make(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const lean_gpu_bind *binds,
                                     const gpu_mm_out *out, gpu_matmul *m, lean_error *err) {
    /* a tile is GR x t.opt outputs; an invocation's t.opt outputs take TR = t.opt x NW rows */
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    const tile_shape t = tile_shape_of(g, w->rows, w->cols, out->mode, out->part != NULL, max_tok);
    const bool split = t.ksplit > 1;
    lean_status st = split_groups(g, t.tiles_o * t.ksplit, "matmul_tiled", &m->tile_x, &m->tile_y, err);
    lean_gpu_const k[24] = {{"GR", 'u', t.gr},          {"GT", 'u', t.gt},   {"TR", 'u', (double)(t.opt * rows_per_out(out->mode))},
                            {"TT", 'u', TILE_T / t.gt}, {"KSTEP", 'u', TILE_KSTEP}, {"NX", 'u', m->tile_x},
                            {"TILES_O", 'u', (double)t.tiles_o}, {"KSPLIT", 'u', (double)t.ksplit},
                            {"SPS", 'u', (double)t.sps}, {"PF", 'u', tile_prefetch(g, w, t.wide)}};
    const int n = 10 + out_consts(out, outs, 4, 0, k + 10);
    /* split: y is the part buffer, written by tile_part; the mode is the combine's */
    lean_gpu_bind b[N_BINDS];
    memcpy(b, binds, sizeof b);
    if (split) b[B_Y] = binds[B_PART];
    const gpu_mm_out part_out = {.mode = GPU_MM_SET};
    const gpu_mm_out *tile_out = split ? &part_out : out;
    const bool i8 = tile_i8(g, w); /* its own arithmetic; else tiled_f32's or tiled_f16's */
    const char *arith = i8 ? (i8_halves(w) ? "tiled_i8_halves" : "tiled_i8_sums") : lean_gpu_f16(g) ? "tiled_f16" : "tiled_f32";
    if (st == LEAN_OK)
        st = gpu_weight_pipeline(g, w, i8 ? "matmul_tiled_i8" : "matmul_tiled", "words_vec4", NULL, MODE_FN[tile_out->mode], arith,
                           k, n, &m->tiled, err);
    if (st == LEAN_OK) st = bind_matmul(g, m->tiled, b, 4, false, false, tile_out, "matmul_tiled", &m->tiled_bg, err);
    if (st == LEAN_OK && split) st = matmul_combine_make(g, w, max_tok, binds, out, t.ksplit, m, err);
    return st;
}

/* ---- 5. checks, create, record ---- */

/* The bytes of x that max_tok tokens' inputs span, a whole number of vec4s (matmul_vec reads
 * x as vec4s; every buffer is a whole number of them, lean_gpu_buf_create). */
static uint64_t x_bytes(const gpu_weight *w, int32_t max_tok) {
    return ((uint64_t)max_tok * (uint64_t)w->cols * 4 + 15) & ~(uint64_t)15;
}

/* in against w and max_tok: x (and a normed input's raw row and norm weight) large enough */
static lean_status check_in(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const gpu_mm_in *in, lean_error *err) {
    const uint64_t norm_bytes = x_bytes(w, 1); /* one row, padded to a vec4 */
    if (in->offset % 16) /* matmul_vec reads x as vec4s */
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul x: offset %llu is not a multiple of 16",
                         (unsigned long long)in->offset);
    lean_status st = gpu_check_binding(g, in->x, in->offset, x_bytes(w, max_tok), "matmul x", err);
    if (st == LEAN_OK && in->norm) st = gpu_check_binding(g, in->raw, 0, x_bytes(w, 1), "matmul raw x", err);
    if (st == LEAN_OK && in->norm && lean_gpu_buf_size(in->norm) < norm_bytes)
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: the norm weight has %llu bytes, %llu wanted",
                       (unsigned long long)lean_gpu_buf_size(in->norm), (unsigned long long)norm_bytes);
    return st;
}

/* A normed input's raw binding: the rows of max_tok tokens that raw holds (one at least:
 * check_in), so the batched pass reads its row t there. */
static uint64_t raw_bytes(const gpu_weight *w, int32_t max_tok, const gpu_mm_in *in) {
    if (!in->raw) return 0;
    const uint64_t want = x_bytes(w, max_tok), has = lean_gpu_buf_size(in->raw) & ~(uint64_t)15;
    return want < has ? want : has;
}

/* The floats of y that max_tok tokens' outputs span, from out->offset. */
static uint64_t y_floats(const gpu_weight *w, int32_t max_tok, const gpu_mm_out *out) {
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode), stride = out->stride ? out->stride : outs;
    return (uint64_t)(max_tok - 1) * stride + out->col + outs;
}

/* the Q, K, V epilogue (gpu_mm_kv) against out: whole heads of the q | k | v row, a mode it
 * takes, its buffers there */
static lean_status check_kv(const gpu_mm_out *out, uint64_t outs, lean_error *err) {
    const gpu_mm_kv *kv = out->kv;
    const int64_t hd = kv->head_dim, row = (int64_t)kv->q_dim + 2 * (int64_t)kv->kv_dim;
    if (hd < 2 || hd % 2 || kv->q_dim % hd || kv->kv_dim % hd || out->col % hd || outs % (uint64_t)hd ||
        out->stride != row || (out->mode != GPU_MM_SET && out->mode != GPU_MM_BIAS))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul q|k|v epilogue: %llu outputs at column %u of rows of %u, head_dim "
                         "%d, q_dim %d, kv_dim %d, mode %d", (unsigned long long)outs, out->col, out->stride,
                         kv->head_dim, kv->q_dim, kv->kv_dim, (int)out->mode);
    if (!kv->step || !kv->kc || !kv->vc || !kv->table)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul q|k|v epilogue: a buffer missing");
    return LEAN_OK;
}

/* out against w and max_tok: a mode w can serve, y (and the bias) large enough */
static lean_status check_out(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const gpu_mm_out *out,
                             lean_error *err) {
    if ((unsigned)out->mode > GPU_MM_SWIGLU || (out->mode == GPU_MM_SWIGLU && w->rows % 2) ||
        (out->mode == GPU_MM_BIAS && !out->bias))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: mode %d over %lld rows%s", (int)out->mode, (long long)w->rows,
                         out->mode == GPU_MM_BIAS ? " without a bias" : "");
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    if (out->stride ? out->col + outs > out->stride : out->col > 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: %llu outputs at column %u of rows of %u", (unsigned long long)outs,
                         out->col, out->stride);
    lean_status st = gpu_check_binding(g, out->y, out->offset, y_floats(w, max_tok, out) * 4, "matmul y", err);
    if (st == LEAN_OK && out->mode == GPU_MM_BIAS)
        st = gpu_check_binding(g, out->bias, 0, (out->col + outs) * 4, "matmul bias", err);
    if (st == LEAN_OK && out->kv) st = check_kv(out, outs, err);
    const uint64_t part = gpu_matmul_part_floats(g, w->rows, w->cols, out->mode, max_tok);
    if (st == LEAN_OK && out->part && part) st = gpu_check_binding(g, out->part, 0, part * 4, "matmul part", err);
    return st;
}

/* gpu_matmul_create, or (tiled false) gpu_matmul_create_rows: matmul_vec alone */
static lean_status matmul_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                                 const gpu_mm_in *in, const gpu_mm_out *out, bool tiled, gpu_matmul **res,
                                 lean_error *err) {
    if (max_tok < 1 || (uint64_t)max_tok > 65535ull * TILE_T)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: max_tok %d is not in 1 .. %d", max_tok, 65535 * TILE_T);
    lean_status st = check_in(g, w, max_tok, in, err);
    if (st == LEAN_OK) st = check_out(g, w, max_tok, out, err);
    const uint32_t n_storage = vec_storage_buffers(out->mode == GPU_MM_BIAS, in->norm != NULL, out->kv != NULL);
    if (st == LEAN_OK && !storage_fits(g, n_storage))
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "matmul: %u storage buffers (bias %d, normed %d, q|k|v epilogue %d), "
                       "the device binds %u", n_storage, out->mode == GPU_MM_BIAS, in->norm != NULL, out->kv != NULL,
                       lean_gpu_get_info(g)->max_storage_buffers_per_stage);
    if (st == LEAN_OK && tiled && max_tok > 1 && !step) st = LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: no step uniform");
    if (st == LEAN_OK && !tiled && max_tok > 1 && (w->cols % 4 || out->kv))
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "matmul rows: %lld columns (a multiple of 4 wanted)%s",
                       (long long)w->cols, out->kv ? ", the q|k|v epilogue" : "");
    const bool rows = !tiled && step != NULL; /* a workgroup takes several rows */
    if (st == LEAN_OK && rows && (in->norm || out->kv))
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "matmul rows with a rows uniform: a normed input or the q|k|v epilogue");
    if (st != LEAN_OK) return st;
    gpu_matmul *m = lean_calloc(1, sizeof *m);
    if (!m) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "no memory for a matmul");
    lean_gpu_bind binds[N_BINDS] = {
        [B_W] = {w->buf, 0, 0},      [B_X] = {in->x, in->offset, x_bytes(w, max_tok)},
        [B_Y] = {out->y, out->offset, y_floats(w, max_tok, out) * 4},
        [B_STEP] = {step, 0, 16},    [B_BIAS] = {out->bias, 0, 0},
        [B_RAW] = {in->raw, 0, raw_bytes(w, max_tok, in)}, [B_NORM] = {in->norm, 0, 0},
        [B_PART] = {out->part, 0, gpu_matmul_part_floats(g, w->rows, w->cols, out->mode, max_tok) * 4}};
    const gpu_mm_kv *kv = out->kv;
    if (kv) {
        binds[B_KV_STEP] = (lean_gpu_bind){kv->step, 0, 16};
        binds[B_KC] = (lean_gpu_bind){kv->kc, 0, 0};
        binds[B_VC] = (lean_gpu_bind){kv->vc, 0, 0};
        binds[B_TABLE] = (lean_gpu_bind){kv->table, 0, 0};
    }
    st = matmul_vec_make(g, w, binds, in, out, rows, m, err);
    if (st == LEAN_OK && tiled && max_tok > 1) st = matmul_tiled_make(g, w, max_tok, binds, out, m, err);
    if (st != LEAN_OK) {
        gpu_matmul_free(m);
        return st;
    }
    *res = m;
    return LEAN_OK;
}

lean_status gpu_matmul_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                              const gpu_mm_in *in, const gpu_mm_out *out, gpu_matmul **res, lean_error *err) {
    return matmul_create(g, w, max_tok, step, in, out, true, res, err);
}

lean_status gpu_matmul_create_rows(lean_gpu *g, const gpu_weight *w, int32_t max_rows, lean_gpu_buf *rows,
                                   const gpu_mm_in *in, const gpu_mm_out *out, gpu_matmul **res, lean_error *err) {
    return matmul_create(g, w, max_rows, rows, in, out, false, res, err);
}

bool gpu_matmul_rows_fit(const gpu_weight *w) { return w->cols % 4 == 0; }

void gpu_matmul_record_rows(lean_gpu_cmd *c, const gpu_matmul *m, int32_t n_rows) {
    lean_gpu_dispatch(c, m->vec, m->vec_bg, m->vec_x, m->vec_y, (uint32_t)lean_div_up((uint64_t)n_rows, m->vec_tpw));
}

void gpu_matmul_record(lean_gpu_cmd *c, const gpu_matmul *m, int32_t n_tok) {
    if (n_tok == 1) lean_gpu_dispatch(c, m->vec, m->vec_bg, m->vec_x, m->vec_y, 1);
    else lean_gpu_dispatch(c, m->tiled, m->tiled_bg, m->tile_x, m->tile_y, (uint32_t)(n_tok + TILE_T - 1) / TILE_T);
    if (n_tok > 1 && m->combine)
        lean_gpu_dispatch(c, m->combine, m->combine_bg, m->combine_x, (uint32_t)(n_tok + COMBINE_CT - 1) / COMBINE_CT, 1);
}

void gpu_matmul_free(gpu_matmul *m) {
    if (!m) return;
    lean_gpu_bindgroup_free(m->vec_bg);
    lean_gpu_bindgroup_free(m->tiled_bg);
    lean_gpu_bindgroup_free(m->combine_bg);
    lean_free(m);
}

