/* chat.c — chat sessions: a conversation kept resident in the KV cache (lean.h, "conversations").
 *
 * What it does: holds the turns of one conversation and the exact ids its lean_ctx has
 * cached. A turn renders the whole conversation through the chat template, tokenizes it,
 * truncates the cache to the longest prefix it shares with that rendering, prefills the
 * rest and draws the reply, one bounded step at a time (the pump: lean_chat_step), turning
 * ids into text with a lean_text_stream and holding back text that could still become a
 * stop string. What it does not: tokenize, render or sample by itself (tokenizer.c,
 * template*.c, sampler.c do), shift the context (a full context ends the reply), or keep
 * more than one conversation per session.
 *
 * Invariants, true between any two calls:
 *   ids[0..n_ids) are the ids in the KV cache, in position order: n_ids == lean_ctx_pos(ctx);
 *   logits are the next-token logits after ids[n_ids - 1] (when has_logits: from the prompt's
 *   last chunk until a drawn id enters the cache; a reply's ids are drawn by lean_gen_*, which
 *   on the GPU keeps the logits there);
 *   msgs holds the committed conversation (system prompt first, if any), user/assistant
 *   pairs after it; a turn in progress is only committed when it ends.
 *
 * Sections: buffers · params / create / free · conversation · stop strings ·
 *           submit · step · turn / abort / accessors
 */
#include "core/chat.h"
#include "core/sampler.h" /* sampler_check_mask */

#include <stdatomic.h>
#include <string.h>

typedef struct chat_buf { /* bytes, always with room for a NUL after them */
    char *p;
    size_t n, cap;
} chat_buf;

/* PHASE_BEGIN: the prompt is in the cache, the generation not begun (the step after the last
 * prefill chunk begins it, or a begin left pending) */
enum { PHASE_IDLE, PHASE_PREFILL, PHASE_BEGIN, PHASE_GEN };

struct lean_chat_session {
    /* ---- configuration (create) */
    const lean_model *m;
    const lean_tokenizer *tok;
    const char *tpl;            /* template source; NULL = ChatML (lean_chat_render's fallback) */
    char *tpl_owned;            /* a copy of params.template_source, when given */
    lean_chat_params tp;        /* bos/eos token text, add_generation_prompt = 1 */
    char **stops;               /* n_stops non-empty strings, owned */
    int32_t n_stops;
    int32_t n_predict, n_batch, n_ctx, n_vocab;
    bool drop_oldest;

    /* ---- the sequence */
    lean_ctx *ctx;
    lean_sampler *smp;
    lean_grammar *grammar;      /* nullable, not owned: every reply is held to it */
    uint32_t *mask;             /* (LEAN_MASK_WORDS(n_vocab)) lean_chat_session_set_mask's copy, once set */
    bool masked;                /* the draws that follow are held to mask */
    lean_text_stream *ts;
    bool ts_dirty;              /* ids were pushed since the last flush */
    float *logits;              /* (n_vocab) after ids[n_ids - 1] */
    bool has_logits;
    int32_t *ids;               /* (cap_ids) the resident ids */
    int32_t n_ids, cap_ids;

    /* ---- the conversation: msgs[0] is the system prompt when n_system == 1 */
    lean_chat_message *msgs;    /* roles are static strings; contents owned */
    size_t n_msgs, cap_msgs, n_system;
    lean_chat_message *view;    /* scratch: the messages one rendering sees */
    size_t cap_view;

    /* ---- the turn in progress */
    int phase;
    char *user;                 /* the user text, owned until committed */
    size_t n_drop;              /* messages after the system prompt left out of this turn */
    int32_t *prompt;            /* (cap_prompt) the rendering's ids: n_prompt of them */
    int32_t n_prompt, cap_prompt;
    int32_t next;               /* the last drawn id, not yet decoded; -1 = none */
    bool gen_masked;            /* the reply's generation was begun with lean_gen_begin_masked */
    chat_buf pend;              /* text from the stream not handed out yet (a stop string may start in it) */
    chat_buf reply;             /* text handed out this turn: the assistant's message */
    chat_buf out;               /* text handed out by the last step */
    bool stop_requested;        /* the callback returned nonzero */
    bool pending;               /* the last step returned LEAN_PENDING: the next resumes it */
    lean_chat_turn_stats stats;
    atomic_int abort_flag;
};

