/* tokenizer_bpe.c — the two encoders: one text segment (special tokens already split off by
 * tokenizer.c) -> token ids.
 *
 * Byte-level BPE ("gpt2"), as HF tokenizers runs a tokenizer.json with a ByteLevel
 * pre-tokenizer and a BPE model:
 *   1. NFC, for Qwen2's vocabularies (its tokenizer.json's normalizer);
 *   2. pre-tokenize: split into words by the vocabulary's regex, implemented here by hand
 *      with the regex engine's own semantics (Oniguruma: leftmost alternative first, greedy
 *      quantifiers that backtrack) over Unicode categories — the matchers say which
 *      alternative they are;
 *   3. every word as bytes, one symbol per byte (the byte-level alphabet is one token per
 *      byte), merged by HF's Word::merge_all: a heap of (rank, position), always merging the
 *      lowest rank, leftmost first, skipping entries whose pair has changed since.
 * SentencePiece-style BPE ("llama"), as llama.cpp's llm_tokenizer_spm (which agrees with HF's
 * BPE-with-byte-fallback on Llama 2's vocabulary): spaces become U+2581 ("\u2581" before the
 * segment too when add_space_prefix), symbols are characters, the adjacent pair whose
 * concatenation is a token with the highest score merges first (leftmost on ties), and a
 * character that is no token becomes its bytes' <0xNN> tokens.
 *
 * Sections: 1. the byte-level alphabet, 2. pre-tokenizers, 3. byte-level BPE, 4. SPM.
 * Costs: O(n log n) per word for the merges (n bytes); pre-tokenizing is O(n) with one
 * category lookup per character.
 */
#include "text/tokenizer.h"
#include "text/unicode.h"

#include <string.h>

/* n elements of size bytes, or NULL when that overflows or the allocation fails. */
static void *alloc_n(size_t n, size_t size) {
    size_t bytes;
    return __builtin_mul_overflow(n, size, &bytes) ? NULL : lean_malloc(bytes);
}

/* ====================================================================== 1. byte-level alphabet */

/* GPT-2's bytes_to_unicode: the printable bytes (! .. ~, ¡ .. ¬, ® .. ÿ) stand for themselves,
 * the other 68 (0x00..0x20, 0x7F..0xA0, 0xAD) for U+0100.. in byte order. */
