/* session.c — lean_ctx: one sequence over a model, its position and its backend state.
 *
 * What it does: checks every request against the context (ids in [0, n_vocab), room in
 * the KV cache) before touching any state, then feeds the backend n_batch tokens at a
 * time, asking for logits only from the last chunk. The position is the number of tokens
 * resident in the KV cache; truncating just lowers it, since a backend only ever reads
 * cache rows below pos + n and overwrites the rest as they are reused.
 * A context's backend state runs over the model's part for that backend (backend.h: on the
 * GPU the device and the weights), made by the first context that needs it, under the model's
 * lock, and made again when its device was lost.
 * A generation (lean_gen_*) hands the draw-and-decode loop to the backend when it can keep
 * it resident (the GPU), else runs it here against the context's copy of the last logits.
 * What it does not: conversations, KV-prefix reuse, text (chat.c, tokenizer.c).
 *
 * lean_decode_batch hands the backend's forward_batch up to BATCH_PASS contexts a pass (their
 * states, ids and positions), or, for a backend without one, runs forward on each in turn.
 *
 * Sections: params · create / free · backend · position · KV access · adapters · prefill / decode · batch ·
 * generation
 */
#include "core/backend.h"
#include "core/kv_snapshot.h"
#include "core/test_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model's part for be in sh->part (made now if there is none, or none that serves: a lost
 * device), or in *alone one for this context only; with sh->lock held. */
static lean_status model_part(const lean_backend *be, const lean_model *m, const lean_backend_config *cfg,
                              lean_backend_model **alone, lean_error *err) {
    lean_model_share *sh = m->share;
    if (sh->part && sh->be != be)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "the model's shared part is the %s backend's, not %s's",
                         sh->be->name, be->name);
    bool own = false;
    lean_status st = sh->part ? be->model_check(sh->part, cfg, &own, err) : LEAN_OK;
    if (st == LEAN_ERR_DEVICE) { /* lost: contexts still on it keep it until they are freed */
        be->model_release(sh->part);
        sh->part = NULL;
        st = LEAN_OK, own = false;
    }
    if (st == LEAN_OK && m->gpu_only && (own || !sh->part)) /* no weights on the host to upload again */
        return LEAN_FAIL(err, sh->part ? LEAN_ERR_UNSUPPORTED : LEAN_ERR_DEVICE,
                         "the model was loaded GPU-only: its weights are on one device, %s",
                         sh->part ? "which this context cannot share (other exact or profile settings, or another "
                                    "thread on an OpenGL device)"
                                  : "which was lost (load the model again)");
    if (st == LEAN_OK && own) return be->model_create(m, cfg, alone, err);
    if (st == LEAN_OK && !sh->part) {
        st = be->model_create(m, cfg, &sh->part, err);
        sh->be = be;
    }
    return st;
}

static lean_status create_state(const lean_backend *be, const lean_model *m, const lean_backend_config *cfg,
                                lean_backend_state **out, lean_error *err) {
    if (!be->create_config) return be->create(m, cfg->n_ctx, cfg->n_batch, out, err);
    if (!be->model_create) return be->create_config(m, NULL, cfg, out, err);
    /* under the model's lock until the state holds its reference to the part */
    lean_mutex_lock(&m->share->lock);
    lean_backend_model *alone = NULL;
    lean_status st = model_part(be, m, cfg, &alone, err);
    if (st == LEAN_OK) st = be->create_config(m, alone ? alone : m->share->part, cfg, out, err);
    if (alone) be->model_release(alone); /* the state holds it now, or it goes */
    lean_mutex_unlock(&m->share->lock);
    return st;
}

#define DEFAULT_N_CTX_CAP 4096

/* the prefill chunk: the one asked for, else the backend's; never more than the context */
static int32_t batch_of(const lean_backend *be, int32_t asked, int32_t n_ctx) {
    const int32_t b = asked ? asked : be->n_batch_default;
    return b < n_ctx ? b : n_ctx;
}

