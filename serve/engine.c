/* engine.c — the slots of `lean serve` and the one thread that computes them.
 *
 * A slot is a lean_ctx (its own KV cache) with the ids that cache holds. A queued job takes
 * the free slot whose cached ids share the longest prefix with its prompt (the least recently
 * used one among equals): the prefix cache. A conversation sent again with one more turn
 * finds its earlier turns there and prefills only what is new. The engine's loop:
 *
 *   1. take cancellations (a connection closed, the server stopping), drop queued jobs whose
 *      clients went away (every QUEUE_POLL_MS), take new jobs into free slots; look for
 *      clients of slots that hung up (a poll of their sockets);
 *   2. prefill one chunk of each new job's prompt past its cached prefix (continuous
 *      batching: new requests join between steps, a long prompt over several); a prompt
 *      done, the slot's generation begins (lean_gen_begin with the job's sampler, or
 *      lean_gen_begin_masked when the job has a logit_bias mask);
 *   3. one step for every generating slot: one lean_gen_next_batch_masked decodes each slot's
 *      last id and draws its next, under its logit_bias mask if it has one (on the GPU the
 *      draws stay there: only the ids come back);
 *   4. each slot's new id: hand its text out (held back while it could still grow into a
 *      stop string), finish the job on an end-of-generation id, a stop string, max_tokens, a
 *      full context or a grammar that is done (lean_gen_end; the slot leaves the batch).
 *
 * The cache of a slot holds its ids but the last one handed out: that one is decoded by the
 * next step (lean.h, lean_gen_next_batch), so a finished slot keeps the ids up to it, and the
 * prefix cache matches against exactly those.
 *
 * The reply of a job does not depend on the others: each slot has its own cache and sampler
 * (seed, penalties, grammar), the draw depends on (seed, position, logits, history) only, the
 * CPU kernels give the same logits for any prefill chunking (lean.h), so a reused prefix is
 * the same bits as a fresh prefill, and lean_gen_next_batch hands each context the ids it
 * would draw alone. A step fails as a whole (lean.h: a failure midway leaves the contexts
 * unknown), so what can fail one slot alone is looked for before it: a grammar that is done
 * or at a dead end. tests/serve/load.mjs holds every seeded reply under load to the same
 * request made alone.
 *
 * Sections: slots, text out (stop strings), the loop, start and stop. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "serve.h"
#include "../cli/cli.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- slots ---- */

struct serve_slot {
    lean_ctx *ctx;
    int32_t *ids;           /* (n_ctx) the ids in the KV cache, n_ids = lean_ctx_pos */
    int32_t n_ids;
    lean_text_stream *ts;
    serve_job *job;         /* NULL: free */
    lean_sampler *smp;      /* the job's */
    int prefill;            /* 1: the job is new; 2: its prompt is being prefilled; 0: generating */
    int32_t last;           /* the last id handed out, which the next step decodes; -1 none */
    char *reply;            /* the reply text so far; [0, n_out) handed out */
    size_t n_reply, cap_reply, n_out;
    uint64_t used;          /* srv->n_jobs when it last took a job: least recently used first */
};

