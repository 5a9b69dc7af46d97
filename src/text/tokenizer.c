/* tokenizer.c — text <-> token ids with the vocabulary in a GGUF's tokenizer.* keys: the
 * public tokenizer API of lean.h.
 *
 * What it does: builds a lean_tokenizer from the keys (tokenizer.h has the table of them),
 * checking every array and every merge; splits text on special tokens (leftmost, longest
 * first, as HF's added-vocabulary matcher) and hands each text segment to an encoder
 * (tokenizer_bpe.c); adds BOS/EOS; turns ids back into bytes and UTF-8 text, all at once
 * or incrementally (lean_text_stream).
 * What it does not: the encoders themselves (tokenizer_bpe.c), Unicode data (unicode.c).
 *
 * Text in: any bytes. Invalid UTF-8 is first replaced, each maximal invalid subpart by
 * U+FFFD (HF tokenizers takes a string, and every usual bytes-to-string decoder does that).
 * Text out: valid UTF-8, with the same replacement for byte sequences the ids spell that are
 * not UTF-8 (a model can emit half a character).
 *
 * Sections, in dependency order:
 *   1. small helpers   id arrays, the text hash, lossy UTF-8 output
 *   2. building        keys -> tables, with the checks and their messages
 *   3. loading         from a file / a stream / for a model
 *   4. encoding        special-token split, segments, BOS/EOS
 *   5. decoding        ids -> bytes -> text; the text stream
 *   6. accessors       counts, token strings, special ids, end of generation
 */
#include "text/tokenizer.h"

#include "text/unicode.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ====================================================================== 1. small helpers */

void tok_ids_push(tok_ids *a, int32_t id) {
    if (a->oom) return;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = cap > SIZE_MAX / sizeof *v ? NULL : lean_realloc(a->v, cap * sizeof *v);
        if (!v) {
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
}

static uint32_t fnv1a(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

int32_t tok_hash_get(const tok_hash *h, const char *blob, const uint32_t *off, const char *key,
                     size_t len) {
    if (!h->slots) return -1;
    for (uint32_t i = fnv1a(key, len) & h->mask;; i = (i + 1) & h->mask) {
        const int32_t id = h->slots[i];
        if (id < 0) return -1;
        if (off[id + 1] - off[id] - 1 == len && memcmp(blob + off[id], key, len) == 0) return id;
    }
}

/* Builds a hash of the ids for which keep(id) holds; the first of equal strings wins. */
static lean_status hash_build(tok_hash *h, const char *blob, const uint32_t *off, int32_t n,
                              const uint8_t *type, bool normal_only, lean_error *err) {
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n) cap *= 2;
    h->slots = lean_malloc((size_t)cap * sizeof *h->slots);
    if (!h->slots) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a hash of %u slots", cap);
    memset(h->slots, 0xFF, (size_t)cap * sizeof *h->slots);
    h->mask = cap - 1;
    for (int32_t id = 0; id < n; id++) {
        if (normal_only && type[id] != LEAN_TOKEN_NORMAL) continue;
        const size_t len = off[id + 1] - off[id] - 1;
        uint32_t i = fnv1a(blob + off[id], len) & h->mask;
        for (;; i = (i + 1) & h->mask) {
            const int32_t o = h->slots[i];
            if (o < 0) break;
            if (off[o + 1] - off[o] - 1 == len && memcmp(blob + off[o], blob + off[id], len) == 0)
                break;
        }
        if (h->slots[i] < 0) h->slots[i] = id;
    }
    return LEAN_OK;
}

/* Appends s[0..n) to a growable byte buffer as valid UTF-8 (each maximal invalid subpart
 * becomes U+FFFD). false when out of memory. */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;

static bool buf_reserve(tok_buf *b, size_t more) {
    if (more > SIZE_MAX - b->n - 1) return false;
    if (b->n + more + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more + 1) cap = cap > SIZE_MAX / 2 ? b->n + more + 1 : cap * 2;
    char *p = lean_realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool buf_put_text(tok_buf *b, const char *s, size_t n) {
    if (n > SIZE_MAX / 3 || !buf_reserve(b, 3 * n)) return false;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        const size_t len = lean_utf8_next((const uint8_t *)s + i, n - i, &cp, &ok);
        if (ok) memcpy(b->p + b->n, s + i, len), b->n += len;
        else memcpy(b->p + b->n, "\xEF\xBF\xBD", 3), b->n += 3;
        i += len;
    }
    b->p[b->n] = 0;
    return true;
}

/* ====================================================================== 2. building */

/* pre names -> (kind, NFC, ignore_merges, add_bos default); llama.cpp's names for the
 * tokenizer.json pre-tokenizers lean implements (llama-vocab.cpp, which sets the same flags). */
static const struct {
    const char *name;
    enum pre_kind kind;
    bool nfc, ignore_merges, add_bos;
} pre_names[] = {
    {"gpt-2", PRE_GPT2, false, false, false},
    {"llama-bpe", PRE_LLAMA3, false, true, true},
    {"llama3", PRE_LLAMA3, false, true, true},
    {"llama-v3", PRE_LLAMA3, false, true, true},
    {"qwen2", PRE_QWEN2, true, false, false},
    {"smollm", PRE_STARCODER, false, false, false},
    {"starcoder", PRE_STARCODER, false, false, false},
};

/* Texts that end generation, as llama.cpp decides (llama-vocab.cpp: special_eog_ids). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "</s>",
    "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", /* Qwen's FIM pad / repo / file separator */
};
/* The end-of-turn token when tokenizer.ggml.eot_token_id is absent: the first of these. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<end_of_utterance>",
};

void lean_tokenizer_free(lean_tokenizer *t) {
    if (!t) return;
    lean_free(t->text);
    lean_free(t->text_off);
    lean_free(t->piece);
    lean_free(t->piece_off);
    lean_free(t->type);
    lean_free(t->score);
    lean_free(t->by_text.slots);
    lean_free(t->by_piece.slots);
    lean_free(t->merges);
    lean_free(t->special);
    lean_free(t->eog);
    lean_free(t);
}

/* A bool key, or def when absent. */
static lean_status get_bool(const gguf_file *f, const char *key, bool def, bool *out, lean_error *err) {
    const gguf_value *v = gguf_find(f, key);
    if (!v) return *out = def, LEAN_OK;
    if (v->type != GGUF_BOOL)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' has type %s; expected bool", key,
                         gguf_vtype_name(v->type));
    *out = v->v.u64 != 0;
    return LEAN_OK;
}

