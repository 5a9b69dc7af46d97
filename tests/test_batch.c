/* test_batch.c — lean_decode_batch (src/core/session.c; the batched passes of the CPU kernels
 * in src/cpu/forward.c and of the GPU in src/gpu/forward_batch.c): several sequences of one model advanced together, each at its own
 * position over its own KV cache, held to three things:
 *
 *   same bits   a sequence's logits after every batched step are the bits of the same steps
 *               decoded alone (lean_decode), whatever else is in the batch: N_SEQ prompts of
 *               different lengths (so different positions, one past a block of 32 keys; the
 *               tiny models share a KV head between 2 query heads), sequences joining after their own
 *               prefill between steps and leaving early (continuous batching), ctx[0]'s
 *               n_batch smaller than the batch (split into passes), ctx[0] with another thread
 *               count; on "cpu" (8-bit activations), "cpu" exact, every CPU table this CPU
 *               runs exact, "cpu-ref", and the GPU's exact path (Dawn; LEAN_TEST_GPU=0 skips
 *               it, saying so) on the Q4_0 llama, the Q8_0 qwen2 (biases; ctx[0]'s n_batch 2:
 *               passes of 2 rows) and the Q4_K qwen3 (q/k norms: no q|k|v epilogue), where
 *               every row must have gone through a batched pass (test_hooks.h counts them),
 *               and a GPU pass of 19 rows (many pages and workgroups in z, no power of two),
 *               and 12 GPU contexts made with lean_ctx_params.n_seq = 12 in one KV page,
 *               their pass one attention a layer (without it: one a page; test_hooks.h),
 *               n_seq past a page's 64 slots clamped, a negative one refused,
 *               and a batch with a LoRA adapter (the parity llama's) row by row, the bits of
 *               each context alone (and its generations, each row stepping alone inside
 *               lean_gen_next_batch one step ahead, the ids of lean_gen_next alone);
 *               for Q4_0, Q8_0, Q4_K, F16 tiny models of the three architectures;
 *   same reply  a seeded sampled reply drawn from the batch's logits (lean_sampler_sample)
 *               is the reply lean_gen_* gives the sequence alone (the draw on the GPU for the
 *               GPU backend);
 *   run-ahead   lean_gen_next_batch's ids beside a step already queued (the GPU submits each
 *               unmasked row's next step before it waits): a generation ended mid-batch and
 *               continued by hand (its logits alone's), begun again and rejoining, one stepping
 *               alone between batched calls, one stopping at its max_ids; ids equal alone's,
 *               and every GPU row one step ahead after each call, each batched step's ids
 *               read back through one map whatever its rows (test_hooks.h); a device lost
 *               with that read-back in flight, a clear LEAN_ERR_DEVICE;
 *   sampler mix lean_gen_next_batch over rows of different samplers (greedy, top-k, a grammar's
 *               mask, a repeat penalty, top-k with another seed; one stepping alone between
 *               calls): each row's ids are its own alone (on the GPU some rows share one draw);
 *   refusals    NULL, n < 1, a context twice, another model, another backend, another
 *               setting (exact beside not, another table; GPU contexts on two devices), a
 *               generation in progress, a full context, an id outside the vocabulary: each a
 *               clear error that changes nothing.
 *
 * lean-test: native-only (CI time: the batched passes are C, the same in every build,
 * and each kernel's independence from the tokens alongside is test_kernels', which wasm runs) */
#include "dev/lean_dev.h"
#include "core/test_hooks.h"
#include "gpu/test_hooks.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_SEQ 5
#define N_STEPS 6 /* batched steps */
#define N_CTX 64

/* When each sequence joins (the step before which it is prefilled) and leaves (after its last
 * step): 0, 2 join late, 1, 4 leave early, so every step's batch is another mix. */
static const int join_at[N_SEQ] = {0, 2, 0, 3, 0};
static const int leave_at[N_SEQ] = {N_STEPS, N_STEPS, 4, N_STEPS, 3};
/* 3's steps cross position 32 (forward.c's blocks of keys: ATTN_KB) with the others alongside. */
#define MAX_PROMPT 30
static const int prompt_len[N_SEQ] = {3, 7, 1, MAX_PROMPT, 5};

typedef struct run_cfg {
    const char *backend;
    bool exact;
    int32_t threads0; /* ctx[0]'s threads (the pass's); the others get 1 */
    int32_t n_batch0; /* ctx[0]'s n_batch: fewer than the batch splits it into passes */
} run_cfg;

static lean_ctx *new_ctx(const lean_model *m, const run_cfg *rc, int32_t threads, int32_t n_batch) {
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = rc->backend;
    p.exact = rc->exact;
    p.n_threads = threads;
    p.n_batch = n_batch;
    p.n_ctx = N_CTX;
    lean_ctx *c = NULL;
    lean_error err = {0};
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_OK, "%s (exact %d): %s", rc->backend, rc->exact, err.msg);
    return c;
}

static void prompt_of(int s, int32_t V, int32_t *ids) {
    for (int i = 0; i < prompt_len[s]; i++) ids[i] = (int32_t)((s * 31 + i * 7 + 3) % V);
}

/* The id fed at step k of sequence s: a fixed walk (not drawn, so a wrong logit cannot hide
 * behind an equal argmax). */
static int32_t id_at(int s, int k, int32_t V) { return (int32_t)((s * 13 + k * 29 + 5) % V); }

/* logits[s][k]: sequence s's logits after its prompt (k = 0) and after step k's id (k >= 1),
 * decoded alone; sequence 0 with the batched ctx[0]'s n_batch, whose prompt is then prefilled
 * in the same chunks (the GPU's prefill rounds by a chunk's length: tiled, or decode's kernel). */
static bool run_alone(const lean_model *m, const run_cfg *rc, int32_t V, float *logits) {
    bool ok = true;
    for (int s = 0; ok && s < N_SEQ; s++) {
        lean_ctx *c = new_ctx(m, rc, 1, s == 0 ? rc->n_batch0 : 0);
        if (!c) return false;
        int32_t ids[MAX_PROMPT];
        prompt_of(s, V, ids);
        lean_error err = {0};
        float *row = logits + (size_t)s * (N_STEPS + 1) * (size_t)V;
        ok = lean_prefill(c, ids, prompt_len[s], row, &err) == LEAN_OK;
        for (int k = join_at[s]; ok && k < leave_at[s]; k++)
            ok = lean_decode(c, id_at(s, k, V), row + (size_t)(k + 1) * (size_t)V, &err) == LEAN_OK;
        CHECK(ok, "%s alone, sequence %d: %s", rc->backend, s, err.msg);
        lean_ctx_free(c);
    }
    return ok;
}

/* The same steps, batched: before step k the sequences joining at k are prefilled; step k
 * decodes every sequence in [join_at, leave_at) together. Compares with alone's bits. */
