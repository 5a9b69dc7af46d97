/* sample.c — GPU-resident sampling (sample.h): the kernels of shaders/sample_*.wgsl, made once
 * and recorded per step, computing what src/core/sampler.c's sample_reference computes.
 *
 * What it does: lays out the scratch and history buffers, builds the candidate tree (sample_topk
 * over the vocabulary, then sample_merge levels until one list is left; sample_argmax levels
 * when greedy) and the pick; keeps the parameters in a uniform so a new seed or temperature
 * needs no new pipeline (pipelines depend only on the vocabulary size and the buffer layout);
 * checks that an adapter reproduces the CPU (gpu_sampler_check).
 * The wide draw (top_k 0 or > 64, sampler.c W1-W4) adds sample_wide_prep (keys and weights),
 * 16 levels of sample_wide_count + sample_wide_digit per threshold search (one, or two when
 * top-p needs top-k's mass first), and sample_pick walks the last level's block sums.
 * A mask (lean_mask's bitset, gpu_sampler_set_mask) lives in the history buffer: the vocabulary
 * kernels treat an id whose bit is clear as they treat a non-finite logit (sampler.c's ALLOWED).
 * The logit bias (gpu_sampler_set_bias) lives there too, dense: the vocabulary kernels add an
 * id's nonzero word to its logit before the penalty, as sample_reference adds its sparse list.
 * What it does not: reading ids back (the caller's), choosing when to sample (forward.c).
 *
 * Buffers (u32 words):
 *   params  (12)   the Params of sample_common.wgsl
 *   scratch        level lists: level l holds groups_l lists of list_len entries (value bits,
 *                  id), one after another from its out_off; the last level has one list (the
 *                  candidates, best first) | the trace (140) | the wide draw only: per id
 *                  (key hi, key lo, weight) | per block 16 x (count, sum) | its state (12)
 *   hist           [0] position of the next draw [1] ring head [2] ring fill [3] unused;
 *                  with the penalty on: counts (n_vocab) and the ring (ring_len); then the
 *                  mask (LEAN_MASK_WORDS(n_vocab), from mask_off; read only with F_MASK); then,
 *                  made with a bias, the bias (n_vocab f32, 0 where none, from bias_off; read
 *                  only with F_BIAS)
 *
 * Sections: layout · making the kernels · create, reset, record, trace · a draw per row · the adapter
 * check · free
 */
#include "gpu/sample.h"

#include <stdio.h>
#include <string.h>

#define WG 64             /* invocations per workgroup, every sampling kernel */
#define CHUNK 4096        /* entries per workgroup: level 0 of the top-k tree */
/* Entries per workgroup, every level of the greedy tree: 8 a lane. A level's time is its lanes'
 * serial reads, not bytes (docs/runs/2026-12-04-moved-from-src.md). */
#define GREEDY_CHUNK 512
#define FAN 8             /* lists merged per workgroup: the later levels of the top-k tree */
#define MAX_LEVELS 8      /* a level shrinks its input 8-fold or more: 65535 groups -> 1 in 7 */
#define TRACE_WORDS 140   /* sample_pick.wgsl's trace */
#define WIDE_LEVELS 16    /* 4 bits of the 64-bit key a level (sample_wide_count.wgsl) */
#define HIST_STATE 4      /* words before the counts in hist */

/* Params flags (sample_common.wgsl) */
enum { F_PENALTY = 1, F_TOP_P = 2, F_WIDE = 4, F_GREEDY = 8, F_MASK = 16, F_BIAS = 32 };

typedef struct kernel {
    lean_gpu_pipeline *pipe; /* owned by the lean_gpu (cached by source) */
    lean_gpu_bindgroup *bg;
    uint32_t groups;
} kernel;

struct gpu_sampler {
    lean_gpu *g;
    sampler_cfg cfg;
    int32_t n_vocab;
    uint32_t ring_len;  /* the penalty window in ids; 0 = the whole history (or no penalty) */
    lean_gpu_buf *params_buf, *scratch, *hist;
    lean_gpu_buf *out;  /* the caller's; the id goes to u32 index out_index */
    uint32_t out_index;
    kernel level[MAX_LEVELS];
    int n_levels;
    kernel pick;
    kernel wprep, wcount, wdigit; /* the wide draw's (pipes NULL otherwise) */
    int wide_phases;    /* threshold searches per draw: 2 when top-p needs top-k's mass, else 1 */
    uint32_t list_len;  /* entries per list: 64, or 1 when greedy */
    uint32_t final_off, trace_off; /* words in scratch */
    uint32_t wide_off, wcount_off, wstate_off, n_blocks;
    uint32_t *host;     /* (mask_off words) what gpu_sampler_reset uploads */
    uint64_t hist_words;
    uint32_t mask_off;  /* words in hist: the mask */
    uint32_t bias_off;  /* words in hist: the dense bias */
    lean_logit_bias *bias; /* (cfg.n_bias) the list on the device, cfg.bias; NULL when none */
    float *dense;       /* (n_vocab) its dense form, made on the first bias */
    uint32_t params[12]; /* what the params uniform holds (F_MASK follows gpu_sampler_set_mask,
                          * F_BIAS gpu_sampler_set_bias) */
};

/* ---- layout ---- */

/* The Params uniform (sample_common.wgsl), 12 words. */
static void params_words(const sampler_cfg *c, uint32_t ring_len, uint32_t w[12]) {
    uint32_t flags = 0;
    if (c->use_penalty) flags |= F_PENALTY;
    if (c->greedy) flags |= F_GREEDY;
    if (!c->greedy && c->use_top_p) flags |= F_TOP_P;
    if (!c->greedy && (c->top_k == 0 || c->top_k > SAMPLER_K_CAP)) flags |= F_WIDE;
    memset(w, 0, 12 * sizeof *w);
    w[0] = (uint32_t)c->seed;
    w[1] = (uint32_t)(c->seed >> 32);
    w[2] = 0; /* zero: fmul's fence */
    w[3] = c->greedy ? 1u : (uint32_t)c->top_k;
    w[4] = flags;
    w[5] = ring_len;
    memcpy(&w[6], &c->penalty, 4);
    memcpy(&w[7], &c->inv_penalty, 4);
    memcpy(&w[8], &c->inv_temperature, 4);
    memcpy(&w[9], &c->top_p_f, 4);
}

