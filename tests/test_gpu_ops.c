/* test_gpu_ops.c — each WebGPU forward kernel of src/gpu/ops.c against the CPU reference ops
 * (ops_ref.h) on random inputs and ragged shapes: RMSNorm (every token, the last token only),
 * SwiGLU, the QKV post-processing (per-head norms or none, RoPE NORM and NEOX, llama3
 * frequency factors, positions near n_ctx, the KV writes at pos, a RoPE table past the binding
 * limit), causal grouped-query attention (head_dim 64, 80, 128 and 256, GQA ratios 1, 3 and
 * 7, 1..65 tokens, queries in rows of q | k | v: the tiled prefill kernel on ragged tiles,
 * split decode over long contexts), decode's Q, K, V matmul epilogue against the matmul and
 * qkv_post it replaces, and argmax (ties). Runs on whatever adapter lean_gpu_open
 * finds (Dawn over llvmpipe in CI).
 *
 * Tolerances: the value write is exact. The others sum in another order than the reference (a tree over 64 lanes; a streaming softmax), so they are
 * held to a few float32 ulps of the quantities summed: 1e-5 relative for the norms and SwiGLU,
 * 2e-5 absolute for attention outputs (averages of values in [-1, 1]). RoPE's cos and sin are
 * the reference's bits (the table is lean_rope_angles' output), so the rotation would be
 * bit-exact but for contraction: a*c - b*s may run as an FMA on a GPU (WGSL allows it), which
 * skips one product's rounding. That moves the result by at most half an ulp of each product
 * plus the final roundings, under 2 ulp(|a c| + |b s|) <= 2 ulp(2) = 4.8e-7 for inputs in
 * [-1, 1): the tolerance, absolute (plus the norm's 1e-5 relative where q and k are normed).
 *
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "gpu_test.h"
#include "gpu/ops.h"
#include "core/rope.h"
#include "cpu/ops_ref.h"
#include "gpu/weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lean_gpu *g;
static uint64_t rng_state = 12345;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static float *rand_floats(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = frand();
    return x;
}

/* A storage buffer holding x (n floats), or zeros when x is NULL. */
static lean_gpu_buf *buf_of(const float *x, int64_t n) {
    lean_error err;
    lean_gpu_buf *b = NULL;
    lean_status st = lean_gpu_buf_create(g, (uint64_t)n * 4, LEAN_GPU_STORAGE, "test", &b, &err);
    if (st == LEAN_OK && x) st = lean_gpu_buf_write(g, b, 0, x, (uint64_t)n * 4, &err);
    CHECK(st == LEAN_OK, "buffer of %lld floats: %s", (long long)n, err.msg);
    return b;
}

static lean_gpu_buf *step_buf(int32_t n_tok, int32_t pos) {
    lean_error err;
    lean_gpu_buf *b = NULL;
    uint32_t v[4];
    gpu_step_words(n_tok, pos, v);
    lean_status st = lean_gpu_buf_create(g, 16, LEAN_GPU_UNIFORM, "step", &b, &err);
    if (st == LEAN_OK) st = lean_gpu_buf_write(g, b, 0, v, 16, &err);
    CHECK(st == LEAN_OK, "step buffer: %s", err.msg);
    return b;
}

static void read_back(lean_gpu_buf *b, float *dst, int64_t n) {
    lean_error err;
    lean_status st = lean_gpu_buf_read(g, b, 0, dst, (uint64_t)n * 4, &err);
    CHECK(st == LEAN_OK, "read back: %s", err.msg);
}

/* Records op for n_tok tokens, submits it; false (and a failed CHECK) when creating failed. */
static bool run_op(lean_status created, const lean_error *cerr, const gpu_op *op, int32_t n_tok) {
    CHECK(created == LEAN_OK, "creating the op: %s", cerr->msg);
    if (created != LEAN_OK) return false;
    lean_error err;
    lean_gpu_cmd *c = NULL;
    lean_status st = lean_gpu_begin(g, &c, &err);
    if (st == LEAN_OK) {
        gpu_op_record(c, op, n_tok);
        st = lean_gpu_submit(c, &err);
    }
    CHECK(st == LEAN_OK, "running the op: %s", err.msg);
    return st == LEAN_OK;
}

