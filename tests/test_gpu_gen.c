/* test_gpu_gen.c — resident generation on the WebGPU backend (lean.h "generation";
 * src/gpu/forward.c, section "generation"), on whatever adapter lean_gpu_open finds:
 *   - the ids lean_gen_* hands out with the draw on the GPU equal, id for id, those of the
 *     step-by-step loop on the host (lean_sampler_sample over the GPU's logits, then
 *     lean_decode) — greedy, sampled, with the repetition penalty over a window and over the
 *     whole history — for tiny models of each architecture;
 *   - stopping after k ids for k at and around the greedy block (16) and the sampled flight
 *     (8) boundaries: the position is the step-by-step one, the logits after decoding the
 *     last id are the host loop's bits, and a second generation continues as the loop does;
 *   - the context's end (LEAN_ERR_CONTEXT_FULL after n_ctx - pos + 1 ids), max_ids, misuse;
 *   - a device lost during a generation: LEAN_ERR_DEVICE, then a clean end and free;
 *   - chat sessions (greedy and sampled, a stop string inside a block, two turns) give the
 *     same replies, resident ids and stats with the resident draw as with the host's
 *     (lean_gpu_options.no_resident);
 *   - under a grammar (lean_sampler_set_grammar: a JSON schema's, and a dead end) the resident
 *     draw, one step at a time under the grammar's mask, gives the host's ids, end, position
 *     and grammar state, in lean_gen_* (greedy, penalized, the wide draw) and in a sampled
 *     chat session (lean_chat_session_set_grammar, two turns);
 *   - the profile (lean_ctx_params.profile, lean_ctx_profile): dispatches per generated id the
 *     same in every block of a generation, kernel rows where the adapter has timestamp-query,
 *     and LEAN_ERR_UNSUPPORTED without profile and on the CPU.
 * Every context runs the exact path (lean_ctx_params.exact).
 *
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "dev/lean_dev.h"
#include "core/backend.h"
#include "core/test_hooks.h"
#include "gpu/test_hooks.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <stdlib.h>

#define N_PROMPT 11
#define MAX_GEN 48

static lean_ctx *new_ctx(const lean_model *m, int32_t n_ctx) {
    lean_error err;
    lean_ctx *c = NULL;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = "gpu";
    cp.n_ctx = n_ctx;
    cp.n_batch = 8;
    cp.exact = true;
    CHECK(lean_ctx_create(m, &cp, &c, &err) == LEAN_OK, "gpu ctx: %s", err.msg);
    return c;
}

/* Whether c's generations draw on the GPU (the default) or on the host: its device's option,
 * read at each lean_gen_begin. */
static void set_resident(lean_ctx *c, bool on) {
    if (c) lean_gpu_options_of(lean_backend_gpu_device(lean_ctx_backend_state(c)))->no_resident = !on;
}

/* What one run saw: the ids, the position after lean_gen_end, the logits after decoding the
 * last id by hand, and the ids of a second generation from there. */
typedef struct run {
    int32_t ids[MAX_GEN], more[8];
    int n, n_more;
    int32_t pos;
    float *logits;
    lean_status end_st; /* what the last lean_gen_next said (when the run went to the end) */
} run;

/* On c (emptied first): the prompt, then k ids (k = 0: until lean_gen_next fails),
 * lean_gen_end, then the checks' data. The resident choice is made at lean_gen_begin, so one
 * context serves both kinds of run (and a device per run would exhaust llvmpipe's EGL). */