/* ---- making the kernels ---- */

/* What a kernel reads the vocabulary through: the logits binding and the history. */
typedef struct vocab_src {
    lean_gpu_buf *logits;
    uint64_t bind_off, bind_size; /* bytes; bind_off a multiple of the storage offset alignment */
    uint32_t logits_off;          /* elements from bind_off to the first logit */
} vocab_src;

/* Where a draw's kernels are made, for one sampler (gpu_sampler) or a row each
 * (gpu_sampler_rows): the device, the buffers they bind, the vocabulary and the words of hist
 * its mask and bias lie at, and row_words: 0 for one sampler (sample_one.wgsl), else the scratch
 * words of a row (sample_rows.wgsl, its ROW_WORDS). */
typedef struct kernel_env {
    lean_gpu *g;
    lean_gpu_buf *scratch, *params, *hist;
    int32_t n_vocab;
    uint32_t mask_off, bias_off;
    uint64_t row_words;
} kernel_env;

/* Compiles sample_one or sample_rows + sample_common + (loader) + kernel with consts (WG and, for
 * rows, ROW_WORDS added) and binds scratch, then (when n_extra >= 0) params and extra[0..n_extra)
 * as @binding(2...): a kernel that reads only scratch (a later tree level of one sampler) has only
 * binding 0 in its layout. */
static lean_status make_kernel(const kernel_env *e, const char *label, const char *loader, const char *name,
                               const lean_gpu_const *consts, int n_consts, const lean_gpu_bind *extra,
                               int n_extra, uint32_t groups, kernel *k, lean_error *err) {
    const char *src[4];
    int n_src = 0;
    src[n_src++] = lean_gpu_shader(e->row_words ? "sample_rows" : "sample_one");
    src[n_src++] = lean_gpu_shader("sample_common");
    if (loader) src[n_src++] = lean_gpu_shader(loader);
    src[n_src++] = lean_gpu_shader(name);
    for (int i = 0; i < n_src; i++)
        if (!src[i]) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "sampling shaders for '%s' are not in this build", label);
    lean_gpu_const all[16]; /* the most consts a kernel gets (end_consts' 13), ROW_WORDS and WG */
    for (int i = 0; i < n_consts; i++) all[i] = consts[i];
    if (e->row_words) all[n_consts++] = (lean_gpu_const){"ROW_WORDS", 'u', (double)e->row_words};
    all[n_consts++] = (lean_gpu_const){"WG", 'u', WG};
    lean_gpu_bind binds[4] = {{e->scratch, 0, 0}, {e->params, 0, 0}};
    for (int i = 0; i < n_extra; i++) binds[2 + i] = extra[i];
    k->groups = groups;
    lean_status st = lean_gpu_pipeline_create(e->g, label, src, n_src, all, n_consts, &k->pipe, err);
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(e->g, k->pipe, binds, n_extra < 0 ? 1 : 2 + n_extra, label, &k->bg, err);
    return st;
}

/* One level of the candidate tree: groups workgroups read n_in items (level 0: vocabulary
 * entries; later: the previous level's lists at in_off, of 64 entries (top-k) or 1 (greedy))
 * and write one list each from out_off (words). */
typedef struct level_plan {
    uint64_t n_in, in_off, out_off;
    uint32_t groups;
} level_plan;

/* The levels from the vocabulary down to one list; returns how many (0 when more than
 * MAX_LEVELS would be needed) and the scratch words the lists take in *words. Top-k: level 0
 * keeps 64 of CHUNK entries per workgroup, later levels merge FAN lists (sample_merge);
 * greedy: every level keeps 1 of GREEDY_CHUNK. */
static int plan_tree(int32_t n_vocab, bool greedy, level_plan *lv, uint64_t *words) {
    const uint32_t list_len = greedy ? 1 : SAMPLER_K_CAP;
    uint64_t n_in = (uint64_t)n_vocab, off = 0, in_off = 0;
    for (int l = 0; l < MAX_LEVELS; l++) {
        lv[l] = (level_plan){n_in, in_off, off, lean_div_up(n_in, greedy ? GREEDY_CHUNK : l == 0 ? CHUNK : FAN)};
        in_off = off;
        n_in = lv[l].groups;
        off += 2 * n_in * list_len;
        if (lv[l].groups == 1) {
            *words = off;
            return l + 1;
        }
    }
    return 0;
}

/* The tree's levels lv[0 .. n_levels) into level[], *made of them made (the top-k tree, or the
 * argmax tree when greedy: rows take only the top-k one). */
static lean_status make_levels(const kernel_env *e, const vocab_src *v, bool greedy, const level_plan *lv,
                               int n_levels, kernel *level, int *made, lean_error *err) {
    for (int l = 0; l < n_levels; l++) {
        char label[32];
        snprintf(label, sizeof label, "sample_%s%s_%d", e->row_words ? "rows_" : "",
                 greedy ? "argmax" : l == 0 ? "topk" : "merge", l);
        const lean_gpu_const k[] = {
            {"N_IN", 'u', (double)lv[l].n_in}, {"OUT_OFF", 'u', (double)lv[l].out_off},
            {"IN_OFF", 'u', (double)lv[l].in_off}, {"CHUNK", 'u', greedy ? GREEDY_CHUNK : CHUNK}, {"FAN", 'u', FAN},
            {"N_VOCAB", 'u', e->n_vocab}, {"LOGITS_OFF", 'u', v->logits_off}, {"MASK_OFF", 'u', e->mask_off},
            {"BIAS_OFF", 'u', e->bias_off}};
        const lean_gpu_bind extra[2] = {{v->logits, v->bind_off, v->bind_size}, {e->hist, 0, 0}};
        const char *loader = l == 0 ? "sample_vocab" : greedy ? "sample_lists" : NULL;
        const char *kern = greedy ? "sample_argmax" : l == 0 ? "sample_topk" : "sample_merge";
        /* a later level of one sampler reads only scratch; a row's reads its params too */
        const int n_extra = l == 0 ? 2 : e->row_words ? 0 : -1;
        lean_status st = make_kernel(e, label, loader, kern, k, 9, extra, n_extra, lv[l].groups, &level[l], err);
        if (st != LEAN_OK) return st;
        *made = l + 1;
    }
    return LEAN_OK;
}