struct lean_ctx {
    const lean_model *m;
    const lean_backend *be;
    lean_backend_state *state;
    int32_t n_ctx;   /* KV cache length, tokens */
    int32_t n_batch; /* most tokens per backend call */
    int32_t pos;     /* tokens resident in the cache */
    char fallback[sizeof ((lean_error *)0)->msg]; /* why 'auto' passed over the rung above be ("" if it did not) */
    float *logits;   /* (n_vocab) the last call's logits, when has_logits: a host generation's */
    bool has_logits; /* the last call computed logits for position pos, and nothing since */
    bool in_batch;   /* marks it during lean_decode_batch's checks (a context given twice) */
    struct ctx_gen { /* the generation in progress (lean_gen_*), when on */
        bool on, resident; /* resident: the backend's gen_* run it */
        bool masked;       /* resident under a mask (the sampler's grammar, the caller's): each draw's from here */
        bool by_caller;    /* begun with lean_gen_begin_masked: lean_gen_next_masked gives masks */
        const lean_mask *mask; /* the caller's mask for the draw in progress (NULL: none) */
        bool mask_sent;    /* the backend has the next draw's mask (its gen_next said LEAN_PENDING) */
        lean_sampler *smp;
        int32_t start;     /* lean_ctx_pos at begin */
        int32_t n_out;     /* ids handed out */
        int32_t limit;     /* most ids: max_ids, or to the context's end */
        bool by_context;   /* limit is the context's end (not max_ids) */
        int32_t last;      /* the last id handed out (a host generation decodes it next) */
    } gen;
    struct ctx_pending { /* a prefill that returned LEAN_PENDING (lean.h): its n, tokens done */
        bool on;
        int32_t n, done;
    } pending;
    lora_set *lora; /* the adapters in force (lean_ctx_set_loras), read by the backend; NULL: none */
};

/* ---- params ---- */

lean_ctx_params lean_ctx_default_params(void) {
    return (lean_ctx_params){.n_ctx = 0, .n_batch = 0, .n_threads = 0, .n_seq = 0, .backend = NULL, .exact = 0, .profile = 0,
                             .progress = NULL, .progress_user = NULL};
}

/* ---- create / free ---- */

lean_status lean_ctx_create(const lean_model *m, const lean_ctx_params *p, lean_ctx **out,
                            lean_error *err) {
    return lean_ctx_create_gpu(m, p, NULL, out, err);
}

lean_status lean_ctx_create_gpu(const lean_model *m, const lean_ctx_params *p, const struct lean_gpu_options *gpu,
                                lean_ctx **out, lean_error *err) {
    if (!m || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_ctx_create: NULL argument");
    *out = NULL;
    lean_ctx_params params = p ? *p : lean_ctx_default_params();
    if (params.n_ctx < 0 || params.n_batch < 0 || params.n_threads < 0 || params.n_seq < 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "n_ctx (%d), n_batch (%d), n_threads (%d) and n_seq (%d) must be >= 0",
                         params.n_ctx, params.n_batch, params.n_threads, params.n_seq);
    lean_backend_choice bc;
    lean_status st = lean_backend_choose(params.backend, &bc, err);
    if (st != LEAN_OK) return st;
    if (m->gpu_only) { /* the device the load made, whatever its adapter, or nothing */
        if (bc.be != m->share->be)
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                             "backend '%s': the model was loaded GPU-only (lean_model_params.gpu_only), its weights "
                             "are on the GPU and not in host memory; load it without gpu_only for the CPU",
                             params.backend);
        bc.hardware_only = false, bc.fallback = NULL;
    }
    int32_t n_ctx = params.n_ctx;
    if (n_ctx == 0) n_ctx = m->hp.n_ctx_train < DEFAULT_N_CTX_CAP ? m->hp.n_ctx_train : DEFAULT_N_CTX_CAP;
    if (n_ctx > LEAN_MAX_N_CTX)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "n_ctx %d is more than lean supports (%d)", n_ctx,
                         LEAN_MAX_N_CTX);
    lean_backend_config cfg = {.n_ctx = n_ctx, .n_batch = batch_of(bc.be, params.n_batch, n_ctx),
                               .n_threads = params.n_threads, .n_seq = params.n_seq, .isa = bc.isa, .hardware_only = bc.hardware_only,
                               .exact = params.exact != 0, .profile = params.profile != 0, .gpu = gpu,
                               .progress = params.progress, .progress_user = params.progress_user};
    /* the call made again after LEAN_PENDING: settle what was made (model.h; one thread in
     * wasm32, natively never set) */
    lean_ctx *c = m->share->settling;
    if (c) {
        m->share->settling = NULL;
    } else {
        c = lean_calloc(1, sizeof *c);
        float *logits = lean_malloc(sizeof *logits * (size_t)m->hp.n_vocab);
        if (!c || !logits) {
            lean_free(c);
            lean_free(logits);
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the context");
        }
        *c = (lean_ctx){.m = m, .be = bc.be, .n_ctx = n_ctx, .n_batch = cfg.n_batch, .logits = logits};
        st = create_state(c->be, m, &cfg, &c->state, err);
    }
    /* a kernel the device rejected, known only once its checks came back (pump mode), fails
     * the backend here as one rejected at once does */
    if (st == LEAN_OK && c->be->settle) st = c->be->settle(c->state, err);
    if (st == LEAN_PENDING && c->state) {
        m->share->settling = c;
        return st;
    }
    if (st != LEAN_OK && c->state) c->be->destroy(c->state), c->state = NULL;
    /* a GPU out of memory (its own, or the host's while uploading) leaves the CPU to try; a
     * pending device request is asked again (lean.h) */
    if (st != LEAN_OK && st != LEAN_PENDING && bc.fallback && c->be != bc.fallback) {
        snprintf(c->fallback, sizeof c->fallback, "%.440s (%s)", err ? err->msg : "the GPU backend",
                 lean_status_str(st));
        c->be = bc.fallback;
        cfg.n_batch = c->n_batch = batch_of(c->be, params.n_batch, n_ctx);
        st = create_state(c->be, m, &cfg, &c->state, err);
    }
    if (st != LEAN_OK) {
        lean_free(c->logits);
        lean_free(c);
        return st;
    }
    *out = c;
    return LEAN_OK;
}