static void gen_run(lean_ctx *c, const lean_model *m, const lean_sampler_params *sp, int32_t max_ids, int k,
                    bool resident, run *r) {
    lean_error err = {0};
    const int32_t V = lean_model_n_vocab(m);
    set_resident(c, resident);
    *r = (run){.logits = calloc((size_t)V, sizeof(float))};
    lean_sampler *smp = NULL;
    int32_t prompt[N_PROMPT];
    tiny_ids(prompt, N_PROMPT, V, 7);
    lean_status st = c ? lean_ctx_truncate(c, 0, &err) : LEAN_ERR_ARG;
    if (!st) st = lean_sampler_create(sp, V, &smp, &err);
    if (!st) st = lean_sampler_accept(smp, prompt, N_PROMPT, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, r->logits, &err);
    if (!st) st = lean_gen_begin(c, smp, max_ids, &err);
    CHECK(st == LEAN_OK, "begin: %s", err.msg);
    if (!st) CHECK(lean_ctx_gen_resident(c) == resident, "resident %d, asked %d", lean_ctx_gen_resident(c), resident);
    while (!st && r->n < MAX_GEN && (k == 0 || r->n < k)) {
        st = lean_gen_next(c, &r->ids[r->n], &err);
        if (!st) r->n++;
    }
    r->end_st = st;
    lean_gen_end(c);
    if (c) r->pos = lean_ctx_pos(c);
    /* continue by hand: decode the last id, then generate a few more */
    if (k && r->n == k) {
        st = lean_decode(c, r->ids[k - 1], r->logits, &err);
        if (!st) st = lean_gen_begin(c, smp, 8, &err);
        while (!st && r->n_more < 8 && !(st = lean_gen_next(c, &r->more[r->n_more], &err))) r->n_more++;
        lean_gen_end(c);
        CHECK(r->n_more == 8, "continuing after %d ids: %s", k, err.msg);
    }
    lean_sampler_free(smp);
    set_resident(c, true);
}

static void run_free(run *r) { free(r->logits); }

/* The resident run equals the host's in every respect. */
static void same_runs(const char *what, const run *a, const run *h, int32_t V) {
    int first = -1;
    for (int i = 0; i < a->n && i < h->n && first < 0; i++)
        if (a->ids[i] != h->ids[i]) first = i;
    CHECK(a->n == h->n && first < 0, "%s: %d resident ids, %d host ids, first difference at %d (%d vs %d)", what,
          a->n, h->n, first, first >= 0 ? a->ids[first] : -1, first >= 0 ? h->ids[first] : -1);
    CHECK(a->pos == h->pos, "%s: position %d after the resident run, %d after the host's", what, a->pos, h->pos);
    CHECK(a->end_st == h->end_st, "%s: ended with %d (resident), %d (host)", what, a->end_st, h->end_st);
    CHECK(memcmp(a->logits, h->logits, sizeof(float) * (size_t)V) == 0, "%s: logits after decoding the last id differ",
          what);
    CHECK(a->n_more == h->n_more && memcmp(a->more, h->more, sizeof a->more) == 0,
          "%s: the continuation differs", what);
}

static lean_sampler_params sampling(int kind) {
    lean_sampler_params p = lean_sampler_default_params();
    p.seed = 1234 + (uint64_t)kind;
    switch (kind) {
    case 0: p.greedy = 1; break;
    case 1: p.temperature = 1.5, p.top_k = 64, p.top_p = 1.0; break;
    case 2: p.temperature = 0.9, p.top_k = 20, p.top_p = 0.9, p.repeat_penalty = 1.3, p.repeat_last_n = 8; break;
    case 3: p.temperature = 0.7, p.top_k = 64, p.top_p = 0.8, p.repeat_penalty = 1.5, p.repeat_last_n = -1; break;
    case 4: p.temperature = 1.2, p.top_k = 0, p.top_p = 0.9, p.repeat_penalty = 1.2; break; /* the wide draw */
    case 5: p.temperature = 0.9, p.top_k = 40, p.top_p = 0.95, p.repeat_penalty = 1.2; break;
    default: p.temperature = 1.1, p.top_k = 0, p.top_p = 0.9; break;
    }
    /* 5 and 6: a logit bias (the capped and the wide draw); ids under every tiny vocabulary */
    static const lean_logit_bias bias[4] = {{2, 3.5f}, {5, -2.0f}, {9, 1.25f}, {13, -0.5f}};
    if (kind >= 5) p.logit_bias = bias, p.n_logit_bias = 4;
    return p;
}