/* ---- buffers ---- */

static bool buf_reserve(chat_buf *b, size_t more) {
    if (b->n + more + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more + 1) {
        if (cap > SIZE_MAX / 2) return false;
        cap *= 2;
    }
    char *p = lean_realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool buf_put(chat_buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

/* Grows an id array to hold at least need ids. */
static bool ids_reserve(int32_t **p, int32_t *cap, int32_t need) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    int32_t *q = lean_realloc(*p, sizeof *q * (size_t)c);
    if (!q) return false;
    *p = q;
    *cap = (int32_t)(c > INT32_MAX ? INT32_MAX : c);
    return true;
}

/* ---- params / create / free ---- */

lean_chat_session_params lean_chat_session_default_params(void) {
    lean_chat_session_params p;
    memset(&p, 0, sizeof p);
    p.sampling = lean_sampler_default_params();
    return p;
}

static lean_status check_params(const lean_chat_session_params *p, lean_error *err) {
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_predict < 0 || p->n_stop < 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "n_ctx (%d), n_batch (%d), n_predict (%d) and n_stop (%d) must be >= 0",
                         p->n_ctx, p->n_batch, p->n_predict, p->n_stop);
    if (p->n_stop > 0 && !p->stop) return LEAN_FAIL(err, LEAN_ERR_ARG, "n_stop is %d but stop is NULL", p->n_stop);
    for (int32_t i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0])
            return LEAN_FAIL(err, LEAN_ERR_ARG, "stop string %d is %s", i, p->stop[i] ? "empty" : "NULL");
    return lean_sampler_params_check(&p->sampling, err);
}

lean_status lean_chat_session_create(const lean_model *m, const lean_chat_session_params *params,
                                     lean_chat_session **out, lean_error *err) {
    if (!m || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_create: NULL argument");
    const lean_chat_session_params p = params ? *params : lean_chat_session_default_params();
    lean_status st = check_params(&p, err);
    if (st != LEAN_OK) return st;
    const lean_tokenizer *tok = lean_model_tokenizer(m);
    if (!tok) return LEAN_FAIL(err, LEAN_ERR_MODEL, "the model file has no tokenizer (tokenizer.ggml.model)");
    if ((st = lean_tokenizer_check(tok, err)) != LEAN_OK) return st;
    const char *model_tpl = lean_model_chat_template(m);
    if (!p.template_source && !model_tpl && !p.chatml_fallback)
        return LEAN_FAIL(err, LEAN_ERR_MODEL,
                         "the model file has no chat template (tokenizer.chat_template): give one, or ask for "
                         "the ChatML fallback");

    lean_chat_session *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a chat session");
    s->m = m;
    s->tok = tok;
    s->n_vocab = lean_model_n_vocab(m);
    s->n_predict = p.n_predict;
    s->drop_oldest = p.drop_oldest != 0;
    s->next = -1;
    atomic_init(&s->abort_flag, 0);
    s->tp = lean_chat_default_params();
    s->tp.add_generation_prompt = 1;
    lean_chat_params_from_model(m, &s->tp);

    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = p.n_ctx;
    cp.n_batch = p.n_batch;
    cp.n_threads = p.n_threads;
    cp.backend = p.backend;
    cp.exact = p.exact;
    cp.progress = p.progress;
    cp.progress_user = p.progress_user;
    if ((st = lean_ctx_create(m, &cp, &s->ctx, err)) != LEAN_OK) goto fail;
    s->n_ctx = lean_ctx_n_ctx(s->ctx);
    s->n_batch = lean_ctx_n_batch(s->ctx);
    if (s->n_predict >= s->n_ctx) {
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "n_predict %d leaves no room for a prompt in a context of %d",
                       s->n_predict, s->n_ctx);
        goto fail;
    }
    if ((st = lean_sampler_create(&p.sampling, s->n_vocab, &s->smp, err)) != LEAN_OK) goto fail;
    if ((st = lean_text_stream_create(tok, LEAN_DETOKENIZE_SKIP_SPECIAL, &s->ts, err)) != LEAN_OK) goto fail;
    if (!(s->logits = lean_calloc((size_t)s->n_vocab, sizeof *s->logits))) goto nomem;
    if (p.template_source) {
        if (!(s->tpl_owned = lean_strndup(p.template_source, strlen(p.template_source)))) goto nomem;
        s->tpl = s->tpl_owned;
    } else {
        s->tpl = model_tpl; /* NULL: ChatML, asked for above */
    }
    if (p.n_stop > 0) {
        if (!(s->stops = lean_calloc((size_t)p.n_stop, sizeof *s->stops))) goto nomem;
        for (; s->n_stops < p.n_stop; s->n_stops++)
            if (!(s->stops[s->n_stops] = lean_strndup(p.stop[s->n_stops], strlen(p.stop[s->n_stops])))) goto nomem;
    }
    if (!(s->msgs = lean_calloc(8, sizeof *s->msgs))) goto nomem;
    s->cap_msgs = 8;
    if (p.system) {
        char *sys = lean_strndup(p.system, strlen(p.system));
        if (!sys) goto nomem;
        s->msgs[0] = (lean_chat_message){"system", sys};
        s->n_msgs = s->n_system = 1;
    }
    *out = s;
    return LEAN_OK;
nomem:
    st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a chat session");
fail:
    lean_chat_session_free(s);
    return st;
}