/* Counts the elements of got outside |got - want| <= abs_tol + rel_tol * |want|. */
static int64_t n_bad(const float *got, const float *want, int64_t n, float abs_tol, float rel_tol, const char *what) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabsf(got[i] - want[i]) <= abs_tol + rel_tol * fabsf(want[i])) continue;
        if (bad++ == 0) fprintf(stderr, "%s: [%lld] %.9g, want %.9g\n", what, (long long)i, got[i], want[i]);
    }
    return bad;
}

/* ---- norms and element-wise ops ---- */

static void test_rmsnorm(int32_t n, int32_t n_tok, bool last_only) {
    const int64_t total = (int64_t)n * n_tok;
    float *x = rand_floats(total), *w = rand_floats(n), *want = malloc(sizeof(float) * (size_t)total);
    float *got = calloc((size_t)total, sizeof(float));
    for (int64_t t = 0; t < n_tok; t++) ref_rmsnorm(want + t * n, x + t * n, w, n, 1e-5f);
    lean_gpu_buf *step = step_buf(n_tok, 0), *bx = buf_of(x, total), *bw = buf_of(w, n), *bo = buf_of(NULL, total);
    gpu_op op = {0};
    lean_error err;
    lean_status st = gpu_rmsnorm_create(g, step, bx, bw, bo, n, 1e-5f, last_only, &op, &err);
    if (run_op(st, &err, &op, n_tok)) {
        read_back(bo, got, last_only ? n : total);
        const float *ref = last_only ? want + (int64_t)(n_tok - 1) * n : want;
        CHECK(n_bad(got, ref, last_only ? n : total, 1e-6f, 1e-5f, "rmsnorm") == 0, "rmsnorm n %d n_tok %d last_only %d",
              n, n_tok, last_only);
    }
    gpu_op_free(&op);
    lean_gpu_buf_free(step), lean_gpu_buf_free(bx), lean_gpu_buf_free(bw), lean_gpu_buf_free(bo);
    free(x), free(w), free(want), free(got);
}

static void test_swiglu(int32_t n, int32_t n_tok) {
    const int64_t total = (int64_t)n * n_tok;
    float *gate = rand_floats(total), *up = rand_floats(total), *got = malloc(sizeof(float) * (size_t)total);
    for (int64_t i = 0; i < total; i++) gate[i] *= 12.0f; /* into silu's tails */
    lean_gpu_buf *bg = buf_of(gate, total), *bu = buf_of(up, total);
    gpu_op op = {0};
    lean_error err;
    lean_status st = gpu_swiglu_create(g, bg, bu, n, &op, &err);
    if (run_op(st, &err, &op, n_tok)) {
        read_back(bg, got, total);
        ref_swiglu(gate, up, total);
        CHECK(n_bad(got, gate, total, 1e-6f, 1e-5f, "swiglu") == 0, "swiglu n %d n_tok %d", n, n_tok);
    }
    gpu_op_free(&op);
    lean_gpu_buf_free(bg), lean_gpu_buf_free(bu);
    free(gate), free(up), free(got);
}

/* ---- position ---- */

static float ulp(float x) { return nextafterf(fabsf(x), INFINITY) - fabsf(x); }

/* qkv_post against forward_ref.c's steps on rows of qkv (q | k | v; pos + n_tok <= n_ctx): per
 * head ref_rmsnorm (norm), ref_rope by lean_rope_angles' table (base 500000, llama3-like
 * factors when asked), q in place, k and v into cache rows pos + t. Every cache row is filled
 * first: the others must stay as they were. v is exact; q and k within the RoPE tolerance (see
 * the top) plus, normed, SwiGLU's 1e-5 relative. */