/* A token id key, or def when absent; it must name a token. */
static lean_status get_id(const gguf_file *f, const char *key, int32_t def, int32_t n, int32_t *out,
                          lean_error *err) {
    if (!gguf_find(f, key)) return *out = def < n ? def : -1, LEAN_OK;
    uint32_t v;
    lean_status st = gguf_get_u32(f, key, &v, err);
    if (st != LEAN_OK) return st;
    if (v >= (uint32_t)n)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "%s is %u, but the vocabulary has %d tokens", key, v, n);
    *out = (int32_t)v;
    return LEAN_OK;
}

/* The string arrays: their elements' total bytes + one NUL each must fit in u32 offsets. */
static lean_status copy_strings(const gguf_value *arr, const char *key, char **blob, uint32_t **off,
                                lean_error *err) {
    const uint64_t n = arr->v.arr.count;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t len = arr->v.arr.items[i].v.str.len;
        if (len > LEAN_TOK_MAX_TOKEN_BYTES)
            return LEAN_FAIL(err, LEAN_ERR_MODEL, "%s[%llu] is %llu bytes long; lean takes tokens of up to %d",
                             key, (unsigned long long)i, (unsigned long long)len, LEAN_TOK_MAX_TOKEN_BYTES);
        total += len + 1;
    }
    if (total > UINT32_MAX)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "%s holds %llu bytes of text, more than lean takes", key,
                         (unsigned long long)total);
    *blob = lean_malloc((size_t)total);
    *off = lean_malloc((size_t)(n + 1) * sizeof **off);
    if (!*blob || !*off) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "copying %s (%llu bytes)", key,
                                          (unsigned long long)total);
    uint32_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_string *s = &arr->v.arr.items[i].v.str;
        (*off)[i] = at;
        memcpy(*blob + at, s->ptr, s->len);
        at += (uint32_t)s->len;
        (*blob)[at++] = 0;
    }
    (*off)[n] = at;
    return LEAN_OK;
}

/* What a token decodes to. Byte-level: each character of its string is a byte through
 * bytes_to_unicode; a string with any other character is taken as it is (HF's ByteLevel
 * decoder). SentencePiece: <0xNN> byte tokens are that byte, U+2581 is a space. */
static lean_status build_pieces(lean_tokenizer *t, lean_error *err) {
    const int32_t n = t->n_tokens;
    const uint32_t total = t->text_off[n]; /* pieces are never longer than the strings */
    t->piece = lean_malloc(total ? total : 1);
    t->piece_off = lean_malloc(((size_t)n + 1) * sizeof *t->piece_off);
    if (!t->piece || !t->piece_off) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating token pieces");
    uint32_t at = 0;
    for (int32_t id = 0; id < n; id++) {
        const char *s = t->text + t->text_off[id];
        const size_t len = tok_text_len(t, id);
        t->piece_off[id] = at;
        char *o = t->piece + at;
        size_t k = 0;
        if (t->kind == TOK_SPM && t->type[id] == LEAN_TOKEN_BYTE && len == 6 && memcmp(s, "<0x", 3) == 0 &&
            isxdigit((unsigned char)s[3]) && isxdigit((unsigned char)s[4]) && s[5] == '>') {
            o[k++] = (char)strtol((char[]){s[3], s[4], 0}, NULL, 16);
        } else if (t->kind == TOK_SPM) {
            for (size_t i = 0; i < len;) {
                if (len - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) o[k++] = ' ', i += 3;
                else o[k++] = s[i++];
            }
        } else {
            bool all = true;
            for (size_t i = 0; i < len && all;) {
                uint32_t cp;
                bool ok;
                i += lean_utf8_next((const uint8_t *)s + i, len - i, &cp, &ok);
                const int b = ok ? tok_cp_to_byte(cp) : -1;
                if (b < 0) all = false;
                else o[k++] = (char)b;
            }
            if (!all) memcpy(o, s, len), k = len;
        }
        o[k++] = 0;
        at += (uint32_t)k;
    }
    t->piece_off[n] = at;
    return LEAN_OK;
}