/* The constants of the pick and the wide draw's kernels: the tree's last list at final_off, the
 * trace at trace_off, the id to out[out_index]; wide: the sampler whose wide draw they are, or
 * NULL (rows never take it: gpu_sampler_rows_takes). */
static void end_consts(const kernel_env *e, const vocab_src *v, uint32_t final_off, uint32_t trace_off,
                       uint32_t out_index, const gpu_sampler *wide, lean_gpu_const k[13]) {
    const lean_gpu_const all[13] = {
        {"N_VOCAB", 'u', e->n_vocab},          {"LOGITS_OFF", 'u', v->logits_off},  {"FINAL_OFF", 'u', final_off},
        {"TRACE_OFF", 'u', trace_off},         {"OUT_INDEX", 'u', out_index},       {"SUM_BLOCK", 'u', SAMPLER_SUM_BLOCK},
        {"N_BLOCKS", 'u', wide ? wide->n_blocks : 0},     {"WIDE_OFF", 'u', wide ? wide->wide_off : 0},
        {"WSTATE_OFF", 'u', wide ? wide->wstate_off : 0}, {"WCOUNT_OFF", 'u', wide ? wide->wcount_off : 0},
        {"PHASE0", 'u', wide && wide->wide_phases == 2 ? 1 : 2}, {"MASK_OFF", 'u', e->mask_off},
        {"BIAS_OFF", 'u', e->bias_off}};
    memcpy(k, all, sizeof all);
}

/* The wide draw's kernels (when cfg asks for it) and the pick. */
static lean_status make_end(gpu_sampler *s, const kernel_env *e, const vocab_src *v, lean_gpu_buf *out,
                            uint32_t out_index, lean_error *err) {
    lean_gpu_const k[13];
    end_consts(e, v, s->final_off, s->trace_off, out_index, s, k);
    lean_status st = LEAN_OK;
    if (s->params[4] & F_WIDE) {
        const lean_gpu_bind vocab[2] = {{v->logits, v->bind_off, v->bind_size}, {s->hist, 0, 0}};
        st = make_kernel(e, "sample_wide_prep", "sample_vocab", "sample_wide_prep", k, 13, vocab, 2,
                         lean_div_up((uint64_t)s->n_vocab, WG), &s->wprep, err);
        if (st == LEAN_OK)
            st = make_kernel(e, "sample_wide_count", NULL, "sample_wide_count", k, 13, NULL, -1,
                             lean_div_up(s->n_blocks, WG), &s->wcount, err);
        if (st == LEAN_OK)
            st = make_kernel(e, "sample_wide_digit", NULL, "sample_wide_digit", k, 13, NULL, 0, 1, &s->wdigit, err);
    }
    const lean_gpu_bind extra[2] = {{s->hist, 0, 0}, {out, 0, 0}};
    if (st == LEAN_OK) st = make_kernel(e, "sample_pick", NULL, "sample_pick", k, 13, extra, 2, 1, &s->pick, err);
    return st;
}

/* ---- create, reset, record, trace, free ---- */

/* Where the logits are bound: the device wants binding offsets aligned. */
static lean_status vocab_binding(lean_gpu *g, lean_gpu_buf *logits, uint64_t offset, int32_t n_vocab,
                                 vocab_src *v, lean_error *err) {
    const uint64_t bytes = (uint64_t)n_vocab * 4;
    if (offset % 4 || offset > lean_gpu_buf_size(logits) || lean_gpu_buf_size(logits) - offset < bytes)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "logits of %d ids at byte %llu: the buffer has %llu bytes", n_vocab,
                         (unsigned long long)offset, (unsigned long long)lean_gpu_buf_size(logits));
    const lean_gpu_info *info = lean_gpu_get_info(g);
    const uint64_t align = info->min_storage_offset_align ? info->min_storage_offset_align : 256;
    v->logits = logits;
    v->bind_off = offset / align * align;
    v->bind_size = offset - v->bind_off + bytes;
    v->logits_off = (uint32_t)((offset - v->bind_off) / 4);
    if (v->bind_size > info->max_storage_binding)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "logits of %d ids: %llu bytes, the device binds at most %llu",
                         n_vocab, (unsigned long long)v->bind_size, (unsigned long long)info->max_storage_binding);
    return LEAN_OK;
}