static lean_model *load_tiny(const char *arch, uint32_t type, char *path, size_t cap) {
    lean_error err;
    tiny_spec sp = tiny_default(arch);
    sp.matrix_type = sp.embd_type = type;
    sp.tied = !strcmp(arch, "qwen2");
    tiny_path(path, cap);
    lean_model *m = NULL;
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK && lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s",
          arch, err.msg);
    return m;
}

/* Every sampling kind on each architecture, until max_ids; then stops around the boundaries. */
static void test_against_host(const char *arch, uint32_t type) {
    char path[256], what[96];
    lean_model *m = load_tiny(arch, type, path, sizeof path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    lean_ctx *c = new_ctx(m, 128);
    for (int kind = 0; kind < 7 && c; kind++) {
        lean_sampler_params sp = sampling(kind);
        run a, h;
        gen_run(c, m, &sp, 40, 0, true, &a);
        gen_run(c, m, &sp, 40, 0, false, &h);
        snprintf(what, sizeof what, "%s kind %d, 40 ids", arch, kind);
        same_runs(what, &a, &h, V);
        CHECK(a.n == 40 && a.end_st == LEAN_ERR_ARG, "%s: %d ids, then status %d (want 40, then max_ids)", what, a.n,
              a.end_st);
        run_free(&a), run_free(&h);
        const int stops[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33};
        for (size_t i = 0; kind < 2 && i < sizeof stops / sizeof *stops; i++) { /* greedy and sampled blocks */
            gen_run(c, m, &sp, 0, stops[i], true, &a);
            gen_run(c, m, &sp, 0, stops[i], false, &h);
            snprintf(what, sizeof what, "%s kind %d, stop after %d", arch, kind, stops[i]);
            same_runs(what, &a, &h, V);
            CHECK(a.pos == N_PROMPT + stops[i] - 1, "%s: position %d, want %d", what, a.pos, N_PROMPT + stops[i] - 1);
            run_free(&a), run_free(&h);
        }
    }
    /* kind 5's settings without its bias, then with it: the context's GPU sampler, made with no
     * room for a bias, is made again (else lean_gen_begin fails) */
    for (int with = 0; with < 2 && c; with++) {
        lean_sampler_params sp = sampling(5);
        if (!with) sp.logit_bias = NULL, sp.n_logit_bias = 0;
        run a, h;
        gen_run(c, m, &sp, 40, 0, true, &a);
        gen_run(c, m, &sp, 40, 0, false, &h);
        snprintf(what, sizeof what, "%s kind 5 %s its bias", arch, with ? "with" : "without");
        same_runs(what, &a, &h, V);
        run_free(&a), run_free(&h);
    }
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(path);
}

/* The context's end: draws at positions N_PROMPT .. n_ctx, then CONTEXT_FULL. */
static void test_context_end(void) {
    char path[256];
    lean_model *m = load_tiny("llama", LEAN_TYPE_F32, path, sizeof path);
    if (!m) return;
    const int32_t n_ctx = N_PROMPT + 19;
    lean_ctx *c = new_ctx(m, n_ctx);
    for (int kind = 0; kind < 2 && c; kind++) {
        lean_sampler_params sp = sampling(kind);
        run a, h;
        gen_run(c, m, &sp, 0, 0, true, &a);
        gen_run(c, m, &sp, 0, 0, false, &h);
        same_runs("context end", &a, &h, lean_model_n_vocab(m));
        CHECK(a.n == n_ctx - N_PROMPT + 1 && a.end_st == LEAN_ERR_CONTEXT_FULL && a.pos == n_ctx,
              "context end: %d ids, status %d, position %d (want %d ids, CONTEXT_FULL, %d)", a.n, a.end_st, a.pos,
              n_ctx - N_PROMPT + 1, n_ctx);
        run_free(&a), run_free(&h);
    }
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(path);
}

/* The prefill chunk: the GPU's own (512) when none is asked, never more than the context. */
static void test_batch_default(void) {
    char path[256];
    lean_model *m = load_tiny("llama", LEAN_TYPE_F32, path, sizeof path);
    if (!m) return;
    const struct { int32_t n_ctx, asked, want; } cases[] = {{1024, 0, 512}, {100, 0, 100}, {1024, 7, 7}, {50, 600, 50}};
    for (int i = 0; i < 4; i++) {
        lean_error err;
        lean_ctx *c = NULL;
        lean_ctx_params cp = lean_ctx_default_params();
        cp.backend = "gpu";
        cp.n_ctx = cases[i].n_ctx;
        cp.n_batch = cases[i].asked;
        cp.exact = true;
        CHECK(lean_ctx_create(m, &cp, &c, &err) == LEAN_OK, "gpu ctx: %s", err.msg);
        if (c)
            CHECK(lean_ctx_n_batch(c) == cases[i].want, "n_ctx %d, n_batch %d asked: %d, want %d", cases[i].n_ctx,
                  cases[i].asked, lean_ctx_n_batch(c), cases[i].want);
        lean_ctx_free(c);
    }
    lean_model_free(m);
    unlink(path);
}

/* Misuse, and a device lost mid-generation. */
static void test_errors(void) {
    char path[256];
    lean_error err;
    lean_model *m = load_tiny("qwen3", LEAN_TYPE_F32, path, sizeof path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    lean_ctx *c = new_ctx(m, 64);
    lean_sampler_params sp = sampling(1);
    lean_sampler *smp = NULL, *other = NULL;
    int32_t prompt[N_PROMPT], id;
    tiny_ids(prompt, N_PROMPT, V, 3);
    float *logits = calloc((size_t)V, sizeof(float));
    if (!c || lean_sampler_create(&sp, V, &smp, &err) || lean_sampler_create(&sp, V + 1, &other, &err)) goto out;
    CHECK(lean_prefill(c, prompt, N_PROMPT, NULL, &err) == LEAN_OK, "prefill: %s", err.msg);
    CHECK(lean_gen_begin(c, smp, 0, &err) == LEAN_ERR_ARG && strstr(err.msg, "logits"), "begin without logits: %s",
          err.msg);
    CHECK(lean_gen_next(c, &id, &err) == LEAN_ERR_ARG, "next without begin");
    CHECK(lean_decode(c, prompt[0], logits, &err) == LEAN_OK, "decode: %s", err.msg);
    CHECK(lean_gen_begin(c, other, 0, &err) == LEAN_ERR_ARG, "a sampler of another vocabulary");
    CHECK(lean_gen_begin(c, smp, -1, &err) == LEAN_ERR_ARG, "max_ids -1");
    CHECK(lean_gen_begin(c, smp, 0, &err) == LEAN_OK, "begin: %s", err.msg);
    CHECK(lean_gen_begin(c, smp, 0, &err) == LEAN_ERR_ARG, "begin twice");
    CHECK(lean_prefill(c, prompt, 1, NULL, &err) == LEAN_ERR_ARG, "prefill during a generation");
    CHECK(lean_ctx_truncate(c, 0, &err) == LEAN_ERR_ARG, "truncate during a generation");
    CHECK(lean_gen_next(c, &id, &err) == LEAN_OK, "next: %s", err.msg);
    lean_gpu_lose_device(lean_backend_gpu_device(lean_ctx_backend_state(c)));
    lean_status st = LEAN_OK;
    for (int i = 0; i < 40 && st == LEAN_OK; i++) st = lean_gen_next(c, &id, &err);
    CHECK(st == LEAN_ERR_DEVICE && err.msg[0], "a lost device: status %d '%s'", st, err.msg);
    lean_gen_end(c);
    CHECK(lean_decode(c, id, logits, &err) == LEAN_ERR_DEVICE, "decode after the loss");
out:
    free(logits);
    lean_sampler_free(smp);
    lean_sampler_free(other);
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(path);
}

/* ---- chat ---- */

typedef struct chat_run {
    char text[2][4096];
    int32_t ids[1024];
    int32_t n_ids;
    lean_chat_turn_stats st[2];
} chat_run;

static int on_text(void *user, const char *t, size_t n) {
    char *dst = user;
    size_t have = strlen(dst);
    if (have + n < 4096) memcpy(dst + have, t, n), dst[have + n] = 0;
    return 0;
}

static void chat(const lean_model *m, int kind, const char *stop, lean_grammar *g, bool resident, chat_run *r) {
    lean_error err;
    memset(r, 0, sizeof *r);
    lean_chat_session_params p = lean_chat_session_default_params();
    p.n_ctx = 512;
    p.n_batch = 16;
    p.n_predict = 40;
    p.backend = "gpu";
    p.exact = true;
    p.sampling = sampling(kind);
    p.n_stop = stop ? 1 : 0;
    p.stop = &stop;
    lean_chat_session *s = NULL;
    lean_status st = lean_chat_session_create(m, &p, &s, &err);
    if (s) set_resident((lean_ctx *)lean_chat_session_ctx(s), resident); /* the session's own context */
    if (st == LEAN_OK && g) st = lean_chat_session_set_grammar(s, g, &err);
    const char *user[2] = {"Hello there, how are you?", "And then?"};
    for (int t = 0; t < 2 && st == LEAN_OK; t++) st = lean_chat_turn(s, user[t], on_text, r->text[t], &r->st[t], &err);
    CHECK(st == LEAN_OK, "chat (kind %d, resident %d): %s", kind, resident, err.msg);
    int32_t n = 0;
    const int32_t *ids = s ? lean_chat_session_ids(s, &n) : NULL;
    r->n_ids = n < 1024 ? n : 1024;
    if (ids) memcpy(r->ids, ids, sizeof *ids * (size_t)r->n_ids);
    lean_chat_session_free(s);
}

static void same_chats(const char *what, const chat_run *a, const chat_run *h) {
    for (int t = 0; t < 2; t++) {
        CHECK(!strcmp(a->text[t], h->text[t]), "%s turn %d: replies differ:\n  resident '%s'\n  host     '%s'", what, t,
              a->text[t], h->text[t]);
        CHECK(!memcmp(&a->st[t], &h->st[t], sizeof a->st[t]), "%s turn %d: stats differ (stop %d/%d, %d/%d generated)",
              what, t, a->st[t].stop, h->st[t].stop, a->st[t].n_generated, h->st[t].n_generated);
    }
    CHECK(a->n_ids == h->n_ids && !memcmp(a->ids, h->ids, sizeof *a->ids * (size_t)a->n_ids),
          "%s: resident ids differ (%d vs %d)", what, a->n_ids, h->n_ids);
}

/* A stop string: 3 ASCII bytes of the host's first reply from 60% of its text on (about its
 * 24th id of 40: inside the second greedy block), so the resident run must stop inside a
 * block it has already run past. */
static void cut_stop(const char *text, char *stop) {
    size_t n = strlen(text), i = n * 6 / 10, k = 0;
    while (i < n && (unsigned char)text[i] >= 0x80) i++;
    while (i + k < n && k < 3 && (unsigned char)text[i + k] < 0x80) k++;
    memcpy(stop, text + i, k);
    stop[k] = 0;
}

/* tiny-llama (F32, with a tokenizer and a chat template) of seed, written to a temporary path
 * named name; NULL on failure (a failed check). */
static lean_model *chat_model(const char *name, uint64_t seed, char *path, size_t cap) {
    lean_error err;
    test_tmp_path(path, cap, name);
    lean_gen_params gp = {.preset = "tiny-llama", .recipe = "f32", .seed = seed};
    lean_model *m = NULL;
    if (lean_generate_model(&gp, path, &err) != LEAN_OK || lean_model_load_file(path, &m, &err) != LEAN_OK)
        CHECK(0, "%s: %s", name, err.msg);
    return m;
}

static void test_chat(void) {
    char path[256];
    lean_model *m = chat_model("chat.gguf", 1, path, sizeof path);
    if (!m) return;
    for (int kind = 0; kind < 3; kind++) {
        chat_run *a = malloc(sizeof *a), *h = malloc(sizeof *h);
        chat(m, kind, NULL, NULL, true, a);
        chat(m, kind, NULL, NULL, false, h);
        same_chats(kind ? "sampled chat" : "greedy chat", a, h);
        char stop[4], what[64];
        cut_stop(h->text[0], stop);
        CHECK(h->st[0].n_generated >= 20 && stop[0], "chat kind %d: the first reply (%d ids, '%s') is too short to cut",
              kind, h->st[0].n_generated, h->text[0]);
        if (stop[0]) {
            chat(m, kind, stop, NULL, true, a);
            chat(m, kind, stop, NULL, false, h);
            snprintf(what, sizeof what, "chat kind %d, stop '%s'", kind, stop);
            same_chats(what, a, h);
            CHECK(h->st[0].stop == LEAN_CHAT_STOP_STRING, "%s: the first turn stopped with %d", what, h->st[0].stop);
        }
        free(a), free(h);
    }
    lean_model_free(m);
    unlink(path);
}

/* ---- grammars ---- */

/* What one generation under g saw: ids until an end-of-generation id or a failure. */
typedef struct gram_run {
    int32_t ids[MAX_GEN];
    int n;
    lean_status end_st;
    int32_t pos;
    int complete, resident;
} gram_run;

static void gram_gen(lean_ctx *c, const lean_model *m, lean_grammar *g, const lean_sampler_params *sp, bool resident,
                     gram_run *r) {
    lean_error err = {0};
    const int32_t V = lean_model_n_vocab(m);
    const lean_tokenizer *tok = lean_model_tokenizer(m);
    set_resident(c, resident);
    *r = (gram_run){.end_st = LEAN_OK};
    lean_sampler *smp = NULL;
    int32_t prompt[N_PROMPT];
    tiny_ids(prompt, N_PROMPT, V, 5);
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_grammar_reset(g, &err);
    if (!st) st = lean_sampler_create(sp, V, &smp, &err);
    if (!st) st = lean_sampler_set_grammar(smp, g, &err);
    if (!st) st = lean_sampler_accept(smp, prompt, N_PROMPT, &err);
    float *logits = calloc((size_t)V, sizeof(float));
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    free(logits);
    if (!st) st = lean_gen_begin(c, smp, MAX_GEN, &err);
    CHECK(st == LEAN_OK, "grammar begin: %s", err.msg);
    r->resident = st == LEAN_OK && lean_ctx_gen_resident(c);
    while (!st && r->n < MAX_GEN) {
        st = lean_gen_next(c, &r->ids[r->n], &err);
        if (st) break;
        if (lean_token_is_eog(tok, r->ids[r->n++])) break;
    }
    r->end_st = st;
    lean_gen_end(c);
    r->pos = lean_ctx_pos(c);
    r->complete = lean_grammar_complete(g);
    lean_sampler_free(smp);
    set_resident(c, true);
}

static void same_gram(const char *what, const gram_run *a, const gram_run *h) {
    int first = -1;
    for (int i = 0; i < a->n && i < h->n && first < 0; i++)
        if (a->ids[i] != h->ids[i]) first = i;
    CHECK(a->n == h->n && first < 0, "%s: %d resident ids, %d host ids, first difference at %d", what, a->n, h->n, first);
    CHECK(a->end_st == h->end_st && a->pos == h->pos && a->complete == h->complete,
          "%s: ended %d/%d at position %d/%d, grammar complete %d/%d (resident/host)", what, a->end_st, h->end_st,
          a->pos, h->pos, a->complete, h->complete);
    CHECK(a->resident && !h->resident, "%s: resident %d/%d, want the GPU's draw then the host's", what, a->resident,
          h->resident);
}

static void test_grammar(void) {
    char path[256], what[96];
    lean_error err;
    lean_model *m = chat_model("grammar.gguf", 3, path, sizeof path);
    if (!m) return;
    static const char schema[] = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}, "
                                 "\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"n\", \"ok\"]}";
    static const char dead[] = "root ::= \"a\" [^\\x00-\\U0010FFFF]"; /* nothing continues "a" */
    char *gbnf = NULL;
    lean_grammar *g = NULL, *gd = NULL;
    lean_status st = lean_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err);
    if (!st) st = lean_grammar_create(gbnf, strlen(gbnf), NULL, lean_model_tokenizer(m), &g, &err);
    if (!st) st = lean_grammar_create(dead, strlen(dead), NULL, lean_model_tokenizer(m), &gd, &err);
    CHECK(st == LEAN_OK, "grammars: %s", err.msg);
    lean_ctx *c = st ? NULL : new_ctx(m, 128);
    static const int kinds[] = {0, 2, 4}; /* the argmax tree, the capped draw with a penalty, the wide draw */
    for (int i = 0; i < 3 && c; i++) {
        const lean_sampler_params sp = sampling(kinds[i]);
        gram_run a, h;
        gram_gen(c, m, g, &sp, true, &a);
        gram_gen(c, m, g, &sp, false, &h);
        snprintf(what, sizeof what, "a schema's grammar, kind %d", kinds[i]);
        same_gram(what, &a, &h);
        CHECK(h.end_st == LEAN_OK && h.complete, "%s: the reply ended with %d, grammar complete %d", what, h.end_st,
              h.complete);
        gram_gen(c, m, gd, &sp, true, &a);
        gram_gen(c, m, gd, &sp, false, &h);
        snprintf(what, sizeof what, "a dead end, kind %d", kinds[i]);
        same_gram(what, &a, &h);
        CHECK(h.n == 1 && h.end_st == LEAN_ERR_ARG, "%s: %d ids, status %d (want 1, then LEAN_ERR_ARG)", what, h.n,
              h.end_st);
    }
    if (c) { /* a sampled chat session: both turns held to the schema */
        chat_run *a = malloc(sizeof *a), *h = malloc(sizeof *h);
        chat(m, 1, NULL, g, true, a);
        chat(m, 1, NULL, g, false, h);
        same_chats("chat under a grammar", a, h);
        CHECK(h->st[0].stop == LEAN_CHAT_STOP_EOG && h->text[0][0] == '{', "chat under a grammar: stop %d, reply '%s'",
              h->st[0].stop, h->text[0]);
        free(a), free(h);
    }
    lean_ctx_free(c);
    lean_grammar_free(g);
    lean_grammar_free(gd);
    lean_grammar_text_free(gbnf);
    lean_model_free(m);
    unlink(path);
}