static lean_status build_merges(lean_tokenizer *t, const gguf_file *f, lean_error *err) {
    const char *key = "tokenizer.ggml.merges";
    const gguf_value *arr;
    if (!gguf_find(f, key))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "missing key '%s' (a gpt2 vocabulary needs its merges)", key);
    lean_status st = gguf_get_arr(f, key, GGUF_STRING, &arr, err);
    if (st != LEAN_OK) return st;
    const uint64_t m = arr->v.arr.count;
    if (m > LEAN_TOK_MAX_MERGES)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "%s has %llu entries; lean takes up to %d", key,
                         (unsigned long long)m, LEAN_TOK_MAX_MERGES);
    uint32_t cap = 16; /* a load of at most 3/4: ~1.5 probes when present, ~4 when absent */
    while (cap < m + m / 3 + 1) cap *= 2;
    t->merges = lean_malloc((size_t)cap * sizeof *t->merges);
    if (!t->merges) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %u merge slots", cap);
    for (uint32_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merge_mask = cap - 1;
    char *joined = lean_malloc(2 * LEAN_TOK_MAX_TOKEN_BYTES + 1);
    if (!joined) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a merge buffer");
    for (uint64_t r = 0; r < m; r++) {
        const gguf_string *s = &arr->v.arr.items[r].v.str;
        /* "left right": split at the first space after the first byte (llama.cpp's rule,
         * which lets a token that is itself a space be the left side) */
        const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
        if (!sp) {
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "%s[%llu] = '%.40s' is not two tokens separated by a space",
                           key, (unsigned long long)r, s->ptr);
            break;
        }
        const size_t ll = (size_t)(sp - s->ptr), rl = s->len - ll - 1;
        const int32_t a = tok_text_id(t, s->ptr, ll), b = tok_text_id(t, sp + 1, rl);
        int32_t c = -1;
        if (a >= 0 && b >= 0 && ll + rl <= 2 * LEAN_TOK_MAX_TOKEN_BYTES) {
            memcpy(joined, s->ptr, ll);
            memcpy(joined + ll, sp + 1, rl);
            c = tok_text_id(t, joined, ll + rl);
        }
        if (a < 0 || b < 0 || c < 0) {
            const char *which = a < 0 ? "left" : b < 0 ? "right" : "merged";
            const char *w = a < 0 ? s->ptr : b < 0 ? sp + 1 : joined;
            const size_t wl = a < 0 ? ll : b < 0 ? rl : ll + rl;
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "%s[%llu] = '%.60s': the %s token '%.*s' is not in the vocabulary",
                           key, (unsigned long long)r, s->ptr, which, (int)(wl > 60 ? 60 : wl), w);
            break;
        }
        const uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint32_t i = tok_merge_slot(k, t->merge_mask);
        while (t->merges[i].key != UINT64_MAX && t->merges[i].key != k) i = (i + 1) & t->merge_mask;
        if (t->merges[i].key == UINT64_MAX) /* a repeated pair keeps its first rank */
            t->merges[i] = (tok_merge){k, (int32_t)r, c};
    }
    lean_free(joined);
    return st;
}

/* Special tokens matched in the text: sorted by first byte, then longest first. */
typedef struct special_key {
    uint8_t first;
    uint32_t len;
    int32_t id;
} special_key;

static int special_cmp(const void *pa, const void *pb) {
    const special_key *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static bool is_special(const lean_tokenizer *t, int32_t id) {
    const uint8_t ty = t->type[id];
    return (ty == LEAN_TOKEN_CONTROL || ty == LEAN_TOKEN_USER_DEFINED || ty == LEAN_TOKEN_UNKNOWN) &&
           tok_text_len(t, id) > 0;
}

static lean_status build_specials(lean_tokenizer *t, lean_error *err) {
    int32_t n = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) n += is_special(t, id);
    special_key *keys = lean_malloc((size_t)(n ? n : 1) * sizeof *keys);
    t->special = lean_malloc((size_t)(n ? n : 1) * sizeof *t->special);
    if (!keys || !t->special) {
        lean_free(keys);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %d special tokens", n);
    }
    int32_t k = 0;
    for (int32_t id = 0; id < t->n_tokens; id++)
        if (is_special(t, id))
            keys[k++] = (special_key){(uint8_t)t->text[t->text_off[id]], (uint32_t)tok_text_len(t, id), id};
    qsort(keys, (size_t)n, sizeof *keys, special_cmp);
    int32_t i = 0;
    for (int b = 0; b < 256; b++) {
        t->special_start[b] = i;
        while (i < n && keys[i].first == b) t->special[i] = keys[i].id, i++;
    }
    t->special_start[256] = n;
    t->n_special = n;
    lean_free(keys);
    return LEAN_OK;
}