static void clear_turn(lean_chat_session *s);

void lean_chat_session_free(lean_chat_session *s) {
    if (!s) return;
    clear_turn(s);
    for (size_t i = 0; i < s->n_msgs; i++) lean_free((char *)s->msgs[i].content);
    lean_free(s->msgs);
    lean_free(s->view);
    for (int32_t i = 0; i < s->n_stops; i++) lean_free(s->stops[i]);
    lean_free(s->stops);
    lean_free(s->tpl_owned);
    lean_free(s->logits);
    lean_free(s->mask);
    lean_free(s->ids);
    lean_free(s->prompt);
    lean_free(s->pend.p);
    lean_free(s->reply.p);
    lean_free(s->out.p);
    lean_text_stream_free(s->ts);
    lean_sampler_free(s->smp);
    lean_ctx_free(s->ctx);
    lean_free(s);
}

/* ---- conversation ---- */

/* Forgets the turn in progress (nothing committed) and puts the sequence state back in line
 * with the invariants. Cannot fail. */
static void clear_turn(lean_chat_session *s) {
    s->phase = PHASE_IDLE;
    s->pending = false; /* lean_gen_end below ends a prefill left pending */
    lean_free(s->user);
    s->user = NULL;
    s->n_drop = 0;
    s->next = -1;
    s->pend.n = s->reply.n = 0;
    s->stop_requested = false;
    if (!s->ctx) return;
    lean_gen_end(s->ctx);
    /* a failed backend call leaves pos where its last complete chunk did: keep both in step */
    const int32_t pos = lean_ctx_pos(s->ctx);
    if (pos < s->n_ids) s->n_ids = pos, s->has_logits = false;
    if (pos > s->n_ids) lean_ctx_truncate(s->ctx, s->n_ids, NULL);
}

/* Commits the turn: the user text and the reply join the conversation, after the messages
 * the turn left out are dropped. The room was reserved by submit, so this cannot fail. */
static void commit_turn(lean_chat_session *s) {
    const size_t first = s->n_system;
    for (size_t i = first; i < first + s->n_drop; i++) lean_free((char *)s->msgs[i].content);
    memmove(s->msgs + first, s->msgs + first + s->n_drop, (s->n_msgs - first - s->n_drop) * sizeof *s->msgs);
    s->n_msgs -= s->n_drop;
    s->msgs[s->n_msgs++] = (lean_chat_message){"user", s->user};
    /* the reply buffer becomes the message; a fresh one is made by the next submit */
    s->msgs[s->n_msgs++] = (lean_chat_message){"assistant", s->reply.p};
    s->user = NULL;
    s->reply = (chat_buf){0};
    s->stats.n_dropped = (int32_t)s->n_drop;
    s->n_drop = 0;
    s->phase = PHASE_IDLE;
}