/* The slots over n contexts (taken: engine_free frees them, also after a failure). */
static lean_status engine_init(serve_server *srv, lean_ctx **ctxs, int n, lean_error *err) {
    srv->slots = calloc((size_t)n, sizeof *srv->slots);
    if (!srv->slots) {
        for (int i = 0; i < n; i++) lean_ctx_free(ctxs[i]);
        err->status = LEAN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "no memory for %d slots", n);
        return err->status;
    }
    srv->n_slots = n;
    srv->n_ctx = lean_ctx_n_ctx(ctxs[0]);
    srv->step_ctx = calloc((size_t)n, sizeof *srv->step_ctx);
    srv->step_ids = calloc((size_t)n, sizeof *srv->step_ids);
    srv->step_slot = calloc((size_t)n, sizeof *srv->step_slot);
    srv->step_allow = calloc((size_t)n, sizeof *srv->step_allow);
    srv->step_mask = calloc((size_t)n, sizeof *srv->step_mask);
    srv->logits = malloc(sizeof *srv->logits * (size_t)srv->n_vocab);
    srv->mask = malloc(sizeof *srv->mask * LEAN_MASK_WORDS(srv->n_vocab));
    for (int i = 0; i < n; i++) srv->slots[i].ctx = ctxs[i], srv->slots[i].last = -1;
    if (!srv->step_ctx || !srv->step_ids || !srv->step_slot || !srv->step_allow || !srv->step_mask || !srv->logits ||
        !srv->mask) {
        err->status = LEAN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "no memory for a step of %d slots", n);
        return err->status;
    }
    for (int i = 0; i < n; i++) {
        serve_slot *s = &srv->slots[i];
        s->ids = malloc(sizeof *s->ids * (size_t)srv->n_ctx);
        if (!s->ids) {
            err->status = LEAN_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "no memory for slot %d's buffers", i);
            return err->status;
        }
        lean_status st = lean_text_stream_create(srv->tok, LEAN_DETOKENIZE_SKIP_SPECIAL, &s->ts, err);
        if (st != LEAN_OK) return st;
    }
    return LEAN_OK;
}

const char *engine_backend_str(const serve_server *srv, char *text, size_t cap) {
    return lean_ctx_backend_str(srv->slots[0].ctx, text, cap);
}

static void engine_free(serve_server *srv) {
    for (int i = 0; srv->slots && i < srv->n_slots; i++) {
        serve_slot *s = &srv->slots[i];
        lean_ctx_free(s->ctx);
        lean_text_stream_free(s->ts);
        lean_sampler_free(s->smp);
        free(s->ids);
        free(s->reply);
    }
    free(srv->slots);
    free(srv->step_ctx);
    free(srv->step_ids);
    free(srv->step_allow);
    free(srv->step_mask);
    free(srv->step_slot);
    free(srv->logits);
    free(srv->mask);
    srv->slots = NULL;
}

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    return k;
}

/* The free slot for j: the longest cached prefix, then the least recently used. */
static serve_slot *pick_slot(serve_server *srv, const serve_job *j) {
    serve_slot *best = NULL;
    int32_t best_k = -1;
    for (int i = 0; i < srv->n_slots; i++) {
        serve_slot *s = &srv->slots[i];
        if (s->job) continue;
        int32_t k = common_prefix(s->ids, s->n_ids, j->prompt, j->n_prompt);
        if (k > best_k || (k == best_k && s->used < best->used)) best = s, best_k = k;
    }
    return best;
}

/* ---- text out ---- */

/* The longest k < strlen(stop) such that text ends with stop's first k bytes. */
static size_t partial_stop(const char *text, size_t n, const char *stop) {
    size_t ls = strlen(stop);
    for (size_t k = ls - 1 < n ? ls - 1 : n; k > 0; k--)
        if (memcmp(text + n - k, stop, k) == 0) return k;
    return 0;
}

/* Adds the slot's new reply text; hands out what can no longer be part of a stop string
 * (all of it when final). Returns 1 when a stop string ended the reply (cut before it).
 * A stop string cannot begin before n_out: text that could begin one is held back. */
static int slot_text(serve_server *srv, serve_slot *s, const char *text, size_t n, int final, int *nomem) {
    serve_job *j = s->job;
    if (text_append(&s->reply, &s->n_reply, &s->cap_reply, text, n) != 0) return *nomem = 1, 0;
    size_t end = s->n_reply;
    int stopped = 0;
    for (int i = 0; i < j->n_stop; i++) {
        const char *hit = memmem(s->reply + s->n_out, s->n_reply - s->n_out, j->stop[i], strlen(j->stop[i]));
        if (hit && (size_t)(hit - s->reply) < end) end = (size_t)(hit - s->reply), stopped = 1;
    }
    if (!stopped && !final)
        for (int i = 0; i < j->n_stop; i++) {
            size_t k = partial_stop(s->reply + s->n_out, s->n_reply - s->n_out, j->stop[i]);
            if (s->n_reply - k < end) end = s->n_reply - k;
        }
    if (end > s->n_out) {
        pthread_mutex_lock(&srv->mu);
        if (text_append(&j->text, &j->n_text, &j->cap_text, s->reply + s->n_out, end - s->n_out) != 0) *nomem = 1;
        if (!j->t_first_ms) j->t_first_ms = now_ms();
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&srv->mu);
        s->n_out = end;
    }
    return stopped;
}