static lean_status build_eog(lean_tokenizer *t, const gguf_file *f, lean_error *err) {
    t->eog = lean_calloc((size_t)t->n_tokens, 1);
    if (!t->eog) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating end-of-generation flags");
    lean_status st;
    if ((st = get_id(f, "tokenizer.ggml.eot_token_id", -1, t->n_tokens, &t->eot, err)) ||
        (st = get_id(f, "tokenizer.ggml.eom_token_id", -1, t->n_tokens, &t->eom, err)))
        return st;
    for (size_t i = 0; t->eot < 0 && i < sizeof eot_texts / sizeof eot_texts[0]; i++)
        t->eot = tok_text_id(t, eot_texts[i], strlen(eot_texts[i]));
    if (t->eom < 0) t->eom = tok_text_id(t, "<|eom_id|>", 10);
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        const int32_t id = tok_text_id(t, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0) t->eog[id] = 1;
    }
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
    return LEAN_OK;
}

static lean_status build(const gguf_file *f, lean_tokenizer *t, lean_error *err) {
    const char *model;
    lean_status st;
    if (!gguf_find(f, "tokenizer.ggml.model"))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "the file has no tokenizer (key 'tokenizer.ggml.model' is missing)");
    if ((st = gguf_get_str(f, "tokenizer.ggml.model", &model, err))) return st;
    if (strcmp(model, "gpt2") == 0) t->kind = TOK_BPE;
    else if (strcmp(model, "llama") == 0) t->kind = TOK_SPM;
    else
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "tokenizer.ggml.model is '%.60s'; lean reads 'gpt2' (byte-level BPE) and 'llama' (SentencePiece)",
                         model);
    snprintf(t->model_name, sizeof t->model_name, "%s", model);

    bool add_bos_default = t->kind == TOK_SPM;
    t->pre = PRE_NONE;
    if (t->kind == TOK_BPE) {
        const char *pre;
        if (!gguf_find(f, "tokenizer.ggml.pre"))
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                             "key 'tokenizer.ggml.pre' is missing: lean needs it to pick the pre-tokenizer");
        if ((st = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err))) return st;
        size_t i = 0, n_names = sizeof pre_names / sizeof pre_names[0];
        while (i < n_names && strcmp(pre, pre_names[i].name) != 0) i++;
        if (i == n_names)
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                             "pre-tokenizer '%.60s' (tokenizer.ggml.pre) is not implemented; lean knows gpt-2, "
                             "llama-bpe (llama3, llama-v3), qwen2, smollm, starcoder", pre);
        t->pre = pre_names[i].kind;
        t->nfc = pre_names[i].nfc;
        t->ignore_merges = pre_names[i].ignore_merges;
        add_bos_default = pre_names[i].add_bos;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
    }

    /* tokens, types, scores */
    const gguf_value *toks, *types = NULL, *scores = NULL;
    if (!gguf_find(f, "tokenizer.ggml.tokens"))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "missing key 'tokenizer.ggml.tokens'");
    if ((st = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, err))) return st;
    const uint64_t n = toks->v.arr.count;
    if (n < 1 || n > LEAN_TOK_MAX_TOKENS)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tokenizer.ggml.tokens has %llu tokens; lean takes 1..%d",
                         (unsigned long long)n, LEAN_TOK_MAX_TOKENS);
    t->n_tokens = (int32_t)n;
    if (gguf_find(f, "tokenizer.ggml.token_type")) {
        if ((st = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &types, err))) return st;
        if (types->v.arr.count != n)
            return LEAN_FAIL(err, LEAN_ERR_MODEL, "tokenizer.ggml.token_type has %llu entries for %llu tokens",
                             (unsigned long long)types->v.arr.count, (unsigned long long)n);
    }
    if (t->kind == TOK_SPM && gguf_find(f, "tokenizer.ggml.scores")) {
        if ((st = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_F32, &scores, err))) return st;
        if (scores->v.arr.count != n)
            return LEAN_FAIL(err, LEAN_ERR_MODEL, "tokenizer.ggml.scores has %llu entries for %llu tokens",
                             (unsigned long long)scores->v.arr.count, (unsigned long long)n);
    }
    if ((st = copy_strings(toks, "tokenizer.ggml.tokens", &t->text, &t->text_off, err))) return st;
    t->type = lean_malloc((size_t)n);
    if (t->kind == TOK_SPM) t->score = lean_calloc((size_t)n, sizeof *t->score);
    if (!t->type || (t->kind == TOK_SPM && !t->score))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating token types and scores");
    for (uint64_t i = 0; i < n; i++) {
        int64_t ty = types ? types->v.arr.items[i].v.i64 : LEAN_TOKEN_NORMAL;
        if (ty < 0 || ty > LEAN_TOKEN_BYTE)
            return LEAN_FAIL(err, LEAN_ERR_MODEL, "tokenizer.ggml.token_type[%llu] is %lld; types are 0..6",
                             (unsigned long long)i, (long long)ty);
        t->type[i] = (uint8_t)(ty == 0 ? LEAN_TOKEN_NORMAL : ty); /* 0: undefined */
        if (scores) t->score[i] = (float)scores->v.arr.items[i].v.f64;
    }

    if ((st = hash_build(&t->by_text, t->text, t->text_off, t->n_tokens, t->type, false, err)) ||
        (st = build_pieces(t, err)))
        return st;
    for (int b = 0; b < 256; b++) {
        char s[8];
        size_t len;
        if (t->kind == TOK_SPM) len = (size_t)snprintf(s, sizeof s, "<0x%02X>", b);
        else len = lean_utf8_put(tok_byte_to_cp((uint8_t)b), (uint8_t *)s);
        t->byte_id[b] = tok_text_id(t, s, len);
    }
    if (t->kind == TOK_BPE) {
        if ((st = build_merges(t, f, err))) return st;
        if (t->ignore_merges &&
            (st = hash_build(&t->by_piece, t->piece, t->piece_off, t->n_tokens, t->type, true, err)))
            return st;
    }

    /* special ids and flags (llama.cpp's defaults: SentencePiece vocabularies put <unk>,
     * <s>, </s> at 0, 1, 2 and add BOS; byte-level ones name theirs) */
    const bool spm = t->kind == TOK_SPM;
    if ((st = get_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, t->n_tokens, &t->bos, err)) ||
        (st = get_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, t->n_tokens, &t->eos, err)) ||
        (st = get_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, t->n_tokens, &t->unk, err)) ||
        (st = get_id(f, "tokenizer.ggml.padding_token_id", -1, t->n_tokens, &t->pad, err)) ||
        (st = get_bool(f, "tokenizer.ggml.add_bos_token", add_bos_default, &t->add_bos, err)) ||
        (st = get_bool(f, "tokenizer.ggml.add_eos_token", false, &t->add_eos, err)) ||
        (st = get_bool(f, "tokenizer.ggml.add_space_prefix", spm, &t->add_space_prefix, err)))
        return st;
    if (t->add_bos && t->bos < 0)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tokenizer.ggml.add_bos_token is true but there is no bos token id");
    if (t->add_eos && t->eos < 0)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tokenizer.ggml.add_eos_token is true but there is no eos token id");
    if ((st = build_specials(t, err))) return st;
    return build_eog(t, f, err);
}