static void test_qkv_post(int32_t n_head, int32_t n_head_kv, int32_t head_dim, lean_rope_style style, bool factors,
                          bool norm, int32_t n_ctx, int32_t n_tok, int32_t pos) {
    const lean_hparams hp = {.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim, .rope_style = style,
                             .rms_eps = 1e-6f};
    const int32_t qd = lean_q_dim(&hp), kvd = lean_kv_dim(&hp), W = qd + 2 * kvd, half = head_dim / 2;
    const int64_t nq = (int64_t)n_tok * W, nc = (int64_t)n_ctx * kvd;
    float *qkv = rand_floats(nq), *kc = rand_floats(nc), *vc = rand_floats(nc), *nw = rand_floats(2 * head_dim);
    float *ff = NULL, *cs = malloc(sizeof(float) * (size_t)half), *sn = malloc(sizeof(float) * (size_t)half);
    if (factors) {
        ff = rand_floats(half);
        for (int32_t i = 0; i < half; i++) ff[i] = 2.5f + 1.5f * ff[i]; /* [1, 4), as llama3's */
    }
    float *got_q = malloc(sizeof(float) * (size_t)nq), *got_k = malloc(sizeof(float) * (size_t)nc),
          *got_v = malloc(sizeof(float) * (size_t)nc);
    lean_gpu_buf *step = step_buf(n_tok, pos), *bq = buf_of(qkv, nq), *bk = buf_of(kc, nc), *bv = buf_of(vc, nc),
                 *bt = NULL, *bn = NULL;
    lean_error err;
    lean_status st = gpu_rope_table_create(g, n_ctx, head_dim, 500000.0f, ff, &bt, &err);
    if (st == LEAN_OK && norm) st = lean_gpu_buf_create(g, 8 * (uint64_t)head_dim, LEAN_GPU_UNIFORM, "norms", &bn, &err);
    if (st == LEAN_OK && norm) st = lean_gpu_buf_write(g, bn, 0, nw, 8 * (uint64_t)head_dim, &err);
    gpu_op op = {0};
    if (st == LEAN_OK) st = gpu_qkv_post_create(g, &hp, step, bq, bk, bv, bt, bn, &op, &err);
    if (run_op(st, &err, &op, n_tok)) {
        read_back(bq, got_q, nq);
        read_back(bk, got_k, nc);
        read_back(bv, got_v, nc);
        for (int32_t t = 0; t < n_tok; t++) { /* the reference, in place in qkv, kc, vc */
            float *q = qkv + (int64_t)t * W, *k = q + qd, *krow = kc + (int64_t)(pos + t) * kvd;
            for (int32_t h = 0; norm && h < n_head + n_head_kv; h++)
                ref_rmsnorm(q + (int64_t)h * head_dim, q + (int64_t)h * head_dim, nw + (h < n_head ? 0 : head_dim),
                            head_dim, hp.rms_eps);
            lean_rope_angles(cs, sn, pos + t, head_dim, 500000.0f, ff);
            ref_rope(q, n_head, head_dim, style, cs, sn);
            ref_rope(k, n_head_kv, head_dim, style, cs, sn);
            memcpy(krow, k, sizeof(float) * (size_t)kvd);
            memcpy(vc + (int64_t)(pos + t) * kvd, k + kvd, sizeof(float) * (size_t)kvd);
            memcpy(got_q + (int64_t)t * W + qd, k, sizeof(float) * 2 * (size_t)kvd); /* k and v stay unchecked in qkv */
        }
        const float rope_tol = 2.0f * ulp(2.0f), rel = norm ? 1e-5f : 0;
        CHECK(n_bad(got_q, qkv, nq, rope_tol, rel, "qkv_post q") == 0 &&
                  n_bad(got_k, kc, nc, rope_tol, rel, "qkv_post k") == 0 && n_bad(got_v, vc, nc, 0, 0, "qkv_post v") == 0,
              "qkv_post heads %d/%d head_dim %d %s factors %d norm %d n_ctx %d n_tok %d pos %d", n_head, n_head_kv,
              head_dim, style == LEAN_ROPE_NEOX ? "neox" : "norm", factors, norm, n_ctx, n_tok, pos);
    } else {
        CHECK(st == LEAN_OK, "qkv_post: %s", err.msg);
    }
    gpu_op_free(&op);
    lean_gpu_buf_free(step), lean_gpu_buf_free(bq), lean_gpu_buf_free(bk), lean_gpu_buf_free(bv),
        lean_gpu_buf_free(bt), lean_gpu_buf_free(bn);
    free(qkv), free(kc), free(vc), free(nw), free(ff), free(cs), free(sn), free(got_q), free(got_k), free(got_v);
}