/* Ends the slot's job: finish is "stop", "length", or NULL with an error (status, message). */
static void slot_finish(serve_server *srv, serve_slot *s, const char *finish, int status, const char *msg) {
    serve_job *j = s->job;
    if (!j) return;
    if (finish) {
        const char *t;
        size_t n;
        int nomem = 0;
        lean_error err;
        if (lean_text_stream_flush(s->ts, &t, &n, &err) == LEAN_OK && slot_text(srv, s, t, n, 1, &nomem))
            finish = "stop";
        if (nomem) finish = NULL, status = 500, msg = "no memory for the reply text";
    } else {
        const char *t;
        size_t n;
        lean_error err;
        lean_text_stream_flush(s->ts, &t, &n, &err);
    }
    pthread_mutex_lock(&srv->mu);
    j->done = 1;
    j->finish = finish;
    srv->n_done++;
    srv->n_cancelled += j->cancelled != 0;
    j->t_done_ms = now_ms();
    if (!finish && !j->cancelled) {
        j->http_status = status;
        snprintf(j->error, sizeof j->error, "%s", msg);
    }
    if (srv->verbosity >= 0)
        fprintf(stderr, "lean serve: slot %d: %s, %d prompt ids (%d cached), %d generated, %.0f ms\n",
                (int)(s - srv->slots), j->cancelled ? "cancelled" : finish ? finish : j->error, j->n_prompt,
                j->n_cached, j->n_gen, j->t_done_ms - j->t_queued_ms);
    pthread_cond_broadcast(&j->cv);
    job_unref_locked(j);
    s->job = NULL;
    srv->n_busy--;
    pthread_mutex_unlock(&srv->mu);
    /* the cache keeps the ids but the last one handed out (lean_gen_end drops what the GPU ran
     * ahead); after a failed prefill or step the rows past what the slot knows are unknown */
    lean_gen_end(s->ctx);
    if (lean_ctx_pos(s->ctx) != s->n_ids) {
        lean_error e2;
        if (lean_ctx_pos(s->ctx) < s->n_ids) s->n_ids = lean_ctx_pos(s->ctx);
        lean_ctx_truncate(s->ctx, s->n_ids, &e2);
    }
    lean_sampler_free(s->smp);
    s->smp = NULL;
    s->last = -1;
}

/* ---- the loop ---- */

/* Prefills one chunk (the context's n_batch ids) of the slot's job past its cached prefix, so
 * a long prompt does not stall the other slots' steps, and begins the generation after the
 * last (or finishes the job on a failure). At least the last prompt id is computed: its logits
 * make the first draw. Split prefills are the same bits as one (lean.h: any chunking). */
static void slot_prefill(serve_server *srv, serve_slot *s) {
    serve_job *j = s->job;
    lean_error err;
    lean_status st = LEAN_OK;
    if (s->prefill == 1) {
        int32_t keep = common_prefix(s->ids, s->n_ids, j->prompt, j->n_prompt);
        if (keep >= j->n_prompt) keep = j->n_prompt - 1;
        pthread_mutex_lock(&srv->mu);
        j->n_cached = keep;
        j->t_start_ms = now_ms();
        pthread_mutex_unlock(&srv->mu);
        s->n_reply = s->n_out = 0;
        s->prefill = 2;
        st = lean_sampler_create(&j->sampling, srv->n_vocab, &s->smp, &err);
        if (st == LEAN_OK) st = lean_sampler_accept(s->smp, j->prompt, j->n_prompt, &err);
        if (st == LEAN_OK && j->grammar) st = lean_sampler_set_grammar(s->smp, j->grammar, &err);
        if (st == LEAN_OK) st = lean_ctx_truncate(s->ctx, keep, &err);
        if (st == LEAN_OK) s->n_ids = keep;
    }
    int32_t left = j->n_prompt - s->n_ids, n = left < lean_ctx_n_batch(s->ctx) ? left : lean_ctx_n_batch(s->ctx);
    /* the last chunk's logits are what lean_gen_begin draws from; the library keeps them */
    if (st == LEAN_OK) st = lean_prefill(s->ctx, j->prompt + s->n_ids, n, n == left ? srv->logits : NULL, &err);
    if (st == LEAN_OK) {
        memcpy(s->ids + s->n_ids, j->prompt + s->n_ids, sizeof *s->ids * (size_t)n);
        s->n_ids += n;
    }
    if (st == LEAN_OK && n == left) {
        /* logit_bias: every draw under the job's mask */
        st = (j->allow ? lean_gen_begin_masked : lean_gen_begin)(s->ctx, s->smp, j->max_tokens > 0 ? j->max_tokens : 0,
                                                                  &err);
        s->prefill = 0;
    }
    if (st != LEAN_OK) {
        s->prefill = 0;
        slot_finish(srv, s, NULL, st == LEAN_ERR_ARG ? 400 : 500, err.msg);
    }
}