/* ---- profile ---- */

/* n ids generated after the prompt, then the profile per id; the dispatch count parsed. */
static double profiled_ids(lean_ctx *c, lean_sampler *smp, int n, char *text, size_t cap) {
    lean_error err;
    int32_t id;
    lean_status st = lean_gen_begin(c, smp, n, &err);
    for (int i = 0; st == LEAN_OK && i < n; i++) st = lean_gen_next(c, &id, &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "profiled generation: %s", err.msg);
    CHECK(lean_ctx_profile(c, 1, text, cap, &err) == LEAN_OK, "profile: %s", err.msg);
    /* the next generation needs logits: decode the last id, and leave it out of the counts */
    float logits[128];
    char none[1];
    if (lean_decode(c, id, logits, &err) != LEAN_OK) CHECK(0, "decode: %s", err.msg);
    lean_ctx_profile(c, 1, none, sizeof none, NULL);
    double per = -1;
    unsigned long long total = 0;
    long long steps = 0;
    CHECK(sscanf(text, "dispatches %lf per step (%llu in %lld steps)", &per, &total, &steps) == 3,
          "profile text: '%.80s'", text);
    return (double)total;
}

/* The kernel rows' calls, summed (the report's lines "  LABEL CALLS calls ..."). */
static double row_calls(const char *text) {
    double sum = 0, calls;
    char label[64];
    for (const char *l = strchr(text, '\n'); l; l = strchr(l + 1, '\n'))
        if (sscanf(l + 1, " %63s %lf calls", label, &calls) == 2) sum += calls;
    return sum;
}