static bool byte_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t tok_byte_to_cp(uint8_t b) {
    if (byte_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(0x7F + cp - 256 - 33);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

/* ====================================================================== 2. pre-tokenizers */

enum { C_L = 1, C_N = 2, C_S = 4 }; /* \p{L}, \p{N}, \s: one character's classes */

typedef struct text_cps {
    const uint32_t *cp; /* the characters */
    const uint8_t *cls; /* C_* of each */
    size_t n;
} text_cps;

static bool is_other(uint8_t c) { return c == 0; } /* [^\s\p{L}\p{N}] */
static bool is_crlf(uint32_t cp) { return cp == '\r' || cp == '\n'; }
static uint32_t ascii_lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

/* Where `\s+(?!\S)|\s+` ends when tried at i (a space): the run less its last character if
 * that one is followed by a non-space (the lookahead fails at the run's end and the engine
 * gives one character back), else the whole run; a single space before a non-space is
 * matched by the second alternative, `\s+`. */
static size_t match_space_run(const text_cps *t, size_t i) {
    size_t k = i;
    while (k < t->n && (t->cls[k] & C_S)) k++;
    if (k == t->n) return k;
    return k - i >= 2 ? k - 1 : k;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (case-sensitive contractions; the optional prefix is U+0020 only). Returns the end of the
 * word that starts at i (< end). */
static size_t next_gpt2(const text_cps *t, size_t i, size_t end) {
    const uint32_t *c = t->cp;
    const uint8_t *k = t->cls;
    if (c[i] == '\'' && i + 1 < end) {
        const uint32_t a = c[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < end) {
            const uint32_t b = c[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }
    /* ` ?X+` for X in \p{L}, \p{N}, other: with the space when X follows it, else without */
    const bool sp = c[i] == ' ' && i + 1 < end;
    for (int x = 0; x < 3; x++) {
        size_t j;
        if (x < 2) {
            const uint8_t want = x == 0 ? C_L : C_N;
            if (sp && (k[i + 1] & want)) j = i + 1;
            else if (k[i] & want) j = i;
            else continue;
            while (j < end && (k[j] & want)) j++;
        } else {
            if (sp && is_other(k[i + 1])) j = i + 1;
            else if (is_other(k[i])) j = i;
            else continue;
            while (j < end && is_other(k[j])) j++;
        }
        return j;
    }
    if (k[i] & C_S) {
        text_cps sub = *t;
        sub.n = end;
        return match_space_run(&sub, i);
    }
    return i + 1; /* unreachable: every character is a letter, number, space or other */
}

/* Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+   — the case-insensitivity is ASCII's here: HF's own output shows
 * Oniguruma folding no other character into these (U+017F long s stays a letter). */
static size_t next_llama3(const text_cps *t, size_t i, int max_digits) {
    const uint32_t *c = t->cp;
    const uint8_t *k = t->cls;
    const size_t n = t->n;
    if (c[i] == '\'' && i + 1 < n) {
        const uint32_t a = ascii_lower(c[i + 1]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            const uint32_t b = ascii_lower(c[i + 2]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    {
        size_t j = SIZE_MAX;
        if (!is_crlf(c[i]) && !(k[i] & (C_L | C_N)) && i + 1 < n && (k[i + 1] & C_L)) j = i + 1;
        else if (k[i] & C_L) j = i;
        if (j != SIZE_MAX) {
            while (j < n && (k[j] & C_L)) j++;
            return j;
        }
    }
    /* \p{N}{1,max} */
    if (k[i] & C_N) {
        size_t j = i;
        while (j < n && j - i < (size_t)max_digits && (k[j] & C_N)) j++;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    {
        size_t j = SIZE_MAX;
        if (c[i] == ' ' && i + 1 < n && is_other(k[i + 1])) j = i + 1;
        else if (is_other(k[i])) j = i;
        if (j != SIZE_MAX) {
            while (j < n && is_other(k[j])) j++;
            while (j < n && is_crlf(c[j])) j++;
            return j;
        }
    }
    if (k[i] & C_S) {
        /* \s*[\r\n]+: \s* gives characters back until [\r\n]+ can match: the match ends
         * after the run's last \r or \n (the one after it, if any, is a space but no \r\n) */
        size_t e = i;
        while (e < n && (k[e] & C_S)) e++;
        for (size_t j = e; j > i; j--)
            if (is_crlf(c[j - 1])) return j;
        return match_space_run(t, i);
    }
    return i + 1;
}

/* Calls word(b0, b1) for each word of the segment, as byte offsets [b0, b1). */
typedef lean_status (*word_fn)(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                               lean_error *err);

static lean_status pretokenize(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                               word_fn word, lean_error *err) {
    lean_status st = LEAN_OK;
    /* n characters at most: code points, classes, byte offsets */
    uint32_t *cp = alloc_n(n + 1, sizeof *cp);
    uint8_t *cls = lean_malloc(n + 1);
    size_t *off = alloc_n(n + 1, sizeof *off);
    if (!cp || !cls || !off) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "pre-tokenizing %zu bytes", n);
        goto done;
    }
    size_t nc = 0;
    for (size_t i = 0; i < n; nc++) {
        bool ok;
        off[nc] = i;
        i += lean_utf8_next((const uint8_t *)s + i, n - i, &cp[nc], &ok);
        const uint32_t c = cp[nc];
        cls[nc] = (uint8_t)((lean_is_letter(c) ? C_L : 0) | (lean_is_number(c) ? C_N : 0) |
                            (lean_is_space(c) ? C_S : 0));
    }
    off[nc] = n;
    const text_cps tc = {cp, cls, nc};
    for (size_t i = 0; i < nc && st == LEAN_OK;) {
        size_t j;
        switch (t->pre) {
        case PRE_LLAMA3: j = next_llama3(&tc, i, 3); break;
        case PRE_QWEN2: j = next_llama3(&tc, i, 1); break;
        case PRE_STARCODER: {
            /* Digits(individual_digits): every number character is a word of its own; GPT-2's
             * regex runs on the text between them, which ends where the next one starts */
            if (cls[i] & C_N) {
                j = i + 1;
                break;
            }
            size_t end = i;
            while (end < nc && !(cls[end] & C_N)) end++;
            j = next_gpt2(&tc, i, end);
            break;
        }
        default: j = next_gpt2(&tc, i, nc); break;
        }
        st = word(t, s + off[i], off[j] - off[i], out, err);
        i = j;
    }
done:
    lean_free(cp);
    lean_free(cls);
    lean_free(off);
    return st;
}

/* ====================================================================== 3. byte-level BPE */

typedef struct bpe_sym {
    int32_t id;
    int32_t prev, next; /* neighbours still alive; -1 at the ends */
    bool gone;          /* merged into its left neighbour */
} bpe_sym;

typedef struct bpe_cand {
    int32_t rank, pos, result;
} bpe_cand;

/* HF's Merge order: lower rank first, then lower position. */
static bool cand_before(const bpe_cand *a, const bpe_cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_before(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n) {
    bpe_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= *n) break;
        if (l + 1 < *n && cand_before(&h[l + 1], &h[l])) m = l + 1;
        if (!cand_before(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static const tok_merge *find_merge(const lean_tokenizer *t, int32_t a, int32_t b) {
    const uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = tok_merge_slot(key, t->merge_mask);; i = (i + 1) & t->merge_mask) {
        const tok_merge *m = &t->merges[i];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

static lean_status bpe_word(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                            lean_error *err) {
    if (n == 0) return LEAN_OK;
    if (t->ignore_merges) {
        int32_t id = tok_hash_get(&t->by_piece, t->piece, t->piece_off, s, n);
        if (id >= 0) return tok_ids_push(out, id), LEAN_OK;
    }
    bpe_sym *sym = alloc_n(n, sizeof *sym);
    /* every merge pushes at most two candidates: n - 1 at the start, 2 per merge after */
    bpe_cand *heap = alloc_n(n, 3 * sizeof *heap);
    if (!sym || !heap) {
        lean_free(sym);
        lean_free(heap);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "merging a word of %zu bytes", n);
    }
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(uint8_t)s[i]];
        if (id < 0) id = t->unk; /* HF drops a character that is no token when there is no unk */
        if (id < 0) continue;
        sym[ns] = (bpe_sym){id, ns - 1, ns + 1, false};
        ns++;
    }
    if (ns > 0) sym[ns - 1].next = -1;
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < ns; i++) {
        const tok_merge *m = find_merge(t, sym[i].id, sym[i + 1].id);
        if (m) heap_push(heap, &nh, (bpe_cand){m->rank, i, m->result});
    }
    while (nh > 0) {
        const bpe_cand top = heap_pop(heap, &nh);
        bpe_sym *l = &sym[top.pos];
        if (l->gone || l->next < 0) continue;
        bpe_sym *r = &sym[l->next];
        /* an entry is stale when the pair at its position no longer makes its result */
        const tok_merge *m = find_merge(t, l->id, r->id);
        if (!m || m->result != top.result) continue;
        l->id = top.result;
        r->gone = true;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = top.pos;
        if (l->prev >= 0 && (m = find_merge(t, sym[l->prev].id, l->id)))
            heap_push(heap, &nh, (bpe_cand){m->rank, l->prev, m->result});
        if (l->next >= 0 && (m = find_merge(t, l->id, sym[l->next].id)))
            heap_push(heap, &nh, (bpe_cand){m->rank, top.pos, m->result});
    }
    for (int32_t i = 0; i >= 0 && i < ns; i = sym[i].next) tok_ids_push(out, sym[i].id);
    lean_free(sym);
    lean_free(heap);
    return LEAN_OK;
}

lean_status tok_encode_bpe(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                           lean_error *err) {
    if (n == 0) return LEAN_OK;
    char *norm = NULL;
    if (t->nfc) {
        bool ascii = true;
        for (size_t i = 0; i < n && ascii; i++) ascii = (uint8_t)s[i] < 0x80;
        if (!ascii) {
            lean_status st = lean_nfc(s, n, &norm, &n, err);
            if (st != LEAN_OK) return st;
            s = norm;
        }
    }
    lean_status st = pretokenize(t, s, n, out, bpe_word, err);
    lean_free(norm);
    return st;
}

/* ====================================================================== 4. SPM */

typedef struct spm_sym {
    uint32_t off, len; /* bytes of the escaped text; len 0 once merged into the left */
    int32_t prev, next;
} spm_sym;

typedef struct spm_cand {
    float score;
    int32_t left, right;
    uint32_t len; /* left + right bytes when pushed: a stale entry no longer matches */
} spm_cand;

/* llama.cpp's llm_bigram_spm order: higher score first, then the leftmost. */
static bool spm_before(const spm_cand *a, const spm_cand *b) {
    return a->score != b->score ? a->score > b->score : a->left < b->left;
}

static void spm_push(spm_cand *h, size_t *n, spm_cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!spm_before(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static spm_cand spm_pop(spm_cand *h, size_t *n) {
    spm_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= *n) break;
        if (l + 1 < *n && spm_before(&h[l + 1], &h[l])) m = l + 1;
        if (!spm_before(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static void spm_try(const lean_tokenizer *t, const char *text, const spm_sym *sym, int32_t l,
                    int32_t r, spm_cand *heap, size_t *nh) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = tok_text_id(t, text + sym[l].off, len);
    if (id < 0) return;
    spm_push(heap, nh, (spm_cand){t->score[id], l, r, len});
}

lean_status tok_encode_spm(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                           lean_error *err) {
    if (n == 0) return LEAN_OK;
    /* escape: each ' ' -> U+2581 (3 bytes), and one before the segment */
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    const size_t len = n + 2 * spaces + (t->add_space_prefix ? 3 : 0); /* n <= 2^29: no overflow */
    char *text = lean_malloc(len + 1);
    spm_sym *sym = alloc_n(len, sizeof *sym);
    spm_cand *heap = alloc_n(len, 3 * sizeof *heap);
    lean_status st = LEAN_OK;
    if (!text || !sym || !heap) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "tokenizing %zu bytes", n);
        goto done;
    }
    size_t at = 0;
    if (t->add_space_prefix) memcpy(text, "\xE2\x96\x81", 3), at = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') memcpy(text + at, "\xE2\x96\x81", 3), at += 3;
        else text[at++] = s[i];
    }
    text[at] = 0;
    int32_t ns = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        bool ok;
        const size_t cl = lean_utf8_next((const uint8_t *)text + i, len - i, &cp, &ok);
        sym[ns] = (spm_sym){(uint32_t)i, (uint32_t)cl, ns - 1, ns + 1};
        ns++;
        i += cl;
    }
    sym[ns - 1].next = -1;
    size_t nh = 0;
    for (int32_t i = 1; i < ns; i++) spm_try(t, text, sym, i - 1, i, heap, &nh);
    while (nh > 0) {
        const spm_cand top = spm_pop(heap, &nh);
        spm_sym *l = &sym[top.left], *r = &sym[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.len) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = top.left;
        spm_try(t, text, sym, l->prev, top.left, heap, &nh);
        spm_try(t, text, sym, top.left, l->next, heap, &nh);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        const int32_t id = tok_text_id(t, text + sym[i].off, sym[i].len);
        if (id >= 0) {
            tok_ids_push(out, id);
            continue;
        }
        /* a character that is no token: its bytes' <0xNN> tokens (byte fallback) */
        for (uint32_t b = 0; b < sym[i].len; b++) {
            const int32_t bid = t->byte_id[(uint8_t)text[sym[i].off + b]];
            if (bid >= 0) tok_ids_push(out, bid);
            else if (t->unk >= 0) tok_ids_push(out, t->unk);
        }
    }
done:
    lean_free(text);
    lean_free(sym);
    lean_free(heap);
    return st;
}