/* Hands out the slot's new id (its sampler has taken it): its text, and the job's end on an
 * end-of-generation id, a stop string, max_tokens or a full context; else the next step
 * decodes it. */
static void slot_take(serve_server *srv, serve_slot *s, int32_t id) {
    serve_job *j = s->job;
    lean_error err;
    if (lean_token_is_eog(srv->tok, id)) return slot_finish(srv, s, "stop", 0, NULL);
    const char *t;
    size_t n;
    if (lean_text_stream_push(s->ts, id, &t, &n, &err) != LEAN_OK) return slot_finish(srv, s, NULL, 500, err.msg);
    pthread_mutex_lock(&srv->mu);
    j->n_gen++;
    pthread_mutex_unlock(&srv->mu);
    int nomem = 0;
    if (slot_text(srv, s, t, n, 0, &nomem)) return slot_finish(srv, s, "stop", 0, NULL);
    if (nomem) return slot_finish(srv, s, NULL, 500, "no memory for the reply text");
    /* the id would be decoded at position n_ids; max_tokens ids are lean_gen_begin's limit */
    if ((j->max_tokens > 0 && j->n_gen >= j->max_tokens) || s->n_ids + 1 >= srv->n_ctx)
        return slot_finish(srv, s, "length", 0, NULL);
    s->last = id;
}

/* 1 when masks a and b (LEAN_MASK_WORDS(n_vocab) words) allow an id in common. */
static int mask_meets(const uint32_t *a, const uint32_t *b, int32_t n_vocab) {
    for (size_t w = 0; w < LEAN_MASK_WORDS(n_vocab); w++)
        if (a[w] & b[w]) return 1;
    return 0;
}

/* One step for every generating slot, in one lean_gen_next_batch_masked: the weights are read
 * once for all of them, each slot's last id is decoded and its next drawn by its own sampler
 * (under its logit_bias mask), the ids it would get alone. A step fails for all its slots (lean.h), so what fails one slot
 * alone, a grammar's dead end (or one logit_bias makes), is found before it: the grammar's
 * mask is cached, the draw then takes it without computing it again (grammar.c). */
static void gen_step(serve_server *srv) {
    int n = 0;
    lean_error err;
    for (int i = 0; i < srv->n_slots; i++) {
        serve_slot *s = &srv->slots[i];
        if (!s->job || s->prefill) continue;
        const serve_job *j = s->job;
        /* response_format: once nothing may follow the grammar, the reply is over (an
         * end-of-generation id would be the only draw left) */
        if (j->grammar && lean_grammar_done(j->grammar)) {
            slot_finish(srv, s, "stop", 0, NULL);
            continue;
        }
        if (j->grammar && lean_grammar_mask(j->grammar, srv->mask, srv->n_vocab, NULL, &err) != LEAN_OK) {
            slot_finish(srv, s, NULL, 500, err.msg);
            continue;
        }
        if (j->grammar && j->allow && !mask_meets(srv->mask, j->allow, srv->n_vocab)) {
            slot_finish(srv, s, NULL, 500, "logit_bias bans every token the response_format allows next");
            continue;
        }
        srv->step_allow[n] = (lean_mask){j->allow, srv->n_vocab};
        srv->step_mask[n] = j->allow ? &srv->step_allow[n] : NULL;
        srv->step_ctx[n] = s->ctx, srv->step_slot[n] = i;
        n++;
    }
    if (n == 0) return;
    lean_status st = lean_gen_next_batch_masked(srv->step_ctx, n, srv->step_mask, srv->step_ids, &err);
    for (int b = 0; b < n; b++) {
        serve_slot *s = &srv->slots[srv->step_slot[b]];
        if (st != LEAN_OK) { /* slot_finish makes the cache what the slot knows */
            slot_finish(srv, s, NULL, 500, err.msg);
            continue;
        }
        if (s->last >= 0) s->ids[s->n_ids++] = s->last; /* in the cache now */
        s->last = -1;
        slot_take(srv, s, srv->step_ids[b]);
    }
}

