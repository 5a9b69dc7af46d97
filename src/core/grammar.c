/* grammar.c — holding output to a grammar: which tokens may come next (a lean_mask), and
 * moving on by the token drawn. The matcher is llama.cpp's (src/llama-grammar.cpp): a set of
 * pushdown stacks, each a way the text so far can continue, every stack's top a character
 * class or a token element; a character keeps the stacks whose top matches it, popped and
 * expanded again (advance). Partial UTF-8 across token boundaries is kept as llama.cpp does.
 *
 * What differs, for speed (a mask asks about every token of a 150k vocabulary every step):
 *   - stacks are persistent lists of hash-consed nodes (element + parent): equal stacks are
 *     the same node, a push or a pop copies nothing;
 *   - a set of stacks with its partial UTF-8 is interned as a state, and the state a byte
 *     leads to is remembered: the grammar becomes a DFA over bytes, built lazily (inside a
 *     JSON string every ordinary character leads back to the same state);
 *   - the vocabulary's pieces are sorted once, with each one's common prefix with the one
 *     before, and a mask walks them in that order (a trie walked without building one): one
 *     transition per distinct byte prefix, and a prefix no stack takes rejects every token
 *     under it at once;
 *   - the mask of a state is kept (the last MASK_CACHE ones): a reply that stays inside a
 *     string asks for the same state's mask again and again.
 * Memory is bounded: past MAX_NODES nodes or MAX_STATES states everything is dropped and the
 * current state rebuilt (flush). docs/runs/2026-12-05-grammar-cost.md has the costs.
 *
 * Tokens: NORMAL, USER_DEFINED and BYTE tokens match by their bytes (lean_token_piece);
 * end-of-generation tokens are allowed when the text so far completes the grammar (some stack
 * is empty); other control, unknown and unused tokens only through <[id]> elements.
 *
 * Sections: 1. hash tables  2. nodes and states  3. advance, a code point, a byte
 * 4. the handle  5. the vocabulary's sorted pieces and the mask  6. accepting tokens and text */
#include "core/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A set this large means a grammar so ambiguous that matching it would not end in useful
 * time (e.g. nested optional repetitions): refused rather than hang. */
#define MAX_STACKS 4096
#define MAX_NODES (1u << 22)
#define MAX_STATES (1u << 18)
#define MAX_TABLES (1u << 15) /* 32 MiB of transition tables before a flush */
#define MASK_CACHE 32
#define NONE UINT32_MAX     /* no node / no state */
#define DEAD (UINT32_MAX - 1) /* the state after a byte no stack takes */

/* ================================================================ 1. hash tables */

/* u64 key -> u32 value, open addressing; keys are never 0 (callers add 1 where needed) */
typedef struct u64map {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;
} u64map;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t map_get(const u64map *m, uint64_t key) {
    if (!m->cap) return NONE;
    for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) return m->vals[i];
        if (m->keys[i] == 0) return NONE;
    }
}