void lean_ctx_free(lean_ctx *c) {
    if (!c) return;
    lean_gen_end(c);
    c->be->destroy(c->state);
    lora_set_free(c->lora);
    lean_free(c->logits);
    lean_free(c);
}

/* ---- backend (for tests: test_hooks.h) ---- */

const lean_backend *lean_ctx_backend(const lean_ctx *c) { return c->be; }

const char *lean_ctx_backend_str(const lean_ctx *c, char *text, size_t cap) {
    if (!cap) return text;
    if (c->be->describe) c->be->describe(c->state, text, cap);
    else snprintf(text, cap, "%s", c->be->name);
    return text;
}
const char *lean_ctx_fallback(const lean_ctx *c) { return c->fallback[0] ? c->fallback : NULL; }
bool lean_ctx_gen_resident(const lean_ctx *c) { return c->gen.on && c->gen.resident; }
lean_backend_state *lean_ctx_backend_state(lean_ctx *c) { return c->state; }

/* ---- position ---- */

int32_t lean_ctx_pos(const lean_ctx *c) { return c->pos; }
int32_t lean_ctx_n_ctx(const lean_ctx *c) { return c->n_ctx; }
int32_t lean_ctx_n_batch(const lean_ctx *c) { return c->n_batch; }

static lean_status check_no_gen(const lean_ctx *c, const char *what, lean_error *err) {
    if (c->pending.on)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s while a prefill of %d tokens is pending (call it again first)", what,
                         c->pending.n);
    return c->gen.on ? LEAN_FAIL(err, LEAN_ERR_ARG, "%s during a generation (lean_gen_end first)", what) : LEAN_OK;
}

lean_status lean_ctx_truncate(lean_ctx *c, int32_t n_pos, lean_error *err) {
    lean_status st = check_no_gen(c, "truncate", err);
    if (st != LEAN_OK) return st;
    if (n_pos < 0 || n_pos > c->pos)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "truncate to %d: must be in 0..%d (the current position)",
                         n_pos, c->pos);
    if (n_pos < c->pos) c->has_logits = false;
    c->pos = n_pos;
    return LEAN_OK;
}

/* ---- KV access (kv_snapshot.h: snapshots and forks) ---- */

lean_status lean_ctx_kv(lean_ctx *c, const char *what, ctx_kv *out, lean_error *err) {
    if (!c) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: NULL context", what);
    lean_status st = check_no_gen(c, what, err);
    if (st == LEAN_OK) *out = (ctx_kv){.m = c->m, .be = c->be, .state = c->state, .pos = c->pos, .n_ctx = c->n_ctx};
    return st;
}

void lean_ctx_kv_set_pos(lean_ctx *c, int32_t n_pos) {
    c->pos = n_pos;
    c->has_logits = false;
}

/* ---- adapters ---- */