void lean_chat_session_reset(lean_chat_session *s) {
    if (!s) return;
    clear_turn(s);
    for (size_t i = s->n_system; i < s->n_msgs; i++) lean_free((char *)s->msgs[i].content);
    s->n_msgs = s->n_system;
    atomic_store(&s->abort_flag, 0);
}

/* ---- stop strings ---- */

/* Hands out text: appends it to the step's output and to the reply. */
static bool hand_out(lean_chat_session *s, const char *p, size_t n) {
    return buf_put(&s->out, p, n) && buf_put(&s->reply, p, n);
}

/* Adds text to the held-back text, then hands out all of it that can no longer be part of a
 * stop string. *found: a stop string appeared (the text before it was handed out; the rest
 * is dropped). O(held * stops) per call, held shorter than the longest stop string + text. */
static lean_status take_text(lean_chat_session *s, const char *text, size_t n, bool *found, lean_error *err) {
    *found = false;
    if (!buf_put(&s->pend, text, n)) goto oom;
    const char *p = s->pend.p ? s->pend.p : "";
    const size_t len = s->pend.n;
    /* the earliest complete stop string */
    size_t at = len;
    for (int32_t k = 0; k < s->n_stops; k++) {
        const size_t sl = strlen(s->stops[k]);
        for (size_t i = 0; i + sl <= len && i < at; i++)
            if (memcmp(p + i, s->stops[k], sl) == 0) {
                at = i;
                break;
            }
    }
    if (at < len) {
        *found = true;
        if (!hand_out(s, p, at)) goto oom;
        s->pend.n = 0;
        return LEAN_OK;
    }
    /* the longest tail that is a proper prefix of a stop string stays held */
    size_t keep = 0;
    for (int32_t k = 0; k < s->n_stops; k++) {
        const size_t sl = strlen(s->stops[k]);
        for (size_t t = (sl - 1 < len ? sl - 1 : len); t > keep; t--)
            if (memcmp(p + len - t, s->stops[k], t) == 0) {
                keep = t;
                break;
            }
    }
    size_t cut = len - keep;
    while (cut > 0 && cut < len && ((unsigned char)p[cut] & 0xC0) == 0x80) cut--; /* whole characters */
    if (!hand_out(s, p, cut)) goto oom;
    memmove(s->pend.p, p + cut, len - cut);
    s->pend.n = len - cut;
    return LEAN_OK;
oom:
    return LEAN_FAIL(err, LEAN_ERR_NOMEM, "holding %zu bytes of reply text", s->pend.n + n);
}

/* ---- submit ---- */

/* Renders system + msgs[first + drop..] + the user text and tokenizes it into s->prompt
 * (at most n_ctx ids are kept; *n_all says how many the rendering makes). */
static lean_status render_prompt(lean_chat_session *s, size_t drop, int32_t *n_all, lean_error *err) {
    const size_t n_view = s->n_msgs - drop + 1;
    if (n_view > s->cap_view) {
        lean_chat_message *v = lean_realloc(s->view, n_view * sizeof *v);
        if (!v) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%zu messages", n_view);
        s->view = v;
        s->cap_view = n_view;
    }
    size_t k = 0;
    for (size_t i = 0; i < s->n_system; i++) s->view[k++] = s->msgs[i];
    for (size_t i = s->n_system + drop; i < s->n_msgs; i++) s->view[k++] = s->msgs[i];
    s->view[k++] = (lean_chat_message){"user", s->user};

    int32_t n = 0;
    lean_status st = lean_chat_tokenize(s->tok, s->tpl, s->view, k, &s->tp, s->prompt, s->cap_prompt, &n, err);
    if (st == LEAN_OK && n > s->cap_prompt && n <= s->n_ctx) { /* more room, unless it cannot fit anyway */
        if (!ids_reserve(&s->prompt, &s->cap_prompt, n))
            st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "%d prompt ids", n);
        else
            st = lean_chat_tokenize(s->tok, s->tpl, s->view, k, &s->tp, s->prompt, s->cap_prompt, &n, err);
    }
    if (st == LEAN_OK && n == 0)
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "the chat template rendered the conversation as no tokens");
    *n_all = n;
    return st;
}