lean_status lean_tokenizer_build(const gguf_file *f, lean_tokenizer **out, lean_error *err) {
    *out = NULL;
    lean_tokenizer *t = lean_calloc(1, sizeof *t);
    if (!t) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a tokenizer");
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    lean_status st = build(f, t, err);
    if (st != LEAN_OK) {
        lean_tokenizer_free(t);
        return st;
    }
    *out = t;
    return LEAN_OK;
}

/* ====================================================================== 3. loading */

lean_status lean_tokenizer_load_stream(lean_read_fn read, void *user, uint64_t file_size,
                                       lean_tokenizer **out, lean_error *err) {
    if (!read || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_tokenizer_load_stream: NULL argument");
    *out = NULL;
    gguf_file *f;
    lean_status st = gguf_read(read, user, file_size, &f, err);
    if (st != LEAN_OK) return st;
    st = lean_tokenizer_build(f, out, err);
    gguf_free(f);
    return st;
}

lean_status lean_tokenizer_load_file(const char *path, lean_tokenizer **out, lean_error *err) {
    if (!path || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_tokenizer_load_file: NULL argument");
    *out = NULL;
    lean_mapped_file map;
    lean_status st = lean_map_file(path, &map, err);
    if (st == LEAN_OK) {
        st = lean_tokenizer_load_stream(lean_read_mapped, &map, map.size, out, err);
        lean_unmap_file(&map);
        return st;
    }
    if (st != LEAN_ERR_UNSUPPORTED) return st;
    /* no mmap (WASI): read the header through stdio */
    FILE *fp = fopen(path, "rb");
    if (!fp) return LEAN_FAIL(err, LEAN_ERR_IO, "cannot open '%s'", path);
    off_t size;
    if (fseeko(fp, 0, SEEK_END) != 0 || (size = ftello(fp)) < 0)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot find the size of '%s'", path);
    else
        st = lean_tokenizer_load_stream(lean_read_stdio, fp, (uint64_t)size, out, err);
    fclose(fp);
    return st;
}

lean_status lean_tokenizer_for_model(const gguf_file *f, lean_tokenizer **out, lean_error *err) {
    *out = NULL;
    if (!gguf_find(f, "tokenizer.ggml.model")) return LEAN_OK;
    lean_error why = {0};
    lean_status st = lean_tokenizer_build(f, out, &why);
    if (st == LEAN_OK) return LEAN_OK;
    if (st == LEAN_ERR_NOMEM) return LEAN_FAIL(err, st, "%s", why.msg);
    lean_tokenizer *t = lean_calloc(1, sizeof *t);
    if (!t) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a tokenizer");
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    t->status = st;
    snprintf(t->error, sizeof t->error, "the model's tokenizer could not be built: %.460s", why.msg);
    *out = t;
    return LEAN_OK;
}

lean_status lean_tokenizer_check(const lean_tokenizer *t, lean_error *err) {
    if (!t) return LEAN_FAIL(err, LEAN_ERR_ARG, "no tokenizer (NULL)");
    if (t->status != LEAN_OK) return LEAN_FAIL(err, t->status, "%s", t->error);
    return LEAN_OK;
}

/* ====================================================================== 4. encoding */

/* The longest special token (of those allowed) that starts at s[0..n), or -1. plain
 * (nullable, parallel to s): a CONTROL or UNKNOWN token is not matched over a byte marked
 * plain (see tok_tokenize). */
static int32_t match_special(const lean_tokenizer *t, const char *s, size_t n, bool parse_control,
                             const uint8_t *plain) {
    const uint8_t b = (uint8_t)s[0];
    for (int32_t i = t->special_start[b]; i < t->special_start[b + 1]; i++) {
        const int32_t id = t->special[i];
        const bool control = t->type[id] != LEAN_TOKEN_USER_DEFINED;
        if (control && !parse_control) continue;
        const size_t len = tok_text_len(t, id);
        if (len > n || memcmp(s, t->text + t->text_off[id], len) != 0) continue;
        if (control && plain && memchr(plain, 1, len)) continue;
        return id;
    }
    return -1;
}

int32_t tok_match_control(const lean_tokenizer *t, const char *s, size_t n) {
    const int32_t id = n && t->n_special ? match_special(t, s, n, true, NULL) : -1;
    return id >= 0 && t->type[id] != LEAN_TOKEN_USER_DEFINED ? id : -1;
}

static lean_status encode_segment(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                                  lean_error *err) {
    if (n == 0) return LEAN_OK;
    return t->kind == TOK_SPM ? tok_encode_spm(t, s, n, out, err) : tok_encode_bpe(t, s, n, out, err);
}

lean_status lean_tokenize(const lean_tokenizer *t, const char *text, size_t text_bytes, uint32_t flags,
                          int32_t *ids, int32_t max_ids, int32_t *n_ids, lean_error *err) {
    return tok_tokenize(t, text, text_bytes, flags, NULL, ids, max_ids, n_ids, err);
}

lean_status tok_tokenize(const lean_tokenizer *t, const char *text, size_t text_bytes, uint32_t flags,
                         const uint8_t *plain, int32_t *ids, int32_t max_ids, int32_t *n_ids, lean_error *err) {
    lean_status st = lean_tokenizer_check(t, err);
    if (st != LEAN_OK) return st;
    if ((!text && text_bytes) || !n_ids || max_ids < 0 || (!ids && max_ids > 0))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_tokenize: NULL text, ids or n_ids, or max_ids < 0");
    if (flags & ~(uint32_t)(LEAN_TOKENIZE_ADD_SPECIAL | LEAN_TOKENIZE_PARSE_SPECIAL))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_tokenize: unknown flags 0x%x", flags);
    if (text_bytes > LEAN_TOK_MAX_TEXT_BYTES)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_tokenize: %zu bytes of text; at most %d at once", text_bytes,
                         LEAN_TOK_MAX_TEXT_BYTES);

    /* invalid UTF-8 -> U+FFFD first, as HF's callers decode bytes to a string (plain's
     * marks move with their bytes; a replacement takes its subpart's first mark) */
    char *clean = NULL;
    uint8_t *clean_plain = NULL;
    {
        size_t i = 0;
        while (i < text_bytes) {
            uint32_t cp;
            bool ok;
            const size_t len = lean_utf8_next((const uint8_t *)text + i, text_bytes - i, &cp, &ok);
            if (!ok) break;
            i += len;
        }
        if (i < text_bytes) {
            tok_buf b = {0};
            if (!buf_put_text(&b, text, text_bytes) || (plain && !(clean_plain = lean_malloc(b.n + 1)))) {
                lean_free(b.p);
                return LEAN_FAIL(err, LEAN_ERR_NOMEM, "replacing invalid UTF-8 in %zu bytes", text_bytes);
            }
            for (size_t j = 0, k = 0; plain && j < text_bytes;) {
                uint32_t cp;
                bool ok;
                const size_t len = lean_utf8_next((const uint8_t *)text + j, text_bytes - j, &cp, &ok);
                const size_t out_len = ok ? len : 3;
                for (size_t q = 0; q < out_len; q++) clean_plain[k + q] = plain[ok ? j + q : j];
                j += len;
                k += out_len;
            }
            plain = clean_plain;
            clean = b.p;
            text = b.p;
            text_bytes = b.n;
        }
    }
    tok_ids out = {0};
    const bool add = flags & LEAN_TOKENIZE_ADD_SPECIAL, parse = flags & LEAN_TOKENIZE_PARSE_SPECIAL;
    if (add && t->add_bos) tok_ids_push(&out, t->bos);
    /* split on special tokens: leftmost first, the longest at a position */
    size_t seg = 0;
    for (size_t i = 0; i < text_bytes && st == LEAN_OK;) {
        const int32_t id = t->n_special ? match_special(t, text + i, text_bytes - i, parse, plain ? plain + i : NULL) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        st = encode_segment(t, text + seg, i - seg, &out, err);
        tok_ids_push(&out, id);
        i += tok_text_len(t, id);
        seg = i;
    }
    if (st == LEAN_OK) st = encode_segment(t, text + seg, text_bytes - seg, &out, err);
    if (st == LEAN_OK && add && t->add_eos) tok_ids_push(&out, t->eos);
    if (st == LEAN_OK && out.oom) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "tokenizing %zu bytes", text_bytes);
    if (st == LEAN_OK && out.n > INT32_MAX)
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "the text makes %zu tokens, more than an int32 counts", out.n);
    if (st == LEAN_OK) {
        const size_t k = out.n < (size_t)max_ids ? out.n : (size_t)max_ids;
        if (k) memcpy(ids, out.v, k * sizeof *ids);
        *n_ids = (int32_t)out.n;
    }
    lean_free(out.v);
    lean_free(clean);
    lean_free(clean_plain);
    return st;
}