lean_status lean_ctx_set_loras(lean_ctx *c, lean_lora *const *loras, const float *scales, int32_t n,
                               lean_error *err) {
    if (!c) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_ctx_set_loras: NULL context");
    if (n < 0 || (n > 0 && (!loras || !scales)))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_ctx_set_loras: %d adapters%s", n, n < 0 ? "" : " with NULL arrays");
    lean_status st = check_no_gen(c, "lean_ctx_set_loras", err);
    if (st != LEAN_OK) return st;
    if (!c->be->set_lora)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "the %s backend does not apply LoRA adapters (docs/lora.md)",
                         c->be->name);
    lora_set *set = NULL;
    if (n > 0 && (st = lora_set_make(c->m, loras, scales, n, &set, err)) != LEAN_OK) return st;
    if ((st = c->be->set_lora(c->state, set, err)) != LEAN_OK) {
        lora_set_free(set);
        return st;
    }
    lora_set_free(c->lora);
    c->lora = set;
    c->has_logits = false; /* computed without these adapters */
    return LEAN_OK;
}

/* ---- prefill / decode ---- */

/* Every check that can fail, done before anything runs. */
static lean_status check_prefill(const lean_ctx *c, const int32_t *ids, int32_t n, lean_error *err) {
    if (n < 1) return LEAN_FAIL(err, LEAN_ERR_ARG, "prefill of %d tokens: need at least 1", n);
    if (!ids) return LEAN_FAIL(err, LEAN_ERR_ARG, "prefill of %d tokens: ids is NULL", n);
    if (n > c->n_ctx - c->pos)
        return LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL,
                         "%d tokens at position %d do not fit in a context of %d (room for %d)", n,
                         c->pos, c->n_ctx, c->n_ctx - c->pos);
    const int32_t n_vocab = c->m->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "ids[%d] = %d is outside the vocabulary [0, %d)", i,
                             ids[i], n_vocab);
    return LEAN_OK;
}

lean_status lean_prefill(lean_ctx *c, const int32_t *ids, int32_t n, float *logits, lean_error *err) {
    if (!c) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_prefill: NULL context");
    int32_t done = 0;
    lean_status st = LEAN_OK;
    if (c->pending.on && c->pending.n == n) { /* the call made again: the chunks done are in the cache */
        done = c->pending.done;
        c->pending.on = false;
    } else {
        st = check_no_gen(c, "prefill", err);
        if (st == LEAN_OK) st = check_prefill(c, ids, n, err);
        if (st != LEAN_OK) return st;
    }
    /* A backend failure midway leaves pos after the last chunk that completed. */
    c->has_logits = false;
    while (done < n) {
        const int32_t chunk = n - done < c->n_batch ? n - done : c->n_batch;
        const bool last = done + chunk == n;
        st = c->be->forward(c->state, ids + done, chunk, c->pos, last && logits ? c->logits : NULL, err);
        if (st == LEAN_PENDING) c->pending = (struct ctx_pending){true, n, done};
        if (st != LEAN_OK) return st;
        c->pos += chunk;
        done += chunk;
    }
    if (logits) memcpy(logits, c->logits, sizeof *logits * (size_t)c->m->hp.n_vocab);
    c->has_logits = logits != NULL;
    return LEAN_OK;
}

lean_status lean_decode(lean_ctx *c, int32_t id, float *logits, lean_error *err) {
    return lean_prefill(c, &id, 1, logits, err);
}

/* ---- batch ---- */

#define BATCH_PASS 64 /* the most rows one forward_batch call gets: 64 rows amortize the weights' reads */

/* The checks every batched call (fn) makes of each ctx[i], before anything runs, the call's own
 * (own: LEAN_OK, or the failure it set) between the common ones and the backend's. */
typedef lean_status (*row_check)(const char *fn, lean_ctx *const *ctx, int32_t i, const int32_t *ids, lean_error *err);
static lean_status check_rows(const char *fn, lean_ctx *const *ctx, int32_t n, const int32_t *ids, row_check own,
                              lean_error *err) {
    if (!ctx || !ids || n < 1) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: %s", fn, n < 1 ? "n must be >= 1" : "NULL argument");
    lean_status st = LEAN_OK;
    int32_t i = 0;
    for (; st == LEAN_OK && i < n; i++) {
        lean_ctx *c = ctx[i];
        if (!c) {
            st = LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d] is NULL", fn, i);
        } else if (c->in_batch) {
            st = LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d] is given twice", fn, i);
        } else if (c->m != ctx[0]->m || c->be != ctx[0]->be) {
            st = LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d] is %s, ctx[0] %s (one model, one backend)", fn, i,
                           c->m != ctx[0]->m ? "of another model" : c->be->name,
                           c->m != ctx[0]->m ? "not" : ctx[0]->be->name);
        } else if ((st = own(fn, ctx, i, ids, err)) != LEAN_OK) {
            /* st and err say what is wrong */
        } else if (c->be->batch_check && (st = c->be->batch_check(ctx[0]->state, c->state, i, err)) != LEAN_OK) {
            /* st and err say what differs */
        } else {
            c->in_batch = true;
        }
    }
    for (int32_t j = 0; j < i; j++)
        if (ctx[j]) ctx[j]->in_batch = false;
    return st;
}