lean_status lean_chat_submit(lean_chat_session *s, const char *user_text, lean_error *err) {
    if (!s || !user_text) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_submit: NULL argument");
    if (s->phase != PHASE_IDLE)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "a turn is in progress: step it to its end (or reset) first");
    lean_status st = LEAN_OK;
    /* everything the turn will need is allocated now, so that ending it cannot fail */
    if (s->n_msgs + 2 > s->cap_msgs) {
        lean_chat_message *v = lean_realloc(s->msgs, (s->n_msgs + 2) * 2 * sizeof *v);
        if (!v) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%zu messages", s->n_msgs + 2);
        s->msgs = v;
        s->cap_msgs = (s->n_msgs + 2) * 2;
    }
    s->stats = (lean_chat_turn_stats){0};
    s->reply.n = 0;
    if (!buf_reserve(&s->reply, 0)) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "a reply buffer");
    s->reply.p[0] = 0;
    if (s->ts_dirty) { /* a turn that failed left the stream mid-sequence */
        const char *t;
        size_t tn;
        if ((st = lean_text_stream_flush(s->ts, &t, &tn, err)) != LEAN_OK) return st;
        s->ts_dirty = false;
    }
    if (!(s->user = lean_strndup(user_text, strlen(user_text))))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "copying %zu bytes of user text", strlen(user_text));

    /* render; on overflow leave out the oldest pairs (drop_oldest) or fail */
    const int32_t room = s->n_predict > 0 ? s->n_predict : 1;
    size_t drop = 0;
    int32_t n = 0;
    for (;;) {
        if ((st = render_prompt(s, drop, &n, err)) != LEAN_OK) goto fail;
        if ((int64_t)n + room <= s->n_ctx) break;
        if (s->drop_oldest && s->n_system + drop + 2 <= s->n_msgs) {
            drop += 2;
            continue;
        }
        st = LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL,
                       "the conversation renders to %d tokens%s and the reply needs room for %d more, but the "
                       "context holds %d: start afresh (reset)%s",
                       n, drop ? " even without its earlier turns" : "", room, s->n_ctx,
                       s->drop_oldest ? ", or shorten the message" : " or drop the oldest turns");
        goto fail;
    }
    s->n_prompt = n;

    /* the longest common prefix with the cache; at least one id is run to get logits */
    int32_t common = 0;
    const int32_t lim = n < s->n_ids ? n : s->n_ids;
    while (common < lim && s->prompt[common] == s->ids[common]) common++;
    if (common == n) common--;
    if (!ids_reserve(&s->ids, &s->cap_ids, n)) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "%d resident ids", n);
        goto fail;
    }
    if (common < s->n_ids) {
        lean_ctx_truncate(s->ctx, common, NULL); /* in range: cannot fail */
        s->n_ids = common;
        s->has_logits = false;
    }
    s->n_drop = drop;
    s->stats = (lean_chat_turn_stats){.n_prompt = n, .n_reused = common, .n_prefilled = n - common,
                                      .n_dropped = (int32_t)drop};
    s->stop_requested = false;
    atomic_store(&s->abort_flag, 0);
    s->phase = PHASE_PREFILL;
    return LEAN_OK;
fail:
    lean_free(s->user);
    s->user = NULL;
    return st;
}

/* ---- step ---- */

/* Ends the turn for reason: hands out the held text where the reply ended on its own,
 * resets the text stream and commits. */
static lean_status finish(lean_chat_session *s, int reason, lean_error *err) {
    lean_gen_end(s->ctx); /* drops what the backend ran ahead: pos is n_ids again */
    const char *t = "";
    size_t tn = 0;
    lean_status st = lean_text_stream_flush(s->ts, &t, &tn, err);
    if (st != LEAN_OK) return st;
    s->ts_dirty = false;
    if (reason == LEAN_CHAT_STOP_EOG || reason == LEAN_CHAT_STOP_LIMIT || reason == LEAN_CHAT_STOP_CONTEXT) {
        bool found;
        if ((st = take_text(s, t, tn, &found, err)) != LEAN_OK) return st;
        if (found) reason = LEAN_CHAT_STOP_STRING;
        else if (!hand_out(s, s->pend.p ? s->pend.p : "", s->pend.n))
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "handing out %zu bytes of reply text", s->pend.n);
    }
    /* an abort keeps only the text already handed out: the reply is what the caller saw */
    s->pend.n = 0;
    s->stats.stop = reason;
    commit_turn(s);
    return LEAN_OK;
}

