/* test_forward.c — src/cpu/forward_ref.c, src/cpu/ops_ref.c and src/core/session.c.
 *
 * Two kinds of checks on tiny random models (tiny_model.h):
 *   numbers     lean's logits at every position against a naive forward written here in
 *               double precision, the way transformers writes it: for llama the q/k rows
 *               are un-permuted (undoing llama.cpp's converter) and rotated with HF's
 *               rotate_half, so a wrong RoPE pairing fails; a second reference with the
 *               pairing deliberately swapped must disagree, proving the check can fail.
 *   properties  the reference is deterministic, so splitting a prefill into chunks of any
 *               size, decoding after a prefill, truncating and re-prefilling, and
 *               streamed vs mapped loading all give bit-identical logits; errors (context
 *               full, bad ids) change nothing; allocation failures end in NOMEM, no leak.
 */
#include "core/backend.h"
#include "test.h"
#include "tiny_model.h"

#include <fcntl.h>

#define N_SEQ 13 /* tokens in the test sequence */

/* ---- the double-precision reference ---- */

/* y (rows) = W (rows, cols) x (cols) */
static void d_matvec(double *y, const float *W, const double *x, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += (double)W[r * cols + c] * x[c];
        y[r] = s;
    }
}

static void d_rmsnorm(double *out, const double *x, const float *w, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double scale = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

static const float *W(const tiny_model *tm, int il, const char *suffix) {
    char name[64];
    snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
    return tiny_get(tm, name);
}

/* llama.cpp's converter stores HF row (h, j * half + i) of wq/wk at GGUF row
 * (h, 2i + j). x (n_heads, head_dim) in GGUF order -> HF order. */
static void d_unpermute(double *x, int n_heads, int hd, double *tmp) {
    for (int h = 0; h < n_heads; h++) {
        for (int i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++) tmp[j * (hd / 2) + i] = x[h * hd + 2 * i + j];
        memcpy(x + h * hd, tmp, sizeof(double) * (size_t)hd);
    }
}

/* HF's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, per head. */
static void d_rope_hf(double *x, int n_heads, int hd, int pos, double base, const float *ff) {
    for (int h = 0; h < n_heads; h++) {
        double *v = x + h * hd;
        for (int i = 0; i < hd / 2; i++) {
            double theta = pos * pow(base, -2.0 * i / hd) / (ff ? ff[i] : 1.0);
            double a = v[i], b = v[i + hd / 2];
            v[i] = a * cos(theta) - b * sin(theta);
            v[i + hd / 2] = b * cos(theta) + a * sin(theta);
        }
    }
}

/* logits (n, n_vocab): the next-token logits after each of ids[0..n). swapped: use the
 * wrong RoPE pairing for the architecture (to show the comparison can fail). */
static void d_forward(const tiny_model *tm, const int32_t *ids, int n, double *logits, int swapped) {
    const tiny_spec *sp = &tm->sp;
    const int d = sp->n_embd, hd = sp->head_dim, qd = sp->n_head * hd, kvd = sp->n_head_kv * hd;
    const int ff = sp->n_ff, V = sp->n_vocab, L = sp->n_layer, group = sp->n_head / sp->n_head_kv;
    const int llama = strcmp(sp->arch, "llama") == 0, qwen2 = strcmp(sp->arch, "qwen2") == 0;
    const int qwen3 = strcmp(sp->arch, "qwen3") == 0;
    const int unpermute = llama != swapped; /* swapped qwen: permute as if it were llama */
    const double eps = sp->rms_eps;
    double *kc = calloc((size_t)L * n * kvd, sizeof(double)), *vc = calloc((size_t)L * n * kvd, sizeof(double));
    double *x = calloc(d, sizeof(double)), *xn = calloc(d, sizeof(double)), *q = calloc(qd, sizeof(double));
    double *att = calloc(qd, sizeof(double)), *o = calloc(d > ff ? d : ff, sizeof(double));
    double *g = calloc(ff, sizeof(double)), *u = calloc(ff, sizeof(double));
    double *sc = calloc(n, sizeof(double)), *tmp = calloc(hd, sizeof(double));
    const float *E = tiny_get(tm, "token_embd.weight"), *freqs = tiny_get(tm, "rope_freqs.weight");
    const float *out_w = sp->tied ? E : tiny_get(tm, "output.weight");
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < d; i++) x[i] = E[(int64_t)ids[t] * d + i];
        for (int il = 0; il < L; il++) {
            double *k = kc + ((int64_t)il * n + t) * kvd, *v = vc + ((int64_t)il * n + t) * kvd;
            d_rmsnorm(xn, x, W(tm, il, "attn_norm.weight"), d, eps);
            d_matvec(q, W(tm, il, "attn_q.weight"), xn, qd, d);
            d_matvec(k, W(tm, il, "attn_k.weight"), xn, kvd, d);
            d_matvec(v, W(tm, il, "attn_v.weight"), xn, kvd, d);
            if (qwen2) {
                const float *bq = W(tm, il, "attn_q.bias"), *bk = W(tm, il, "attn_k.bias"),
                            *bv = W(tm, il, "attn_v.bias");
                for (int i = 0; i < qd; i++) q[i] += bq[i];
                for (int i = 0; i < kvd; i++) k[i] += bk[i], v[i] += bv[i];
            }
            if (qwen3) {
                for (int h = 0; h < sp->n_head; h++)
                    d_rmsnorm(q + h * hd, q + h * hd, W(tm, il, "attn_q_norm.weight"), hd, eps);
                for (int h = 0; h < sp->n_head_kv; h++)
                    d_rmsnorm(k + h * hd, k + h * hd, W(tm, il, "attn_k_norm.weight"), hd, eps);
            }
            if (unpermute) {
                d_unpermute(q, sp->n_head, hd, tmp);
                d_unpermute(k, sp->n_head_kv, hd, tmp);
            }
            d_rope_hf(q, sp->n_head, hd, t, sp->rope_base, freqs);
            d_rope_hf(k, sp->n_head_kv, hd, t, sp->rope_base, freqs);
            for (int h = 0; h < sp->n_head; h++) {
                const int64_t off = (int64_t)(h / group) * hd;
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double *kj = kc + ((int64_t)il * n + j) * kvd + off;
                    double s = 0;
                    for (int i = 0; i < hd; i++) s += q[h * hd + i] * kj[i];
                    sc[j] = s / sqrt((double)hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int i = 0; i < hd; i++) {
                    double a = 0;
                    for (int j = 0; j <= t; j++) a += sc[j] / sum * vc[((int64_t)il * n + j) * kvd + off + i];
                    att[h * hd + i] = a;
                }
            }
            d_matvec(o, W(tm, il, "attn_output.weight"), att, d, qd);
            for (int i = 0; i < d; i++) x[i] += o[i];
            d_rmsnorm(xn, x, W(tm, il, "ffn_norm.weight"), d, eps);
            d_matvec(g, W(tm, il, "ffn_gate.weight"), xn, ff, d);
            d_matvec(u, W(tm, il, "ffn_up.weight"), xn, ff, d);
            for (int i = 0; i < ff; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            d_matvec(o, W(tm, il, "ffn_down.weight"), g, d, ff);
            for (int i = 0; i < d; i++) x[i] += o[i];
        }
        d_rmsnorm(xn, x, tiny_get(tm, "output_norm.weight"), d, eps);
        d_matvec(logits + (int64_t)t * V, out_w, xn, V, d);
    }
    free(kc), free(vc), free(x), free(xn), free(q), free(att), free(o), free(g), free(u);
    free(sc), free(tmp);
}