/* lean_decode_batch's own checks of ctx[i]. */
static lean_status check_decode_row(const char *fn, lean_ctx *const *ctx, int32_t i, const int32_t *ids, lean_error *err) {
    const lean_ctx *c = ctx[i];
    if (c->pending.on || c->gen.on)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d] has %s", fn, i,
                         c->pending.on ? "a prefill pending (call it again first)"
                                       : "a generation in progress (lean_gen_end first)");
    if (c->pos >= c->n_ctx)
        return LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL, "%s: ctx[%d] is full (%d tokens of %d)", fn, i, c->pos,
                         c->n_ctx);
    if (ids[i] < 0 || ids[i] >= c->m->hp.n_vocab)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ids[%d] = %d is outside the vocabulary [0, %d)", fn, i,
                         ids[i], c->m->hp.n_vocab);
    return LEAN_OK;
}

/* A backend without forward_batch: each context's step alone. */
static lean_status decode_each(lean_ctx *c, int32_t id, bool logits, lean_error *err) {
    lean_status st = c->be->forward(c->state, &id, 1, c->pos, logits ? c->logits : NULL, err);
    if (st == LEAN_PENDING) { /* no call made again here: drop the read-back (lean.h) */
        if (c->be->gen_end) c->be->gen_end(c->state);
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "lean_decode_batch cannot wait for the GPU in this host (no JSPI): use lean_decode");
    }
    return st;
}

/* The passes of lean_decode_batch over checked contexts; logits (nullable): (n, n_vocab) every
 * row's. keep: each row's logits in its context's c->logits too (what a host generation begun
 * later draws from); without it (a host generation's draw follows: logits always computed) a
 * batched pass leaves them in logits alone (has_logits false), and a backend without one in
 * c->logits alone (logits unused: NULL). */
static lean_status decode_rows(lean_ctx *const *ctx, const int32_t *ids, int32_t n, float *logits, bool keep,
                               lean_error *err) {
    lean_status st = LEAN_OK;
    const size_t n_vocab = (size_t)ctx[0]->m->hp.n_vocab;
    const bool want = logits != NULL || !keep;
    for (int32_t done = 0; done < n;) {
        const lean_backend *be = ctx[done]->be;
        const int32_t most = ctx[done]->n_batch < BATCH_PASS ? ctx[done]->n_batch : BATCH_PASS;
        const int32_t rows = !be->forward_batch ? 1 : n - done < most ? n - done : most;
        float *out = logits ? logits + done * n_vocab : NULL;
        for (int32_t i = done; i < done + rows; i++) ctx[i]->has_logits = false;
        if (be->forward_batch) {
            lean_backend_state *states[BATCH_PASS];
            int32_t pos[BATCH_PASS];
            for (int32_t i = 0; i < rows; i++) states[i] = ctx[done + i]->state, pos[i] = ctx[done + i]->pos;
            st = be->forward_batch(states, ids + done, pos, rows, out, err);
        } else {
            st = decode_each(ctx[done], ids[done], want, err);
        }
        if (st != LEAN_OK) return st;
        for (int32_t i = done; i < done + rows; i++) {
            lean_ctx *c = ctx[i];
            c->pos++;
            c->has_logits = want && (keep || !be->forward_batch);
            /* the caller's row to the context's copy (a host generation draws from it), or back */
            if (logits && keep && be->forward_batch) memcpy(c->logits, logits + i * n_vocab, sizeof *logits * n_vocab);
            else if (logits && keep) memcpy(logits + i * n_vocab, c->logits, sizeof *logits * n_vocab);
        }
        done += rows;
    }
    return LEAN_OK;
}

lean_status lean_decode_batch(lean_ctx *const *ctx, const int32_t *ids, int32_t n, float *logits, lean_error *err) {
    lean_status st = check_rows("lean_decode_batch", ctx, n, ids, check_decode_row, err);
    return st != LEAN_OK ? st : decode_rows(ctx, ids, n, logits, true, err);
}

/* ---- generation ---- */