/* Decode's Q, K, V epilogue (weights.h's gpu_mm_kv): the matmul of a one-token q | k | v row
 * doing qkv_post's work equals the plain matmul (SET, or BIAS with a bias) followed by
 * qkv_post — q in the row, the key and value cache rows at pos, every other cache row as it
 * was — v exactly, q and k within the RoPE tolerance (each kernel may contract differently).
 * apart: Wv a matmul of its own at column q_dim + kv_dim (its format differing, as q4_k_m's),
 * [Wq; Wk] one. Weights in [-1/64, 1/64) over 64 columns keep outputs (and biases) in
 * [-1, 1), so |a|, |b| < 2 and the tolerance is 2 ulp(4). */
static void test_qkv_epilogue(int32_t n_head, int32_t n_head_kv, int32_t head_dim, lean_rope_style style, bool bias,
                              bool apart, int32_t pos) {
    enum { COLS = 64, N_CTX = 40 };
    const lean_hparams hp = {.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim, .rope_style = style};
    const int32_t qd = lean_q_dim(&hp), kvd = lean_kv_dim(&hp), R = qd + 2 * kvd;
    const int64_t nc = (int64_t)N_CTX * kvd;
    float *w = rand_floats((int64_t)R * COLS), *x = rand_floats(COLS), *b = rand_floats(R), *kc = rand_floats(nc),
          *vc = rand_floats(nc);
    for (int64_t i = 0; i < (int64_t)R * COLS; i++) w[i] /= COLS;
    float *want[3], *got[3]; /* q | k | v row, key cache, value cache */
    const int64_t len[3] = {R, nc, nc};
    for (int i = 0; i < 3; i++) {
        want[i] = malloc(sizeof(float) * (size_t)len[i]);
        got[i] = malloc(sizeof(float) * (size_t)len[i]);
    }
    lean_gpu_buf *step = step_buf(1, pos), *bx = buf_of(x, COLS), *bb = buf_of(b, R), *bt = NULL;
    lean_error err;
    lean_status st = gpu_rope_table_create(g, N_CTX, head_dim, 10000.0f, NULL, &bt, &err);
    for (int fused = 0; fused < 2 && st == LEAN_OK; fused++) {
        lean_gpu_buf *by = buf_of(NULL, R), *bk = buf_of(kc, nc), *bv = buf_of(vc, nc);
        const gpu_mm_kv kv = {.step = step, .kc = bk, .vc = bv, .table = bt, .q_dim = qd, .kv_dim = kvd,
                              .head_dim = head_dim, .neox = style == LEAN_ROPE_NEOX};
        /* the matrices: [Wq; Wk; Wv], or [Wq; Wk] and Wv */
        const int32_t split = apart ? qd + kvd : R, rows[2] = {split, R - split};
        gpu_weight gw[2] = {{0}};
        gpu_matmul *mm[2] = {NULL};
        gpu_op post = {0};
        for (int k = 0; k < 2 && st == LEAN_OK; k++) {
            if (!rows[k]) continue;
            const lean_tensor t = {.name = "test.weight", .type = LEAN_TYPE_F32, .ne = {COLS, rows[k], 1, 1},
                                   .n_bytes = (uint64_t)rows[k] * COLS * 4,
                                   .data = w + (int64_t)(k ? split : 0) * COLS};
            const gpu_mm_out out = {.y = by, .col = (uint32_t)(k ? split : 0), .stride = (uint32_t)R,
                                    .mode = bias ? GPU_MM_BIAS : GPU_MM_SET, .bias = bias ? bb : NULL,
                                    .kv = fused ? &kv : NULL};
            st = gpu_weight_upload(g, &t, &gw[k], &err);
            if (st == LEAN_OK) st = gpu_matmul_create(g, &gw[k], 1, step, &(gpu_mm_in){.x = bx}, &out, &mm[k], &err);
        }
        if (st == LEAN_OK && !fused) st = gpu_qkv_post_create(g, &hp, step, by, bk, bv, bt, NULL, &post, &err);
        lean_gpu_cmd *c = NULL;
        if (st == LEAN_OK) st = lean_gpu_begin(g, &c, &err);
        if (st == LEAN_OK) {
            for (int k = 0; k < 2; k++)
                if (mm[k]) gpu_matmul_record(c, mm[k], 1);
            if (!fused) gpu_op_record(c, &post, 1);
            st = lean_gpu_submit(c, &err);
        }
        float **dst = fused ? got : want;
        if (st == LEAN_OK) read_back(by, dst[0], R), read_back(bk, dst[1], nc), read_back(bv, dst[2], nc);
        for (int k = 0; k < 2; k++) gpu_matmul_free(mm[k]), gpu_weight_free(&gw[k]);
        gpu_op_free(&post);
        lean_gpu_buf_free(by), lean_gpu_buf_free(bk), lean_gpu_buf_free(bv);
    }
    CHECK(st == LEAN_OK, "qkv epilogue: %s", err.msg);
    if (st == LEAN_OK) {
        const float tol = 2.0f * ulp(4.0f);
        CHECK(n_bad(got[0], want[0], qd, tol, 0, "epilogue q") == 0 &&
                  n_bad(got[1], want[1], nc, tol, 0, "epilogue k") == 0 &&
                  n_bad(got[2], want[2], nc, 0, 0, "epilogue v") == 0,
              "qkv epilogue heads %d/%d head_dim %d %s bias %d apart %d pos %d", n_head, n_head_kv, head_dim,
              style == LEAN_ROPE_NEOX ? "neox" : "norm", bias, apart, pos);
    }
    lean_gpu_buf_free(step), lean_gpu_buf_free(bx), lean_gpu_buf_free(bb), lean_gpu_buf_free(bt);
    free(w), free(x), free(b), free(kc), free(vc);
    for (int i = 0; i < 3; i++) free(want[i]), free(got[i]);
}