static void run_batched(const lean_model *m, const run_cfg *rc, int32_t V, const float *alone, const char *what) {
    lean_ctx *ctx[N_SEQ] = {0};
    float *batch = malloc(sizeof(float) * N_SEQ * (size_t)V), *first = malloc(sizeof(float) * (size_t)V);
    lean_error err = {0};
    int mismatches = 0, rows = 0;
    for (int s = 0; s < N_SEQ; s++) {
        /* ctx[0] (the pass's threads and scratch) is whichever joins first: sequence 0 */
        ctx[s] = new_ctx(m, rc, s == 0 ? rc->threads0 : 1, s == 0 ? rc->n_batch0 : 0);
        if (!ctx[s]) goto done;
    }
    for (int k = 0; k < N_STEPS; k++) {
        lean_ctx *in[N_SEQ];
        int32_t ids[N_SEQ];
        int which[N_SEQ], n = 0;
        for (int s = 0; s < N_SEQ; s++) {
            if (k == join_at[s]) { /* a new request: its prefill between steps */
                int32_t p[MAX_PROMPT];
                prompt_of(s, V, p);
                CHECK(lean_prefill(ctx[s], p, prompt_len[s], first, &err) == LEAN_OK, "%s", err.msg);
                mismatches += memcmp(first, alone + (size_t)s * (N_STEPS + 1) * (size_t)V, sizeof(float) * (size_t)V) != 0;
            }
            if (k >= join_at[s] && k < leave_at[s]) in[n] = ctx[s], ids[n] = id_at(s, k, V), which[n++] = s;
        }
        if (!n) continue;
        const lean_status st = lean_decode_batch(in, ids, n, batch, &err);
        CHECK(st == LEAN_OK, "%s: step %d of %d sequences: %s", what, k, n, err.msg);
        if (st != LEAN_OK) goto done;
        for (int i = 0; i < n; i++, rows++) {
            const int s = which[i];
            const float *want = alone + ((size_t)s * (N_STEPS + 1) + (size_t)k + 1) * (size_t)V;
            if (memcmp(batch + (size_t)i * (size_t)V, want, sizeof(float) * (size_t)V)) {
                if (!mismatches) fprintf(stderr, "%s: step %d, sequence %d (row %d of %d) differs\n", what, k, s, i, n);
                mismatches++;
            }
            CHECK(lean_ctx_pos(ctx[s]) == prompt_len[s] + k - join_at[s] + 1, "%s: sequence %d at %d", what, s,
                  lean_ctx_pos(ctx[s]));
        }
    }
    CHECK(mismatches == 0, "%s: %d of %d batched rows are not the bits decoded alone", what, mismatches, rows);
    if (!strcmp(rc->backend, "gpu")) { /* in passes, not one context after another */
        int64_t led = 0;
        for (int s = 0; s < N_SEQ; s++) led += lean_backend_gpu_batch_rows(lean_ctx_backend_state(ctx[s]));
        CHECK(led == rows, "%s: %lld of %d rows went through a batched pass", what, (long long)led, rows);
    }
done:
    for (int s = 0; s < N_SEQ; s++) lean_ctx_free(ctx[s]);
    free(batch), free(first);
}

/* A seeded sampled reply of n_ids: alone through lean_gen_*, and batched (with the other
 * sequences alongside, each drawing from its row with lean_sampler_sample). */
#define N_REPLY 12
static void test_reply(const lean_model *m, const run_cfg *rc, int32_t V, const char *what) {
    int32_t alone[N_SEQ][N_REPLY], got[N_SEQ][N_REPLY];
    lean_sampler_params sp = lean_sampler_default_params();
    sp.temperature = 1.5;
    sp.repeat_penalty = 1.1;
    lean_error err = {0};
    lean_ctx *ctx[N_SEQ] = {0};
    lean_sampler *smp[N_SEQ] = {0};
    float *logits = malloc(sizeof(float) * N_SEQ * (size_t)V), *one_logits = malloc(sizeof(float) * (size_t)V);
    bool ok = true;
    for (int s = 0; ok && s < N_SEQ; s++) {
        int32_t p[MAX_PROMPT];
        prompt_of(s, V, p);
        sp.seed = 1000 + (uint64_t)s;
        lean_ctx *c = new_ctx(m, rc, 1, 0);
        lean_sampler *one = NULL;
        ok = c && lean_sampler_create(&sp, V, &one, &err) == LEAN_OK &&
             lean_sampler_accept(one, p, prompt_len[s], &err) == LEAN_OK &&
             lean_prefill(c, p, prompt_len[s], one_logits, &err) == LEAN_OK &&
             lean_gen_begin(c, one, N_REPLY, &err) == LEAN_OK;
        for (int i = 0; ok && i < N_REPLY; i++) ok = lean_gen_next(c, &alone[s][i], &err) == LEAN_OK;
        if (c) lean_gen_end(c);
        lean_ctx_free(c);
        lean_sampler_free(one);
        /* the batched one's context and sampler, prefilled */
        ctx[s] = new_ctx(m, rc, 1, 0);
        ok = ok && ctx[s] && lean_sampler_create(&sp, V, &smp[s], &err) == LEAN_OK &&
             lean_sampler_accept(smp[s], p, prompt_len[s], &err) == LEAN_OK &&
             lean_prefill(ctx[s], p, prompt_len[s], logits + (size_t)s * (size_t)V, &err) == LEAN_OK;
    }
    CHECK(ok, "%s: %s", what, err.msg);
    for (int i = 0; ok && i < N_REPLY; i++) {
        int32_t ids[N_SEQ];
        for (int s = 0; ok && s < N_SEQ; s++)
            ok = lean_sampler_sample(smp[s], logits + (size_t)s * (size_t)V, lean_ctx_pos(ctx[s]), NULL, &ids[s],
                                     &err) == LEAN_OK &&
                 lean_sampler_accept(smp[s], &ids[s], 1, &err) == LEAN_OK;
        for (int s = 0; s < N_SEQ; s++) got[s][i] = ids[s];
        if (ok && i + 1 < N_REPLY) ok = lean_decode_batch(ctx, ids, N_SEQ, logits, &err) == LEAN_OK;
        CHECK(ok, "%s: step %d: %s", what, i, err.msg);
    }
    if (ok) CHECK(!memcmp(alone, got, sizeof alone), "%s: a batched seeded reply differs from lean_gen's alone", what);
    for (int s = 0; s < N_SEQ; s++) lean_ctx_free(ctx[s]), lean_sampler_free(smp[s]);
    free(logits), free(one_logits);
}

/* lean_gen_next_batch: N_SEQ generations, each its own sampler settings (greedy; temperature
 * with top-k and a logit bias; top-p; a repeat penalty and another bias; a high temperature), joining at different steps (each
 * prefilled, lean_gen_begin, then in the next call), leaving early (lean_gen_end) or at their
 * max_ids; on the GPU one sequence first runs ahead alone (lean_gen_next queues steps) before it
 * joins. Every sequence's ids are those of lean_gen_next alone with the same settings; on the
 * GPU the rows past their first draw went through the batched pass. */
#define GEN_IDS 10
static const int gen_join[N_SEQ] = {0, 0, 2, 3, 1}, gen_stop[N_SEQ] = {GEN_IDS, 6, GEN_IDS, 5, GEN_IDS};
static lean_sampler_params gen_params(int s) {
    static const lean_logit_bias b1[2] = {{3, 2.5f}, {7, -1.5f}}, b3[3] = {{1, 4.0f}, {2, 0.75f}, {9, -3.0f}};
    lean_sampler_params sp = lean_sampler_default_params();
    sp.seed = 500 + (uint64_t)s;
    if (s == 0) sp.greedy = 1;
    if (s == 1) sp.temperature = 0.9, sp.top_k = 5, sp.top_p = 1.0, sp.logit_bias = b1, sp.n_logit_bias = 2;
    if (s == 3) sp.logit_bias = b3, sp.n_logit_bias = 3; /* each row its own bias, as its own penalty */
    if (s == 2) sp.temperature = 1.0, sp.top_k = 0, sp.top_p = 0.7;
    if (s == 3) sp.temperature = 0.7, sp.repeat_penalty = 1.3;
    if (s == 4) sp.temperature = 2.0, sp.top_k = 0;
    return sp;
}