/* Draws the next id (lean_gen_next: the id drawn before it enters the cache); ends the turn on
 * an end-of-generation id, a stop string or n_predict, else keeps the id as s->next. */
static lean_status draw(lean_chat_session *s, lean_error *err) {
    int32_t id;
    const lean_mask mask = {s->mask, s->n_vocab};
    lean_status st = s->gen_masked ? lean_gen_next_masked(s->ctx, s->masked ? &mask : NULL, &id, err)
                                   : lean_gen_next(s->ctx, &id, err);
    if (st != LEAN_OK) return st;
    if (s->next >= 0) {
        s->ids[s->n_ids++] = s->next;
        s->has_logits = false;
    }
    s->stats.n_generated++;
    if (lean_token_is_eog(s->tok, id)) return finish(s, LEAN_CHAT_STOP_EOG, err);
    s->next = id;
    if (id < lean_tokenizer_n_tokens(s->tok)) { /* padded embedding rows have no text */
        const char *t;
        size_t tn;
        bool found;
        if ((st = lean_text_stream_push(s->ts, id, &t, &tn, err)) != LEAN_OK) return st;
        s->ts_dirty = true;
        if ((st = take_text(s, t, tn, &found, err)) != LEAN_OK) return st;
        if (found) return finish(s, LEAN_CHAT_STOP_STRING, err);
    }
    if (s->n_predict > 0 && s->stats.n_generated >= s->n_predict) return finish(s, LEAN_CHAT_STOP_LIMIT, err);
    return LEAN_OK;
}

static lean_status step(lean_chat_session *s, lean_error *err) {
    /* a stop waits for the piece of work left pending to complete: the state stays exact; but
     * an abort ends a pending draw at once (it drew nothing; lean_gen_end drops its steps) */
    if ((!s->pending || s->phase == PHASE_GEN) && atomic_load(&s->abort_flag))
        return finish(s, LEAN_CHAT_STOP_ABORT, err);
    if (!s->pending && s->stop_requested) return finish(s, LEAN_CHAT_STOP_CALLBACK, err);
    lean_status st;
    if (s->phase == PHASE_PREFILL) {
        /* one chunk of the prompt; the logits only after the last */
        const int32_t todo = s->n_prompt - s->n_ids;
        const int32_t n = todo < s->n_batch ? todo : s->n_batch;
        const bool last = n == todo;
        if ((st = lean_prefill(s->ctx, s->prompt + s->n_ids, n, last ? s->logits : NULL, err)) != LEAN_OK)
            return st;
        memcpy(s->ids + s->n_ids, s->prompt + s->n_ids, sizeof *s->ids * (size_t)n);
        s->n_ids += n;
        s->has_logits = last;
        /* the first id is drawn by the next step: on the GPU it comes back in a block with
         * the ids run ahead of it, and a host timing the prefill needs the step between */
        if (last) s->phase = PHASE_BEGIN;
        return LEAN_OK;
    }
    if (s->phase == PHASE_BEGIN) {
        /* the penalty's history is what the cache holds, then every drawn id */
        lean_sampler_reset(s->smp);
        if ((s->grammar && (st = lean_grammar_reset(s->grammar, err)) != LEAN_OK) ||
            (st = lean_sampler_accept(s->smp, s->ids, s->n_ids, err)) != LEAN_OK ||
            (st = (s->masked ? lean_gen_begin_masked : lean_gen_begin)(s->ctx, s->smp, s->n_predict, err)) != LEAN_OK)
            return st;
        s->gen_masked = s->masked;
        s->phase = PHASE_GEN;
        s->next = -1;
        return draw(s, err);
    }
    /* the id drawn last time goes into the cache as the next is drawn */
    if (s->n_ids >= s->n_ctx) return finish(s, LEAN_CHAT_STOP_CONTEXT, err);
    if (!ids_reserve(&s->ids, &s->cap_ids, s->n_ids + 1))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%d resident ids", s->n_ids + 1);
    return draw(s, err);
}