/* The epilogue refuses what it cannot do, by name: outputs that are no whole heads of the row,
 * a mode it does not take. */
static void test_qkv_epilogue_errors(void) {
    lean_gpu_buf *step = step_buf(1, 0), *bx = buf_of(NULL, 64), *by = buf_of(NULL, 64 * 3), *bc = buf_of(NULL, 64 * 8);
    float *w = rand_floats(64 * 64);
    const lean_tensor t = {
        .name = "test.weight", .type = LEAN_TYPE_F32, .ne = {64, 64, 1, 1}, .n_bytes = 64 * 64 * 4, .data = w};
    gpu_weight gw = {0};
    lean_error err;
    CHECK(gpu_weight_upload(g, &t, &gw, &err) == LEAN_OK, "upload: %s", err.msg);
    const gpu_mm_kv kv = {.step = step, .kc = bc, .vc = bc, .table = bc, .q_dim = 64, .kv_dim = 64, .head_dim = 64};
    const gpu_mm_out bad[] = {
        {.y = by, .col = 32, .stride = 192, .kv = &kv},                          /* not at a head */
        {.y = by, .col = 0, .stride = 160, .kv = &kv},                           /* not q | k | v's row */
        {.y = by, .col = 0, .stride = 192, .mode = GPU_MM_ADD, .kv = &kv},        /* a residual add */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpu_matmul *mm = NULL;
        const lean_status st = gpu_matmul_create(g, &gw, 1, step, &(gpu_mm_in){.x = bx}, &bad[i], &mm, &err);
        CHECK(st == LEAN_ERR_ARG && mm == NULL && strstr(err.msg, "epilogue"), "epilogue error %zu: status %d (%s)", i,
              (int)st, err.msg);
        gpu_matmul_free(mm);
    }
    gpu_weight_free(&gw);
    free(w);
    lean_gpu_buf_free(step), lean_gpu_buf_free(bx), lean_gpu_buf_free(by), lean_gpu_buf_free(bc);
}

/* A table past the storage binding limit is refused, naming n_ctx, before anything is made. */
static void test_rope_table_limit(void) {
    const int32_t head_dim = 1024, n_ctx = (int32_t)(gpu_binding_max_bytes(g) / (head_dim * 4)) + 1;
    lean_gpu_buf *bt = NULL;
    lean_error err;
    char want[32];
    snprintf(want, sizeof want, "n_ctx %d", n_ctx);
    CHECK(gpu_rope_table_create(g, n_ctx, head_dim, 10000.0f, NULL, &bt, &err) == LEAN_ERR_UNSUPPORTED &&
              bt == NULL && strstr(err.msg, want),
          "rope table for n_ctx %d: %s", n_ctx, err.msg);
}