static void test_gen_batch(const lean_model *m, const run_cfg *rc, int32_t V, const char *what) {
    int32_t alone[N_SEQ][GEN_IDS], got[N_SEQ][GEN_IDS];
    int n_got[N_SEQ] = {0};
    lean_error err = {0};
    lean_ctx *ctx[N_SEQ] = {0};
    lean_sampler *smp[N_SEQ] = {0};
    float *first = malloc(sizeof(float) * (size_t)V); /* a prefill's logits: what lean_gen_begin draws from */
    bool ok = first != NULL;
    const bool gpu = !strcmp(rc->backend, "gpu");
    for (int s = 0; ok && s < N_SEQ; s++) { /* alone */
        int32_t p[MAX_PROMPT];
        prompt_of(s, V, p);
        const lean_sampler_params sp = gen_params(s);
        lean_ctx *c = new_ctx(m, rc, 1, 0);
        lean_sampler *one = NULL;
        ok = c && lean_sampler_create(&sp, V, &one, &err) == LEAN_OK &&
             lean_sampler_accept(one, p, prompt_len[s], &err) == LEAN_OK &&
             lean_prefill(c, p, prompt_len[s], first, &err) == LEAN_OK && lean_gen_begin(c, one, 0, &err) == LEAN_OK;
        for (int i = 0; ok && i < gen_stop[s]; i++) ok = lean_gen_next(c, &alone[s][i], &err) == LEAN_OK;
        if (c) lean_gen_end(c);
        lean_ctx_free(c);
        lean_sampler_free(one);
    }
    CHECK(ok, "%s alone: %s", what, err.msg);
    for (int k = 0; ok && k < GEN_IDS + 3; k++) { /* sequence 2 joins at 2: 10 calls from there */
        lean_ctx *in[N_SEQ];
        int which[N_SEQ], n = 0;
        for (int s = 0; ok && s < N_SEQ; s++) {
            if (k == gen_join[s]) {
                int32_t p[MAX_PROMPT];
                prompt_of(s, V, p);
                const lean_sampler_params sp = gen_params(s);
                ctx[s] = new_ctx(m, rc, 1, 0);
                ok = ctx[s] && lean_sampler_create(&sp, V, &smp[s], &err) == LEAN_OK &&
                     lean_sampler_accept(smp[s], p, prompt_len[s], &err) == LEAN_OK &&
                     lean_prefill(ctx[s], p, prompt_len[s], first, &err) == LEAN_OK &&
                     lean_gen_begin(ctx[s], smp[s], s == 3 ? gen_stop[s] : 0, &err) == LEAN_OK;
                /* sequence 4 runs ahead alone first: its first two ids through lean_gen_next */
                for (int i = 0; ok && s == 4 && i < 2; i++) ok = lean_gen_next(ctx[s], &got[s][n_got[s]++], &err) == LEAN_OK;
            }
            if (ctx[s] && n_got[s] < gen_stop[s]) in[n] = ctx[s], which[n++] = s;
        }
        int32_t ids[N_SEQ];
        ok = ok && (!n || lean_gen_next_batch(in, n, ids, &err) == LEAN_OK);
        for (int i = 0; ok && i < n; i++) {
            const int s = which[i];
            got[s][n_got[s]++] = ids[i];
            if (n_got[s] == gen_stop[s] && s != 3) lean_gen_end(ctx[s]); /* 3 stops at its max_ids */
        }
    }
    CHECK(ok, "%s batched: %s", what, err.msg);
    int32_t id;
    if (ok) CHECK(lean_gen_next_batch(&ctx[3], 1, &id, &err) == LEAN_ERR_ARG && strstr(err.msg, "ctx[0]'s 5 ids"),
                  "%s: past max_ids: %s", what, err.msg);
    for (int s = 0; ok && s < N_SEQ; s++)
        CHECK(n_got[s] == gen_stop[s] && !memcmp(alone[s], got[s], sizeof(int32_t) * (size_t)gen_stop[s]),
              "%s: sequence %d's batched ids differ from lean_gen_next's alone", what, s);
    int64_t led = 0;
    for (int s = 0; gpu && s < N_SEQ; s++) led += ctx[s] ? lean_backend_gpu_batch_rows(lean_ctx_backend_state(ctx[s])) : 0;
    CHECK(!gpu || !ok || led >= 20, "%s: %lld rows went through a batched pass", what, (long long)led);
    for (int s = 0; s < N_SEQ; s++) lean_ctx_free(ctx[s]), lean_sampler_free(smp[s]);
    free(first);
}

/* The GPU's run-ahead (forward_batch.c, "generation, batched"): after a batched call every row not
 * masked with ids left has its next step submitted, so what the caller does between calls meets
 * a step in flight. RA_CALLS calls over three sequences, each call's script the same batched and
 * alone (lean_gen_next in place of each batched call): sequence 0 (greedy) ends after RA_END's
 * call (an EOS or a cancel: lean_gen_end drops its step), decodes its last id by hand (the logits
 * must be those alone), begins again and rejoins; sequence 1 steps alone with lean_gen_next
 * between batched calls (its queued step served first) and rejoins; sequence 2 joins late and
 * stops at its max_ids (nothing may run past them). Ids and logits equal alone's; on the GPU
 * lean_backend_gpu_gen_ahead shows every batched row one step ahead until its max_ids. */
#define RA_CALLS 8
#define RA_END 3
#define RA_MAX 4 /* sequence 2's max_ids */
enum { RA_NONE, RA_BATCH, RA_ALONE };
static int ra_action(int q, int k) {
    if (q == 1 && (k == 3 || k == 4)) return RA_ALONE;
    if (q == 2) return k >= 2 && k < 2 + RA_MAX ? RA_BATCH : RA_NONE;
    return RA_BATCH;
}

/* One run of the script; batched false: every RA_BATCH as lean_gen_next. ids[q][...] the ids in
 * order (n[q] of them), logits: sequence 0's after its last id decoded by hand. *behind: batched
 * GPU rows found not one step ahead; *maps_off: batched GPU calls whose read-back maps were not
 * one per batched step (one for the rows with none queued, one for the run-ahead). */
static bool ra_run(const lean_model *m, const run_cfg *rc, int32_t V, bool batched, int32_t ids[3][RA_CALLS],
                   int n[3], float *logits, int *behind, int *maps_off) {
    static const int param[3] = {0, 1, 3};
    lean_ctx *ctx[3] = {0};
    lean_sampler *smp[3] = {0};
    lean_error err = {0};
    bool ok = true;
    const bool gpu = batched && !strcmp(rc->backend, "gpu");
    for (int k = 0; ok && k < RA_CALLS; k++) {
        lean_ctx *in[3];
        int which[3], b = 0;
        for (int q = 0; ok && q < 3; q++) {
            const int act = ra_action(q, k);
            if (act != RA_NONE && !ctx[q]) { /* joins: prefilled, begun */
                int32_t p[MAX_PROMPT];
                prompt_of(param[q], V, p);
                const lean_sampler_params sp = gen_params(param[q]);
                ctx[q] = new_ctx(m, rc, 1, 0);
                ok = ctx[q] && lean_sampler_create(&sp, V, &smp[q], &err) == LEAN_OK &&
                     lean_sampler_accept(smp[q], p, prompt_len[param[q]], &err) == LEAN_OK &&
                     lean_prefill(ctx[q], p, prompt_len[param[q]], logits, &err) == LEAN_OK &&
                     lean_gen_begin(ctx[q], smp[q], q == 2 ? RA_MAX : 0, &err) == LEAN_OK;
            }
            if (ok && (act == RA_ALONE || (act == RA_BATCH && !batched)))
                ok = lean_gen_next(ctx[q], &ids[q][n[q]++], &err) == LEAN_OK;
            else if (act == RA_BATCH) in[b] = ctx[q], which[b++] = q;
        }
        int32_t got[3], ahead[3] = {0};
        lean_gpu *dev = gpu && b ? lean_backend_gpu_device(lean_ctx_backend_state(in[0])) : NULL;
        for (int i = 0; dev && i < b; i++) ahead[i] = lean_backend_gpu_gen_ahead(lean_ctx_backend_state(in[i]));
        const uint64_t maps0 = dev ? lean_gpu_map_count(dev) : 0;
        ok = ok && (!b || lean_gen_next_batch(in, b, got, &err) == LEAN_OK);
        for (int i = 0; ok && i < b; i++) ids[which[i]][n[which[i]]++] = got[i];
        bool first = false, after = false; /* a step for the rows with none queued; the run-ahead */
        for (int i = 0; ok && gpu && i < b; i++) { /* one step ahead, none past max_ids */
            const int32_t now = lean_backend_gpu_gen_ahead(lean_ctx_backend_state(in[i]));
            *behind += now != (which[i] == 2 && n[2] == RA_MAX ? 0 : 1);
            first |= ahead[i] == 0, after |= ahead[i] <= 1 && now == 1;
        }
        if (ok && dev) /* each batched step reads its rows' ids back through one map */
            *maps_off += lean_gpu_map_count(dev) - maps0 != (uint64_t)first + after;
        if (ok && k == RA_END) { /* sequence 0 stops, continues by hand, begins again */
            lean_gen_end(ctx[0]);
            ok = lean_decode(ctx[0], ids[0][n[0] - 1], logits, &err) == LEAN_OK &&
                 lean_gen_begin(ctx[0], smp[0], 0, &err) == LEAN_OK;
        }
    }
    CHECK(ok, "run-ahead %s, %s: %s", rc->backend, batched ? "batched" : "alone", err.msg);
    for (int q = 0; q < 3; q++) {
        if (ctx[q]) lean_gen_end(ctx[q]);
        lean_ctx_free(ctx[q]), lean_sampler_free(smp[q]);
    }
    return ok;
}