lean_status gpu_sampler_create(lean_gpu *g, const sampler_cfg *cfg, int32_t n_vocab, lean_gpu_buf *logits,
                               uint64_t logits_offset, lean_gpu_buf *out, uint32_t out_index,
                               gpu_sampler **res, lean_error *err) {
    if (!res) return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu_sampler_create: res is NULL");
    *res = NULL;
    if (!g || !cfg || !logits || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu_sampler_create: NULL argument");
    if (n_vocab < 1) return LEAN_FAIL(err, LEAN_ERR_ARG, "n_vocab %d: must be >= 1", n_vocab);
    if (cfg->seed == LEAN_SEED_RANDOM)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu_sampler_create: the seed must be resolved (lean_sampler_seed)");
    if ((uint64_t)out_index * 4 + 4 > lean_gpu_buf_size(out))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "out index %u: the id buffer has %llu bytes", out_index,
                         (unsigned long long)lean_gpu_buf_size(out));
    vocab_src v = {0};
    lean_status st = vocab_binding(g, logits, logits_offset, n_vocab, &v, err);
    if (st != LEAN_OK) return st;
    gpu_sampler *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the GPU sampler");
    s->g = g;
    s->out = out;
    s->out_index = out_index;
    s->cfg = *cfg;
    s->cfg.bias = NULL; /* gpu_sampler_set_bias below */
    s->cfg.n_bias = 0;
    s->n_vocab = n_vocab;
    s->list_len = cfg->greedy ? 1 : SAMPLER_K_CAP;
    s->ring_len = cfg->use_penalty && cfg->repeat_last_n > 0 ? (uint32_t)cfg->repeat_last_n : 0;
    s->mask_off = HIST_STATE + (cfg->use_penalty ? (uint32_t)n_vocab + s->ring_len : 0);
    s->bias_off = s->mask_off + (uint32_t)LEAN_MASK_WORDS(n_vocab);
    s->hist_words = (uint64_t)s->bias_off + (cfg->n_bias > 0 ? (uint64_t)n_vocab : 0);
    level_plan lv[MAX_LEVELS];
    uint64_t words = 0;
    const int n_levels = plan_tree(n_vocab, cfg->greedy, lv, &words);
    const lean_gpu_info *info = lean_gpu_get_info(g);
    uint32_t *w = s->params;
    params_words(cfg, s->ring_len, w);
    if (n_levels == 0 || lv[0].groups > info->max_workgroups_per_dim) {
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "sampling %d ids needs %u workgroups in one dimension; the device allows %u",
                       n_vocab, lv[0].groups, info->max_workgroups_per_dim);
        goto fail;
    }
    if (s->hist_words * 4 > info->max_storage_binding) {
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                       "a penalty window of %u ids over %d ids needs %llu bytes; the device binds at most %llu",
                       s->ring_len, n_vocab, (unsigned long long)s->hist_words * 4,
                       (unsigned long long)info->max_storage_binding);
        goto fail;
    }
    s->host = lean_calloc(s->mask_off, sizeof *s->host);
    if (!s->host) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "the GPU sampler's history mirror (%llu words)",
                       (unsigned long long)s->hist_words);
        goto fail;
    }
    s->trace_off = (uint32_t)words;
    s->n_blocks = (uint32_t)lean_div_up((uint64_t)n_vocab, SAMPLER_SUM_BLOCK);
    s->wide_off = s->trace_off + TRACE_WORDS;
    s->wcount_off = s->wide_off + 3 * (uint32_t)n_vocab;
    s->wstate_off = s->wcount_off + 32 * s->n_blocks;
    s->wide_phases = !(w[4] & F_WIDE) ? 0 : cfg->use_top_p && cfg->top_k > 0 ? 2 : 1;
    const uint64_t scratch_words = s->wide_phases ? (uint64_t)s->wstate_off + 12 : (uint64_t)s->wide_off;
    st = lean_gpu_buf_create(g, sizeof s->params, LEAN_GPU_UNIFORM, "sample params", &s->params_buf, err);
    if (st == LEAN_OK) st = lean_gpu_buf_write(g, s->params_buf, 0, w, sizeof s->params, err);
    if (st == LEAN_OK)
        st = lean_gpu_buf_create(g, s->hist_words * 4, LEAN_GPU_STORAGE, "sample history", &s->hist, err);
    if (st == LEAN_OK)
        st = lean_gpu_buf_create(g, scratch_words * 4, LEAN_GPU_STORAGE, "sample scratch", &s->scratch, err);
    const kernel_env e = {g, s->scratch, s->params_buf, s->hist, n_vocab, s->mask_off, s->bias_off, 0};
    if (st == LEAN_OK) st = make_levels(&e, &v, cfg->greedy, lv, n_levels, s->level, &s->n_levels, err);
    s->final_off = (uint32_t)lv[n_levels - 1].out_off;
    if (st == LEAN_OK) st = make_end(s, &e, &v, out, out_index, err);
    if (st == LEAN_OK) st = gpu_sampler_set_bias(s, cfg->bias, cfg->n_bias, err);
    if (st != LEAN_OK) goto fail;
    *res = s;
    return LEAN_OK;
fail:
    gpu_sampler_free(s);
    return st;
}

lean_status gpu_sampler_reset(gpu_sampler *s, uint32_t pos, const int32_t *history, int32_t n_history,
                              lean_error *err) {
    if (!s || n_history < 0 || (n_history > 0 && !history))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu_sampler_reset: bad arguments (%d history ids)", n_history);
    for (int32_t i = 0; i < n_history; i++)
        if (history[i] < 0 || history[i] >= s->n_vocab)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "history[%d] = %d is outside the vocabulary [0, %d)", i, history[i],
                             s->n_vocab);
    uint32_t *h = s->host;
    memset(h, 0, (size_t)s->mask_off * sizeof *h);
    h[0] = pos;
    if (s->cfg.use_penalty) {
        int32_t first = 0; /* the window: the last ring_len ids, or all */
        if (s->ring_len > 0 && (uint32_t)n_history > s->ring_len) first = n_history - (int32_t)s->ring_len;
        const uint32_t fill = (uint32_t)(n_history - first);
        uint32_t *counts = h + HIST_STATE, *ring = counts + s->n_vocab;
        for (int32_t i = first; i < n_history; i++) {
            counts[history[i]]++;
            if (s->ring_len > 0) ring[i - first] = (uint32_t)history[i];
        }
        h[1] = s->ring_len > 0 ? fill % s->ring_len : 0;
        h[2] = s->ring_len > 0 ? fill : 0;
    }
    return lean_gpu_buf_write(s->g, s->hist, 0, h, (uint64_t)s->mask_off * 4, err);
}