/* ====================================================================== 5. decoding */

static bool skipped(const lean_tokenizer *t, int32_t id, uint32_t flags) {
    return (flags & LEAN_DETOKENIZE_SKIP_SPECIAL) &&
           (t->type[id] == LEAN_TOKEN_CONTROL || t->type[id] == LEAN_TOKEN_UNKNOWN);
}

static lean_status check_ids(const lean_tokenizer *t, const int32_t *ids, int32_t n, lean_error *err) {
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_tokens)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "ids[%d] = %d is outside the vocabulary [0, %d)", i, ids[i],
                             t->n_tokens);
    return LEAN_OK;
}

lean_status lean_detokenize(const lean_tokenizer *t, const int32_t *ids, int32_t n_ids, uint32_t flags,
                            char *text, size_t max_bytes, size_t *n_bytes, lean_error *err) {
    lean_status st = lean_tokenizer_check(t, err);
    if (st != LEAN_OK) return st;
    if ((!ids && n_ids > 0) || n_ids < 0 || !n_bytes || (!text && max_bytes > 0))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_detokenize: NULL ids, text or n_bytes, or n_ids < 0");
    if (flags & ~(uint32_t)LEAN_DETOKENIZE_SKIP_SPECIAL)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_detokenize: unknown flags 0x%x", flags);
    if ((st = check_ids(t, ids, n_ids, err))) return st;
    /* the pieces' bytes, then valid UTF-8 of them */
    tok_buf raw = {0}, out = {0};
    for (int32_t i = 0; i < n_ids; i++) {
        if (skipped(t, ids[i], flags)) continue;
        size_t len;
        const char *p = lean_token_piece(t, ids[i], &len);
        if (!buf_reserve(&raw, len)) goto oom;
        memcpy(raw.p + raw.n, p, len);
        raw.n += len;
    }
    size_t skip = 0; /* SentencePiece: the first space is the prefix added when encoding */
    if (t->kind == TOK_SPM && t->add_space_prefix && raw.n > 0 && raw.p[0] == ' ') skip = 1;
    if (!buf_put_text(&out, raw.n ? raw.p + skip : "", raw.n - skip)) goto oom;
    if (max_bytes) {
        const size_t k = out.n < max_bytes ? out.n : max_bytes;
        memcpy(text, out.p, k);
        if (out.n < max_bytes) text[out.n] = 0;
    }
    *n_bytes = out.n;
    lean_free(raw.p);
    lean_free(out.p);
    return LEAN_OK;
oom:
    lean_free(raw.p);
    lean_free(out.p);
    return LEAN_FAIL(err, LEAN_ERR_NOMEM, "detokenizing %d ids", n_ids);
}