static void test_gen_runahead(const lean_model *m, const run_cfg *rc, int32_t V, const char *what) {
    int32_t alone[3][RA_CALLS], got[3][RA_CALLS];
    int n_alone[3] = {0}, n_got[3] = {0}, behind = 0, maps_off = 0;
    float *want = malloc(sizeof(float) * (size_t)V), *logits = malloc(sizeof(float) * (size_t)V);
    if (want && logits && ra_run(m, rc, V, false, alone, n_alone, want, &behind, &maps_off) &&
        ra_run(m, rc, V, true, got, n_got, logits, &behind, &maps_off)) {
        for (int q = 0; q < 3; q++)
            CHECK(n_got[q] == n_alone[q] && !memcmp(alone[q], got[q], sizeof(int32_t) * (size_t)n_got[q]),
                  "%s: run-ahead sequence %d's ids differ from alone's", what, q);
        CHECK(!memcmp(want, logits, sizeof(float) * (size_t)V),
              "%s: the logits of the last id decoded by hand after lean_gen_end differ from alone's", what);
        CHECK(behind == 0, "%s: %d batched rows were not one step ahead (or ran past max_ids)", what, behind);
        CHECK(maps_off == 0, "%s: %d lean_gen_next_batch calls made other than one read-back map a batched step",
              what, maps_off);
    }
    free(want), free(logits);
}

/* lean_gen_next_batch over a mix of samplers in one batch, on a model with a tokenizer (a
 * grammar needs one): greedy; seeded top-k; a grammar's mask (a JSON schema's, seeded); a repeat
 * penalty over a short window; the top-k row's settings with another seed. A batched draw that
 * read another row's settings, seed, window or mask would give other ids than the row alone
 * (lean_gen_next); each row stops at an end-of-generation id or MIX_IDS. Row 1 steps alone for two
 * calls in between (its sampler's position then its own again: gpu_gen.behind). */
#define MIX_ROWS 5
#define MIX_IDS 12
static lean_sampler_params mix_params(int r) {
    lean_sampler_params sp = lean_sampler_default_params();
    sp.seed = 11 + 11 * (uint64_t)r;
    if (r == 0) sp.greedy = 1;
    if (r == 3) sp.repeat_penalty = 1.5, sp.repeat_last_n = 4, sp.temperature = 1.2;
    if (r == 4) sp.seed = 101;
    return sp;
}

/* Row r's sampler (under g when r is the masked row) and its prefilled, begun context. */
static lean_ctx *mix_begin(const lean_model *m, const run_cfg *rc, int r, lean_grammar *g, lean_sampler **smp,
                           lean_error *err) {
    const int32_t V = lean_model_n_vocab(m);
    int32_t p[MAX_PROMPT];
    prompt_of(r, V, p);
    const lean_sampler_params sp = mix_params(r);
    lean_ctx *c = new_ctx(m, rc, 1, 0);
    float *logits = malloc(sizeof(float) * (size_t)V);
    bool ok = c && logits && lean_sampler_create(&sp, V, smp, err) == LEAN_OK &&
              (r != 2 || (lean_grammar_reset(g, err) == LEAN_OK && lean_sampler_set_grammar(*smp, g, err) == LEAN_OK)) &&
              lean_sampler_accept(*smp, p, prompt_len[r], err) == LEAN_OK &&
              lean_prefill(c, p, prompt_len[r], logits, err) == LEAN_OK && lean_gen_begin(c, *smp, MIX_IDS, err) == LEAN_OK;
    free(logits);
    if (ok) return c;
    lean_ctx_free(c);
    return NULL;
}

static void test_gen_mix(const run_cfg *rc) {
    char path[256], what[64];
    lean_error err = {0};
    snprintf(what, sizeof what, "sampler mix, %s", rc->backend);
    test_tmp_path(path, sizeof path, "mix.gguf");
    lean_gen_params gp = {.preset = "tiny-llama", .recipe = "f32", .seed = 5};
    lean_model *m = NULL;
    if (lean_generate_model(&gp, path, &err) != LEAN_OK || lean_model_load_file(path, &m, &err) != LEAN_OK) {
        CHECK(0, "%s: the model: %s", what, err.msg);
        return;
    }
    static const char schema[] = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}, "
                                 "\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"n\", \"ok\"]}";
    const lean_tokenizer *tok = lean_model_tokenizer(m);
    char *gbnf = NULL;
    lean_grammar *g = NULL;
    bool ok = lean_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err) == LEAN_OK &&
              lean_grammar_create(gbnf, strlen(gbnf), NULL, tok, &g, &err) == LEAN_OK;
    int32_t alone[MIX_ROWS][MIX_IDS], got[MIX_ROWS][MIX_IDS];
    int n_alone[MIX_ROWS] = {0}, n_got[MIX_ROWS] = {0};
    for (int r = 0; ok && r < MIX_ROWS; r++) { /* each row alone */
        lean_sampler *smp = NULL;
        lean_ctx *c = mix_begin(m, rc, r, g, &smp, &err);
        ok = c != NULL;
        while (ok && n_alone[r] < MIX_IDS) {
            ok = lean_gen_next(c, &alone[r][n_alone[r]], &err) == LEAN_OK;
            if (ok && lean_token_is_eog(tok, alone[r][n_alone[r]++])) break;
        }
        if (c) lean_gen_end(c);
        lean_ctx_free(c);
        lean_sampler_free(smp);
    }
    CHECK(ok, "%s alone: %s", what, err.msg);
    lean_ctx *ctx[MIX_ROWS] = {0};
    lean_sampler *smp[MIX_ROWS] = {0};
    for (int r = 0; ok && r < MIX_ROWS; r++) ok = (ctx[r] = mix_begin(m, rc, r, g, &smp[r], &err)) != NULL;
    bool live[MIX_ROWS];
    for (int r = 0; r < MIX_ROWS; r++) live[r] = ok;
    for (int k = 0; ok && k < MIX_IDS; k++) { /* every row together until it ends */
        lean_ctx *in[MIX_ROWS];
        int which[MIX_ROWS], n = 0;
        for (int r = 0; ok && r < MIX_ROWS; r++) {
            if (live[r] && r == 1 && (k == 4 || k == 5)) { /* alone between batched calls (its step queued) */
                ok = lean_gen_next(ctx[r], &got[r][n_got[r]], &err) == LEAN_OK;
                if (ok && lean_token_is_eog(tok, got[r][n_got[r]++])) live[r] = false, lean_gen_end(ctx[r]);
            } else if (live[r]) {
                in[n] = ctx[r], which[n++] = r;
            }
        }
        int32_t ids[MIX_ROWS];
        ok = !n || lean_gen_next_batch(in, n, ids, &err) == LEAN_OK;
        for (int i = 0; ok && i < n; i++) {
            const int r = which[i];
            got[r][n_got[r]++] = ids[i];
            if (n_got[r] == MIX_IDS || lean_token_is_eog(tok, ids[i])) live[r] = false, lean_gen_end(ctx[r]);
        }
    }
    CHECK(ok, "%s batched: %s", what, err.msg);
    for (int r = 0; ok && r < MIX_ROWS; r++)
        CHECK(n_got[r] == n_alone[r] && !memcmp(alone[r], got[r], sizeof(int32_t) * (size_t)n_got[r]),
              "%s: row %d's batched ids (%d) differ from lean_gen_next's alone (%d)", what, r, n_got[r], n_alone[r]);
    CHECK(!ok || memcmp(alone[1], alone[4], sizeof alone[1]) || n_alone[1] != n_alone[4],
          "%s: rows 1 and 4 (seeds apart) drew the same ids: the check cannot tell their seeds apart", what);
    for (int r = 0; r < MIX_ROWS; r++) lean_ctx_free(ctx[r]), lean_sampler_free(smp[r]);
    lean_grammar_free(g);
    lean_grammar_text_free(gbnf);
    lean_model_free(m);
    unlink(path);
}