/* ---- helpers ---- */

/* max over i of |a[i] - b[i]| / (1 + |b[i]|) */
static double max_rel_err(const float *a, const double *b, int n) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
        if (e > worst || e != e) worst = e != e ? INFINITY : e;
    }
    return worst;
}

static lean_ctx *new_ctx(const lean_model *m, int n_ctx, int n_batch) {
    lean_ctx_params p = {.n_ctx = n_ctx, .n_batch = n_batch, .backend = "cpu-ref"};
    lean_ctx *c = NULL;
    lean_error err = {0};
    lean_status st = lean_ctx_create(m, &p, &c, &err);
    CHECK(st == LEAN_OK, "ctx create (n_ctx %d, n_batch %d): %s", n_ctx, n_batch, err.msg);
    return c;
}

/* Prefill ids in calls of `step` tokens into a ctx with n_batch; logits of the last. */
static void prefill_steps(const lean_model *m, int n_batch, int step, const int32_t *ids, int n,
                          float *logits) {
    lean_ctx *c = new_ctx(m, 64, n_batch);
    lean_error err = {0};
    for (int done = 0; c && done < n; done += step) {
        int k = n - done < step ? n - done : step;
        CHECK(lean_prefill(c, ids + done, k, logits, &err) == LEAN_OK, "%s", err.msg);
    }
    if (c) CHECK(lean_ctx_pos(c) == n, "pos %d after %d tokens", lean_ctx_pos(c), n);
    lean_ctx_free(c);
}