/* Turns one of the params' flags on or off (a write of the word when it changes). */
static lean_status set_flag(gpu_sampler *s, uint32_t flag, bool on, lean_error *err) {
    const uint32_t flags = on ? s->params[4] | flag : s->params[4] & ~flag;
    if (flags == s->params[4]) return LEAN_OK;
    lean_status st = lean_gpu_buf_write(s->g, s->params_buf, 16, &flags, 4, err); /* word 4: flags */
    if (st == LEAN_OK) s->params[4] = flags;
    return st;
}

lean_status gpu_sampler_set_mask(gpu_sampler *s, const uint32_t *bits, lean_error *err) {
    lean_status st = LEAN_OK;
    if (bits) st = lean_gpu_buf_write(s->g, s->hist, 4ull * s->mask_off, bits, 4 * LEAN_MASK_WORDS(s->n_vocab), err);
    return st == LEAN_OK ? set_flag(s, F_MASK, bits != NULL, err) : st;
}

bool gpu_sampler_takes_bias(const gpu_sampler *s) { return s->hist_words > s->bias_off; }

lean_status gpu_sampler_set_bias(gpu_sampler *s, const lean_logit_bias *bias, int32_t n, lean_error *err) {
    lean_status st = sampler_check_bias(bias, n, s->n_vocab, err);
    if (st != LEAN_OK) return st;
    if (n > 0 && !gpu_sampler_takes_bias(s))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu_sampler_set_bias: the sampler was made without a bias (no room "
                         "for one)");
    if (n == s->cfg.n_bias && (n == 0 || memcmp(bias, s->bias, sizeof *bias * (size_t)n) == 0))
        return set_flag(s, F_BIAS, n > 0, err); /* already on the device */
    lean_logit_bias *copy = lean_malloc(sizeof *copy * (size_t)(n > 0 ? n : 1));
    if (!s->dense) s->dense = lean_calloc((size_t)s->n_vocab, sizeof *s->dense);
    if (!copy || !s->dense) {
        lean_free(copy);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "the GPU sampler's bias (%d ids)", s->n_vocab);
    }
    for (int32_t i = 0; i < s->cfg.n_bias; i++) s->dense[s->bias[i].id] = 0;
    if (n > 0) memcpy(copy, bias, sizeof *copy * (size_t)n);
    for (int32_t i = 0; i < n; i++) s->dense[bias[i].id] = bias[i].value != 0 ? bias[i].value : 0.0f;
    lean_free(s->bias);
    s->bias = copy;
    s->cfg.bias = copy;
    s->cfg.n_bias = n;
    st = n > 0 ? lean_gpu_buf_write(s->g, s->hist, 4ull * s->bias_off, s->dense, 4ull * (uint64_t)s->n_vocab, err)
               : LEAN_OK;
    if (st != LEAN_OK) { /* unknown on the device: written whole next time */
        memset(s->dense, 0, sizeof *s->dense * (size_t)s->n_vocab);
        s->cfg.n_bias = 0;
    }
    return st == LEAN_OK ? set_flag(s, F_BIAS, n > 0, err) : st;
}

void gpu_sampler_record(lean_gpu_cmd *c, const gpu_sampler *s) {
    for (int l = 0; l < s->n_levels; l++) lean_gpu_dispatch(c, s->level[l].pipe, s->level[l].bg, s->level[l].groups, 1, 1);
    if (s->wide_phases) lean_gpu_dispatch(c, s->wprep.pipe, s->wprep.bg, s->wprep.groups, 1, 1);
    for (int l = 0; l < s->wide_phases * WIDE_LEVELS; l++) {
        lean_gpu_dispatch(c, s->wcount.pipe, s->wcount.bg, s->wcount.groups, 1, 1);
        lean_gpu_dispatch(c, s->wdigit.pipe, s->wdigit.bg, 1, 1, 1);
    }
    lean_gpu_dispatch(c, s->pick.pipe, s->pick.bg, 1, 1, 1);
}

static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The trace of a draw from its final list (list_len (value, id) pairs) and trace words. */
static void trace_of(const gpu_sampler *s, const uint32_t *list, const uint32_t *tr, sample_trace *t) {
    memset(t, 0, sizeof *t);
    t->wide = tr[139] != 0;
    t->n_cand = (int32_t)(t->wide || tr[0] <= s->list_len ? tr[0] : s->list_len);
    t->n_kept = (int32_t)tr[1];
    t->pick = (int32_t)tr[2]; /* NO_ID reads as -1 */
    t->id = (int32_t)tr[6];
    t->mass = f32_of(tr[7]);
    t->u = f32_of(tr[3]);
    t->target = f32_of(tr[4]);
    t->kept = f32_of(tr[136]);
    const int32_t n = t->wide ? (t->n_kept < (int32_t)s->list_len ? t->n_kept : (int32_t)s->list_len) : t->n_cand;
    for (int32_t j = 0; j < n; j++) {
        t->logit[j] = f32_of(list[2 * j]);
        t->ids[j] = (int32_t)list[2 * j + 1];
        t->weight[j] = f32_of(tr[8 + j]);
        t->cum[j] = f32_of(tr[72 + j]);
    }
    if (t->wide) { /* the kept set's key: sampler.c's entry_key of its last entry */
        const uint32_t k = tr[137], b = k & 0x80000000u ? k & 0x7fffffffu : ~k;
        t->last_logit = f32_of(b);
        t->last_id = (int32_t)~tr[138];
    }
}

lean_status gpu_sampler_read_trace(gpu_sampler *s, sample_trace *t, lean_error *err) {
    uint32_t list[2 * SAMPLER_K_CAP], tr[TRACE_WORDS];
    lean_status st = lean_gpu_buf_read(s->g, s->scratch, (uint64_t)s->final_off * 4, list, s->list_len * 8, err);
    if (st == LEAN_OK) st = lean_gpu_buf_read(s->g, s->scratch, (uint64_t)s->trace_off * 4, tr, sizeof tr, err);
    if (st == LEAN_OK) trace_of(s, list, tr, t);
    return st;
}