/* ---- attention ---- */

/* att (n_tok, q_dim): forward_ref.c's attend_token for every token and head; q's rows are
 * q_stride floats apart. */
static void ref_attention(float *att, const float *q, int32_t q_stride, const float *kc, const float *vc,
                          const lean_hparams *hp, int32_t n_tok, int32_t pos, float *scores) {
    const int32_t hd = hp->head_dim, kvd = lean_kv_dim(hp), qd = lean_q_dim(hp), group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int32_t t = 0; t < n_tok; t++)
        for (int32_t h = 0; h < hp->n_head; h++) {
            const float *qh = q + (int64_t)t * q_stride + (int64_t)h * hd;
            const int64_t off = (int64_t)(h / group) * hd;
            float *out = att + (int64_t)t * qd + (int64_t)h * hd;
            for (int32_t j = 0; j <= pos + t; j++) scores[j] = ref_dot(qh, kc + (int64_t)j * kvd + off, hd) * scale;
            ref_softmax(scores, pos + t + 1);
            for (int32_t i = 0; i < hd; i++) {
                float a = 0;
                for (int32_t j = 0; j <= pos + t; j++) a += scores[j] * vc[(int64_t)j * kvd + off + i];
                out[i] = a;
            }
        }
}

static void test_attention(int32_t head_dim, int32_t n_head, int32_t n_head_kv, int32_t n_ctx, int32_t n_tok,
                           int32_t pos) {
    const lean_hparams hp = {.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim};
    /* q in the forward pass's rows of q | k | v: q_stride = q_dim + 2 kv_dim */
    const int32_t q_stride = lean_q_dim(&hp) + 2 * lean_kv_dim(&hp);
    const int64_t qn = (int64_t)n_tok * lean_q_dim(&hp), cn = (int64_t)n_ctx * lean_kv_dim(&hp),
                  qin = (int64_t)n_tok * q_stride;
    /* every cache row is filled: rows past pos + t must not count */
    float *q = rand_floats(qin), *kc = rand_floats(cn), *vc = rand_floats(cn);
    for (int64_t i = 0; i < qin; i++) q[i] *= 3.0f; /* sharper softmax */
    float *want = malloc(sizeof(float) * (size_t)qn), *got = malloc(sizeof(float) * (size_t)qn);
    float *scores = malloc(sizeof(float) * (size_t)n_ctx);
    ref_attention(want, q, q_stride, kc, vc, &hp, n_tok, pos, scores);
    lean_gpu_buf *step = step_buf(n_tok, pos), *bq = buf_of(q, qin), *bk = buf_of(kc, cn), *bv = buf_of(vc, cn),
                 *bo = buf_of(NULL, (int64_t)gpu_attention_out_floats(&hp, n_ctx, n_tok));
    gpu_attention a = {0};
    lean_error err;
    lean_status st = gpu_attention_create(g, &hp, n_tok, step, bq, q_stride, bk, bv, bo, &a, &err);
    CHECK(st == LEAN_OK, "attention: %s", err.msg);
    lean_gpu_cmd *c = NULL;
    if (st == LEAN_OK) st = lean_gpu_begin(g, &c, &err);
    if (st == LEAN_OK) {
        gpu_attention_record(c, &a, n_tok, pos);
        st = lean_gpu_submit(c, &err);
        CHECK(st == LEAN_OK, "attention run: %s", err.msg);
    }
    if (st == LEAN_OK) {
        read_back(bo, got, qn);
        CHECK(n_bad(got, want, qn, 2e-5f, 0, "attention") == 0,
              "attention head_dim %d heads %d/%d n_ctx %d n_tok %d pos %d", head_dim, n_head, n_head_kv, n_ctx, n_tok,
              pos);
    }
    gpu_attention_free(&a);
    lean_gpu_buf_free(step), lean_gpu_buf_free(bq), lean_gpu_buf_free(bk), lean_gpu_buf_free(bv),
        lean_gpu_buf_free(bo);
    free(q), free(kc), free(vc), free(want), free(got), free(scores);
}