/* ---- numbers ---- */

/* Decodes ids one at a time and compares the logits after each with the double forward. */
static void check_numbers(const char *what, const tiny_model *tm, const lean_model *m, double tol) {
    const int V = tm->sp.n_vocab;
    int32_t ids[N_SEQ];
    tiny_ids(ids, N_SEQ, V, tm->sp.seed + 99);
    double *want = malloc(sizeof(double) * N_SEQ * V), *wrong = malloc(sizeof(double) * N_SEQ * V);
    d_forward(tm, ids, N_SEQ, want, 0);
    d_forward(tm, ids, N_SEQ, wrong, 1);
    float *got = malloc(sizeof(float) * V);
    lean_ctx *c = new_ctx(m, 32, 8);
    lean_error err = {0};
    double worst = 0, worst_wrong = 0;
    for (int t = 0; c && t < N_SEQ; t++) {
        CHECK(lean_decode(c, ids[t], got, &err) == LEAN_OK, "%s", err.msg);
        double e = max_rel_err(got, want + (int64_t)t * V, V);
        double ew = max_rel_err(got, wrong + (int64_t)t * V, V);
        if (e > worst) worst = e;
        if (ew > worst_wrong) worst_wrong = ew;
    }
    CHECK(worst < tol, "%s: logits differ from the double forward by %g (tolerance %g)", what, worst, tol);
    CHECK(worst_wrong > 1e-2, "%s: the swapped-RoPE reference agrees too well (%g): the check is blind",
          what, worst_wrong);
    lean_ctx_free(c);
    free(want), free(wrong), free(got);
}

/* ---- properties ---- */