/* 1 when the client on fd has closed its end (or the socket failed). */
static int hung_up(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return 1;
    return 0;
}

/* A queued job's socket is polled at most this often: one poll(2) per queued job, and the
 * queue may hold --max-queue of them. */
#define QUEUE_POLL_MS 100

/* Drops the queued jobs whose client went away (cancelled, or its socket hung up), under
 * srv->mu: a request given up while it waits leaves the queue now, not when a slot frees. */
static void drop_gone_queued(serve_server *srv) {
    serve_job *prev = NULL;
    for (serve_job *j = srv->queue_head, *next; j; j = next) {
        next = j->next;
        if (!j->cancelled && !(j->fd >= 0 && hung_up(j->fd))) {
            prev = j;
            continue;
        }
        if (prev) prev->next = next;
        else srv->queue_head = next;
        if (srv->queue_tail == j) srv->queue_tail = prev;
        srv->n_queued--;
        j->next = NULL;
        j->cancelled = j->done = 1;
        j->t_done_ms = now_ms();
        srv->n_done++, srv->n_cancelled++;
        if (srv->verbosity >= 0)
            fprintf(stderr, "lean serve: queued: cancelled, %d prompt ids, %.0f ms\n", j->n_prompt,
                    j->t_done_ms - j->t_queued_ms);
        pthread_cond_broadcast(&j->cv);
        job_unref_locked(j);
    }
}

/* What engine_start hands its thread. */
typedef struct engine_args {
    serve_server *srv;
    lean_ctx_params params;
    int n, verbosity;
    lean_error *err;
} engine_args;

/* Makes the slots on this thread; 0, or -1 with *err set. */
static int engine_open(serve_server *srv, const engine_args *a) {
    lean_ctx **ctxs = calloc((size_t)a->n, sizeof *ctxs);
    if (!ctxs) {
        a->err->status = LEAN_ERR_NOMEM;
        snprintf(a->err->msg, sizeof a->err->msg, "no memory for %d slots", a->n);
        return -1;
    }
    for (int i = 0; i < a->n; i++)
        if (ctx_create_quietly(srv->model, &a->params, a->verbosity, &ctxs[i], a->err) != LEAN_OK ||
            (srv->n_loras && lean_ctx_set_loras(ctxs[i], srv->loras, srv->lora_scales, srv->n_loras, a->err) != LEAN_OK)) {
            for (int k = 0; k <= i; k++) lean_ctx_free(ctxs[k]);
            free(ctxs);
            return -1;
        }
    lean_status st = engine_init(srv, ctxs, a->n, a->err);
    free(ctxs);
    return st == LEAN_OK ? 0 : -1;
}

