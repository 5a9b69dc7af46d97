/* grammar.c — holding output to a grammar: which tokens may come next (a lean_mask), and
 * moving on by the token drawn. The matcher is llama.cpp's (src/llama-grammar.cpp): a set of
 * pushdown stacks, each a way the text so far can continue, every stack's top a character
 * class or a token element; a character keeps the stacks whose top matches it, popped and
 * expanded again (advance). Partial UTF-8 across token boundaries is kept as llama.cpp does.
 *
 * What differs, for speed (a mask asks about every token of a 150k vocabulary every step):
 *   - stacks are persistent lists in an arena (a node: element + parent), so a push or a pop
 *     copies nothing and stacks share their bottoms;
 *   - the vocabulary's pieces are sorted once, with each one's common prefix with the one
 *     before, and a mask walks them in that order: the stacks after a prefix are computed
 *     once for every token that starts with it (a trie walked without building one), and a
 *     prefix no stack takes rejects every token under it at once.
 * Cost: one step per distinct byte prefix the grammar still allows (docs/runs/ has the
 * numbers), never per token, plus one comparison per token.
 *
 * Tokens: NORMAL, USER_DEFINED and BYTE tokens match by their bytes (lean_token_piece);
 * end-of-generation tokens are allowed when the text so far completes the grammar (some stack
 * is empty); other control, unknown and unused tokens only through <[id]> elements.
 *
 * Sections: 1. stacks (arena, advance, accept a code point / a byte)  2. the handle
 * 3. the vocabulary's sorted pieces and the mask  4. accepting tokens and text */
#include "core/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A set this large means a grammar so ambiguous that matching it would not end in useful
 * time (e.g. nested optional repetitions): refused rather than hang. */
#define MAX_STACKS 4096

/* ================================================================ 1. stacks */

typedef struct snode {
    uint32_t elem;   /* index into rules.elems: the element to match next */
    uint32_t parent; /* the node under it; 0 = bottom (node 0 is the empty stack) */
} snode;

typedef struct u32vec {
    uint32_t *v;
    size_t n, cap;
} u32vec;