static void test_profile(bool timestamps) {
    char path[256], text[8192];
    lean_error err;
    lean_model *m = load_tiny("llama", LEAN_TYPE_Q8_0, path, sizeof path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    lean_ctx *c = new_ctx(m, 128); /* not profiling */
    CHECK(c && lean_ctx_profile(c, 1, text, sizeof text, &err) == LEAN_ERR_UNSUPPORTED, "profile without profile");
    lean_ctx_free(c);
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = "cpu-ref";
    cp.profile = true;
    CHECK(lean_ctx_create(m, &cp, &c, &err) == LEAN_OK && lean_ctx_profile(c, 1, text, sizeof text, &err) ==
          LEAN_ERR_UNSUPPORTED, "profile on the CPU");
    lean_ctx_free(c);
    c = NULL;
    cp.backend = "gpu", cp.n_ctx = 128, cp.n_batch = 8, cp.exact = true; /* new_ctx's, profiled */
    CHECK(lean_ctx_create(m, &cp, &c, &err) == LEAN_OK, "profiled gpu ctx: %s", err.msg);
    lean_sampler_params sp = sampling(0);
    lean_sampler *smp = NULL;
    int32_t prompt[N_PROMPT];
    tiny_ids(prompt, N_PROMPT, V, 3);
    float *logits = calloc((size_t)V, sizeof(float));
    if (c && lean_sampler_create(&sp, V, &smp, &err) == LEAN_OK &&
        lean_prefill(c, prompt, N_PROMPT, logits, &err) == LEAN_OK) {
        CHECK(lean_ctx_profile(c, 1, text, sizeof text, &err) == LEAN_OK && strstr(text, "dispatches"),
              "profile after a prefill: '%s'", text);
        /* 1 id is one draw; 17 are 16 (decode + draw) steps more, whatever the blocks: the
         * difference is 16 steps' dispatches, a multiple of 16 */
        profiled_ids(c, smp, 1, text, sizeof text); /* the first also checks the adapter's draw */
        const double one = profiled_ids(c, smp, 1, text, sizeof text);
        const double seventeen = profiled_ids(c, smp, 17, text, sizeof text);
        const double per_step = (seventeen - one) / 16;
        CHECK(one > 0 && per_step == (double)(long long)per_step && per_step > one,
              "dispatches: %g for 1 id, %g for 17 (%g a step)", one, seventeen, per_step);
        CHECK(!timestamps || strstr(text, "GPU time"), "timed kernels on a timestamp adapter: '%s'", text);
        CHECK(!timestamps || row_calls(text) == seventeen, "the kernel rows count %g calls, %g dispatches ran",
              row_calls(text), seventeen);
        CHECK(timestamps || strstr(text, "no kernel times"), "no timestamps: said so: '%s'", text);
    } else {
        CHECK(0, "profile set-up: %s", err.msg);
    }
    free(logits);
    lean_sampler_free(smp);
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(path);
}

int main(void) {
    lean_gpu *g = test_gpu_open("test_gpu_gen");
    if (!g) return test_finish("test_gpu_gen");
    const bool timestamps = test_gpu_variant(g, "timestamps");
    lean_gpu_close(g);
    test_profile(timestamps);
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) test_against_host(archs[a], LEAN_TYPE_F32);
    test_against_host("llama", LEAN_TYPE_Q4_0);
    test_context_end();
    test_batch_default();
    test_errors();
    test_chat();
    test_grammar();
    return test_finish("test_gpu_gen");
}