static int map_put(u64map *m, uint64_t key, uint32_t val) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *keys = lean_calloc(cap, sizeof *keys);
        uint32_t *vals = lean_malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            lean_free(keys);
            lean_free(vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t j = mix(m->keys[i]) & (cap - 1);
            while (keys[j]) j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        lean_free(m->keys);
        lean_free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t i = mix(key) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

static void map_clear(u64map *m) {
    if (m->cap) memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->n = 0;
}

static void map_free(u64map *m) {
    lean_free(m->keys);
    lean_free(m->vals);
    *m = (u64map){0};
}

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

/* ================================================================ 2. nodes and states */

typedef struct snode {
    uint32_t elem;   /* index into rules.elems: the element to match next */
    uint32_t parent; /* the node under it; 0 = bottom (node 0 is the empty stack) */
} snode;

/* partial UTF-8: the bits so far and the continuation bytes still to come */
typedef struct utf8_state {
    uint32_t value;
    int32_t n_remain;
} utf8_state;

typedef struct gstate {
    uint32_t off, n;  /* its stacks: pool.v[off .. off + n), node ids, sorted */
    utf8_state utf8;
    uint32_t mask;    /* its slot in the mask cache, or NONE */
    uint32_t table;   /* its row of 256 next states in tables (NONE: none yet) */
} gstate;

struct lean_grammar {
    grammar_rules rules;
    snode *nodes;       /* hash-consed: node_map finds (elem, parent) */
    size_t n_nodes, cap_nodes;
    u64map node_map;
    gstate *states;     /* interned sets; state_map: content hash -> first state of that hash */
    size_t n_states, cap_states;
    u64map state_map;
    u32vec pool;        /* the states' stacks */
    uint32_t *tables;   /* rows of 256: the state each byte leads to (NONE: not computed yet) */
    size_t n_tables, cap_tables;
    u32vec scratch;     /* a set being built */
    u32vec todo;        /* advance's work list */
    uint32_t *in_set;   /* per node: set_gen when the stack is in the set being built */
    uint32_t *seen;     /* per node: seen_gen when advance expanded it in this call */
    uint32_t set_gen, seen_gen;
    size_t set_n, seen_n; /* the set being built's size; stacks advance expanded */
    uint32_t cur;       /* the current state */
    int failed;         /* an allocation failed or MAX_STACKS was passed in this call */
    uint64_t n_bytes;   /* bytes accepted since the start (for messages) */
    /* the vocabulary (NULL tok: text and token ids only) */
    const lean_tokenizer *tok;
    int32_t n_tokens;
    int32_t *order;     /* byte-matched tokens sorted by piece */
    const uint8_t **piece; /* piece[i], piece_len[i]: order[i]'s bytes */
    uint32_t *piece_len;
    uint32_t *lcp;      /* lcp[i]: bytes piece(order[i]) shares with piece(order[i - 1]) */
    int32_t n_order;
    int32_t *eog;       /* end-of-generation ids */
    int32_t n_eog;
    size_t max_piece;
    uint32_t *d_state;  /* the mask's walk: the state after each depth (max_piece + 1) */
    /* masks of recent states: MASK_CACHE slots of LEAN_MASK_WORDS(n_tokens) words */
    uint32_t *masks;
    uint32_t mask_owner[MASK_CACHE], mask_count[MASK_CACHE], mask_next;
};

static uint32_t node(lean_grammar *g, uint32_t parent, uint32_t elem) {
    const uint64_t key = ((uint64_t)elem << 32 | parent) + 1;
    uint32_t id = map_get(&g->node_map, key);
    if (id != NONE) return id;
    if (g->n_nodes == g->cap_nodes) {
        size_t cap = g->cap_nodes * 2;
        snode *v = lean_realloc(g->nodes, cap * sizeof *v);
        if (v) g->nodes = v;
        uint32_t *a = lean_realloc(g->in_set, cap * sizeof *a);
        if (a) g->in_set = a;
        uint32_t *b = lean_realloc(g->seen, cap * sizeof *b);
        if (b) g->seen = b;
        if (!v || !a || !b) {
            g->failed = 1;
            return 0;
        }
        memset(g->in_set + g->cap_nodes, 0, (cap - g->cap_nodes) * sizeof *a);
        memset(g->seen + g->cap_nodes, 0, (cap - g->cap_nodes) * sizeof *b);
        g->cap_nodes = cap;
    }
    id = (uint32_t)g->n_nodes;
    if (map_put(&g->node_map, key, id)) {
        g->failed = 1;
        return 0;
    }
    g->nodes[g->n_nodes++] = (snode){elem, parent};
    return id;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The state of the set scratch.v[from ..) with u (sorted in place, interned); NONE on failure */
static uint32_t intern(lean_grammar *g, size_t from, utf8_state u) {
    uint32_t *s = g->scratch.v + from;
    const size_t n = g->scratch.n - from;
    qsort(s, n, sizeof *s, cmp_u32);
    uint64_t h = mix((uint64_t)u.value << 8 | (uint32_t)u.n_remain);
    for (size_t i = 0; i < n; i++) h = mix(h ^ s[i]);
    h |= 1;
    /* states of one hash chain through state_map's probe sequence: key h + k for k = 0.. */
    for (uint64_t k = 0;; k++) {
        uint32_t id = map_get(&g->state_map, h + 2 * k);
        if (id == NONE) break;
        const gstate *t = &g->states[id];
        if (t->n == n && t->utf8.value == u.value && t->utf8.n_remain == u.n_remain &&
            memcmp(g->pool.v + t->off, s, n * sizeof *s) == 0)
            return id;
        if (k > 1000) return NONE;
    }
    if (g->n_states == g->cap_states) {
        size_t cap = g->cap_states ? g->cap_states * 2 : 256;
        gstate *v = lean_realloc(g->states, cap * sizeof *v);
        if (!v) return NONE;
        g->states = v;
        g->cap_states = cap;
    }
    const uint32_t id = (uint32_t)g->n_states;
    uint64_t k = 0;
    while (map_get(&g->state_map, h + 2 * k) != NONE) k++;
    const size_t off = g->pool.n;
    for (size_t i = 0; i < n; i++)
        if (u32_push(&g->pool, g->scratch.v[from + i])) return NONE;
    if (map_put(&g->state_map, h + 2 * k, id)) return NONE;
    g->states[g->n_states++] = (gstate){(uint32_t)off, (uint32_t)n, u, NONE, NONE};
    return id;
}

/* ================================================================ 3. advance, a code point, a byte */

static int is_end(const grammar_elem *e) { return e->type == GE_END || e->type == GE_ALT; }

/* A new generation of per-node marks (0 never marks) */
static uint32_t next_gen(uint32_t *gen, uint32_t *marks, size_t n) {
    if (++*gen == 0) {
        memset(marks, 0, n * sizeof *marks);
        *gen = 1;
    }
    return *gen;
}

/* Starts building a set (one at a time) at the end of scratch. */
static void set_begin(lean_grammar *g) {
    next_gen(&g->set_gen, g->in_set, g->cap_nodes);
    g->set_n = 0;
}

/* Adds stack s to the set being built unless it is there (nodes are canonical: O(1)). */
static void add_unique(lean_grammar *g, uint32_t s) {
    if (g->in_set[s] == g->set_gen) return;
    if (g->set_n >= MAX_STACKS || u32_push(&g->scratch, s)) {
        g->failed = 1;
        return;
    }
    g->in_set[s] = g->set_gen;
    g->set_n++;
}

/* Expands stack s until every top is a character class or token (or the stack is empty) and
 * adds the results to the set being built (llama_grammar_advance_stack). */
static void advance(lean_grammar *g, uint32_t s) {
    const grammar_elem *el = g->rules.elems;
    g->todo.n = 0;
    next_gen(&g->seen_gen, g->seen, g->cap_nodes);
    g->seen_n = 0;
    if (u32_push(&g->todo, s)) {
        g->failed = 1;
        return;
    }
    while (g->todo.n > 0 && !g->failed) {
        uint32_t cur = g->todo.v[--g->todo.n];
        /* a stack met before in this call is not expanded again: this is what ends the loop
         * of a repetition whose body may be empty, ( [x]* )* (llama.cpp's `seen` set) */
        if (g->seen[cur] == g->seen_gen) continue;
        if (++g->seen_n > 16 * MAX_STACKS) {
            g->failed = 1;
            break;
        }
        g->seen[cur] = g->seen_gen;
        if (cur == 0) {
            add_unique(g, 0);
            continue;
        }
        const uint32_t pos = g->nodes[cur].elem;
        if (el[pos].type != GE_RULE_REF) {
            add_unique(g, cur);
            continue;
        }
        uint32_t sub = g->rules.rule_start[el[pos].value];
        const uint32_t under = g->nodes[cur].parent;
        for (;;) {
            uint32_t next = under;
            if (!is_end(&el[pos + 1])) next = node(g, next, pos + 1);
            if (!is_end(&el[sub])) next = node(g, next, sub);
            if (g->failed || u32_push(&g->todo, next)) {
                g->failed = 1;
                break;
            }
            while (!is_end(&el[sub])) sub++;
            if (el[sub].type != GE_ALT) break;
            sub++;
        }
    }
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

/* The next UTF-8 state after byte b, or -1 when b cannot come here (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF). */
static int utf8_next(utf8_state u, uint8_t b, utf8_state *out) {
    if (u.n_remain == 0) {
        if (b < 0x80) *out = (utf8_state){b, 0};
        else if (b >= 0xc2 && b <= 0xdf) *out = (utf8_state){b & 0x1fu, 1};
        else if (b >= 0xe0 && b <= 0xef) *out = (utf8_state){b & 0x0fu, 2};
        else if (b >= 0xf0 && b <= 0xf4) *out = (utf8_state){b & 0x07u, 3};
        else return -1;
        return 0;
    }
    if ((b & 0xc0) != 0x80) return -1;
    /* the first continuation byte decides: E0 A0.., ED ..9F, F0 90.., F4 ..8F */
    if (u.n_remain == 2 && u.value < 0x10) {
        if ((u.value == 0 && b < 0xa0) || (u.value == 0xd && b >= 0xa0)) return -1;
    } else if (u.n_remain == 3 && ((u.value == 0 && b < 0x90) || (u.value == 4 && b >= 0x90))) {
        return -1;
    }
    *out = (utf8_state){(u.value << 6) | (b & 0x3fu), u.n_remain - 1};
    return 0;
}

/* The state after byte b in state st (remembered in st's table); DEAD when no stack takes it,
 * NONE on failure. */
static uint32_t step(lean_grammar *g, uint32_t st, uint8_t b) {
    uint32_t row = g->states[st].table;
    if (row != NONE && g->tables[(size_t)row * 256 + b] != NONE) return g->tables[(size_t)row * 256 + b];
    if (row == NONE) {
        if (g->n_tables == g->cap_tables) {
            size_t cap = g->cap_tables ? g->cap_tables * 2 : 64;
            uint32_t *t = lean_realloc(g->tables, cap * 256 * sizeof *t);
            if (!t) {
                g->failed = 1;
                return NONE;
            }
            g->tables = t;
            g->cap_tables = cap;
        }
        row = (uint32_t)g->n_tables++;
        memset(g->tables + (size_t)row * 256, 0xff, 256 * sizeof *g->tables); /* all NONE */
        g->states[st].table = row;
    }
    uint32_t to;
    const gstate s = g->states[st];
    const grammar_elem *el = g->rules.elems;
    utf8_state u = {0, 0};
    const size_t from = g->scratch.n;
    set_begin(g);
    if (utf8_next(s.utf8, b, &u) == 0) {
        for (uint32_t i = 0; i < s.n && !g->failed; i++) {
            const uint32_t x = g->pool.v[s.off + i];
            if (x == 0) continue;
            const uint32_t pos = g->nodes[x].elem;
            if (!is_char_elem(el[pos].type)) continue;
            if (u.n_remain > 0) { /* a character begun: keep the stacks it may still match */
                if (match_partial(&el[pos], u)) add_unique(g, x);
                continue;
            }
            uint32_t after;
            if (!match_char(&el[pos], u.value, &after, el)) continue;
            uint32_t next = g->nodes[x].parent;
            if (!is_end(&el[after])) next = node(g, next, after);
            advance(g, next);
        }
    }
    if (u.n_remain == 0) u.value = 0; /* whole characters leave no bits behind */
    to = g->failed ? NONE : g->scratch.n == from ? DEAD : intern(g, from, u);
    g->scratch.n = from;
    if (to == NONE) g->failed = 1;
    else g->tables[(size_t)row * 256 + b] = to;
    return to;
}

/* ================================================================ 4. the handle */

/* Drops every node, state and cached mask, keeping the current state's stacks (memory
 * bound). 0 on success. */
static int flush(lean_grammar *g) {
    const gstate cur = g->states[g->cur];
    /* the current stacks as element lists, bottom first, separated by NONE */
    u32vec save = {0};
    for (uint32_t i = 0; i < cur.n; i++) {
        const size_t mark = save.n;
        for (uint32_t x = g->pool.v[cur.off + i]; x != 0; x = g->nodes[x].parent)
            if (u32_push(&save, g->nodes[x].elem)) goto oom;
        for (size_t a = mark, b = save.n - 1; a < b && b != (size_t)-1; a++, b--) {
            uint32_t t = save.v[a];
            save.v[a] = save.v[b];
            save.v[b] = t;
        }
        if (u32_push(&save, NONE)) goto oom;
    }
    map_clear(&g->node_map);
    map_clear(&g->state_map);
    g->n_tables = 0;
    g->n_nodes = 1;
    g->n_states = 0;
    g->pool.n = 0;
    g->scratch.n = 0;
    for (int i = 0; i < MASK_CACHE; i++) g->mask_owner[i] = NONE;
    set_begin(g);
    uint32_t top = 0;
    for (size_t i = 0; i < save.n; i++) {
        if (save.v[i] == NONE) {
            add_unique(g, top);
            top = 0;
        } else {
            top = node(g, top, save.v[i]);
        }
    }
    lean_free(save.v);
    if (g->failed) return -1;
    g->cur = intern(g, 0, cur.utf8);
    g->scratch.n = 0;
    return g->cur == NONE ? -1 : 0;
oom:
    lean_free(save.v);
    return -1;
}

/* Called at the start of each public call that builds states. */
static lean_status begin_call(lean_grammar *g, lean_error *err) {
    g->failed = 0;
    g->scratch.n = 0;
    if ((g->n_nodes > MAX_NODES || g->n_states > MAX_STATES || g->n_tables > MAX_TABLES) && flush(g) != 0)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory");
    return LEAN_OK;
}

lean_status lean_grammar_reset(lean_grammar *g, lean_error *err) {
    if (!g) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar is NULL");
    g->failed = 0;
    g->scratch.n = 0;
    g->n_bytes = 0;
    const grammar_elem *el = g->rules.elems;
    uint32_t pos = g->rules.rule_start[g->rules.root];
    set_begin(g);
    for (;;) { /* one stack per alternative of the root, as llama_grammar_init_impl */
        uint32_t s = is_end(&el[pos]) ? 0 : node(g, 0, pos);
        advance(g, s);
        while (!is_end(&el[pos])) pos++;
        if (el[pos].type != GE_ALT) break;
        pos++;
    }
    uint32_t st = g->failed ? NONE : intern(g, 0, (utf8_state){0, 0});
    g->scratch.n = 0;
    if (st == NONE)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match at the start", MAX_STACKS);
    g->cur = st;
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
    g->masks = lean_malloc(MASK_CACHE * LEAN_MASK_WORDS(g->n_tokens) * sizeof *g->masks);
    if (!g->order || !g->lcp || !g->eog || !g->masks) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
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
    g->piece = lean_malloc((size_t)g->n_order * sizeof *g->piece + 1);
    g->piece_len = lean_malloc((size_t)g->n_order * sizeof *g->piece_len + 1);
    if (!g->piece || !g->piece_len) {
        lean_free(refs);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < g->n_order; i++) {
        g->order[i] = refs[i].id;
        g->piece[i] = (const uint8_t *)refs[i].bytes;
        g->piece_len[i] = (uint32_t)refs[i].n;
        size_t k = 0;
        if (i) /* the common prefix with the piece before */
            while (k < refs[i - 1].n && k < refs[i].n && refs[i - 1].bytes[k] == refs[i].bytes[k]) k++;
        g->lcp[i] = (uint32_t)k;
    }
    lean_free(refs);
    g->d_state = lean_calloc(g->max_piece + 1, sizeof *g->d_state);
    if (!g->d_state) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    return LEAN_OK;
}

lean_status lean_grammar_create(const char *gbnf, size_t len, const char *root, const lean_tokenizer *t,
                                lean_grammar **out, lean_error *err) {
    if (!out) return LEAN_FAIL(err, LEAN_ERR_ARG, "out is NULL");
    *out = NULL;
    lean_grammar *g = lean_calloc(1, sizeof *g);
    if (!g) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < MASK_CACHE; i++) g->mask_owner[i] = NONE;
    lean_status st = grammar_parse(gbnf, len, root, t, &g->rules, err);
    if (st != LEAN_OK) goto fail;
    g->cap_nodes = 1024;
    g->nodes = lean_malloc(g->cap_nodes * sizeof *g->nodes);
    g->in_set = lean_calloc(g->cap_nodes, sizeof *g->in_set);
    g->seen = lean_calloc(g->cap_nodes, sizeof *g->seen);
    if (!g->nodes || !g->in_set || !g->seen) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    g->nodes[0] = (snode){0, 0};
    g->n_nodes = 1;
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
    map_free(&g->node_map);
    lean_free(g->states);
    map_free(&g->state_map);
    lean_free(g->pool.v);
    lean_free(g->tables);
    lean_free(g->scratch.v);
    lean_free(g->todo.v);
    lean_free(g->in_set);
    lean_free(g->seen);
    lean_free(g->order);
    lean_free(g->piece);
    lean_free(g->piece_len);
    lean_free(g->lcp);
    lean_free(g->eog);
    lean_free(g->d_state);
    lean_free(g->masks);
    lean_free(g);
}

static int state_complete(const lean_grammar *g, uint32_t st) {
    const gstate *s = &g->states[st];
    return s->utf8.n_remain == 0 && s->n > 0 && g->pool.v[s->off] == 0; /* sorted: the empty stack first */
}

int lean_grammar_complete(const lean_grammar *g) { return g && state_complete(g, g->cur); }

int lean_grammar_done(const lean_grammar *g) {
    if (!g) return 0;
    const gstate *s = &g->states[g->cur];
    return s->utf8.n_remain == 0 && s->n == 1 && g->pool.v[s->off] == 0;
}

/* ================================================================ 5. the mask */

/* Writes the mask of state st into bits (words of the vocabulary) */
static void compute_mask(lean_grammar *g, uint32_t st, uint32_t *bits) {
    memset(bits, 0, LEAN_MASK_WORDS(g->n_tokens) * sizeof *bits);
    const grammar_elem *el = g->rules.elems;
    const gstate s = g->states[st];
    for (uint32_t i = 0; i < s.n; i++) { /* token elements on the stacks */
        const uint32_t x = g->pool.v[s.off + i];
        if (x == 0) continue;
        const grammar_elem *e = &el[g->nodes[x].elem];
        if (e->type == GE_TOKEN && (int32_t)e->value < g->n_tokens) lean_mask_allow(bits, (int32_t)e->value);
        if (e->type == GE_TOKEN_NOT)
            for (int32_t id = 0; id < g->n_tokens; id++)
                if ((uint32_t)id != e->value) lean_mask_allow(bits, id);
    }
    if (state_complete(g, st))
        for (int32_t i = 0; i < g->n_eog; i++) lean_mask_allow(bits, g->eog[i]);
    /* the sorted pieces: d_state[k] is the state after the first k bytes of the piece */
    g->d_state[0] = st;
    size_t depth = 0;       /* the deepest depth computed for the previous piece */
    size_t dead = SIZE_MAX; /* a depth (<= depth) whose state is DEAD */
    for (int32_t i = 0; i < g->n_order && !g->failed; i++) {
        const size_t l = g->lcp[i];
        if (dead <= l) continue; /* shares a prefix no stack takes */
        const size_t len = g->piece_len[i];
        const uint8_t *piece = g->piece[i];
        size_t k = l < depth ? l : depth;
        dead = SIZE_MAX;
        for (; k < len; k++) {
            const uint32_t next = step(g, g->d_state[k], piece[k]);
            if (next == NONE) return;
            g->d_state[k + 1] = next;
            if (next == DEAD) {
                dead = k + 1;
                break;
            }
        }
        depth = k < len ? k + 1 : len;
        if (k == len) lean_mask_allow(bits, g->order[i]);
    }
}

lean_status lean_grammar_mask(lean_grammar *g, uint32_t *bits, int32_t n_vocab, int32_t *n_allowed, lean_error *err) {
    if (!g || !bits || n_vocab <= 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar mask: %s", !g ? "grammar is NULL" : !bits ? "bits is NULL" : "n_vocab <= 0");
    if (!g->tok) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar mask: the grammar was made without a vocabulary");
    if (n_vocab < g->n_tokens)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar mask: n_vocab %d below the vocabulary's %d tokens", n_vocab, g->n_tokens);
    lean_status st = begin_call(g, err);
    if (st != LEAN_OK) return st;
    const size_t words = LEAN_MASK_WORDS(g->n_tokens);
    gstate *cur = &g->states[g->cur];
    uint32_t slot = cur->mask;
    if (slot == NONE || g->mask_owner[slot] != g->cur) {
        slot = g->mask_next;
        g->mask_next = (g->mask_next + 1) % MASK_CACHE;
        g->mask_owner[slot] = NONE;
        compute_mask(g, g->cur, g->masks + slot * words);
        if (g->failed)
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match one prefix", MAX_STACKS);
        int32_t count = 0;
        for (size_t w = 0; w < words; w++) count += __builtin_popcount(g->masks[slot * words + w]);
        g->mask_owner[slot] = g->cur;
        g->mask_count[slot] = (uint32_t)count;
        g->states[g->cur].mask = slot; /* states may have moved (realloc) */
    }
    memcpy(bits, g->masks + slot * words, words * sizeof *bits);
    memset(bits + words, 0, (LEAN_MASK_WORDS(n_vocab) - words) * sizeof *bits);
    const int32_t allowed = (int32_t)g->mask_count[slot];
    if (n_allowed) *n_allowed = allowed;
    if (allowed == 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: no token of the vocabulary continues the output here (after %llu bytes)",
                         (unsigned long long)g->n_bytes);
    return LEAN_OK;
}

/* ================================================================ 6. accepting */

/* The state after bytes b[0..n) from st (DEAD, or NONE on failure). */
static uint32_t walk(lean_grammar *g, uint32_t st, const uint8_t *b, size_t n) {
    for (size_t k = 0; k < n && st != DEAD && st != NONE; k++) st = step(g, st, b[k]);
    return st;
}

lean_status lean_grammar_accept_text(lean_grammar *g, const char *text, size_t n, lean_error *err) {
    if (!g || (!text && n)) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar or text is NULL");
    lean_status st = begin_call(g, err);
    if (st != LEAN_OK) return st;
    uint32_t s = g->cur;
    for (size_t k = 0; k < n; k++) {
        s = step(g, s, (uint8_t)text[k]);
        if (s == NONE) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match", MAX_STACKS);
        if (s == DEAD)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: byte %zu (0x%02x) of the text does not fit the grammar after %llu bytes", k,
                             (uint8_t)text[k], (unsigned long long)g->n_bytes);
    }
    g->cur = s;
    g->n_bytes += n;
    return LEAN_OK;
}

lean_status lean_grammar_accept_token(lean_grammar *g, int32_t id, lean_error *err) {
    if (!g) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar is NULL");
    if (id < 0 || (g->tok && id >= g->n_tokens))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: token %d outside the vocabulary (%d tokens)", id, g->n_tokens);
    lean_status st = begin_call(g, err);
    if (st != LEAN_OK) return st;
    for (int32_t i = 0; i < g->n_eog; i++)
        if (g->eog[i] == id) {
            if (!lean_grammar_complete(g))
                return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: end of generation (token %d) before the grammar is complete", id);
            /* the end: only the empty stack remains */
            set_begin(g);
            add_unique(g, 0);
            if (g->failed) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
            uint32_t s = intern(g, 0, (utf8_state){0, 0});
            g->scratch.n = 0;
            if (s == NONE) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
            g->cur = s;
            return LEAN_OK;
        }
    size_t n = 0; /* without a vocabulary, a token moves only token elements */
    const char *piece = g->tok ? lean_token_piece(g->tok, id, &n) : "";
    const int32_t type = g->tok ? lean_token_get_type(g->tok, id) : 0;
    if (!(type == LEAN_TOKEN_NORMAL || type == LEAN_TOKEN_USER_DEFINED || type == LEAN_TOKEN_BYTE)) n = 0;
    /* by its bytes (llama_grammar_accept_token: the stacks whose top is a class) */
    const uint32_t by_bytes = n ? walk(g, g->cur, (const uint8_t *)piece, n) : DEAD;
    if (by_bytes == NONE) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match", MAX_STACKS);
    /* by its id: stacks whose top is a token element matching id, popped and advanced */
    const grammar_elem *el = g->rules.elems;
    const gstate cur = g->states[g->cur];
    g->scratch.n = 0;
    set_begin(g);
    for (uint32_t i = 0; i < cur.n && !g->failed; i++) {
        const uint32_t x = g->pool.v[cur.off + i];
        if (x == 0) continue;
        const uint32_t pos = g->nodes[x].elem;
        const grammar_elem *e = &el[pos];
        if ((e->type == GE_TOKEN && e->value == (uint32_t)id) || (e->type == GE_TOKEN_NOT && e->value != (uint32_t)id)) {
            uint32_t next = g->nodes[x].parent;
            if (!is_end(&el[pos + 1])) next = node(g, next, pos + 1);
            advance(g, next);
        }
    }
    if (g->scratch.n == 0 && by_bytes == DEAD) {
        return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar: token %d does not fit the grammar after %llu bytes", id,
                         (unsigned long long)g->n_bytes);
    }
    uint32_t s = by_bytes;
    if (g->scratch.n) { /* the union of both ways */
        utf8_state u = {0, 0};
        if (by_bytes != DEAD) {
            const gstate b = g->states[by_bytes];
            u = b.utf8;
            for (uint32_t i = 0; i < b.n; i++) add_unique(g, g->pool.v[b.off + i]);
        }
        s = g->failed ? NONE : intern(g, 0, u);
        g->scratch.n = 0;
        if (s == NONE) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "grammar: out of memory, or more than %d ways to match", MAX_STACKS);
    }
    g->cur = s;
    g->n_bytes += n;
    return LEAN_OK;
}