static int u32_push(u32vec *a, uint32_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        uint32_t *v = lean_realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* partial UTF-8: the bits so far and the continuation bytes still to come (-1: invalid) */
typedef struct utf8_state {
    uint32_t value;
    int32_t n_remain;
} utf8_state;

struct lean_grammar {
    grammar_rules rules;
    snode *nodes;       /* the arena; nodes[0] is the empty stack's sentinel */
    size_t n_nodes, cap_nodes;
    u32vec sets;        /* stack sets, one after another: a set is a run of node indices */
    u32vec todo;        /* advance's work list */
    u32vec seen;        /* the stacks advance has expanded in this call */
    size_t cur_n;       /* the current set: sets.v[0 .. cur_n) */
    utf8_state cur_utf8;
    int failed;         /* an allocation failed or MAX_STACKS was passed in this call */
    uint64_t n_bytes;   /* bytes accepted since the start (for messages) */
    /* the vocabulary (NULL tok: text only) */
    const lean_tokenizer *tok;
    int32_t n_tokens;
    int32_t *order;     /* byte-matched tokens sorted by piece */
    uint32_t *lcp;      /* lcp[i]: bytes piece(order[i]) shares with piece(order[i - 1]) */
    int32_t n_order;
    int32_t *eog;       /* end-of-generation ids */
    int32_t n_eog;
    size_t max_piece;
    /* per-depth state of the mask's walk (max_piece + 1 entries) */
    size_t *d_off, *d_n, *d_nodes;
    utf8_state *d_utf8;
};

static uint32_t push_node(lean_grammar *g, uint32_t parent, uint32_t elem) {
    if (g->n_nodes == g->cap_nodes) {
        size_t cap = g->cap_nodes * 2;
        snode *v = cap > UINT32_MAX ? NULL : lean_realloc(g->nodes, cap * sizeof *v);
        if (!v) {
            g->failed = 1;
            return 0;
        }
        g->nodes = v;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = (snode){elem, parent};
    return (uint32_t)g->n_nodes++;
}

static int stack_equal(const lean_grammar *g, uint32_t a, uint32_t b) {
    while (a != b) {
        if (a == 0 || b == 0 || g->nodes[a].elem != g->nodes[b].elem) return 0;
        a = g->nodes[a].parent;
        b = g->nodes[b].parent;
    }
    return 1;
}

static int is_end(const grammar_elem *e) { return e->type == GE_END || e->type == GE_ALT; }

/* Adds stack s to the set sets.v[from ..) unless an equal one is there. */
static void add_unique(lean_grammar *g, size_t from, uint32_t s) {
    for (size_t i = from; i < g->sets.n; i++)
        if (stack_equal(g, g->sets.v[i], s)) return;
    if (g->sets.n - from >= MAX_STACKS || u32_push(&g->sets, s)) g->failed = 1;
}

/* Expands stack s until every top is a character class or token (or the stack is empty) and
 * adds the results to the set that starts at sets.v[from] (llama_grammar_advance_stack). */
static void advance(lean_grammar *g, uint32_t s, size_t from) {
    const grammar_elem *el = g->rules.elems;
    size_t todo0 = g->todo.n;
    if (u32_push(&g->todo, s)) {
        g->failed = 1;
        return;
    }
    g->seen.n = 0;
    while (g->todo.n > todo0 && !g->failed) {
        uint32_t cur = g->todo.v[--g->todo.n];
        /* a stack met before in this call is not expanded again: this is what ends the loop
         * of a repetition whose body may be empty, ( [x]* )* (llama.cpp's `seen` set) */
        size_t k = 0;
        while (k < g->seen.n && !stack_equal(g, g->seen.v[k], cur)) k++;
        if (k < g->seen.n) continue;
        if (g->seen.n >= MAX_STACKS || u32_push(&g->seen, cur)) {
            g->failed = 1;
            break;
        }
        if (cur == 0) {
            add_unique(g, from, 0);
            continue;
        }
        const uint32_t pos = g->nodes[cur].elem;
        if (el[pos].type != GE_RULE_REF) {
            add_unique(g, from, cur);
            continue;
        }
        uint32_t sub = g->rules.rule_start[el[pos].value];
        const uint32_t under = g->nodes[cur].parent;
        for (;;) {
            uint32_t next = under;
            if (!is_end(&el[pos + 1])) next = push_node(g, next, pos + 1);
            if (!is_end(&el[sub])) next = push_node(g, next, sub);
            if (g->failed || u32_push(&g->todo, next)) {
                g->failed = 1;
                break;
            }
            while (!is_end(&el[sub])) sub++;
            if (el[sub].type != GE_ALT) break;
            sub++;
        }
    }
    g->todo.n = todo0;
}

/* Does code point c match the class at pos? *after: the element after the class. */
static int match_char(const grammar_elem *pos, uint32_t c, uint32_t *after, const grammar_elem *base) {
    const int positive = pos->type == GE_CHAR || pos->type == GE_CHAR_ANY;
    int found = 0;
    do {
        if (pos[1].type == GE_CHAR_RNG_UPPER) {
            found = found || (pos->value <= c && c <= pos[1].value);
            pos += 2;
        } else if (pos->type == GE_CHAR_ANY) {
            found = 1;
            pos += 1;
        } else {
            found = found || pos->value == c;
            pos += 1;
        }
    } while (pos->type == GE_CHAR_ALT);
    *after = (uint32_t)(pos - base);
    return found == positive;
}

/* Could some completion of the partial character u match the class at pos? */
static int match_partial(const grammar_elem *pos, utf8_state u) {
    const int positive = pos->type == GE_CHAR || pos->type == GE_CHAR_ANY;
    if (u.n_remain < 0 || (u.n_remain == 1 && u.value < 2)) return 0;
    uint32_t low = u.value << (u.n_remain * 6);
    uint32_t high = low | ((1u << (u.n_remain * 6)) - 1);
    if (low == 0) {
        if (u.n_remain == 2) low = 1u << 11;
        else if (u.n_remain == 3) low = 1u << 16;
    }
    do {
        if (pos[1].type == GE_CHAR_RNG_UPPER) {
            if (pos->value <= high && low <= pos[1].value) return positive;
            pos += 2;
        } else if (pos->type == GE_CHAR_ANY) {
            return 1;
        } else {
            if (low <= pos->value && pos->value <= high) return positive;
            pos += 1;
        }
    } while (pos->type == GE_CHAR_ALT);
    return !positive;
}

static int is_char_elem(uint32_t t) { return t == GE_CHAR || t == GE_CHAR_NOT || t == GE_CHAR_ANY; }

/* The set sets.v[from .. from + n) after code point c, appended at the end of sets. */
static void accept_cp(lean_grammar *g, size_t from, size_t n, uint32_t c) {
    const size_t out = g->sets.n;
    const grammar_elem *el = g->rules.elems;
    for (size_t i = 0; i < n && !g->failed; i++) {
        uint32_t s = g->sets.v[from + i];
        if (s == 0) continue;
        uint32_t pos = g->nodes[s].elem, after;
        if (!is_char_elem(el[pos].type) || !match_char(&el[pos], c, &after, el)) continue;
        uint32_t next = g->nodes[s].parent;
        if (!is_end(&el[after])) next = push_node(g, next, after);
        advance(g, next, out);
    }
}

/* One byte on the set sets.v[from .. from + n) in UTF-8 state *u: the next set is appended at
 * the end of sets (the same stacks, filtered, while a character is incomplete); *u updated.
 * Returns the next set's size (0: the byte is not allowed). */
static size_t accept_byte(lean_grammar *g, size_t from, size_t n, utf8_state *u, uint8_t b) {
    const size_t out = g->sets.n;
    utf8_state next = *u;
    if (u->n_remain <= 0) {
        if (b < 0x80) {
            accept_cp(g, from, n, b);
            *u = (utf8_state){0, 0};
            return g->sets.n - out;
        }
        if (b >= 0xc2 && b <= 0xf4) next = (utf8_state){b & (b < 0xe0 ? 0x1fu : b < 0xf0 ? 0x0fu : 0x07u), b < 0xe0 ? 1 : b < 0xf0 ? 2 : 3};
        else return 0; /* a continuation byte without a lead, an overlong lead, or past U+10FFFF */
    } else {
        if ((b & 0xc0) != 0x80) return 0;
        next = (utf8_state){(u->value << 6) | (b & 0x3fu), u->n_remain - 1};
        /* the second byte decides overlong forms, surrogates and code points past U+10FFFF
         * (RFC 3629's table): E0 A0.., ED ..9F, F0 90.., F4 ..8F */
        if (u->n_remain == 2 && u->value < 0x10 && u->value != 0) { /* a 3-byte lead E1..EF */
            if (u->value == 0xd && b >= 0xa0) return 0;
        } else if (u->n_remain == 2 && u->value == 0 && b < 0xa0) { /* E0 */
            return 0;
        } else if (u->n_remain == 3 && ((u->value == 0 && b < 0x90) || (u->value == 4 && b >= 0x90))) {
            return 0;
        }
        if (next.n_remain == 0) {
            accept_cp(g, from, n, next.value);
            *u = next;
            return g->sets.n - out;
        }
    }
    const grammar_elem *el = g->rules.elems;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = g->sets.v[from + i];
        if (s != 0 && is_char_elem(el[g->nodes[s].elem].type) && match_partial(&el[g->nodes[s].elem], next))
            if (u32_push(&g->sets, s)) g->failed = 1;
    }
    *u = next;
    return g->sets.n - out;
}

/* Makes sets.v[from .. from + n) the current set, alone in the arena (copies the stacks'
 * nodes, shared bottoms once). */
static lean_status compact(lean_grammar *g, size_t from, size_t n, lean_error *err) {
    uint32_t *map = lean_calloc(g->n_nodes, sizeof *map);
    snode *nodes = lean_malloc(g->cap_nodes * sizeof *nodes);
    if (!map || !nodes) {
        lean_free(map);
        lean_free(nodes);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    }
    size_t k = 1;
    nodes[0] = (snode){0, 0};
    for (size_t i = 0; i < n; i++) {
        /* copy the chain bottom-first: collect it on todo, then map from the bottom up */
        uint32_t s = g->sets.v[from + i];
        size_t t0 = g->todo.n;
        for (uint32_t x = s; x != 0 && map[x] == 0; x = g->nodes[x].parent)
            if (u32_push(&g->todo, x)) {
                g->todo.n = t0;
                lean_free(map);
                lean_free(nodes);
                return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
            }
        while (g->todo.n > t0) {
            uint32_t x = g->todo.v[--g->todo.n];
            nodes[k] = (snode){g->nodes[x].elem, map[g->nodes[x].parent]};
            map[x] = (uint32_t)k++;
        }
        g->sets.v[i] = map[s];
    }
    lean_free(map);
    lean_free(g->nodes);
    g->nodes = nodes;
    g->n_nodes = k;
    g->sets.n = n;
    g->cur_n = n;
    return LEAN_OK;
}

/* ================================================================ 2. the handle */

lean_status lean_grammar_reset(lean_grammar *g, lean_error *err) {
    if (!g) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar is NULL");
    g->n_nodes = 1;
    g->sets.n = 0;
    g->failed = 0;
    g->n_bytes = 0;
    g->cur_utf8 = (utf8_state){0, 0};
    const grammar_elem *el = g->rules.elems;
    uint32_t pos = g->rules.rule_start[g->rules.root];
    for (;;) { /* one stack per alternative of the root, as llama_grammar_init_impl */
        uint32_t s = is_end(&el[pos]) ? 0 : push_node(g, 0, pos);
        advance(g, s, 0);
        while (!is_end(&el[pos])) pos++;
        if (el[pos].type != GE_ALT) break;
        pos++;
    }
    if (g->failed) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match at the start", MAX_STACKS);
    g->cur_n = g->sets.n;
    return LEAN_OK;
}

typedef struct piece_ref {
    const char *bytes;
    size_t n;
    int32_t id;
} piece_ref;

static int cmp_piece(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    int c = memcmp(x->bytes, y->bytes, x->n < y->n ? x->n : y->n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static lean_status index_vocab(lean_grammar *g, const lean_tokenizer *t, lean_error *err) {
    g->tok = t;
    g->n_tokens = lean_tokenizer_n_tokens(t);
    g->order = lean_malloc((size_t)g->n_tokens * sizeof *g->order);
    g->lcp = lean_malloc((size_t)g->n_tokens * sizeof *g->lcp);
    g->eog = lean_malloc((size_t)g->n_tokens * sizeof *g->eog);
    if (!g->order || !g->lcp || !g->eog) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    for (int32_t id = 0; id < g->n_tokens; id++) {
        const int32_t type = lean_token_get_type(t, id);
        size_t n;
        lean_token_piece(t, id, &n);
        if (lean_token_is_eog(t, id)) g->eog[g->n_eog++] = id;
        else if (n > 0 && (type == LEAN_TOKEN_NORMAL || type == LEAN_TOKEN_USER_DEFINED || type == LEAN_TOKEN_BYTE)) {
            g->order[g->n_order++] = id;
            if (n > g->max_piece) g->max_piece = n;
        }
    }
    piece_ref *refs = lean_malloc((size_t)g->n_order * sizeof *refs);
    if (!refs) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < g->n_order; i++) {
        refs[i].id = g->order[i];
        refs[i].bytes = lean_token_piece(t, refs[i].id, &refs[i].n);
    }
    qsort(refs, (size_t)g->n_order, sizeof *refs, cmp_piece);
    for (int32_t i = 0; i < g->n_order; i++) g->order[i] = refs[i].id;
    lean_free(refs);
    for (int32_t i = 0; i < g->n_order; i++) {
        size_t na = 0, nb;
        const char *pa = i ? lean_token_piece(t, g->order[i - 1], &na) : "", *pb = lean_token_piece(t, g->order[i], &nb);
        size_t k = 0;
        while (k < na && k < nb && pa[k] == pb[k]) k++;
        g->lcp[i] = (uint32_t)k;
    }
    const size_t d = g->max_piece + 1;
    g->d_off = lean_calloc(d, sizeof *g->d_off);
    g->d_n = lean_calloc(d, sizeof *g->d_n);
    g->d_nodes = lean_calloc(d + 1, sizeof *g->d_nodes);
    g->d_utf8 = lean_calloc(d, sizeof *g->d_utf8);
    if (!g->d_off || !g->d_n || !g->d_nodes || !g->d_utf8) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    return LEAN_OK;
}

lean_status lean_grammar_create(const char *gbnf, size_t len, const char *root, const lean_tokenizer *t,
                                lean_grammar **out, lean_error *err) {
    if (!out) return LEAN_FAIL(err, LEAN_ERR_ARG, "out is NULL");
    *out = NULL;
    lean_grammar *g = lean_calloc(1, sizeof *g);
    if (!g) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    lean_status st = grammar_parse(gbnf, len, root, t, &g->rules, err);
    if (st != LEAN_OK) goto fail;
    g->cap_nodes = 1024;
    g->nodes = lean_malloc(g->cap_nodes * sizeof *g->nodes);
    if (!g->nodes) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    g->nodes[0] = (snode){0, 0};
    if (t && (st = index_vocab(g, t, err)) != LEAN_OK) goto fail;
    if ((st = lean_grammar_reset(g, err)) != LEAN_OK) goto fail;
    *out = g;
    return LEAN_OK;
fail:
    lean_grammar_free(g);
    return st;
}

void lean_grammar_free(lean_grammar *g) {
    if (!g) return;
    grammar_rules_free(&g->rules);
    lean_free(g->nodes);
    lean_free(g->sets.v);
    lean_free(g->todo.v);
    lean_free(g->seen.v);
    lean_free(g->order);
    lean_free(g->lcp);
    lean_free(g->eog);
    lean_free(g->d_off);
    lean_free(g->d_n);
    lean_free(g->d_nodes);
    lean_free(g->d_utf8);
    lean_free(g);
}

int lean_grammar_complete(const lean_grammar *g) {
    if (!g || g->cur_utf8.n_remain != 0) return 0;
    for (size_t i = 0; i < g->cur_n; i++)
        if (g->sets.v[i] == 0) return 1;
    return 0;
}

int lean_grammar_done(const lean_grammar *g) {
    if (!g) return 0;
    for (size_t i = 0; i < g->cur_n; i++)
        if (g->sets.v[i] != 0) return 0;
    return g->cur_utf8.n_remain == 0;
}

/* ================================================================ 3. the mask */

lean_status lean_grammar_mask(lean_grammar *g, uint32_t *bits, int32_t n_vocab, int32_t *n_allowed, lean_error *err) {
    if (!g || !bits || n_vocab <= 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar mask: %s", !g ? "grammar is NULL" : !bits ? "bits is NULL" : "n_vocab <= 0");
    if (!g->tok) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar mask: the grammar was made without a vocabulary");
    if (n_vocab < g->n_tokens)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar mask: n_vocab %d below the vocabulary's %d tokens", n_vocab, g->n_tokens);
    memset(bits, 0, LEAN_MASK_WORDS(n_vocab) * sizeof *bits);
    int32_t allowed = 0;
    const grammar_elem *el = g->rules.elems;
    /* token elements on the current stacks */
    for (size_t i = 0; i < g->cur_n; i++) {
        uint32_t s = g->sets.v[i];
        if (s == 0) continue;
        const grammar_elem *e = &el[g->nodes[s].elem];
        if (e->type == GE_TOKEN && (int32_t)e->value < g->n_tokens) lean_mask_allow(bits, (int32_t)e->value);
        if (e->type == GE_TOKEN_NOT)
            for (int32_t id = 0; id < g->n_tokens; id++)
                if ((uint32_t)id != e->value) lean_mask_allow(bits, id);
    }
    if (lean_grammar_complete(g))
        for (int32_t i = 0; i < g->n_eog; i++) lean_mask_allow(bits, g->eog[i]);
    /* the sorted pieces: depth k's set is the one after the first k bytes of the piece */
    g->failed = 0;
    g->d_off[0] = 0;
    g->d_n[0] = g->cur_n;
    g->d_utf8[0] = g->cur_utf8;
    g->d_nodes[1] = g->n_nodes;
    size_t depth = 0;          /* the deepest depth computed for the previous piece */
    size_t dead = SIZE_MAX;    /* a depth (<= depth) whose set was empty */
    for (int32_t i = 0; i < g->n_order && !g->failed; i++) {
        const int32_t id = g->order[i];
        size_t len;
        const uint8_t *piece = (const uint8_t *)lean_token_piece(g->tok, id, &len);
        const size_t l = g->lcp[i];
        if (dead <= l) continue; /* shares a prefix no stack takes */
        size_t k = l < depth ? l : depth;
        g->n_nodes = g->d_nodes[k + 1];
        g->sets.n = g->d_off[k] + g->d_n[k];
        dead = SIZE_MAX;
        for (; k < len; k++) {
            utf8_state u = g->d_utf8[k];
            const size_t off = g->sets.n;
            size_t n = accept_byte(g, g->d_off[k], g->d_n[k], &u, piece[k]);
            g->d_off[k + 1] = off;
            g->d_n[k + 1] = n;
            g->d_utf8[k + 1] = u;
            g->d_nodes[k + 2] = g->n_nodes;
            if (n == 0) {
                dead = k + 1;
                break;
            }
        }
        depth = k < len ? k + 1 : len;
        if (k == len) lean_mask_allow(bits, id);
    }
    g->n_nodes = g->d_nodes[1];
    g->sets.n = g->cur_n;
    if (g->failed)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match one prefix", MAX_STACKS);
    for (size_t w = 0; w < LEAN_MASK_WORDS(n_vocab); w++) allowed += __builtin_popcount(bits[w]);
    if (n_allowed) *n_allowed = allowed;
    if (allowed == 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: no token of the vocabulary continues the output here (after %llu bytes)",
                         (unsigned long long)g->n_bytes);
    return LEAN_OK;
}

/* ================================================================ 4. accepting */

/* Moves the current set by bytes; on failure the state is unchanged. */
static lean_status accept_bytes(lean_grammar *g, const uint8_t *b, size_t n, size_t extra_from, size_t extra_n,
                                lean_error *err) {
    g->failed = 0;
    size_t from = 0, cnt = g->cur_n;
    utf8_state u = g->cur_utf8;
    for (size_t k = 0; k < n; k++) {
        const size_t off = g->sets.n;
        cnt = accept_byte(g, from, cnt, &u, b[k]);
        from = off;
        if (g->failed) break;
        if (cnt == 0) {
            g->sets.n = g->cur_n;
            return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: byte %zu (0x%02x) of the text does not fit the grammar after %llu bytes", k,
                             b[k], (unsigned long long)g->n_bytes);
        }
    }
    /* stacks from a token element (extra_*) join the set */
    for (size_t i = 0; i < extra_n && !g->failed; i++) {
        size_t before = g->sets.n;
        add_unique(g, from, g->sets.v[extra_from + i]);
        cnt += g->sets.n - before;
    }
    if (g->failed) {
        g->sets.n = g->cur_n;
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match", MAX_STACKS);
    }
    if (cnt == 0) {
        g->sets.n = g->cur_n;
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: the token does not fit the grammar after %llu bytes",
                         (unsigned long long)g->n_bytes);
    }
    lean_status st = compact(g, from, cnt, err);
    if (st != LEAN_OK) return st;
    g->cur_utf8 = u;
    g->n_bytes += n;
    return LEAN_OK;
}

lean_status lean_grammar_accept_text(lean_grammar *g, const char *text, size_t n, lean_error *err) {
    if (!g || (!text && n)) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar or text is NULL");
    if (n == 0) return LEAN_OK;
    return accept_bytes(g, (const uint8_t *)text, n, 0, 0, err);
}

lean_status lean_grammar_accept_token(lean_grammar *g, int32_t id, lean_error *err) {
    if (!g) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar is NULL");
    if (id < 0 || (g->tok && id >= g->n_tokens))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: token %d outside the vocabulary (%d tokens)", id, g->n_tokens);
    for (int32_t i = 0; i < g->n_eog; i++)
        if (g->eog[i] == id) {
            if (!lean_grammar_complete(g))
                return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: end of generation (token %d) before the grammar is complete", id);
            /* the end: only the empty stack remains */
            g->sets.v[0] = 0;
            g->cur_n = g->sets.n = 1;
            return LEAN_OK;
        }
    /* stacks whose top is a token element matching id, popped and advanced */
    g->failed = 0;
    const size_t extra_from = g->sets.n;
    const grammar_elem *el = g->rules.elems;
    for (size_t i = 0; i < g->cur_n && !g->failed; i++) {
        uint32_t s = g->sets.v[i];
        if (s == 0) continue;
        uint32_t pos = g->nodes[s].elem;
        const grammar_elem *e = &el[pos];
        if ((e->type == GE_TOKEN && e->value == (uint32_t)id) || (e->type == GE_TOKEN_NOT && e->value != (uint32_t)id)) {
            uint32_t next = g->nodes[s].parent;
            if (!is_end(&el[pos + 1])) next = push_node(g, next, pos + 1);
            advance(g, next, extra_from);
        }
    }
    const size_t extra_n = g->sets.n - extra_from;
    size_t n = 0; /* without a vocabulary, a token moves only token elements */
    const char *piece = g->tok ? lean_token_piece(g->tok, id, &n) : "";
    const int32_t type = g->tok ? lean_token_get_type(g->tok, id) : 0;
    if (!(type == LEAN_TOKEN_NORMAL || type == LEAN_TOKEN_USER_DEFINED || type == LEAN_TOKEN_BYTE)) n = 0;
    if (n == 0 && extra_n == 0) {
        g->sets.n = g->cur_n;
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: token %d does not fit the grammar after %llu bytes", id,
                         (unsigned long long)g->n_bytes);
    }
    if (n == 0) { /* only the token element moved */
        lean_status st = compact(g, extra_from, extra_n, err);
        return st;
    }
    if (extra_n == 0) return accept_bytes(g, (const uint8_t *)piece, n, 0, 0, err);
    /* both: the byte path may fail while the token path fits */
    lean_status st = accept_bytes(g, (const uint8_t *)piece, n, extra_from, extra_n, err);
    if (st == LEAN_ERR_ARG) {
        st = compact(g, extra_from, extra_n, err);
    }
    return st;
}