/* by_caller: the caller gives each draw a mask (lean_gen_begin_masked) */
static lean_status gen_begin(lean_ctx *c, lean_sampler *smp, int32_t max_ids, bool by_caller, lean_error *err) {
    if (!c || !smp) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_begin: NULL argument");
    lean_status st = check_no_gen(c, "lean_gen_begin", err);
    if (st != LEAN_OK) return st;
    if (!c->has_logits)
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "lean_gen_begin: the context's last call computed no logits to draw from (prefill or "
                         "decode with logits first)");
    if (max_ids < 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_begin: max_ids %d must be >= 0", max_ids);
    const sampler_cfg *cfg = sampler_get_cfg(smp);
    int32_t n_hist;
    const int32_t *hist = sampler_history(smp, &n_hist);
    if (sampler_n_vocab(smp) != c->m->hp.n_vocab)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_begin: a sampler of %d ids for a model of %d",
                         sampler_n_vocab(smp), c->m->hp.n_vocab);
    const int32_t room = c->n_ctx - c->pos + 1; /* draws at positions pos .. n_ctx */
    c->gen = (struct ctx_gen){.on = true, .smp = smp, .start = c->pos, .last = -1,
                              .limit = max_ids && max_ids < room ? max_ids : room,
                              .by_context = !max_ids || max_ids >= room, .by_caller = by_caller};
    if (c->be->gen_begin) { /* with a grammar or the caller's masks: one step at a time, each under its mask */
        const bool masked = by_caller || sampler_grammar(smp) != NULL;
        st = c->be->gen_begin(c->state, cfg, hist, n_hist, c->pos, c->gen.limit, masked, err);
        if (st == LEAN_OK) c->gen.resident = true, c->gen.masked = masked;
        else if (st != LEAN_ERR_UNSUPPORTED) c->gen.on = false;
        if (st != LEAN_ERR_UNSUPPORTED) return st;
    }
    return LEAN_OK;
}

lean_status lean_gen_begin(lean_ctx *c, lean_sampler *smp, int32_t max_ids, lean_error *err) {
    return gen_begin(c, smp, max_ids, false, err);
}

lean_status lean_gen_begin_masked(lean_ctx *c, lean_sampler *smp, int32_t max_ids, lean_error *err) {
    return gen_begin(c, smp, max_ids, true, err);
}

/* The backend's step; under a grammar the mask goes down with it (computed once, not again when
 * the call is made again after LEAN_PENDING) and the drawn id moves the grammar on. */
static lean_status resident_step(lean_ctx *c, int32_t *id, lean_error *err) {
    const uint32_t *bits = NULL;
    lean_status st = LEAN_OK;
    if (c->gen.masked && !c->gen.mask_sent) st = sampler_grammar_mask(c->gen.smp, c->gen.mask, &bits, err);
    if (st == LEAN_OK) st = c->be->gen_next(c->state, bits, id, err);
    c->gen.mask_sent = st == LEAN_PENDING;
    if (st == LEAN_OK && c->gen.masked) st = sampler_grammar_take(c->gen.smp, *id, err);
    return st;
}

/* The host's step: decode the last id handed out (into c->logits), then draw. */
static lean_status host_step(lean_ctx *c, int32_t *id, lean_error *err) {
    lean_status st = LEAN_OK;
    if (c->gen.n_out > 0) st = c->be->forward(c->state, &c->gen.last, 1, c->pos, c->logits, err);
    if (st == LEAN_OK) st = lean_sampler_sample(c->gen.smp, c->logits, c->pos + (c->gen.n_out > 0), c->gen.mask, id, err);
    return st;
}

lean_status lean_gen_next(lean_ctx *c, int32_t *id, lean_error *err) {
    if (!c || !id) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_next: NULL argument");
    if (!c->gen.on) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_next: no generation in progress");
    if (c->gen.n_out >= c->gen.limit)
        return c->gen.by_context
                   ? LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL, "the next draw would be at position %d, past n_ctx %d",
                               c->gen.start + c->gen.n_out, c->n_ctx)
                   : LEAN_FAIL(err, LEAN_ERR_ARG, "this generation's %d ids (max_ids) are all drawn", c->gen.limit);
    lean_status st = c->gen.resident ? resident_step(c, id, err) : host_step(c, id, err);
    if (st == LEAN_OK) st = lean_sampler_accept(c->gen.smp, id, 1, err);
    if (st != LEAN_OK) return st;
    if (c->gen.n_out++ > 0) c->pos++; /* the previous id is in the cache now */
    c->gen.last = *id;
    return LEAN_OK;
}