struct lean_text_stream {
    const lean_tokenizer *t;
    uint32_t flags;
    bool at_start;   /* nothing emitted yet: the SentencePiece prefix space is still to strip */
    char held[4];    /* the start of a character whose other bytes have not come yet */
    size_t n_held;
    tok_buf in, out; /* scratch: held + piece, and the text handed back */
};

lean_status lean_text_stream_create(const lean_tokenizer *t, uint32_t flags, lean_text_stream **out,
                                    lean_error *err) {
    lean_status st = lean_tokenizer_check(t, err);
    if (st != LEAN_OK) return st;
    if (!out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_text_stream_create: NULL out");
    if (flags & ~(uint32_t)LEAN_DETOKENIZE_SKIP_SPECIAL)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_text_stream_create: unknown flags 0x%x", flags);
    lean_text_stream *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a text stream");
    s->t = t;
    s->flags = flags;
    s->at_start = true;
    *out = s;
    return LEAN_OK;
}

void lean_text_stream_free(lean_text_stream *s) {
    if (!s) return;
    lean_free(s->in.p);
    lean_free(s->out.p);
    lean_free(s);
}

lean_status lean_text_stream_push(lean_text_stream *s, int32_t id, const char **text, size_t *n_bytes,
                                  lean_error *err) {
    if (!s || !text || !n_bytes) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_text_stream_push: NULL argument");
    const lean_tokenizer *t = s->t;
    if (id < 0 || id >= t->n_tokens)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "id %d is outside the vocabulary [0, %d)", id, t->n_tokens);
    size_t len = 0;
    const char *p = skipped(t, id, s->flags) ? "" : lean_token_piece(t, id, &len);
    if (s->at_start && len > 0) {
        if (t->kind == TOK_SPM && t->add_space_prefix && p[0] == ' ') p++, len--;
        s->at_start = false;
    }
    s->in.n = 0;
    s->out.n = 0;
    if (!buf_reserve(&s->in, s->n_held + len)) goto oom;
    memcpy(s->in.p, s->held, s->n_held);
    memcpy(s->in.p + s->n_held, p, len);
    s->in.n = s->n_held + len;
    /* hand back every complete character; keep an unfinished one for the next id */
    const size_t done = lean_utf8_complete_prefix((const uint8_t *)s->in.p, s->in.n);
    if (!buf_put_text(&s->out, s->in.p, done)) goto oom;
    s->n_held = s->in.n - done;
    memcpy(s->held, s->in.p + done, s->n_held);
    *text = s->out.p ? s->out.p : "";
    *n_bytes = s->out.n;
    return LEAN_OK;
oom:
    return LEAN_FAIL(err, LEAN_ERR_NOMEM, "growing the text stream's buffer");
}