/* decode reads heads as vec4s: a head_dim that is no multiple of 4, or past what a workgroup's
 * lanes hold, is refused by name, not run wrong */
/* Prefill (attention_tiled.wgsl): 16 or 8 tokens a tile for these head dims, whole, ragged
 * and single tiles, the last key tile partly past the call's keys, each token's keys over
 * GPU_ATTN_KSPLITS splits (some splits without a key for the first tokens). */
static void test_prefill_attention(void) {
    /* head_dim, heads, KV heads, n_ctx, n_tok, pos */
    test_attention(64, 2, 2, 96, 65, 31);    /* GQA 1, a prefill past a resident prefix */
    test_attention(128, 6, 2, 80, 65, 0);    /* GQA 3, a cold prefill of 65 */
    test_attention(64, 14, 2, 600, 7, 593);  /* GQA 7, a suffix up to n_ctx */
    test_attention(64, 3, 1, 40, 2, 0);      /* GQA 3, the fewest tokens that tile */
    test_attention(128, 7, 1, 64, 16, 48);   /* GQA 7, one whole tile, up to n_ctx */
    test_attention(128, 2, 2, 50, 17, 33);   /* GQA 1, a tile and one token, up to n_ctx */
    test_attention(64, 6, 2, 64, 33, 0);     /* GQA 3, two tiles and one token, cold */
    test_attention(128, 14, 2, 300, 65, 235); /* GQA 7, 19 key tiles, up to n_ctx */
    test_attention(80, 4, 2, 40, 23, 10);    /* a head_dim no power of two */
    test_attention(256, 2, 1, 40, 19, 21);   /* tiles shrunk to fit 16 KiB */
}

static void test_attention_unsupported(void) {
    const int32_t dims[] = {62, 4 * GPU_ATTN_WG + 4};
    for (int i = 0; i < 2; i++) {
        const lean_hparams hp = {.n_head = 2, .n_head_kv = 1, .head_dim = dims[i]};
        const int32_t q_stride = lean_q_dim(&hp) + 2 * lean_kv_dim(&hp);
        lean_gpu_buf *step = step_buf(1, 0), *bq = buf_of(NULL, q_stride), *bk = buf_of(NULL, 8 * lean_kv_dim(&hp)),
                     *bv = buf_of(NULL, 8 * lean_kv_dim(&hp)),
                     *bo = buf_of(NULL, (int64_t)gpu_attention_out_floats(&hp, 8, 1));
        gpu_attention a = {0};
        lean_error err = {0};
        const lean_status st = gpu_attention_create(g, &hp, 1, step, bq, q_stride, bk, bv, bo, &a, &err);
        CHECK(st == LEAN_ERR_UNSUPPORTED && strstr(err.msg, "head_dim"), "attention head_dim %d: status %d (%s)",
              dims[i], (int)st, err.msg);
        gpu_attention_free(&a);
        lean_gpu_buf_free(step), lean_gpu_buf_free(bq), lean_gpu_buf_free(bk), lean_gpu_buf_free(bv),
            lean_gpu_buf_free(bo);
    }
}

/* ---- argmax ---- */

static void test_argmax(int32_t n, int32_t first, int32_t second) {
    float *x = rand_floats(n);
    if (first >= 0) x[first] = x[second] = 2.0f; /* a tie: the lower index wins */
    int32_t want = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[want]) want = i;
    lean_gpu_buf *bx = buf_of(x, n), *bo = buf_of(NULL, 1);
    gpu_op op = {0};
    lean_error err;
    lean_status st = test_gpu_argmax_create(g, bx, bo, n, &op, &err);
    if (run_op(st, &err, &op, 1)) {
        float f;
        read_back(bo, &f, 1);
        uint32_t got;
        memcpy(&got, &f, 4);
        CHECK(got == (uint32_t)want, "argmax n %d: %u, want %d", n, got, want);
    }
    gpu_op_free(&op);
    lean_gpu_buf_free(bx), lean_gpu_buf_free(bo);
    free(x);
}

