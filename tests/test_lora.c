/* test_lora.c — LoRA adapters (src/core/lora.c; the forward hooks of cpu/forward_ref.c and
 * cpu/forward.c).
 *
 * Reference: for the six parity models (build/fixtures/NAME-f32.gguf) and three adapters each
 * (build/lora/NAME-{a,b,e}.gguf, made by scripts/make_lora.py: a of rank 8 with alpha 16 on every
 * 2-D weight in F32, b of rank 4 without alpha on q, v, down, output and the embedding in F16, e
 * of rank 8 with alpha 4 on the embedding, k and up in F16; each file's SHA-256 checked against
 * tests/data/lora/NAME.txt), what numpy computes in float64 from the math (tests/data/lora/NAME.txt:
 * a alone, a * 0.75 + b * -0.5, and e + b * 0.5: two terms on the embedding) at prompt positions 4, 8
 * and 16: cpu-ref within 1e-3 on the recorded top-21 and the same argmax, and the same logits
 * far (> 0.1) from the model's without adapters, so the test sees the adapter. The CPU kernels,
 * exact, within 1e-3 of numpy too with its argmax, the same bits for 1 thread and prefill chunks
 * of 16 as for 3 threads and chunks of 5; not exact, cpu-ref's argmax. The same checks against
 * transformers + PEFT (tests/data/lora/peft/: a random rank-8 LoRA on every weight, converted as
 * convert_lora_to_gguf.py does, and PEFT's logits with it at scale 1; lora_ref.h). A quantized base (q8_0, q4_k, q6_k)
 * takes the adapters as F32 does: the exact kernels within 1e-3 of cpu-ref.
 * Switching: removing the adapters gives the model's bits again, scale 0 its values; two
 * contexts of one model with different adapters do not disturb each other.
 * Refusals (adapters written here with gguf_writer for a tiny model): each misfit named; the
 * embedding's flipped pair taken, a pair shaped as a matmul's refused.
 * Chat sessions (lean_chat_session_set_loras): adapters set between turns are the adapters set
 * before the first (the same greedy reply, the cache computed without them dropped: nothing
 * reused), removing them gives the model's reply again, not during a turn.
 * Out of memory: every allocation of a load failing in turn ends in a clean error. */
#include "dev/lean_dev.h"
#include "fixture.h"
#include "lora_ref.h"
#include "test.h"
#include "tiny_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_V 4096
#define TOL 1e-3f

/* ---- helpers ---- */

static lean_ctx *new_ctx(const lean_model *m, const char *backend, int exact, int n_threads, int n_batch) {
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = backend, p.exact = exact, p.n_threads = n_threads, p.n_batch = n_batch, p.n_ctx = 64;
    lean_ctx *c = NULL;
    lean_error err;
    lean_status st = lean_ctx_create(m, &p, &c, &err);
    CHECK(st == LEAN_OK, "ctx %s: %s", backend, err.msg);
    return c;
}

/* logits after the first n ids of ids, from an empty cache */
static bool logits_at(lean_ctx *c, const int32_t *ids, int n, float *out) {
    lean_error err;
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (st == LEAN_OK) st = lean_prefill(c, ids, n, out, &err);
    CHECK(st == LEAN_OK, "prefill %d: %s", n, err.msg);
    return st == LEAN_OK;
}