/* ---- refusals ---- */

static void test_refusals(const lean_model *m, const lean_model *other, int32_t V) {
    const run_cfg cpu = {"cpu", false, 1, 0}, cpu_exact = {"cpu", true, 1, 0}, ref = {"cpu-ref", false, 1, 0},
                  generic = {"cpu-generic", false, 1, 0};
    lean_ctx *a = new_ctx(m, &cpu, 1, 0), *b = new_ctx(m, &cpu, 1, 0), *ex = new_ctx(m, &cpu_exact, 1, 0),
             *r = new_ctx(m, &ref, 1, 0), *o = new_ctx(other, &cpu, 1, 0), *gen = new_ctx(m, &generic, 1, 0);
    if (!a || !b || !ex || !r || !o || !gen) goto done;
    lean_error err = {0};
    const int32_t p[] = {1, 2, 3};
    CHECK(lean_prefill(a, p, 3, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_prefill(b, p, 2, NULL, &err) == LEAN_OK, "%s", err.msg);
    struct {
        lean_ctx *c[2];
        int32_t ids[2];
        int n;
        lean_status want;
        const char *says;
    } cases[] = {
        {{a, b}, {1, 2}, 0, LEAN_ERR_ARG, "n must be >= 1"},
        {{a, NULL}, {1, 2}, 2, LEAN_ERR_ARG, "ctx[1] is NULL"},
        {{a, a}, {1, 2}, 2, LEAN_ERR_ARG, "ctx[1] is given twice"},
        {{a, o}, {1, 2}, 2, LEAN_ERR_ARG, "ctx[1] is of another model"},
        {{a, r}, {1, 2}, 2, LEAN_ERR_ARG, "ctx[1] is cpu_ref"},
        {{a, ex}, {1, 2}, 2, LEAN_ERR_ARG, "ctx[1] computes with"},
        {{a, b}, {1, V}, 2, LEAN_ERR_ARG, "ids[1] = "},
        {{a, b}, {-1, 2}, 2, LEAN_ERR_ARG, "ids[0] = -1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err = (lean_error){0};
        const lean_status st = lean_decode_batch(cases[i].c, cases[i].ids, cases[i].n, NULL, &err);
        CHECK(st == cases[i].want && strstr(err.msg, cases[i].says), "case %zu: status %d, '%s' (want '%s')", i, st,
              err.msg, cases[i].says);
        CHECK(lean_ctx_pos(a) == 3 && lean_ctx_pos(b) == 2, "case %zu changed a position: %d, %d", i,
              lean_ctx_pos(a), lean_ctx_pos(b));
    }
    /* another kernel table, where this CPU's best is not the generic one */
    char best[64], gname[64];
    lean_ctx_backend_str(a, best, sizeof best);
    lean_ctx_backend_str(gen, gname, sizeof gname);
    if (strncmp(best, "cpu (generic", 12)) {
        CHECK(lean_decode_batch((lean_ctx *[]){a, gen}, (int32_t[]){1, 2}, 2, NULL, &err) == LEAN_ERR_ARG &&
                  strstr(err.msg, "one batch, one setting"),
              "%s beside %s: %s", best, gname, err.msg);
    }
    CHECK(lean_decode_batch(NULL, p, 1, NULL, &err) == LEAN_ERR_ARG, "NULL ctx");
    CHECK(lean_decode_batch((lean_ctx *[]){a}, NULL, 1, NULL, &err) == LEAN_ERR_ARG, "NULL ids");
    /* a generation in progress */
    lean_sampler_params sp = lean_sampler_default_params();
    sp.greedy = 1;
    lean_sampler *smp = NULL;
    CHECK(lean_sampler_create(&sp, V, &smp, &err) == LEAN_OK, "%s", err.msg);
    float *logits = malloc(sizeof(float) * 2 * (size_t)V);
    CHECK(lean_decode_batch((lean_ctx *[]){a, b}, (int32_t[]){4, 5}, 2, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gen_begin(b, smp, 4, &err) == LEAN_ERR_ARG, "gen_begin after a batch without logits");
    CHECK(lean_decode_batch((lean_ctx *[]){a, b}, (int32_t[]){4, 5}, 2, logits, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gen_begin(b, smp, 4, &err) == LEAN_OK, "gen_begin after a batch with logits: %s", err.msg);
    CHECK(lean_decode_batch((lean_ctx *[]){a, b}, (int32_t[]){4, 5}, 2, logits, &err) == LEAN_ERR_ARG &&
              strstr(err.msg, "ctx[1] has a generation in progress"),
          "during a generation: %s", err.msg);
    lean_gen_end(b);
    CHECK(lean_ctx_pos(a) == 5 && lean_ctx_pos(b) == 4, "positions %d, %d", lean_ctx_pos(a), lean_ctx_pos(b));
    /* a full context */
    int32_t fill[N_CTX];
    for (int i = 0; i < N_CTX; i++) fill[i] = i % V;
    CHECK(lean_prefill(a, fill, N_CTX - lean_ctx_pos(a), NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_decode_batch((lean_ctx *[]){b, a}, (int32_t[]){4, 5}, 2, logits, &err) == LEAN_ERR_CONTEXT_FULL &&
              strstr(err.msg, "ctx[1] is full"),
          "full: %s", err.msg);
    CHECK(lean_ctx_pos(b) == 4, "a refused batch moved ctx[0] to %d", lean_ctx_pos(b));
    lean_sampler_free(smp);
    free(logits);
done:
    lean_ctx_free(a), lean_ctx_free(b), lean_ctx_free(ex), lean_ctx_free(r), lean_ctx_free(o), lean_ctx_free(gen);
}

/* GPU contexts on two devices (exact beside not: other device options) share no pass. */
static void test_gpu_refusal(const lean_model *m) {
    const run_cfg exact = {"gpu", true, 1, 0}, fast = {"gpu", false, 1, 0};
    lean_ctx *a = new_ctx(m, &exact, 1, 0), *b = new_ctx(m, &fast, 1, 0);
    lean_error err = {0};
    if (a && b) {
        CHECK(lean_prefill(a, (const int32_t[]){1, 2}, 2, NULL, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_prefill(b, (const int32_t[]){1}, 1, NULL, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_decode_batch((lean_ctx *[]){a, b}, (int32_t[]){3, 4}, 2, NULL, &err) == LEAN_ERR_ARG &&
                  strstr(err.msg, "ctx[1] is on another GPU device"),
              "gpu exact beside not: %s", err.msg);
        CHECK(lean_ctx_pos(a) == 2 && lean_ctx_pos(b) == 1, "a refused batch moved to %d, %d", lean_ctx_pos(a),
              lean_ctx_pos(b));
    }
    lean_ctx_free(a), lean_ctx_free(b);
}

/* GPU contexts with LoRA adapters (the parity llama and its adapter, as test_gpu_lora loads
 * them): a batch of an adapted context beside a plain one decodes row by row (each context's
 * forward adds its terms; no batched pass), each row the bits of its context decoded alone. */
static void test_gpu_lora(void) {
    lean_error err = {0};
    lean_model *m = NULL;
    lean_lora *ad = NULL;
    CHECK(lean_model_load_file("build/fixtures/llama-f32.gguf", &m, &err) == LEAN_OK, "llama: %s", err.msg);
    if (m) CHECK(lean_lora_load_file(m, "build/lora/llama-a.gguf", &ad, &err) == LEAN_OK, "llama-a: %s", err.msg);
    if (!m || !ad) goto done;
    const run_cfg rc = {"gpu", true, 1, 0};
    const int32_t V = lean_model_n_vocab(m), p[] = {3, 1, 4, 1, 5};
    const float one = 1.0f;
    lean_ctx *c[4] = {new_ctx(m, &rc, 1, 0), new_ctx(m, &rc, 1, 0), new_ctx(m, &rc, 1, 0), new_ctx(m, &rc, 1, 0)};
    float *want = malloc(sizeof(float) * 2 * (size_t)V), *got = malloc(sizeof(float) * 2 * (size_t)V);
    bool ok = c[0] && c[1] && c[2] && c[3] && want && got;
    /* c[0], c[2] adapted; c[0], c[1] alone, c[2], c[3] batched */
    for (int i = 0; ok && i < 4; i++)
        ok = (i % 2 || lean_ctx_set_loras(c[i], &ad, &one, 1, &err) == LEAN_OK) &&
             lean_prefill(c[i], p, 5 - i % 2, NULL, &err) == LEAN_OK;
    ok = ok && lean_decode(c[0], 7, want, &err) == LEAN_OK && lean_decode(c[1], 8, want + V, &err) == LEAN_OK &&
         lean_decode_batch(c + 2, (int32_t[]){7, 8}, 2, got, &err) == LEAN_OK;
    CHECK(ok, "gpu with an adapter: %s", err.msg);
    if (ok) {
        CHECK(!memcmp(want, got, sizeof(float) * 2 * (size_t)V), "gpu with an adapter: a batched row differs");
        CHECK(lean_backend_gpu_batch_rows(lean_ctx_backend_state(c[2])) == 0, "an adapted batch took the batched pass");
    }
    /* generations from there: c[2], c[3] step alone inside lean_gen_next_batch, one step ahead */
    lean_sampler *smp[4] = {0};
    int32_t ids[4][6], two[2];
    int behind = 0;
    lean_sampler_params sp = lean_sampler_default_params();
    sp.seed = 77; /* sampled, one seed for all four */
    for (int i = 0; ok && i < 4; i++)
        ok = lean_sampler_create(&sp, V, &smp[i], &err) == LEAN_OK && lean_gen_begin(c[i], smp[i], 6, &err) == LEAN_OK;
    for (int k = 0; ok && k < 6; k++) {
        ok = lean_gen_next(c[0], &ids[0][k], &err) == LEAN_OK && lean_gen_next(c[1], &ids[1][k], &err) == LEAN_OK &&
             lean_gen_next_batch(c + 2, 2, two, &err) == LEAN_OK;
        ids[2][k] = two[0], ids[3][k] = two[1];
        for (int i = 2; ok && i < 4; i++) behind += lean_backend_gpu_gen_ahead(lean_ctx_backend_state(c[i])) != (k < 5);
    }
    CHECK(ok, "gpu generations with an adapter: %s", err.msg);
    if (ok) {
        CHECK(!memcmp(ids[0], ids[2], sizeof ids[0]) && !memcmp(ids[1], ids[3], sizeof ids[1]),
              "gpu with an adapter: a batched generation's ids differ from lean_gen_next's alone");
        CHECK(behind == 0, "gpu with an adapter: %d batched rows not one step ahead", behind);
    }
    for (int i = 0; i < 4; i++) lean_gen_end(c[i]), lean_ctx_free(c[i]), lean_sampler_free(smp[i]);
    free(want), free(got);
done:
    lean_lora_free(ad);
    lean_model_free(m);
}

/* The GPU's KV pool (src/gpu/kvpool.h): sequences whose caches lie in several pages (contexts
 * of 1024 positions beside one of N_CTX, twins in between), at positions past one and two
 * attention chunks (GPU_ATTN_MIN_CHUNK: split and merged) beside short ones in one pass, a
 * sequence leaving (its context freed: its page goes) and a new one joining in a slot given
 * back; every batched row the bits of its twin decoded alone with lean_decode. */
#define LONG_SEQ 5
static void test_gpu_pool(const lean_model *m, int32_t V) {
    static const int32_t n_ctx[LONG_SEQ] = {1024, 1024, 1024, N_CTX, 1024};
    static const int32_t plen[LONG_SEQ] = {300, 5, 600, 10, 7};
    static const int join[LONG_SEQ] = {0, 0, 0, 0, 2}, leave[LONG_SEQ] = {4, 2, 4, 4, 4}; /* 1 leaves, 4 joins */
    lean_ctx *c[LONG_SEQ] = {0}, *twin[LONG_SEQ] = {0};
    float *got = malloc(sizeof(float) * LONG_SEQ * (size_t)V), *want = malloc(sizeof(float) * (size_t)V);
    int32_t *p = malloc(sizeof(int32_t) * 600);
    lean_error err = {0};
    bool ok = got && want && p;
    int mismatches = 0, rows = 0;
    int64_t led = 0;
    for (int k = 0; ok && k < 4; k++) {
        lean_ctx *in[LONG_SEQ];
        int32_t ids[LONG_SEQ];
        int which[LONG_SEQ], n = 0;
        for (int s = 0; ok && s < LONG_SEQ; s++) {
            if (k == leave[s] && c[s]) { /* gone: the next pass prunes its page's kernels */
                led += lean_backend_gpu_batch_rows(lean_ctx_backend_state(c[s]));
                lean_ctx_free(c[s]), lean_ctx_free(twin[s]);
                c[s] = twin[s] = NULL;
            }
            if (k != join[s]) continue;
            lean_ctx_params cp = lean_ctx_default_params();
            cp.backend = "gpu", cp.exact = 1, cp.n_ctx = n_ctx[s];
            for (int i = 0; i < plen[s]; i++) p[i] = (int32_t)((s * 17 + i * 5 + 1) % V);
            ok = lean_ctx_create(m, &cp, &c[s], &err) == LEAN_OK && lean_ctx_create(m, &cp, &twin[s], &err) == LEAN_OK &&
                 lean_prefill(c[s], p, plen[s], NULL, &err) == LEAN_OK &&
                 lean_prefill(twin[s], p, plen[s], NULL, &err) == LEAN_OK;
        }
        for (int s = 0; s < LONG_SEQ; s++)
            if (c[s] && k >= join[s] && k < leave[s]) in[n] = c[s], ids[n] = id_at(s, k, V), which[n++] = s;
        ok = ok && lean_decode_batch(in, ids, n, got, &err) == LEAN_OK;
        for (int i = 0; ok && i < n; i++, rows++) {
            ok = lean_decode(twin[which[i]], ids[i], want, &err) == LEAN_OK;
            mismatches += ok && memcmp(got + (size_t)i * (size_t)V, want, sizeof(float) * (size_t)V) != 0;
        }
    }
    CHECK(ok, "gpu pool: %s", err.msg);
    CHECK(mismatches == 0, "gpu pool: %d of %d batched rows are not their twin's bits", mismatches, rows);
    for (int s = 0; s < LONG_SEQ; s++) {
        if (c[s]) led += lean_backend_gpu_batch_rows(lean_ctx_backend_state(c[s]));
        lean_ctx_free(c[s]), lean_ctx_free(twin[s]);
    }
    CHECK(!ok || led == rows, "gpu pool: %lld of %d rows went through a batched pass", (long long)led, rows);
    free(got), free(want), free(p);
}

/* A device lost with a batched step in flight (the run-ahead: its rows' ids in one read-back the
 * three rows hold): the next lean_gen_next_batch fails with LEAN_ERR_DEVICE, and the rows end
 * with the leader freed first (the read-back outlives its batch; ASan sees it freed once, by the
 * last row). Its own model: the loss ends the device of every context on it. */
static void test_gpu_lost(void) {
    char path[512];
    lean_model *m = tiny_load_all("llama", LEAN_TYPE_Q4_0, 77, path, sizeof path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    lean_ctx *c[3] = {0};
    lean_sampler *smp[3] = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_error err = {0};
    bool ok = logits != NULL;
    for (int s = 0; ok && s < 3; s++) {
        int32_t p[MAX_PROMPT];
        prompt_of(s, V, p);
        const lean_sampler_params sp = gen_params(s);
        lean_ctx_params cp = lean_ctx_default_params();
        cp.backend = "gpu", cp.exact = 1, cp.n_ctx = N_CTX;
        ok = lean_ctx_create(m, &cp, &c[s], &err) == LEAN_OK && lean_sampler_create(&sp, V, &smp[s], &err) == LEAN_OK &&
             lean_prefill(c[s], p, prompt_len[s], logits, &err) == LEAN_OK &&
             lean_gen_begin(c[s], smp[s], 0, &err) == LEAN_OK;
    }
    int32_t ids[3];
    ok = ok && lean_gen_next_batch(c, 3, ids, &err) == LEAN_OK;
    CHECK(ok, "gpu lost: before the loss: %s", err.msg);
    if (ok) {
        CHECK(lean_backend_gpu_gen_ahead(lean_ctx_backend_state(c[2])) == 1, "gpu lost: no step in flight");
        lean_gpu_lose_device(lean_backend_gpu_device(lean_ctx_backend_state(c[0])));
        const lean_status st = lean_gen_next_batch(c, 3, ids, &err);
        CHECK(st == LEAN_ERR_DEVICE && err.msg[0], "gpu lost: status %d '%s'", st, err.msg);
    }
    if (c[0]) lean_gen_end(c[0]);
    lean_ctx_free(c[0]); /* the leader: its batch goes, the step's read-back stays held */
    if (c[1]) lean_gen_end(c[1]);
    lean_ctx_free(c[1]), lean_ctx_free(c[2]); /* c[2] ends in its free: the last hold */
    for (int s = 0; s < 3; s++) lean_sampler_free(smp[s]);
    free(logits);
    lean_model_free(m);
    unlink(path);
}

/* A wide pass (the other GPU checks pass at most 5 rows): W_SEQ sequences, a row count no
 * power of two divides, at their own positions, then the first W_NARROW of them a step further.
 * Exact: every row the bits of its twin decoded alone. Otherwise the first pass is past
 * BATCH_TILED_ROWS and the second past BATCH_TILED_LOGITS only (forward_batch.c), so their
 * matmuls run prefill's tiled kernel: every row the bits of its twin in a pass of the same
 * sequences in the reverse order (a row does not depend on its place or neighbours), and close
 * to the sequence decoded alone (solo). */
#define W_SEQ 19
#define W_NARROW 6
static void test_gpu_wide(const lean_model *m, int32_t V, bool exact, const char *run) {
    char what[160];
    snprintf(what, sizeof what, "%s, the pass %s", run, exact ? "exact" : "off the exact path");
    lean_ctx *c[W_SEQ] = {0}, *twin[W_SEQ] = {0}, *solo[W_SEQ] = {0}, *rev[W_SEQ];
    float *got = malloc(sizeof(float) * W_SEQ * (size_t)V), *want = malloc(sizeof(float) * W_SEQ * (size_t)V);
    float *sl = malloc(sizeof(float) * (size_t)V); /* solo's logits */
    lean_error err = {0};
    bool ok = got && want && sl;
    int mismatches = 0, rows = 0;
    double worst = 0; /* the largest |batched - solo| over the row's largest |logit| */
    for (int s = 0; ok && s < W_SEQ; s++) {
        lean_ctx_params cp = lean_ctx_default_params();
        cp.backend = "gpu", cp.exact = exact, cp.n_ctx = N_CTX, cp.n_batch = W_SEQ;
        int32_t ids[4];
        for (int i = 0; i < 1 + s % 4; i++) ids[i] = (int32_t)((s * 11 + i * 3 + 2) % V);
        ok = lean_ctx_create(m, &cp, &c[s], &err) == LEAN_OK && lean_ctx_create(m, &cp, &twin[s], &err) == LEAN_OK &&
             lean_prefill(c[s], ids, 1 + s % 4, NULL, &err) == LEAN_OK &&
             lean_prefill(twin[s], ids, 1 + s % 4, NULL, &err) == LEAN_OK;
        if (ok && !exact)
            ok = lean_ctx_create(m, &cp, &solo[s], &err) == LEAN_OK &&
                 lean_prefill(solo[s], ids, 1 + s % 4, NULL, &err) == LEAN_OK;
    }
    for (int k = 0; ok && k < 2; k++) {
        const int n = k == 0 ? W_SEQ : W_NARROW;
        int32_t ids[W_SEQ], rids[W_SEQ];
        for (int s = 0; s < n; s++)
            ids[s] = id_at(s, k, V), rids[n - 1 - s] = ids[s], rev[s] = twin[n - 1 - s];
        ok = lean_decode_batch(c, ids, n, got, &err) == LEAN_OK;
        if (ok && !exact) ok = lean_decode_batch(rev, rids, n, want, &err) == LEAN_OK;
        for (int s = 0; ok && s < n; s++, rows++) {
            const float *row = got + (size_t)s * (size_t)V;
            if (exact) {
                ok = lean_decode(twin[s], ids[s], want, &err) == LEAN_OK;
                mismatches += ok && memcmp(row, want, sizeof(float) * (size_t)V) != 0;
                continue;
            }
            mismatches += memcmp(row, want + (size_t)(n - 1 - s) * (size_t)V, sizeof(float) * (size_t)V) != 0;
            ok = lean_decode(solo[s], ids[s], sl, &err) == LEAN_OK;
            double big = 0, diff = 0;
            for (int32_t v = 0; ok && v < V; v++) {
                big = fabs(sl[v]) > big ? fabs(sl[v]) : big;
                diff = fabs(row[v] - sl[v]) > diff ? fabs(row[v] - sl[v]) : diff;
            }
            if (ok && big > 0 && diff / big > worst) worst = diff / big;
        }
    }
    CHECK(ok, "%s, %d then %d rows: %s", what, W_SEQ, W_NARROW, err.msg);
    CHECK(mismatches == 0, "%s, %d then %d rows: %d of %d batched rows are not their twin's bits%s", what, W_SEQ,
          W_NARROW, mismatches, rows, exact ? " (decoded alone)" : " (the same sequences batched in the reverse order)");
    /* the 8-bit prefill's bound against the F32 path (test_gpu_forward): 6% of the largest logit */
    CHECK(exact || worst <= 0.06, "%s, %d then %d rows: a batched row's logits are %.3g of the largest off the sequence "
          "decoded alone", what, W_SEQ, W_NARROW, worst);
    if (!exact)
        printf("%s, %d then %d rows: batched rows within %.3g of the largest logit of alone's\n", what, W_SEQ, W_NARROW,
               worst);
    const int64_t led = c[0] ? lean_backend_gpu_batch_rows(lean_ctx_backend_state(c[0])) : 0;
    CHECK(!ok || led == rows, "%s, %d then %d rows: %lld of %d rows went through a batched pass", what, W_SEQ,
          W_NARROW, (long long)led, rows);
    for (int s = 0; s < W_SEQ; s++) lean_ctx_free(c[s]), lean_ctx_free(twin[s]), lean_ctx_free(solo[s]);
    free(got), free(want), free(sl);
}

#define H_SEQ 12
/* Makes n GPU contexts of N_CTX (n_seq as given; the first's n_batch H_SEQ: it leads one pass
 * of them all), each prefilled with s's prompt; false (err set) on a failure. */
static bool make_prefilled(const lean_model *m, int32_t V, int32_t n_seq, lean_ctx **c, int n, lean_error *err) {
    bool ok = true;
    for (int s = 0; ok && s < n; s++) {
        lean_ctx_params cp = lean_ctx_default_params();
        cp.backend = "gpu", cp.exact = 1, cp.n_ctx = N_CTX, cp.n_seq = n_seq, cp.n_batch = s == 0 ? H_SEQ : 0;
        int32_t ids[3];
        for (int i = 0; i < 1 + s % 3; i++) ids[i] = (int32_t)((s * 7 + i * 5 + 3) % V);
        ok = lean_ctx_create(m, &cp, &c[s], err) == LEAN_OK && lean_prefill(c[s], ids, 1 + s % 3, NULL, err) == LEAN_OK;
    }
    return ok;
}

/* The distinct KV pages (test_hooks.h) c[0..n)'s caches lie in; *cap the slots of c[0]'s. */
static int pages_of(lean_ctx *const *c, int n, int32_t *cap) {
    uint64_t id[H_SEQ];
    int d = 0;
    for (int s = 0; s < n; s++) {
        int32_t k;
        const uint64_t p = lean_backend_gpu_kv_page(lean_ctx_backend_state(c[s]), &k);
        if (s == 0) *cap = k;
        int i = 0;
        while (i < d && id[i] != p) i++;
        if (i == d) id[d++] = p;
    }
    return d;
}

/* lean_ctx_params.n_seq (kvpool.h): a lone context's page is its own cache (1 slot); H_SEQ
 * contexts made together without it lie in several pages (1, 1, 2, 4, ...), and a batched pass
 * over them records one attention a layer per page; made with n_seq = H_SEQ they lie in one
 * page of H_SEQ slots and the pass records one attention a layer, every row its twin's bits
 * (decoded alone). A hint past the 64 slots a page holds is clamped; a negative one refused. */
static void test_gpu_seq_hint(const lean_model *m, int32_t V) {
    lean_model_info info;
    lean_model_get_info(m, &info);
    lean_ctx *plain[H_SEQ] = {0}, *hinted[H_SEQ] = {0}, *twin[H_SEQ] = {0}, *big[2] = {0};
    float *got = malloc(sizeof(float) * H_SEQ * (size_t)V), *want = malloc(sizeof(float) * (size_t)V);
    lean_error err = {0};
    int32_t ids[H_SEQ], cap = 0;
    for (int s = 0; s < H_SEQ; s++) ids[s] = id_at(s, 0, V);
    bool ok = got && want && make_prefilled(m, V, 0, plain, 1, &err);
    CHECK(!ok || (pages_of(plain, 1, &cap) == 1 && cap == 1), "n_seq 0: a lone context's page has %d slots, not 1",
          cap);
    ok = ok && make_prefilled(m, V, 0, plain + 1, H_SEQ - 1, &err); /* one set of H_SEQ with plain[0] */
    int d = ok ? pages_of(plain, H_SEQ, &cap) : 0;
    int64_t a0 = ok ? lean_backend_gpu_batch_attention(lean_ctx_backend_state(plain[0])) : 0;
    ok = ok && lean_decode_batch(plain, ids, H_SEQ, got, &err) == LEAN_OK;
    int64_t da = ok ? lean_backend_gpu_batch_attention(lean_ctx_backend_state(plain[0])) - a0 : 0;
    CHECK(!ok || (d > 1 && da == (int64_t)d * info.n_layer),
          "n_seq 0: %d contexts in %d pages, %lld attention records over %d layers", H_SEQ, d, (long long)da,
          info.n_layer);
    for (int s = 0; s < H_SEQ; s++) lean_ctx_free(plain[s]);

    ok = ok && make_prefilled(m, V, H_SEQ, hinted, H_SEQ, &err) && make_prefilled(m, V, 0, twin, H_SEQ, &err);
    d = ok ? pages_of(hinted, H_SEQ, &cap) : 0;
    CHECK(!ok || (d == 1 && cap == H_SEQ), "n_seq %d: the contexts lie in %d pages (the first of %d slots)", H_SEQ, d,
          cap);
    a0 = ok ? lean_backend_gpu_batch_attention(lean_ctx_backend_state(hinted[0])) : 0;
    ok = ok && lean_decode_batch(hinted, ids, H_SEQ, got, &err) == LEAN_OK;
    da = ok ? lean_backend_gpu_batch_attention(lean_ctx_backend_state(hinted[0])) - a0 : 0;
    CHECK(!ok || da == info.n_layer, "n_seq %d: %lld attention records over %d layers, not one a layer", H_SEQ,
          (long long)da, info.n_layer);
    int mismatches = 0;
    for (int s = 0; ok && s < H_SEQ; s++) {
        ok = lean_decode(twin[s], ids[s], want, &err) == LEAN_OK;
        mismatches += ok && memcmp(got + (size_t)s * (size_t)V, want, sizeof(float) * (size_t)V) != 0;
    }
    CHECK(mismatches == 0, "n_seq %d: %d of %d rows are not their twin's bits", H_SEQ, mismatches, H_SEQ);
    for (int s = 0; s < H_SEQ; s++) lean_ctx_free(hinted[s]), lean_ctx_free(twin[s]);

    ok = ok && make_prefilled(m, V, 1000, big, 2, &err);
    d = ok ? pages_of(big, 2, &cap) : 0;
    CHECK(!ok || (d == 1 && cap == 64), "n_seq 1000: %d pages, the first of %d slots (want 1 of 64)", d, cap);
    for (int s = 0; s < 2; s++) lean_ctx_free(big[s]);
    CHECK(ok, "n_seq: %s", err.msg);
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = "gpu", cp.n_ctx = N_CTX, cp.n_seq = -1;
    lean_ctx *bad = NULL;
    const lean_status st = lean_ctx_create(m, &cp, &bad, &err);
    CHECK(st == LEAN_ERR_ARG && !bad && strstr(err.msg, "n_seq"), "n_seq -1: status %d, '%s'", (int)st, err.msg);
    free(got), free(want);
}

int main(void) {
    static const uint32_t formats[] = {LEAN_TYPE_Q4_0, LEAN_TYPE_Q8_0, LEAN_TYPE_Q4_K, LEAN_TYPE_F16};
    static const char *archs[] = {"llama", "qwen2", "qwen3", "llama"};
    static const char *isas[] = {"cpu-generic", "cpu-avx2", "cpu-avx512", "cpu-neon", "cpu-simd128"};
    const bool gpu = !test_gpu_skipped("test_batch");
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        char path[512];
        lean_model *m = tiny_load_all(archs[f], formats[f], 40 + f, path, sizeof path);
        if (!m) continue;
        const int32_t V = lean_model_n_vocab(m);
        float *alone = malloc(sizeof(float) * N_SEQ * (N_STEPS + 1) * (size_t)V);
        run_cfg rcs[16];
        int n_rc = 0;
        rcs[n_rc++] = (run_cfg){"cpu", false, 2, 2};
        rcs[n_rc++] = (run_cfg){"cpu", true, 2, 0};
        rcs[n_rc++] = (run_cfg){"cpu-ref", true, 1, 0};
        for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
            lean_ctx_params p = lean_ctx_default_params();
            p.backend = isas[i];
            lean_ctx *probe = NULL;
            lean_error err;
            if (lean_ctx_create(m, &p, &probe, &err) != LEAN_OK) continue; /* a table this CPU lacks */
            lean_ctx_free(probe);
            rcs[n_rc++] = (run_cfg){isas[i], true, 3, 3};
        }
        if (gpu && f < 3) rcs[n_rc++] = (run_cfg){"gpu", true, 1, f == 1 ? 2 : 0}; /* llvmpipe is slow: 3 */
        for (int i = 0; i < n_rc; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s%s (%d threads, n_batch %d)", lean_type_name((int)formats[f]),
                     rcs[i].backend, rcs[i].exact ? " exact" : "", rcs[i].threads0, rcs[i].n_batch0);
            if (run_alone(m, &rcs[i], V, alone)) run_batched(m, &rcs[i], V, alone, what);
            if (i < 2 || (f == 0 && !strcmp(rcs[i].backend, "gpu"))) test_reply(m, &rcs[i], V, what);
            if (f == 0 && (i == 0 || !strcmp(rcs[i].backend, "gpu"))) test_gen_batch(m, &rcs[i], V, what), test_gen_runahead(m, &rcs[i], V, what);
            if (!strcmp(rcs[i].backend, "gpu")) {
                test_gpu_wide(m, V, true, what);
                /* a model's GPU part has its first context's options (exact, here): the pass off the
                 * exact path on a second load of the same file, whose first context is */
                char dpath[512];
                lean_model *dm = tiny_load_all(archs[f], formats[f], 40 + f, dpath, sizeof dpath);
                if (dm) test_gpu_wide(dm, V, false, what), lean_model_free(dm), unlink(dpath);
            }
            printf("%s: checked\n", what);
        }
        if (f == 0 && gpu)
            test_gpu_refusal(m), test_gpu_lora(), test_gpu_pool(m, V), test_gpu_seq_hint(m, V),
                test_gen_mix(&rcs[n_rc - 1]);
        if (f == 0) test_gen_mix(&rcs[0]);
        if (f == 0) {
            char opath[512];
            lean_model *other = tiny_load_all(archs[f], formats[f], 99, opath, sizeof opath);
            if (other) test_refusals(m, other, V);
            lean_model_free(other);
            unlink(opath);
        }
        free(alone);
        lean_model_free(m);
        unlink(path);
    }
    if (gpu) test_gpu_lost();
    return test_finish("test_batch");
}