lean_status lean_text_stream_flush(lean_text_stream *s, const char **text, size_t *n_bytes,
                                   lean_error *err) {
    if (!s || !text || !n_bytes) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_text_stream_flush: NULL argument");
    s->out.n = 0;
    if (!buf_put_text(&s->out, s->held, s->n_held))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "growing the text stream's buffer");
    s->n_held = 0;
    s->at_start = true;
    *text = s->out.p ? s->out.p : "";
    *n_bytes = s->out.n;
    return LEAN_OK;
}

/* ====================================================================== 6. accessors */

static bool usable(const lean_tokenizer *t) { return t && t->status == LEAN_OK; }

int32_t lean_tokenizer_n_tokens(const lean_tokenizer *t) { return usable(t) ? t->n_tokens : 0; }

int32_t lean_token_get_type(const lean_tokenizer *t, int32_t id) {
    return usable(t) && id >= 0 && id < t->n_tokens ? t->type[id] : 0;
}

const char *lean_token_text(const lean_tokenizer *t, int32_t id, size_t *n_bytes) {
    if (!usable(t) || id < 0 || id >= t->n_tokens) return NULL;
    if (n_bytes) *n_bytes = tok_text_len(t, id);
    return t->text + t->text_off[id];
}

const char *lean_token_piece(const lean_tokenizer *t, int32_t id, size_t *n_bytes) {
    if (!usable(t) || id < 0 || id >= t->n_tokens) return NULL;
    if (n_bytes) *n_bytes = t->piece_off[id + 1] - t->piece_off[id] - 1;
    return t->piece + t->piece_off[id];
}

int32_t lean_token_bos(const lean_tokenizer *t) { return usable(t) ? t->bos : -1; }
int32_t lean_token_eos(const lean_tokenizer *t) { return usable(t) ? t->eos : -1; }
int32_t lean_token_eot(const lean_tokenizer *t) { return usable(t) ? t->eot : -1; }

int lean_token_is_eog(const lean_tokenizer *t, int32_t id) {
    return usable(t) && id >= 0 && id < t->n_tokens && t->eog[id];
}

void lean_tokenizer_get_info(const lean_tokenizer *t, lean_tokenizer_info *out) {
    memset(out, 0, sizeof *out);
    out->model = out->pre = "";
    out->bos = out->eos = out->eot = out->unk = out->pad = -1;
    if (!usable(t)) return;
    out->model = t->model_name;
    out->pre = t->pre_name;
    out->n_tokens = t->n_tokens;
    out->bos = t->bos;
    out->eos = t->eos;
    out->eot = t->eot;
    out->unk = t->unk;
    out->pad = t->pad;
    out->add_bos = t->add_bos;
    out->add_eos = t->add_eos;
    out->add_space_prefix = t->add_space_prefix;
    out->normalize_nfc = t->nfc;
}