/* ---- a draw per row ----
 * gpu_sampler_rows: the capped tree (sample_topk, sample_merge) and the pick made once with
 * sample_rows.wgsl, each dispatch over every row (workgroup_id.y). A greedy row goes through the
 * top-k tree too: its list's first entry is the argmax tree's (the same order, the same ids).
 * Scratch: per row ROW_WORDS words (its levels' lists, then its trace); params: per row the
 * Params of the sampler it draws for; hist: per row 4 words, [0] its draw's position. */
struct gpu_sampler_rows {
    lean_gpu *g;
    int32_t rows_max;
    lean_gpu_buf *params_buf, *scratch, *hist;
    kernel level[MAX_LEVELS];
    int n_levels;
    kernel pick;
    uint32_t *host; /* rows_max * 12 params words, then rows_max * 4 hist words: what _write uploads */
};

lean_status gpu_sampler_rows_create(lean_gpu *g, int32_t n_vocab, int32_t rows_max, lean_gpu_buf *logits,
                                    lean_gpu_buf *out, gpu_sampler_rows **res, lean_error *err) {
    *res = NULL;
    level_plan lv[MAX_LEVELS];
    uint64_t words = 0;
    const int n_levels = n_vocab > 0 ? plan_tree(n_vocab, false, lv, &words) : 0;
    const lean_gpu_info *info = lean_gpu_get_info(g);
    if (rows_max < 1 || n_levels == 0 || lv[0].groups > info->max_workgroups_per_dim ||
        (uint64_t)rows_max > info->max_workgroups_per_dim)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "a draw per row: %d rows of %d ids", rows_max, n_vocab);
    const uint64_t row_words = words + TRACE_WORDS, scratch_bytes = 4 * row_words * (uint64_t)rows_max;
    if (scratch_bytes > info->max_storage_binding || lean_gpu_buf_size(logits) < 4ull * (uint64_t)n_vocab * rows_max ||
        lean_gpu_buf_size(out) < 4ull * (uint64_t)rows_max)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "a draw per row: %d rows of %d ids do not fit the buffers", rows_max,
                         n_vocab);
    gpu_sampler_rows *r = lean_calloc(1, sizeof *r);
    uint32_t *host = lean_calloc((size_t)rows_max * 16, sizeof *host);
    if (!r || !host) {
        lean_free(r), lean_free(host);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "a draw per row: %d rows", rows_max);
    }
    r->g = g, r->rows_max = rows_max, r->host = host;
    lean_status st = lean_gpu_buf_create(g, 48ull * (uint64_t)rows_max, LEAN_GPU_STORAGE, "sample rows params",
                                         &r->params_buf, err);
    if (st == LEAN_OK) st = lean_gpu_buf_create(g, 16ull * (uint64_t)rows_max, LEAN_GPU_STORAGE, "sample rows hist", &r->hist, err);
    if (st == LEAN_OK) st = lean_gpu_buf_create(g, scratch_bytes, LEAN_GPU_STORAGE, "sample rows scratch", &r->scratch, err);
    const kernel_env e = {g, r->scratch, r->params_buf, r->hist, n_vocab, 0, 0, row_words};
    const vocab_src v = {logits, 0, 0, 0};
    if (st == LEAN_OK) st = make_levels(&e, &v, false, lv, n_levels, r->level, &r->n_levels, err);
    lean_gpu_const k[13];
    end_consts(&e, &v, (uint32_t)lv[n_levels - 1].out_off, (uint32_t)words, 0, NULL, k);
    const lean_gpu_bind extra[2] = {{r->hist, 0, 0}, {out, 0, 0}};
    if (st == LEAN_OK) st = make_kernel(&e, "sample_rows_pick", NULL, "sample_pick", k, 13, extra, 2, 1, &r->pick, err);
    if (st != LEAN_OK) {
        gpu_sampler_rows_free(r);
        return st;
    }
    *res = r;
    return LEAN_OK;
}

bool gpu_sampler_rows_takes(const gpu_sampler *s) {
    return !(s->params[4] & (F_PENALTY | F_WIDE | F_MASK | F_BIAS));
}

void gpu_sampler_rows_set(gpu_sampler_rows *r, int32_t row, const gpu_sampler *s, uint32_t pos) {
    uint32_t *w = r->host + 12 * (size_t)row;
    if (s) {
        memcpy(w, s->params, sizeof s->params);
    } else { /* a row drawn by its own sampler: the cheapest draw, its id unread */
        memset(w, 0, sizeof s->params);
        w[3] = 1, w[4] = F_GREEDY;
    }
    r->host[12 * (size_t)r->rows_max + 4 * (size_t)row] = pos;
}

lean_status gpu_sampler_rows_write(gpu_sampler_rows *r, int32_t n, lean_error *err) {
    if (n < 1 || n > r->rows_max)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "a draw per row: %d rows (at most %d)", n, r->rows_max);
    lean_status st = lean_gpu_buf_write(r->g, r->params_buf, 0, r->host, 48ull * (uint64_t)n, err);
    if (st == LEAN_OK) st = lean_gpu_buf_write(r->g, r->hist, 0, r->host + 12 * (size_t)r->rows_max, 16ull * (uint64_t)n, err);
    return st;
}

void gpu_sampler_rows_record(lean_gpu_cmd *c, const gpu_sampler_rows *r, int32_t n) {
    for (int l = 0; l < r->n_levels; l++)
        lean_gpu_dispatch(c, r->level[l].pipe, r->level[l].bg, r->level[l].groups, (uint32_t)n, 1);
    lean_gpu_dispatch(c, r->pick.pipe, r->pick.bg, 1, (uint32_t)n, 1);
}