lean_status lean_gen_next_masked(lean_ctx *c, const lean_mask *mask, int32_t *id, lean_error *err) {
    if (!c || !id) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_next_masked: NULL argument");
    if (!c->gen.on) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gen_next_masked: no generation in progress");
    if (!c->gen.by_caller)
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "lean_gen_next_masked: the generation was begun without masks (lean_gen_begin_masked takes them)");
    lean_status st = mask ? sampler_check_mask(c->m->hp.n_vocab, mask, "lean_gen_next_masked", err) : LEAN_OK;
    if (st != LEAN_OK) return st;
    c->gen.mask = mask;
    st = lean_gen_next(c, id, err);
    c->gen.mask = NULL;
    return st;
}

void lean_gen_end(lean_ctx *c) {
    if (c && c->pending.on) { /* a prefill left pending: its read-back goes (backend.h, gen_end) */
        c->pending.on = false;
        c->has_logits = false;
        if (c->be->gen_end) c->be->gen_end(c->state);
    }
    if (!c || !c->gen.on) return;
    if (c->gen.resident) c->be->gen_end(c->state);
    /* a host generation's logits are the last draw's; the GPU's ran ahead of it */
    c->has_logits = !c->gen.resident && c->gen.n_out == 0;
    c->gen = (struct ctx_gen){.on = false};
}

/* ---- batched generation ---- */

/* lean_gen_next_batch's own checks of ctx[i] (ids: the output, unread). */
static lean_status check_gen_row(const char *fn, lean_ctx *const *ctx, int32_t i, const int32_t *ids, lean_error *err) {
    (void)ids;
    const lean_ctx *c = ctx[i];
    if (!c->gen.on) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d] has no generation in progress", fn, i);
    if (c->gen.n_out >= c->gen.limit)
        return c->gen.by_context ? LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL, "%s: ctx[%d]'s next draw "
                                             "would be at position %d, past n_ctx %d", fn, i,
                                             c->gen.start + c->gen.n_out, c->n_ctx)
                                 : LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d]'s %d ids (max_ids) "
                                             "are all drawn", fn, i, c->gen.limit);
    if (c->gen.resident != ctx[0]->gen.resident)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: ctx[%d] draws on the %s, ctx[0] on the %s", fn, i,
                         c->gen.resident ? "backend" : "host", ctx[0]->gen.resident ? "backend" : "host");
    return LEAN_OK;
}

/* lean_gen_next_batch_masked's checks of masks[i] (after check_rows: ctx[i] is one of the batch's
 * generations), as lean_gen_next_masked makes them. */
static lean_status check_masks(lean_ctx *const *ctx, int32_t n, const lean_mask *const *masks, lean_error *err) {
    static const char fn[] = "lean_gen_next_batch_masked";
    for (int32_t i = 0; masks && i < n; i++) {
        if (!masks[i]) continue;
        if (!ctx[i]->gen.by_caller)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: masks[%d] is for ctx[%d], whose generation was begun without "
                             "masks (lean_gen_begin_masked takes them)", fn, i, i);
        char who[64];
        snprintf(who, sizeof who, "%s: masks[%d]", fn, i);
        lean_status st = sampler_check_mask(ctx[i]->m->hp.n_vocab, masks[i], who, err);
        if (st != LEAN_OK) return st;
    }
    return LEAN_OK;
}

/* Resident: the backend draws every row's id in passes of up to BATCH_PASS rows, each row's
 * mask (the caller's, the grammar's, both) with it. */
static lean_status gen_batch_resident(lean_ctx *const *ctx, int32_t n, int32_t *ids, lean_error *err) {
    lean_status st = LEAN_OK;
    for (int32_t done = 0; st == LEAN_OK && done < n;) {
        const int32_t most = ctx[done]->n_batch < BATCH_PASS ? ctx[done]->n_batch : BATCH_PASS;
        const int32_t rows = n - done < most ? n - done : most;
        lean_backend_state *states[BATCH_PASS];
        const uint32_t *masks[BATCH_PASS];
        for (int32_t i = 0; st == LEAN_OK && i < rows; i++) {
            lean_ctx *c = ctx[done + i];
            states[i] = c->state, masks[i] = NULL;
            if (c->gen.masked) st = sampler_grammar_mask(c->gen.smp, c->gen.mask, &masks[i], err);
        }
        if (st == LEAN_OK) st = ctx[done]->be->gen_next_batch(states, masks, rows, ids + done, err);
        for (int32_t i = 0; st == LEAN_OK && i < rows; i++) {
            lean_ctx *c = ctx[done + i];
            if (c->gen.masked) st = sampler_grammar_take(c->gen.smp, ids[done + i], err);
            if (st == LEAN_OK) st = lean_sampler_accept(c->gen.smp, &ids[done + i], 1, err);
            if (st == LEAN_OK && c->gen.n_out++ > 0) c->pos++; /* the previous id is in the cache now */
            c->gen.last = ids[done + i];
        }
        done += rows;
    }
    return st;
}