static void check_properties(const char *what, const lean_model *m, lean_model *streamed) {
    const int V = lean_model_n_vocab(m);
    int32_t ids[N_SEQ];
    tiny_ids(ids, N_SEQ, V, 7);
    const size_t lb = sizeof(float) * (size_t)V;
    float *full = malloc(lb), *got = malloc(lb);
    lean_error err = {0};
    prefill_steps(m, N_SEQ, N_SEQ, ids, N_SEQ, full);

    /* every chunk size, split by n_batch and split by the caller */
    for (int b = 1; b <= N_SEQ; b++) {
        memset(got, 0, lb);
        prefill_steps(m, b, N_SEQ, ids, N_SEQ, got);
        CHECK(memcmp(got, full, lb) == 0, "%s: n_batch %d differs from one batch", what, b);
        memset(got, 0, lb);
        prefill_steps(m, N_SEQ, b, ids, N_SEQ, got);
        CHECK(memcmp(got, full, lb) == 0, "%s: prefill calls of %d differ from one call", what, b);
    }

    /* decode after prefill; logits NULL on the prefill */
    lean_ctx *c = new_ctx(m, 64, 4);
    CHECK(lean_prefill(c, ids, N_SEQ - 1, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_decode(c, ids[N_SEQ - 1], got, &err) == LEAN_OK, "%s", err.msg);
    CHECK(memcmp(got, full, lb) == 0, "%s: decode after prefill differs", what);

    /* truncate and re-prefill, also after other tokens overwrote the cache rows */
    CHECK(lean_ctx_truncate(c, 5, &err) == LEAN_OK && lean_ctx_pos(c) == 5, "%s", err.msg);
    CHECK(lean_prefill(c, ids + 5, N_SEQ - 5, got, &err) == LEAN_OK, "%s", err.msg);
    CHECK(memcmp(got, full, lb) == 0, "%s: truncate + re-prefill differs", what);
    const int32_t other[6] = {1, 2, 3, 4, 5, 6};
    CHECK(lean_ctx_truncate(c, 3, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_prefill(c, other, 6, got, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_ctx_truncate(c, 3, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_prefill(c, ids + 3, N_SEQ - 3, got, &err) == LEAN_OK, "%s", err.msg);
    CHECK(memcmp(got, full, lb) == 0, "%s: re-prefill over other tokens differs", what);
    CHECK(lean_ctx_truncate(c, N_SEQ + 1, &err) == LEAN_ERR_ARG, "truncate past pos");
    CHECK(strstr(err.msg, "truncate to 14: must be in 0..13") != NULL, "message: %s", err.msg);
    CHECK(lean_ctx_truncate(c, -1, &err) == LEAN_ERR_ARG && lean_ctx_pos(c) == N_SEQ, "truncate -1");
    CHECK(lean_ctx_truncate(c, 0, &err) == LEAN_OK && lean_ctx_pos(c) == 0, "truncate 0");
    lean_ctx_free(c);

    /* a full context refuses and changes nothing */
    c = new_ctx(m, N_SEQ, 4);
    CHECK(lean_ctx_n_ctx(c) == N_SEQ, "n_ctx %d", lean_ctx_n_ctx(c));
    CHECK(lean_prefill(c, ids, N_SEQ - 2, NULL, &err) == LEAN_OK, "%s", err.msg);
    memset(got, 0, lb);
    lean_status st = lean_prefill(c, ids + N_SEQ - 2, 3, got, &err);
    CHECK(st == LEAN_ERR_CONTEXT_FULL && err.status == st, "status %d", st);
    CHECK(strstr(err.msg, "3 tokens at position 11 do not fit in a context of 13") != NULL,
          "message: %s", err.msg);
    CHECK(lean_ctx_pos(c) == N_SEQ - 2 && got[0] == 0.0f, "state changed: pos %d", lean_ctx_pos(c));

    /* ids outside the vocabulary: refused before anything runs */
    int32_t bad[2] = {ids[N_SEQ - 2], V};
    st = lean_prefill(c, bad, 2, got, &err);
    CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "ids[1] = 97 is outside the vocabulary [0, 97)"),
          "status %d: %s", st, err.msg);
    bad[0] = -1;
    st = lean_prefill(c, bad, 1, got, &err);
    CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "ids[0] = -1 is outside the vocabulary [0, 97)"),
          "status %d: %s", st, err.msg);
    CHECK(lean_ctx_pos(c) == N_SEQ - 2 && got[0] == 0.0f, "state changed: pos %d", lean_ctx_pos(c));
    CHECK(lean_prefill(c, ids, 0, got, &err) == LEAN_ERR_ARG, "prefill of 0");
    CHECK(lean_prefill(c, NULL, 1, got, &err) == LEAN_ERR_ARG, "prefill of NULL");
    CHECK(lean_prefill(c, ids + N_SEQ - 2, 2, got, &err) == LEAN_OK, "%s", err.msg);
    CHECK(memcmp(got, full, lb) == 0, "%s: logits after refused calls differ", what);
    CHECK(lean_decode(c, 0, got, &err) == LEAN_ERR_CONTEXT_FULL, "decode into a full context");
    lean_ctx_free(c);

    /* streamed weights give the same logits as mapped ones */
    if (streamed) {
        memset(got, 0, lb);
        prefill_steps(streamed, 5, N_SEQ, ids, N_SEQ, got);
        CHECK(memcmp(got, full, lb) == 0, "%s: streamed load differs from mmap load", what);
    }
    free(full), free(got);
}

/* ---- loading ---- */

static size_t pread_fd(void *user, uint64_t off, void *dst, size_t n) {
    ssize_t got = pread(*(int *)user, dst, n, (off_t)off);
    return got < 0 ? 0 : (size_t)got;
}

static lean_model *load_stream(const char *path) {
    int fd = open(path, O_RDONLY);
    uint64_t size = (uint64_t)lseek(fd, 0, SEEK_END);
    lean_model *m = NULL;
    lean_error err = {0};
    CHECK(lean_model_load_stream(pread_fd, &fd, size, &m, &err) == LEAN_OK, "%s", err.msg);
    close(fd);
    return m;
}