void gpu_sampler_rows_free(gpu_sampler_rows *r) {
    if (!r) return;
    for (int l = 0; l < r->n_levels; l++) lean_gpu_bindgroup_free(r->level[l].bg);
    lean_gpu_bindgroup_free(r->pick.bg);
    lean_gpu_buf_free(r->params_buf);
    lean_gpu_buf_free(r->scratch);
    lean_gpu_buf_free(r->hist);
    lean_free(r->host);
    lean_free(r);
}

/* ---- the adapter check ---- */

/* The distinct ids of the penalty window of history (lean_sampler's rule), into ids. */
static int32_t window_ids(const sampler_cfg *cfg, const int32_t *hist, int32_t n_hist, int32_t *ids) {
    if (!cfg->use_penalty) return 0;
    int32_t first = cfg->repeat_last_n >= 0 && n_hist > cfg->repeat_last_n ? n_hist - cfg->repeat_last_n : 0, n = 0;
    for (int32_t i = first; i < n_hist; i++) {
        bool seen = false;
        for (int32_t j = 0; j < n && !seen; j++) seen = ids[j] == hist[i];
        if (!seen) ids[n++] = hist[i];
    }
    return n;
}

/* One GPU draw: reset, record, submit; the id and the trace read back. */
static lean_status gpu_draw_traced(gpu_sampler *s, const int32_t *hist, int32_t n_hist, uint32_t pos, uint32_t *id,
                                   sample_trace *t, lean_error *err) {
    lean_gpu_cmd *c = NULL;
    lean_status st = gpu_sampler_reset(s, pos, hist, n_hist, err);
    if (st == LEAN_OK) st = lean_gpu_begin(s->g, &c, err);
    if (st == LEAN_OK) {
        gpu_sampler_record(c, s);
        st = lean_gpu_submit(c, err);
    }
    if (st == LEAN_OK) st = lean_gpu_buf_read(s->g, s->out, 4ull * s->out_index, id, 4, err);
    if (st == LEAN_OK) st = gpu_sampler_read_trace(s, t, err);
    return st;
}

/* Holds the GPU's draw (gid, gt) for (logits, mask, history, pos) to sample_reference's. */
static lean_status compare_draw(gpu_sampler *s, const float *logits, const uint32_t *mask, const int32_t *history,
                                int32_t n_history, uint32_t pos, float *work, uint32_t gid, const sample_trace *gt,
                                lean_error *err) {
    sample_trace ct;
    int32_t *pen = lean_malloc(sizeof *pen * (size_t)(n_history > 0 ? n_history : 1)), cid = -1;
    if (!pen) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu_sampler_compare: %d history ids", n_history);
    const int32_t n_pen = window_ids(&s->cfg, history, n_history, pen);
    lean_error cpu_err;
    const lean_status st = sample_reference(&s->cfg, logits, s->n_vocab, mask, pen, n_pen, pos, work, &cid, &ct, &cpu_err);
    lean_free(pen);
    const char *adapter = lean_gpu_get_info(s->g)->adapter;
    if (st != LEAN_OK) /* no id allowed */
        return gid == GPU_SAMPLE_NO_ID ? LEAN_OK
                                       : LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "adapter '%s' chose id %u where the CPU found none (%s)",
                                                   adapter, gid, cpu_err.msg);
    char diff[200];
    if (gid != (uint32_t)cid || !sample_trace_same(&ct, gt, diff, sizeof diff))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "adapter '%s' does not sample as the CPU does (position %u: id %d/%u; %s)",
                         adapter, pos, cid, gid, gid == (uint32_t)cid ? diff : "the ids differ");
    return LEAN_OK;
}

lean_status gpu_sampler_compare(gpu_sampler *s, const float *logits, const uint32_t *mask, const int32_t *history,
                                int32_t n_history, uint32_t pos, float *work, lean_error *err) {
    uint32_t gid = 0;
    sample_trace gt;
    lean_status st = gpu_sampler_set_mask(s, mask, err);
    if (st == LEAN_OK) st = gpu_draw_traced(s, history, n_history, pos, &gid, &gt, err);
    return st == LEAN_OK ? compare_draw(s, logits, mask, history, n_history, pos, work, gid, &gt, err) : st;
}

/* CHECK_DRAWS draws of each sampler: the capped draw (top-k 64), then the wide one (top-k 0:
 * the threshold search crosses the 64th candidate: top-p keeps ~300 of the 1000 ids). */
enum { CHECK_N = 1000, CHECK_HIST = 16, CHECK_DRAWS = 4 };

struct gpu_sampler_check_run {
    lean_gpu *g;
    gpu_sampler *s[2];  /* the capped draw's, the wide draw's */
    lean_gpu_buf *logits, *out;
    lean_gpu_buf *rb;  /* READBACK: per draw, rec_words words: id | final list | trace */
    uint32_t rec_words;
    float *x;          /* (CHECK_N + SAMPLER_WORK_FLOATS) the logits, then sample_reference's scratch */
    int32_t hist[CHECK_HIST];
};

static uint32_t check_pos(int k) { return (uint32_t)k * 7919u; }

void gpu_sampler_check_free(gpu_sampler_check_run *r) {
    if (!r) return;
    gpu_sampler_free(r->s[0]);
    gpu_sampler_free(r->s[1]);
    lean_gpu_buf_free(r->logits);
    lean_gpu_buf_free(r->out);
    lean_gpu_buf_free(r->rb);
    lean_free(r->x);
    lean_free(r);
}