static void *engine_main(void *arg) {
    engine_args *a = arg;
    serve_server *srv = a->srv;
    int ok = engine_open(srv, a) == 0;
    pthread_mutex_lock(&srv->mu);
    srv->started = ok ? 1 : -1; /* a is engine_start's: not touched after this */
    pthread_cond_broadcast(&srv->wake);
    pthread_mutex_unlock(&srv->mu);
    if (!ok) {
        engine_free(srv);
        return NULL;
    }
    double queue_polled_ms = 0;
    for (;;) {
        pthread_mutex_lock(&srv->mu);
        for (;;) {
            int active = 0, free_slot = 0;
            for (int i = 0; i < srv->n_slots; i++) active |= srv->slots[i].job != NULL, free_slot |= !srv->slots[i].job;
            if (srv->stopping || active || (srv->queue_head && free_slot)) break;
            pthread_cond_wait(&srv->wake, &srv->mu);
        }
        if (srv->stopping) {
            for (serve_job *j = srv->queue_head, *next; j; j = next) {
                next = j->next;
                j->cancelled = j->done = 1;
                pthread_cond_broadcast(&j->cv);
                job_unref_locked(j);
            }
            srv->queue_head = srv->queue_tail = NULL;
            for (int i = 0; i < srv->n_slots; i++)
                if (srv->slots[i].job) srv->slots[i].job->cancelled = 1;
        }
        if (srv->queue_head && now_ms() - queue_polled_ms >= QUEUE_POLL_MS) {
            drop_gone_queued(srv);
            queue_polled_ms = now_ms();
        }
        /* new jobs into free slots, in arrival order */
        while (srv->queue_head && !srv->stopping) {
            serve_slot *s = pick_slot(srv, srv->queue_head);
            if (!s) break;
            serve_job *j = srv->queue_head;
            srv->queue_head = j->next;
            if (!srv->queue_head) srv->queue_tail = NULL;
            srv->n_queued--;
            j->next = NULL;
            s->job = j;
            srv->n_busy++;
            s->prefill = 1;
            s->used = ++srv->n_jobs;
        }
        int stopping = srv->stopping;
        pthread_mutex_unlock(&srv->mu);

        for (int i = 0; i < srv->n_slots; i++) {
            serve_slot *s = &srv->slots[i];
            if (!s->job) continue;
            pthread_mutex_lock(&srv->mu);
            int fd = s->job->cancelled ? -1 : s->job->fd; /* http.c sets -1 before the socket closes */
            if (fd >= 0 && hung_up(fd)) s->job->cancelled = 1;
            int cancelled = s->job->cancelled;
            pthread_mutex_unlock(&srv->mu);
            if (cancelled) slot_finish(srv, s, NULL, 0, NULL);
        }
        if (stopping) break;
        for (int i = 0; i < srv->n_slots; i++) {
            serve_slot *s = &srv->slots[i];
            if (s->job && s->prefill) slot_prefill(srv, s);
        }
        gen_step(srv);
    }
    engine_free(srv);
    return NULL;
}

/* ---- start and stop ---- */

int engine_submit(serve_server *srv, serve_job *j) {
    pthread_mutex_lock(&srv->mu);
    if (srv->stopping || srv->n_queued >= srv->max_queued) {
        pthread_mutex_unlock(&srv->mu);
        return -1;
    }
    j->refs++;
    j->t_queued_ms = now_ms();
    if (srv->queue_tail) srv->queue_tail->next = j;
    else srv->queue_head = j;
    srv->queue_tail = j;
    srv->n_queued++;
    pthread_cond_signal(&srv->wake);
    pthread_mutex_unlock(&srv->mu);
    return 0;
}

lean_status engine_start(serve_server *srv, const lean_ctx_params *p, int n, int verbosity, lean_error *err) {
    engine_args a = {.srv = srv, .params = *p, .n = n, .verbosity = verbosity, .err = err};
    if (pthread_create(&srv->engine, NULL, engine_main, &a) != 0) {
        err->status = LEAN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "cannot start the engine thread");
        return err->status;
    }
    pthread_mutex_lock(&srv->mu);
    while (!srv->started) pthread_cond_wait(&srv->wake, &srv->mu);
    int ok = srv->started > 0;
    pthread_mutex_unlock(&srv->mu);
    if (!ok) {
        pthread_join(srv->engine, NULL);
        return err->status;
    }
    return LEAN_OK;
}

void engine_stop(serve_server *srv) {
    pthread_mutex_lock(&srv->mu);
    srv->stopping = 1;
    pthread_cond_signal(&srv->wake);
    pthread_mutex_unlock(&srv->mu);
    pthread_join(srv->engine, NULL);
}