lean_status lean_chat_step(lean_chat_session *s, const char **text, size_t *n_bytes, int *more, lean_error *err) {
    if (!s || !text || !n_bytes || !more) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_step: NULL argument");
    *text = "";
    *n_bytes = 0;
    *more = 0;
    s->out.n = 0;
    if (s->phase == PHASE_IDLE) return LEAN_OK;
    lean_status st = step(s, err);
    s->pending = st == LEAN_PENDING;
    if (st == LEAN_PENDING) { /* nothing changed that the call made again will not redo (lean.h) */
        *more = 1;
        return st;
    }
    if (st != LEAN_OK) {
        s->stats.stop = LEAN_CHAT_STOP_NONE;
        s->out.n = 0;
        clear_turn(s);
        return st;
    }
    *text = s->out.p ? s->out.p : "";
    *n_bytes = s->out.n;
    *more = s->phase != PHASE_IDLE;
    return LEAN_OK;
}

/* ---- turn / abort / accessors ---- */

lean_status lean_chat_turn(lean_chat_session *s, const char *user_text, lean_chat_text_fn on_text, void *user,
                           lean_chat_turn_stats *stats, lean_error *err) {
    /* made again after LEAN_PENDING: the turn goes on from its pending step */
    lean_status st = s && s->pending ? LEAN_OK : lean_chat_submit(s, user_text, err);
    for (int more = st == LEAN_OK; more;) {
        const char *t = "";
        size_t n = 0;
        if ((st = lean_chat_step(s, &t, &n, &more, err)) != LEAN_OK) break;
        if (n > 0 && on_text && on_text(user, t, n) != 0) s->stop_requested = true;
    }
    if (stats && s) *stats = s->stats;
    return st;
}

lean_status lean_chat_session_set_messages(lean_chat_session *s, const lean_chat_message *msgs, size_t n,
                                           lean_error *err) {
    if (!s || (n && !msgs)) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_messages: NULL argument");
    if (s->phase != PHASE_IDLE) return LEAN_FAIL(err, LEAN_ERR_ARG, "a turn is in progress: step it to its end first");
    const size_t sys = n > 0 && msgs[0].role && strcmp(msgs[0].role, "system") == 0;
    if ((n - sys) % 2 != 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%zu messages after the system prompt: expected user/assistant pairs", n - sys);
    for (size_t i = sys; i < n; i++) {
        const char *want = (i - sys) % 2 == 0 ? "user" : "assistant";
        if (!msgs[i].role || strcmp(msgs[i].role, want) != 0 || !msgs[i].content)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "message %zu has role '%s', expected '%s' with content", i,
                             msgs[i].role ? msgs[i].role : "(null)", want);
    }
    /* the copies first, so that a failure changes nothing; room for a turn's two more */
    lean_chat_message *v = lean_calloc(n + 2, sizeof *v);
    if (!v) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%zu messages", n + 2);
    for (size_t i = 0; i < n; i++) {
        char *c = lean_strndup(msgs[i].content, strlen(msgs[i].content));
        if (!c) {
            for (size_t j = 0; j < i; j++) lean_free((char *)v[j].content);
            lean_free(v);
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "copying message %zu", i);
        }
        v[i] = (lean_chat_message){i < sys ? "system" : (i - sys) % 2 == 0 ? "user" : "assistant", c};
    }
    for (size_t i = 0; i < s->n_msgs; i++) lean_free((char *)s->msgs[i].content);
    lean_free(s->msgs);
    s->msgs = v;
    s->n_msgs = n;
    s->cap_msgs = n + 2;
    s->n_system = sys;
    return LEAN_OK;
}