/* Draw k: reset to its position, draw, copy what the check compares to its record in rb. */
static lean_status check_draw(gpu_sampler_check_run *r, int k, lean_error *err) {
    gpu_sampler *s = r->s[k / CHECK_DRAWS];
    lean_gpu_cmd *c = NULL;
    lean_status st = gpu_sampler_reset(s, check_pos(k), r->hist, CHECK_HIST, err);
    if (st == LEAN_OK) st = lean_gpu_begin(r->g, &c, err);
    if (st != LEAN_OK) return st;
    gpu_sampler_record(c, s);
    const uint64_t rec = 4ull * r->rec_words * (uint64_t)k;
    lean_gpu_copy(c, s->out, 4ull * s->out_index, r->rb, rec, 4);
    lean_gpu_copy(c, s->scratch, 4ull * s->final_off, r->rb, rec + 4, 8ull * s->list_len);
    lean_gpu_copy(c, s->scratch, 4ull * s->trace_off, r->rb, rec + 4 + 8ull * s->list_len, 4ull * TRACE_WORDS);
    return lean_gpu_submit(c, err);
}

lean_status gpu_sampler_check_begin(lean_gpu *g, gpu_sampler_check_run **out, lean_error *err) {
    *out = NULL;
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = 0.7;
    p.top_k = SAMPLER_K_CAP;
    p.top_p = 0.9;
    p.repeat_penalty = 1.3;
    p.repeat_last_n = CHECK_HIST;
    p.seed = 0x5a3b1e;
    static const lean_logit_bias bias[] = {{3, 2.75f}, {17, -1.3f}, {500, 4.1f}, {999, 0.37f}};
    p.logit_bias = bias; /* the bias's addition too: ids among the best (logits in [-8, 8)) */
    p.n_logit_bias = 4;
    sampler_cfg cfg;
    lean_status st = sampler_config(&p, &cfg, err);
    if (st != LEAN_OK) return st;
    gpu_sampler_check_run *r = lean_calloc(1, sizeof *r);
    float *x = lean_malloc((CHECK_N + SAMPLER_WORK_FLOATS(CHECK_N)) * sizeof *x);
    if (!r || !x) {
        lean_free(r), lean_free(x);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu_sampler_check: %d logits", CHECK_N);
    }
    r->g = g;
    r->x = x;
    uint32_t u = 12345;
    for (int i = 0; i < CHECK_N; i++) { /* [-8, 8) from a 32-bit LCG: a wide spread of weights */
        u = u * 1664525u + 1013904223u;
        x[i] = (float)(u >> 8) * 0x1p-20f - 8.0f;
    }
    for (int i = 0; i < CHECK_HIST; i++) r->hist[i] = (i * 37 + 11) % CHECK_N;
    st = lean_gpu_buf_create(g, sizeof *x * CHECK_N, LEAN_GPU_STORAGE, "sample check logits", &r->logits, err);
    if (st == LEAN_OK) st = lean_gpu_buf_write(g, r->logits, 0, x, sizeof *x * CHECK_N, err);
    if (st == LEAN_OK) st = lean_gpu_buf_create(g, 4, LEAN_GPU_STORAGE, "sample check id", &r->out, err);
    if (st == LEAN_OK) st = gpu_sampler_create(g, &cfg, CHECK_N, r->logits, 0, r->out, 0, &r->s[0], err);
    cfg.top_k = 0;
    cfg.inv_temperature = 1.0f / (cfg.temperature = 2.0f);
    if (st == LEAN_OK) st = gpu_sampler_create(g, &cfg, CHECK_N, r->logits, 0, r->out, 0, &r->s[1], err);
    if (st == LEAN_OK) {
        r->rec_words = 1 + 2 * SAMPLER_K_CAP + TRACE_WORDS;
        st = lean_gpu_buf_create(g, 4ull * r->rec_words * 2 * CHECK_DRAWS, LEAN_GPU_READBACK, "sample check records",
                                 &r->rb, err);
    }
    for (int k = 0; k < 2 * CHECK_DRAWS && st == LEAN_OK; k++) st = check_draw(r, k, err);
    if (st == LEAN_OK) st = lean_gpu_map_begin(r->rb, err);
    if (st != LEAN_OK) {
        gpu_sampler_check_free(r);
        return st;
    }
    *out = r;
    return LEAN_OK;
}

lean_status gpu_sampler_check_end(gpu_sampler_check_run *r, lean_error *err) {
    uint32_t *w = lean_malloc(4ull * r->rec_words * 2 * CHECK_DRAWS);
    lean_status st = w ? lean_gpu_map_take(r->rb, w, 4ull * r->rec_words * 2 * CHECK_DRAWS, err)
                       : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu_sampler_check: its records");
    if (st == LEAN_PENDING) return lean_free(w), st;
    for (int k = 0; k < 2 * CHECK_DRAWS && st == LEAN_OK; k++) {
        gpu_sampler *s = r->s[k / CHECK_DRAWS];
        const uint32_t *rec = w + (size_t)r->rec_words * (size_t)k;
        sample_trace gt;
        trace_of(s, rec + 1, rec + 1 + 2 * SAMPLER_K_CAP, &gt);
        st = compare_draw(s, r->x, NULL, r->hist, CHECK_HIST, check_pos(k), r->x + CHECK_N, rec[0], &gt, err);
    }
    lean_free(w);
    gpu_sampler_check_free(r);
    return st;
}

lean_status gpu_sampler_check(lean_gpu *g, lean_error *err) {
    gpu_sampler_check_run *r;
    lean_status st = gpu_sampler_check_begin(g, &r, err);
    return st == LEAN_OK ? gpu_sampler_check_end(r, err) : st;
}

void gpu_sampler_free(gpu_sampler *s) {
    if (!s) return;
    for (int l = 0; l < s->n_levels; l++) lean_gpu_bindgroup_free(s->level[l].bg);
    lean_gpu_bindgroup_free(s->pick.bg);
    lean_gpu_bindgroup_free(s->wprep.bg);
    lean_gpu_bindgroup_free(s->wcount.bg);
    lean_gpu_bindgroup_free(s->wdigit.bg);
    lean_gpu_buf_free(s->params_buf);
    lean_gpu_buf_free(s->scratch);
    lean_gpu_buf_free(s->hist);
    lean_free(s->host);
    lean_free(s->bias);
    lean_free(s->dense);
    lean_free(s);
}