/* Writes sp, then runs the numbers (tolerance tol) and, if props, the properties. */
static void run_model(const char *what, const tiny_spec *sp, double tol, int props) {
    char path[256];
    tiny_path(path, sizeof path);
    tiny_model *tm = calloc(1, sizeof *tm);
    lean_error err = {0};
    lean_model *m = NULL;
    CHECK(tiny_write(sp, path, tm, &err) == LEAN_OK, "%s: %s", what, err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", what, err.msg);
    if (m) {
        check_numbers(what, tm, m, tol);
        if (props) {
            lean_model *s = load_stream(path);
            check_properties(what, m, s);
            lean_model_free(s);
        }
    }
    lean_model_free(m);
    tiny_free(tm);
    free(tm);
    unlink(path);
}

static void test_archs(void) {
    tiny_spec sp = tiny_default("llama");
    run_model("llama", &sp, 1e-4, 1);
    sp.rope_freqs = 1; /* llama3 scaling */
    sp.tied = 1;
    sp.n_head_kv = 1; /* multi-query */
    sp.rope_base = 500000.0f;
    run_model("llama3-style", &sp, 1e-4, 1);
    sp = tiny_default("qwen2");
    run_model("qwen2", &sp, 1e-4, 1);
    sp.tied = 1;
    sp.n_head_kv = 4;
    sp.rope_base = 1000000.0f;
    run_model("qwen2 tied, no GQA", &sp, 1e-4, 0);
    sp = tiny_default("qwen3");
    run_model("qwen3", &sp, 1e-4, 1);
}

/* Every matrix format through the same matmul: the double forward uses the values the
 * quantizer round trip produced, so only lean's arithmetic is measured. */
static void test_formats(void) {
    const uint32_t small[] = {LEAN_TYPE_F16, LEAN_TYPE_BF16, LEAN_TYPE_Q8_0, LEAN_TYPE_Q4_0,
                              LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        tiny_spec sp = tiny_default(i % 2 ? "qwen2" : "llama");
        sp.matrix_type = sp.embd_type = small[i];
        char what[64];
        snprintf(what, sizeof what, "%s %s", sp.arch, lean_type_traits_get(small[i])->name);
        run_model(what, &sp, 1e-4, i == 2);
    }
    const uint32_t kq[] = {LEAN_TYPE_Q4_K, LEAN_TYPE_Q5_K, LEAN_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        tiny_spec sp = tiny_default(i == 1 ? "qwen3" : "llama");
        sp.n_embd = 256; /* K-quant rows are multiples of 256 */
        sp.n_ff = 256;
        sp.n_layer = 1;
        sp.head_dim = 64;
        sp.matrix_type = sp.embd_type = kq[i];
        char what[64];
        snprintf(what, sizeof what, "%s %s", sp.arch, lean_type_traits_get(kq[i])->name);
        run_model(what, &sp, 1e-4, 0);
    }
}

static void test_ctx_params(void) {
    tiny_spec sp = tiny_default("llama");
    char path[256];
    tiny_path(path, sizeof path);
    lean_error err = {0};
    lean_model *m = NULL;
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    lean_ctx_params p = lean_ctx_default_params();
    CHECK(p.n_ctx == 0 && p.n_batch == 0, "defaults %d %d", p.n_ctx, p.n_batch);
    lean_ctx *c = NULL;
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_OK, "%s", err.msg);
    CHECK(c && lean_ctx_n_ctx(c) == 256 && lean_ctx_pos(c) == 0, "n_ctx 0 -> n_ctx_train 256");
    CHECK(c && lean_ctx_n_batch(c) == 64, "n_batch 0 -> the CPU's 64: %d", c ? lean_ctx_n_batch(c) : -1);
    lean_ctx_free(c);
    p.n_batch = 1000; /* more than the context: one chunk holds at most n_ctx */
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_OK && lean_ctx_n_batch(c) == 256, "n_batch 1000 -> 256");
    lean_ctx_free(c);
    p.n_batch = 0;
    CHECK(lean_ctx_create(m, NULL, &c, &err) == LEAN_OK && lean_ctx_n_ctx(c) == 256, "NULL params");
    lean_ctx_free(c);
    p.n_ctx = -1;
    c = (lean_ctx *)&p; /* must become NULL */
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_ERR_ARG && c == NULL, "n_ctx -1: %s", err.msg);
    p.n_ctx = 1 << 30;
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_ERR_ARG && c == NULL, "huge n_ctx: %s", err.msg);
    CHECK(strstr(err.msg, "n_ctx 1073741824 is more than lean supports (16777216)") != NULL,
          "message: %s", err.msg);
    lean_model_free(m);
    unlink(path);

    sp.n_ctx_train = 100000;
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_ctx_create(m, NULL, &c, &err) == LEAN_OK && lean_ctx_n_ctx(c) == 4096,
          "n_ctx 0 -> capped at 4096");
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(path);
}

/* Fails every allocation of load -> ctx (the defaults: "auto") -> prefill in turn
 * (tiny_alloc_sweep). */
static void test_alloc_failures(void) {
    tiny_spec sp = tiny_default("qwen3");
    tiny_alloc_sweep(&sp, NULL);
}

int main(void) {
    test_archs();
    test_formats();
    test_ctx_params();
    test_alloc_failures();
    return test_finish("test_forward");
}