lean_status lean_chat_session_set_sampling(lean_chat_session *s, const lean_sampler_params *sampling,
                                           int32_t n_predict, lean_error *err) {
    if (!s || !sampling) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_sampling: NULL argument");
    if (s->phase != PHASE_IDLE) return LEAN_FAIL(err, LEAN_ERR_ARG, "a turn is in progress: step it to its end first");
    if (n_predict < 0 || n_predict >= s->n_ctx)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "n_predict %d: expected 0..%d (the context holds %d)", n_predict,
                         s->n_ctx - 1, s->n_ctx);
    lean_sampler *smp;
    lean_status st = lean_sampler_create(sampling, s->n_vocab, &smp, err);
    if (st == LEAN_OK) st = lean_sampler_set_grammar(smp, s->grammar, err);
    if (st != LEAN_OK) {
        lean_sampler_free(smp);
        return st;
    }
    lean_sampler_free(s->smp); /* a turn resets and refills the history: nothing else to carry */
    s->smp = smp;
    s->n_predict = n_predict;
    return LEAN_OK;
}

lean_status lean_chat_session_set_grammar(lean_chat_session *s, lean_grammar *g, lean_error *err) {
    if (!s) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_grammar: NULL session");
    if (s->phase != PHASE_IDLE) return LEAN_FAIL(err, LEAN_ERR_ARG, "a turn is in progress: step it to its end first");
    lean_status st = lean_sampler_set_grammar(s->smp, g, err);
    if (st == LEAN_OK) s->grammar = g;
    return st;
}

lean_status lean_chat_session_set_mask(lean_chat_session *s, const lean_mask *mask, lean_error *err) {
    if (!s) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_mask: NULL session");
    if (s->phase == PHASE_GEN && !s->gen_masked)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_mask: this reply began without a mask (set one "
                         "before the turn's first draw)");
    if (s->pending) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_mask: a step is pending: step it first");
    if (!mask) {
        s->masked = false;
        return LEAN_OK;
    }
    lean_status st = sampler_check_mask(s->n_vocab, mask, "lean_chat_session_set_mask", err);
    if (st != LEAN_OK) return st;
    const size_t words = LEAN_MASK_WORDS(s->n_vocab);
    if (!s->mask && !(s->mask = lean_malloc(words * sizeof *s->mask)))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "lean_chat_session_set_mask: %zu words", words);
    memcpy(s->mask, mask->bits, words * sizeof *s->mask);
    s->masked = true;
    return LEAN_OK;
}

lean_status lean_chat_session_set_loras(lean_chat_session *s, lean_lora *const *loras, const float *scales, int32_t n,
                                       lean_error *err) {
    if (!s) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_session_set_loras: NULL session");
    if (s->phase != PHASE_IDLE) return LEAN_FAIL(err, LEAN_ERR_ARG, "a turn is in progress: step it to its end first");
    lean_status st = lean_ctx_set_loras(s->ctx, loras, scales, n, err);
    if (st != LEAN_OK) return st;
    /* the cache was computed with the old adapters: the next turn prefills everything again */
    lean_ctx_truncate(s->ctx, 0, NULL);
    s->n_ids = 0;
    s->has_logits = false;
    return LEAN_OK;
}

void lean_chat_abort(lean_chat_session *s) {
    if (s) atomic_store(&s->abort_flag, 1);
}

void lean_chat_session_stats(const lean_chat_session *s, lean_chat_turn_stats *out) {
    if (s && out) *out = s->stats;
}

const lean_chat_message *lean_chat_session_messages(const lean_chat_session *s, size_t *n) {
    if (n) *n = s ? s->n_msgs : 0;
    return s ? s->msgs : NULL;
}

const int32_t *lean_chat_session_ids(const lean_chat_session *s, int32_t *n) {
    if (n) *n = s ? s->n_ids : 0;
    return s ? s->ids : NULL;
}

const lean_ctx *lean_chat_session_ctx(const lean_chat_session *s) { return s ? s->ctx : NULL; }
const lean_sampler *lean_chat_session_sampler(const lean_chat_session *s) { return s ? s->smp : NULL; }

const float *chat_session_logits(lean_chat_session *s) {
    if (!s || s->n_ids == 0) return NULL;
    if (!s->has_logits && s->phase == PHASE_IDLE) { /* the last resident id again, with its logits */
        const int32_t last = s->ids[s->n_ids - 1];
        if (lean_ctx_truncate(s->ctx, s->n_ids - 1, NULL) != LEAN_OK ||
            lean_decode(s->ctx, last, s->logits, NULL) != LEAN_OK)
            return NULL;
        s->has_logits = true;
    }
    return s->has_logits ? s->logits : NULL;
}