static void test_all(void) {
    printf("test_gpu_ops: reductions over %s\n", lean_gpu_subgroup_size(g) ? "subgroups" : "workgroup trees");

    const int32_t widths[] = {1, 64, 100, 896, 2050}, toks[] = {1, 7, 65};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (size_t j = 0; j < sizeof toks / sizeof toks[0]; j++) {
            test_rmsnorm(widths[i], toks[j], false);
            test_swiglu(widths[i], toks[j]);
        }
    test_rmsnorm(896, 65, true); /* the final norm: last token only */
    test_rmsnorm(100, 1, true);

    for (int style = 0; style < 2; style++)
        for (int factors = 0; factors < 2; factors++) {
            const lean_rope_style rs = style ? LEAN_ROPE_NEOX : LEAN_ROPE_NORM;
            test_qkv_post(14, 2, 64, rs, factors, false, 16, 7, 0);
            test_qkv_post(2, 2, 128, rs, factors, true, 4096, 65, 4031); /* near n_ctx 4096 */
            test_qkv_post(3, 1, 64, rs, factors, !factors, 4096, 1, 4095);
        }
    test_qkv_post(4, 2, 80, LEAN_ROPE_NEOX, false, true, 40, 23, 10); /* a head_dim past WG, no power of two */
    test_qkv_post(2, 1, 256, LEAN_ROPE_NORM, false, true, 8, 3, 5);   /* 4 elements a lane */
    test_rope_table_limit();

    test_prefill_attention();
    test_attention(128, 14, 2, 16, 1, 0);    /* decode of the first token */
    test_attention(64, 6, 2, 300, 1, 100);   /* 101 keys: one tile of 128, part-filled */
    test_attention(64, 6, 2, 300, 1, 255);   /* 256 keys: two tiles, one chunk, no split */
    test_attention(64, 6, 2, 300, 1, 256);   /* 257 keys: two splits */
    test_attention(80, 4, 2, 300, 1, 200);   /* 20 vec4s a head: 6 key groups of 128 lanes */
    test_attention(256, 2, 1, 600, 1, 530);  /* 64 vec4s a head: 2 key groups; 3 splits */
    test_attention(64, 6, 2, 8300, 1, 8191); /* 8192 keys: the most splits, 32 of 256 keys */
    test_attention(64, 6, 2, 8300, 1, 8192); /* 8193 keys: 17 splits of 512 */
    test_attention(128, 3, 1, 8300, 1, 8299); /* 17 splits of 512, up to n_ctx */
    test_attention_unsupported();
    if (gpu_matmul_kv_fits(g, true, false)) { /* the epilogue where the device binds its 7 storage buffers */
        test_qkv_epilogue(4, 2, 64, LEAN_ROPE_NORM, false, false, 0);
        test_qkv_epilogue(4, 2, 64, LEAN_ROPE_NEOX, true, false, 17);   /* qwen2: NEOX, biases */
        test_qkv_epilogue(6, 2, 64, LEAN_ROPE_NORM, false, true, 39);   /* Wv apart, the last row */
        test_qkv_epilogue(4, 1, 128, LEAN_ROPE_NEOX, true, true, 5);    /* Wv apart, with biases */
        test_qkv_epilogue(2, 2, 80, LEAN_ROPE_NEOX, false, false, 11);  /* a head_dim no power of two */
        test_qkv_epilogue_errors();
    }

    test_argmax(1, -1, -1);
    test_argmax(1000, -1, -1);
    test_argmax(151936 / 16, 777, 5000);
    test_argmax(100, 99, 3);
}

int main(void) {
    if (!(g = test_gpu_open("test_gpu_ops"))) return test_finish("test_gpu_ops");
    test_gpu_variant(g, "subgroups");
    test_all();
    /* prefill attention's key splits other than GPU_ATTN_KSPLITS: none, and 3 (whose merge
     * takes two splits' states into split 0) */
    lean_gpu_options *opt = lean_gpu_options_of(g);
    for (uint32_t ks = 1; ks <= 3; ks += 2) {
        opt->attn_ksplits = ks;
        printf("test_gpu_ops: prefill attention in %u key splits\n", ks);
        test_prefill_attention();
    }
    opt->attn_ksplits = 0;
    if (lean_gpu_subgroup_size(g)) { /* and the kernels every adapter without subgroups runs */
        opt->no_subgroups = true;
        test_all();
    }
    lean_gpu_close(g);
    return test_finish("test_gpu_ops");
}