static bool set(lean_ctx *c, lean_lora *const *a, const float *s, int n) {
    lean_error err;
    lean_status st = lean_ctx_set_loras(c, a, s, n, &err);
    CHECK(st == LEAN_OK, "set_loras: %s", err.msg);
    return st == LEAN_OK;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static bool same_bits(const float *a, const float *b, int n) { return memcmp(a, b, sizeof *a * (size_t)n) == 0; }

/* ---- against numpy and PEFT ---- */

/* src's reference of the parity model name (m) on all: cpu-ref, the CPU's exact kernels with 1
 * thread and chunks of 16 and with 3 threads and chunks of 5, and its fast kernels */
static void check_source(const lora_source *src, const char *name, const lean_model *m, lean_ctx *const all[4]) {
    ref_file r;
    lean_lora *ad[LORA_REF_MAX];
    if (!lora_ref_open(src, name, m, &r, ad)) return;
    const char *who = src->who;
    lean_ctx *cr = all[0];
    const int n_vocab = lean_model_n_vocab(m);
    float *ref = malloc(sizeof(float) * MAX_V), *base = malloc(sizeof(float) * MAX_V),
          *got = malloc(sizeof(float) * MAX_V);
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = r.prompt[i];
    float max_ref = 0, max_exact = 0; /* over the cases and positions, for the log */
    for (int k = 0; k < r.n_cases; k++) {
        const ref_case *c = &r.cases[k];
        lean_lora *use[2];
        for (int i = 0; i < c->n_terms; i++) use[i] = ad[c->adapter[i]];
        for (int i = 0; i < 4; i++) set(all[i], NULL, NULL, 0);
        for (int p = 0; p < 3; p++) {
            const int pos = c->pos[p];
            logits_at(cr, ids, pos, base); /* without adapters */
            set(cr, use, c->scale, c->n_terms);
            logits_at(cr, ids, pos, ref);
            set(cr, NULL, NULL, 0);
            float worst = 0, moved = 0;
            for (int i = 0; i < 21; i++) {
                const int id = c->ids[p][i];
                const float d = fabsf(ref[id] - c->logit[p][i]), dm = fabsf(base[id] - c->logit[p][i]);
                worst = d > worst ? d : worst;
                moved = dm > moved ? dm : moved;
            }
            max_ref = fmaxf(max_ref, worst);
            CHECK(worst <= TOL, "%s case %s pos %d: cpu-ref differs from %s by %g", name, c->name, pos, who, worst);
            CHECK(argmax(ref, n_vocab) == c->ids[p][0], "%s case %s pos %d: argmax %d, %s's %d", name, c->name, pos,
                  argmax(ref, n_vocab), who, c->ids[p][0]);
            CHECK(moved > 0.1f, "%s case %s pos %d: the adapters move the logits by only %g", name, c->name, pos,
                  moved);
            for (int i = 1; i < 4; i++) {
                set(all[i], use, c->scale, c->n_terms);
                logits_at(all[i], ids, pos, i == 2 ? base : got); /* base: no longer needed */
                set(all[i], NULL, NULL, 0);
                if (i == 1) {
                    worst = 0;
                    for (int j = 0; j < 21; j++) worst = fmaxf(worst, fabsf(got[c->ids[p][j]] - c->logit[p][j]));
                    max_exact = fmaxf(max_exact, worst);
                    CHECK(worst <= TOL, "%s case %s pos %d: cpu exact differs from %s by %g", name, c->name, pos,
                          who, worst);
                    CHECK(argmax(got, n_vocab) == c->ids[p][0], "%s case %s pos %d: cpu exact argmax %d, %s's %d",
                          name, c->name, pos, argmax(got, n_vocab), who, c->ids[p][0]);
                } else if (i == 2) {
                    CHECK(same_bits(got, base, n_vocab), "%s case %s pos %d: cpu exact, 3 threads and batch 5, not "
                          "the bits of 1 thread and batch 16", name, c->name, pos);
                } else {
                    CHECK(argmax(got, n_vocab) == argmax(ref, n_vocab), "%s case %s pos %d: cpu argmax %d, cpu-ref %d",
                          name, c->name, pos, argmax(got, n_vocab), argmax(ref, n_vocab));
                }
            }
        }
    }
    printf("%s: max |delta| from %s's top-21: cpu-ref %.3g, cpu exact %.3g\n", name, who, max_ref, max_exact);
    /* removing the adapters gives the model's bits again; scale 0 its values */
    logits_at(cr, ids, 16, base);
    const float one = 1.0f, zero = 0.0f;
    set(cr, ad, &one, 1);
    logits_at(cr, ids, 16, got);
    set(cr, NULL, NULL, 0);
    logits_at(cr, ids, 16, ref);
    CHECK(same_bits(ref, base, n_vocab), "%s: removed adapters leave other logits", name);
    set(cr, ad, &zero, 1);
    logits_at(cr, ids, 16, ref);
    bool eq = true;
    for (int i = 0; i < n_vocab; i++) eq &= ref[i] == base[i];
    CHECK(eq, "%s: an adapter of scale 0 changes the logits", name);
    set(cr, NULL, NULL, 0);
    for (int i = 0; i < LORA_REF_MAX; i++) lean_lora_free(ad[i]);
    free(ref), free(base), free(got);
}

static void test_reference(const char *name) {
    lean_model *m = lora_ref_model(name);
    if (!m) return;
    lean_ctx *all[4] = {new_ctx(m, "cpu-ref", 0, 0, 0), new_ctx(m, "cpu", 1, 1, 16), new_ctx(m, "cpu", 1, 3, 5),
                        new_ctx(m, "cpu", 0, 2, 0)};
    if (all[0] && all[1] && all[2] && all[3]) {
        check_source(&LORA_NUMPY, name, m, all);
        check_source(&LORA_PEFT, name, m, all);
    }
    for (int i = 0; i < 4; i++) lean_ctx_free(all[i]);
    lean_model_free(m);
}

/* A quantized base: the adapter adds to it as to F32 (exact kernels near cpu-ref), and
 * two contexts with different adapters interleave without touching each other. */
static void test_quantized_base(const char *fmt) {
    char path[128];
    lean_error err;
    lean_model *m = NULL;
    snprintf(path, sizeof path, "build/fixtures/qwen2-%s.gguf", fmt);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", path, err.msg);
    if (!m) return;
    lean_lora *ad[2] = {NULL, NULL};
    CHECK(lean_lora_load_file(m, "build/lora/qwen2-a.gguf", &ad[0], &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_lora_load_file(m, "build/lora/qwen2-b.gguf", &ad[1], &err) == LEAN_OK, "%s", err.msg);
    const int n_vocab = lean_model_n_vocab(m);
    float *a = malloc(sizeof(float) * MAX_V), *b = malloc(sizeof(float) * MAX_V), *base = malloc(sizeof(float) * MAX_V);
    int32_t ids[12];
    tiny_ids(ids, 12, n_vocab, 5);
    lean_ctx *cr = new_ctx(m, "cpu-ref", 0, 0, 0), *cx = new_ctx(m, "cpu", 1, 2, 0), *other = new_ctx(m, "cpu", 1, 2, 0);
    const float s[2] = {1.0f, 2.0f};
    if (cr && cx && other && ad[0] && ad[1]) {
        logits_at(cr, ids, 12, base);
        set(cr, ad, s, 2);
        logits_at(cr, ids, 12, a);
        set(cx, ad, s, 2);
        set(other, &ad[1], s, 1);
        lean_error e2;
        /* interleaved: other runs between cx's prefill and decode */
        CHECK(lean_ctx_truncate(cx, 0, &e2) == LEAN_OK && lean_prefill(cx, ids, 11, NULL, &e2) == LEAN_OK,
              "%s", e2.msg);
        logits_at(other, ids, 12, b);
        CHECK(lean_decode(cx, ids[11], b, &e2) == LEAN_OK, "%s", e2.msg);
        float moved = 0, worst = 0;
        for (int i = 0; i < n_vocab; i++) moved = fmaxf(moved, fabsf(a[i] - base[i])), worst = fmaxf(worst, fabsf(a[i] - b[i]));
        CHECK(worst <= TOL, "%s: cpu exact with adapters differs from cpu-ref by %g", fmt, worst);
        CHECK(moved > 0.1f, "%s: the adapters move the logits by only %g", fmt, moved);
        /* a batch: contexts with the same adapters and scales share a pass and give their alone
         * bits; other adapters are refused (the pass would run ctx[0]'s for every row) */
        lean_ctx *twin = new_ctx(m, "cpu", 1, 2, 0);
        if (twin) {
            set(twin, ad, s, 2);
            float *rows = malloc(sizeof(float) * 2 * (size_t)n_vocab);
            CHECK(lean_ctx_truncate(cx, 0, &e2) == LEAN_OK && lean_prefill(cx, ids, 11, NULL, &e2) == LEAN_OK &&
                      lean_prefill(twin, ids, 11, NULL, &e2) == LEAN_OK,
                  "%s", e2.msg);
            lean_ctx *pair[2] = {cx, twin}, *mixed[2] = {cx, other};
            const int32_t two[2] = {ids[11], ids[11]};
            CHECK(lean_decode_batch(pair, two, 2, rows, &e2) == LEAN_OK, "%s: batch: %s", fmt, e2.msg);
            CHECK(!memcmp(rows, b, sizeof(float) * (size_t)n_vocab) &&
                      !memcmp(rows + n_vocab, b, sizeof(float) * (size_t)n_vocab),
                  "%s: a batch with adapters differs from decoding alone", fmt);
            CHECK(lean_decode_batch(mixed, two, 2, rows, &e2) == LEAN_ERR_ARG && strstr(e2.msg, "LoRA"),
                  "%s: a batch mixing adapters: %s", fmt, e2.msg);
            free(rows);
        }
        lean_ctx_free(twin);
    }
    lean_ctx_free(cr), lean_ctx_free(cx), lean_ctx_free(other);
    lean_lora_free(ad[0]), lean_lora_free(ad[1]);
    free(a), free(b), free(base);
    lean_model_free(m);
}

/* ---- refusals ---- */

typedef struct bad {
    const char *what;
    const char *general_type, *adapter_type, *arch;
    const char *name_a, *name_b; /* NULL name_b: no lora_b */
    int64_t a_cols, a_rank, b_rank, b_rows;
    uint32_t type;
    lean_status want;
    const char *needle; /* in the message */
} bad;

static void *adapter_bytes(const bad *b, uint64_t *n) {
    gguf_writer *w = gguf_writer_new();
    if (b->arch) gguf_w_str(w, "general.architecture", b->arch);
    if (b->general_type) gguf_w_str(w, "general.type", b->general_type);
    if (b->adapter_type) gguf_w_str(w, "adapter.type", b->adapter_type);
    gguf_w_f32(w, "adapter.lora.alpha", 8.0f);
    const char *names[2] = {b->name_a, b->name_b};
    const int64_t shapes[2][2] = {{b->a_cols, b->a_rank}, {b->b_rank, b->b_rows}};
    for (int i = 0; i < 2; i++) {
        if (!names[i]) continue;
        uint64_t bytes = 0;
        lean_type_bytes(b->type, (uint64_t)(shapes[i][0] * shapes[i][1]), &bytes);
        void *data = calloc(1, (size_t)bytes);
        gguf_w_tensor(w, names[i], b->type, 2, shapes[i], data, bytes);
        free(data);
    }
    void *out = NULL;
    lean_error err;
    CHECK(gguf_writer_write_mem(w, &out, n, &err) == LEAN_OK, "%s: writing: %s", b->what, err.msg);
    gguf_writer_free(w);
    return out;
}

static void test_refusals(void) {
    char path[64];
    tiny_spec sp = tiny_default("llama");
    sp.tied = 1;
    lean_error err;
    lean_model *m = NULL;
    CHECK(tiny_write(&sp, tiny_path(path, sizeof path), NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    unlink(path);
    if (!m) return;
    /* tiny llama: n_embd 64, q_dim 64, kv_dim 32, n_ff 96, 2 layers */
#define Q "blk.1.attn_q.weight"
    const bad cases[] = {
        {"good", "adapter", "lora", "llama", Q ".lora_a", Q ".lora_b", 64, 4, 4, 64, LEAN_TYPE_F32, LEAN_OK, ""},
        {"good q8_0", "adapter", "lora", "llama", "blk.0.ffn_down.weight.lora_a", "blk.0.ffn_down.weight.lora_b", 96,
         32, 32, 64, LEAN_TYPE_Q8_0, LEAN_OK, ""},
        {"not an adapter", NULL, "lora", "llama", Q ".lora_a", Q ".lora_b", 64, 4, 4, 64, LEAN_TYPE_F32,
         LEAN_ERR_MODEL, "general.type is missing"},
        {"a model", "model", "lora", "llama", Q ".lora_a", Q ".lora_b", 64, 4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL,
         "\"model\""},
        {"not lora", "adapter", "control_vector", "llama", Q ".lora_a", Q ".lora_b", 64, 4, 4, 64, LEAN_TYPE_F32,
         LEAN_ERR_UNSUPPORTED, "control_vector"},
        {"other arch", "adapter", "lora", "qwen2", Q ".lora_a", Q ".lora_b", 64, 4, 4, 64, LEAN_TYPE_F32,
         LEAN_ERR_MODEL, "'qwen2'"},
        {"no arch", "adapter", "lora", NULL, Q ".lora_a", Q ".lora_b", 64, 4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL,
         "general.architecture"},
        {"unknown layer", "adapter", "lora", "llama", "blk.2.attn_q.weight.lora_a", "blk.2.attn_q.weight.lora_b", 64,
         4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL, "'blk.2.attn_q.weight.lora_a'"},
        {"unknown weight", "adapter", "lora", "llama", "blk.0.attn_qkv.weight.lora_a", "blk.0.attn_qkv.weight.lora_b",
         64, 4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL, "no weight 'blk.0.attn_qkv.weight'"},
        {"bad suffix", "adapter", "lora", "llama", Q ".lora_x", NULL, 64, 4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL,
         "'" Q ".lora_x'"},
        {"wrong cols", "adapter", "lora", "llama", Q ".lora_a", Q ".lora_b", 96, 4, 4, 64, LEAN_TYPE_F32,
         LEAN_ERR_MODEL, "'" Q "'"},
        {"wrong rows", "adapter", "lora", "llama", "blk.0.attn_k.weight.lora_a", "blk.0.attn_k.weight.lora_b", 64, 4,
         4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL, "'blk.0.attn_k.weight' (32 rows"},
        {"ranks differ", "adapter", "lora", "llama", Q ".lora_a", Q ".lora_b", 64, 4, 5, 64, LEAN_TYPE_F32,
         LEAN_ERR_MODEL, "expected [64, rank]"},
        {"no lora_b", "adapter", "lora", "llama", Q ".lora_a", NULL, 64, 4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL,
         "no " Q ".lora_b"},
#define E "token_embd.weight"
        /* the embedding's pair flipped, as llama.cpp reads it: A ne [rank, n_vocab], B ne [rank, n_embd] */
        {"good embedding", "adapter", "lora", "llama", E ".lora_a", E ".lora_b", 4, 97, 4, 64, LEAN_TYPE_F32, LEAN_OK,
         ""},
        {"embedding as a matmul", "adapter", "lora", "llama", E ".lora_a", E ".lora_b", 64, 4, 4, 97, LEAN_TYPE_F32,
         LEAN_ERR_MODEL, "'" E "' (97 rows, 64 cols): " E ".lora_a is [64, 4]"},
        {"embedding ranks differ", "adapter", "lora", "llama", E ".lora_a", E ".lora_b", 4, 97, 5, 64, LEAN_TYPE_F32,
         LEAN_ERR_MODEL, "expected [rank, 97] and [rank, 64]"},
        {"embedding of another vocabulary", "adapter", "lora", "llama", E ".lora_a", E ".lora_b", 4, 96, 4, 64,
         LEAN_TYPE_F32, LEAN_ERR_MODEL, E ".lora_a is [4, 96]"},
#undef E
        {"tied output", "adapter", "lora", "llama", "output.weight.lora_a", "output.weight.lora_b", 64, 4, 4, 97,
         LEAN_TYPE_F32, LEAN_ERR_MODEL, "tied"},
        {"no tensors", "adapter", "lora", "llama", NULL, NULL, 64, 4, 4, 64, LEAN_TYPE_F32, LEAN_ERR_MODEL,
         "no NAME.lora_a"},
    };
#undef Q
    lean_lora *good = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad *b = &cases[i];
        uint64_t n = 0;
        void *bytes = adapter_bytes(b, &n);
        if (!bytes) continue;
        lean_lora *a = NULL;
        memset(&err, 0, sizeof err);
        const lean_status st = lean_lora_load_memory(m, bytes, (size_t)n, &a, &err);
        CHECK(st == b->want, "%s: status %s, expected %s (%s)", b->what, lean_status_str(st), lean_status_str(b->want),
              err.msg);
        CHECK(st == LEAN_OK || (a == NULL && strstr(err.msg, b->needle)), "%s: message '%s' lacks '%s'", b->what,
              err.msg, b->needle);
        if (st == LEAN_OK && i == 0) {
            CHECK(lean_lora_n_weights(a) == 1 && lean_lora_max_rank(a) == 4, "good: %d weights, rank %d",
                  lean_lora_n_weights(a), lean_lora_max_rank(a));
            good = a;
            /* every allocation of the load failing in turn: a clean error, nothing leaked */
            int fails = 0, runs = 0;
            for (uint64_t k = 1; k < 200; k++) {
                lean_alloc_fail_at(k, false);
                lean_lora *x = NULL;
                const lean_status s2 = lean_lora_load_memory(m, bytes, (size_t)n, &x, &err);
                lean_alloc_fail_at(0, false);
                runs++;
                if (s2 == LEAN_OK) {
                    lean_lora_free(x);
                    break;
                }
                fails += s2 == LEAN_ERR_NOMEM && x == NULL;
            }
            CHECK(fails == runs - 1 && runs > 3, "out of memory: %d clean failures of %d runs", fails, runs);
        } else {
            lean_lora_free(a);
        }
        /* a truncated file: the reader's error */
        if (i == 0) {
            lean_lora *x = NULL;
            CHECK(lean_lora_load_memory(m, bytes, (size_t)n - 9, &x, &err) == LEAN_ERR_FORMAT && !x,
                  "truncated: %s", err.msg);
        }
        free(bytes);
    }
    /* lean_ctx_set_loras' own checks */
    lean_ctx *c = new_ctx(m, "cpu-ref", 0, 0, 0);
    lean_model *m2 = NULL;
    CHECK(tiny_write(&sp, tiny_path(path, sizeof path), NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m2, &err) == LEAN_OK, "%s", err.msg);
    unlink(path);
    lean_ctx *c2 = m2 ? new_ctx(m2, "cpu", 0, 1, 0) : NULL;
    if (c && good && c2) {
        const float one = 1.0f, nan = NAN;
        CHECK(lean_ctx_set_loras(c, &good, &nan, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "scale"), "nan: %s",
              err.msg);
        CHECK(lean_ctx_set_loras(c2, &good, &one, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "another model"),
              "other model: %s", err.msg);
        CHECK(lean_ctx_set_loras(c, NULL, &one, 1, &err) == LEAN_ERR_ARG, "NULL loras: %s", err.msg);
        CHECK(lean_ctx_set_loras(c, &good, &one, -1, &err) == LEAN_ERR_ARG, "n -1: %s", err.msg);
        /* not during a generation; and set_loras drops the last logits */
        int32_t id = 3;
        float *lg = malloc(sizeof(float) * 97);
        lean_sampler *smp = NULL;
        lean_sampler_params sp2 = lean_sampler_default_params();
        sp2.temperature = 0;
        CHECK(lean_sampler_create(&sp2, 97, &smp, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_prefill(c, &id, 1, lg, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_gen_begin(c, smp, 2, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_ctx_set_loras(c, &good, &one, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "generation"),
              "during a generation: %s", err.msg);
        lean_gen_end(c);
        CHECK(lean_ctx_set_loras(c, &good, &one, 1, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_gen_begin(c, smp, 2, &err) == LEAN_ERR_ARG, "gen_begin after set_loras: %s", err.msg);
        lean_sampler_free(smp);
        free(lg);
    }
    lean_ctx_free(c);
    lean_ctx_free(c2);
    lean_lora_free(good);
    lean_model_free(m2);
    lean_model_free(m);
}

/* ---- chat sessions ---- */

/* One greedy turn; its reply into out (cap bytes) and its stats. */
static bool chat_turn(lean_chat_session *s, char *out, size_t cap, lean_chat_turn_stats *st) {
    lean_error err;
    if (lean_chat_submit(s, "Hello there", &err) != LEAN_OK) {
        CHECK(false, "submit: %s", err.msg);
        return false;
    }
    size_t n = 0;
    for (int more = 1; more;) {
        const char *t;
        size_t k;
        if (lean_chat_step(s, &t, &k, &more, &err) != LEAN_OK) {
            CHECK(false, "step: %s", err.msg);
            return false;
        }
        if (n + k < cap) memcpy(out + n, t, k), n += k;
    }
    out[n] = 0;
    lean_chat_session_stats(s, st);
    return true;
}

static void test_chat_session(void) {
    /* tiny-llama (n_embd 256) with the built-in vocabulary and ChatML; an adapter of rank 4 on
     * every layer's q and ffn_up, F32, random values large enough to move a greedy reply */
    char model[512];
    test_tmp_path(model, sizeof model, "lora-chat.gguf");
    lean_gen_params gp = {.preset = "tiny-llama", .recipe = "f32", .seed = 1};
    lean_error err;
    CHECK(lean_generate_model(&gp, model, &err) == LEAN_OK, "%s", err.msg);
    lean_model *m = NULL;
    CHECK(lean_model_load_file(model, &m, &err) == LEAN_OK, "%s", err.msg);
    unlink(model);
    if (!m) return;
    lean_model_info info;
    lean_model_get_info(m, &info);
    const int64_t E = info.n_embd, F = info.n_ff, R = 4;
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "general.architecture", info.arch);
    gguf_w_str(w, "general.type", "adapter");
    gguf_w_str(w, "adapter.type", "lora");
    gguf_w_f32(w, "adapter.lora.alpha", 8.0f);
    float *v = malloc(sizeof *v * (size_t)(F > E ? F : E) * R);
    uint64_t seed = 7;
    for (int l = 0; l < info.n_layer; l++) {
        const char *slot[2] = {"attn_q", "ffn_up"};
        const int64_t rows[2] = {E, F};
        for (int k = 0; k < 2; k++) {
            char name[96];
            const int64_t a_ne[2] = {E, R}, b_ne[2] = {R, rows[k]};
            for (int64_t i = 0; i < E * R; i++) v[i] = (float)((int64_t)(tiny_rng(&seed) % 2001) - 1000) * 2e-4f;
            snprintf(name, sizeof name, "blk.%d.%s.weight.lora_a", l, slot[k]);
            gguf_w_tensor(w, name, LEAN_TYPE_F32, 2, a_ne, v, sizeof *v * (size_t)(E * R));
            for (int64_t i = 0; i < R * rows[k]; i++) v[i] = (float)((int64_t)(tiny_rng(&seed) % 2001) - 1000) * 2e-4f;
            snprintf(name, sizeof name, "blk.%d.%s.weight.lora_b", l, slot[k]);
            gguf_w_tensor(w, name, LEAN_TYPE_F32, 2, b_ne, v, sizeof *v * (size_t)(R * rows[k]));
        }
    }
    free(v);
    void *bytes = NULL;
    uint64_t n_bytes = 0;
    CHECK(gguf_writer_write_mem(w, &bytes, &n_bytes, &err) == LEAN_OK, "%s", err.msg);
    gguf_writer_free(w);
    lean_lora *a = NULL;
    CHECK(bytes && lean_lora_load_memory(m, bytes, (size_t)n_bytes, &a, &err) == LEAN_OK, "%s", err.msg);
    free(bytes);
    lean_chat_session_params p = lean_chat_session_default_params();
    p.backend = "cpu-ref", p.n_ctx = 128, p.n_predict = 8, p.sampling.temperature = 0;
    lean_chat_session *before = NULL, *between = NULL;
    CHECK(lean_chat_session_create(m, &p, &before, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_chat_session_create(m, &p, &between, &err) == LEAN_OK, "%s", err.msg);
    const float one = 1.0f;
    char r_lora[512], r_base[512], r[512];
    lean_chat_turn_stats st;
    if (a && before && between && lean_chat_session_set_loras(before, &a, &one, 1, &err) == LEAN_OK &&
        chat_turn(before, r_lora, sizeof r_lora, &st) && chat_turn(between, r_base, sizeof r_base, &st)) {
        CHECK(strcmp(r_lora, r_base) != 0, "the adapter leaves the reply as it was: '%s'", r_base);
        /* the same conversation again, the adapter set between the turns: the cache held it
         * computed without the adapter, so nothing of it may be reused */
        lean_chat_session_reset(between);
        CHECK(lean_chat_session_set_loras(between, &a, &one, 1, &err) == LEAN_OK, "%s", err.msg);
        if (chat_turn(between, r, sizeof r, &st))
            CHECK(strcmp(r, r_lora) == 0 && st.n_reused == 0, "set between turns: '%s' (%d reused), set first: '%s'",
                  r, st.n_reused, r_lora);
        lean_chat_session_reset(between);
        CHECK(lean_chat_session_set_loras(between, NULL, NULL, 0, &err) == LEAN_OK, "%s", err.msg);
        if (chat_turn(between, r, sizeof r, &st))
            CHECK(strcmp(r, r_base) == 0 && st.n_reused == 0, "removed: '%s' (%d reused), the model's: '%s'", r,
                  st.n_reused, r_base);
        CHECK(lean_chat_submit(between, "Again", &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_chat_session_set_loras(between, &a, &one, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "turn"),
              "during a turn: %s", err.msg);
        CHECK(lean_chat_session_set_loras(NULL, &a, &one, 1, &err) == LEAN_ERR_ARG, "NULL session: %s", err.msg);
    }
    lean_chat_session_free(before);
    lean_chat_session_free(between);
    lean_lora_free(a);
    lean_model_free(m);
}

int main(void) {
    test_refusals();
    test_chat_session();
    for (size_t i = 0; i < sizeof LORA_NAMES / sizeof LORA_NAMES[0]; i++) test_reference(LORA_NAMES[i]);
    test_quantized_base("q8_0");
    test_quantized_base("q4_k");
    test_quantized_base("q6_k");
    return test_finish("test_lora");
}