/* Resident, one generation alone: lean_gen_next's step (decode's kernels, which fuse the norms and
 * the q|k|v epilogue that a batched pass of one row runs as dispatches of their own; the same
 * ids), never LEAN_PENDING (lean.h). */
static lean_status gen_one_resident(lean_ctx *c, int32_t *id, lean_error *err) {
    lean_status st = lean_gen_next(c, id, err);
    if (st != LEAN_PENDING) return st;
    return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                     "lean_gen_next_batch cannot wait for the GPU in this host (no JSPI): use lean_gen_next");
}

/* On the host: the last ids handed out decoded together (lean_decode_batch's passes), then
 * each row's draw from its logits: a decoded row's in the pass's buffer when the backend has
 * batched passes (not copied to c->logits: a generation's next step writes them again), else
 * in c->logits, as a row's first draw (its prefill's). */
static lean_status gen_batch_host(lean_ctx *const *ctx, int32_t n, int32_t *ids, lean_error *err) {
    const size_t n_vocab = (size_t)ctx[0]->m->hp.n_vocab;
    const bool pass = ctx[0]->be->forward_batch != NULL;
    lean_ctx **dec = lean_malloc(sizeof *dec * (size_t)n);
    int32_t *last = lean_malloc(sizeof *last * (size_t)n), d = 0;
    float *logits = NULL;
    lean_status st = dec && last ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "lean_gen_next_batch: %d rows", n);
    for (int32_t i = 0; st == LEAN_OK && i < n; i++)
        if (ctx[i]->gen.n_out > 0) dec[d] = ctx[i], last[d++] = ctx[i]->gen.last;
    if (st == LEAN_OK && pass && d && !(logits = lean_malloc(sizeof *logits * (size_t)d * n_vocab)))
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "lean_gen_next_batch: the logits of %d rows", d);
    if (st == LEAN_OK && d) st = decode_rows(dec, last, d, logits, false, err);
    for (int32_t i = 0, j = 0; st == LEAN_OK && i < n; i++) {
        lean_ctx *c = ctx[i];
        const float *row = pass && c->gen.n_out > 0 ? logits + (size_t)j++ * n_vocab : c->logits;
        st = lean_sampler_sample(c->gen.smp, row, c->pos, c->gen.mask, &ids[i], err);
        if (st == LEAN_OK) st = lean_sampler_accept(c->gen.smp, &ids[i], 1, err);
        c->gen.n_out++; /* decode_rows moved pos past the id it decoded */
        c->gen.last = ids[i];
    }
    lean_free(dec), lean_free(last), lean_free(logits);
    return st;
}

lean_status lean_gen_next_batch(lean_ctx *const *ctx, int32_t n, int32_t *ids, lean_error *err) {
    return lean_gen_next_batch_masked(ctx, n, NULL, ids, err);
}

lean_status lean_gen_next_batch_masked(lean_ctx *const *ctx, int32_t n, const lean_mask *const *masks, int32_t *ids,
                                       lean_error *err) {
    lean_status st = check_rows(masks ? "lean_gen_next_batch_masked" : "lean_gen_next_batch", ctx, n, ids,
                                check_gen_row, err);
    if (st == LEAN_OK) st = check_masks(ctx, n, masks, err);
    if (st != LEAN_OK) return st;
    for (int32_t i = 0; masks && i < n; i++) ctx[i]->gen.mask = masks[i]; /* read during the call only */
    if (!ctx[0]->gen.resident) st = gen_batch_host(ctx, n, ids, err);
    else st = n == 1 ? gen_one_resident(ctx[0], ids, err) : gen_batch_resident(ctx, n, ids, err);
    for (int32_t i = 0; masks && i < n; i++) ctx[i]->gen.mask = NULL;
    return st;
}

/* ---- profile ---- */

lean_status lean_ctx_profile(lean_ctx *c, int64_t steps, char *text, size_t cap, lean_error *err) {
    if (!c || (!text && cap)) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_ctx_profile: NULL argument");
    if (cap) text[0] = 0;
    if (!c->be->profile)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "the %s backend has no profile (the GPU backend has)", c->be->name);
    return c->be->profile(c->state, steps, text, cap, err);
}
