/* grammar_parse.c — GBNF text to rules (grammar.h), as llama.cpp's llama_grammar_parser reads it.
 *
 * What it reads (llama.cpp's grammars/README.md): rules `name ::= alternatives`, one per line
 * (a rule goes on over newlines only inside parentheses or after '|'), names of [a-zA-Z0-9-];
 * "literals" and [classes] ([^...] negated, a-z ranges) with the escapes \x.. \u.... \U........
 * \t \r \n \\ \" \[ \]; '.' any character; ( groups ); the repetitions * + ? {m} {m,} {m,n};
 * tokens <[id]> and !<[id]>, and <text> (needs the tokenizer: the text must be one token);
 * comments from '#' to the end of the line. Repetitions become helper rules exactly as
 * llama.cpp writes them (S{m,n} -> S ... S S'(n-m), S'(x) ::= S S'(x-1) |), so rule
 * numbering, and so what a grammar accepts, is the same.
 * What it refuses (LEAN_ERR_FORMAT, naming line and column): any syntax error, an undefined
 * rule, no root rule, left recursion (the matcher would loop), a repetition count above
 * LEAN_GRAMMAR_MAX_REPEAT, more than GRAMMAR_MAX_ELEMS elements, groups nested deeper than 200.
 *
 * Sections: 1. growable arrays and symbols   2. lexing helpers   3. sequences, alternatives,
 * rules   4. checks (undefined rules, root, left recursion) and flattening */
#include "core/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NESTING 200

/* ================================================================ 1. arrays and symbols */

typedef struct evec {
    grammar_elem *v;
    size_t n, cap;
} evec;

typedef struct parser {
    const char *src;        /* the NUL-terminated copy of the text */
    const lean_tokenizer *tok;
    lean_error *err;
    lean_status st;         /* LEAN_OK until the first failure */
    char **names;           /* symbol id -> name */
    evec *rules;            /* symbol id -> its rule (n == 0: not defined yet) */
    const char **first_use; /* symbol id -> where it was first referenced (for "undefined") */
    uint32_t n_sym, cap_sym;
    size_t n_elems;         /* all rules' elements, against GRAMMAR_MAX_ELEMS */
    int depth;
} parser;

static void where(const parser *p, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *s = p->src; s < at; s++) {
        if (*s == '\n') ++*line, *col = 1;
        else ++*col;
    }
}

/* Records the first failure: "grammar line L column C: what" and returns NULL. */
static const char *fail_at(parser *p, const char *at, lean_status st, const char *what) {
    if (p->st != LEAN_OK) return NULL;
    int line, col;
    where(p, at, &line, &col);
    char near[24] = "";
    if (*at) {
        size_t n = 0;
        while (at[n] && at[n] != '\n' && n < 16) n++;
        snprintf(near, sizeof near, " near '%.*s'", (int)n, at);
    } else {
        snprintf(near, sizeof near, " at the end");
    }
    p->st = LEAN_FAIL(p->err, st, "grammar line %d column %d: %s%s", line, col, what, near);
    return NULL;
}

static const char *nomem(parser *p, const char *at) { return fail_at(p, at, LEAN_ERR_NOMEM, "out of memory"); }

static int evec_push(parser *p, evec *e, uint32_t type, uint32_t value) {
    if (p->n_elems >= GRAMMAR_MAX_ELEMS) return -1;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        grammar_elem *v = lean_realloc(e->v, cap * sizeof *v);
        if (!v) return -1;
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = (grammar_elem){type, value};
    p->n_elems++;
    return 0;
}

/* The id of the symbol named name[0..len), made if new; UINT32_MAX when out of memory. */
static uint32_t symbol_id(parser *p, const char *name, size_t len, const char *use) {
    for (uint32_t i = 0; i < p->n_sym; i++)
        if (strlen(p->names[i]) == len && memcmp(p->names[i], name, len) == 0) return i;
    if (p->n_sym == p->cap_sym) {
        uint32_t cap = p->cap_sym ? p->cap_sym * 2 : 32;
        char **names = lean_realloc(p->names, cap * sizeof *names);
        if (names) p->names = names;
        evec *rules = lean_realloc(p->rules, cap * sizeof *rules);
        if (rules) p->rules = rules;
        const char **fu = lean_realloc(p->first_use, cap * sizeof *fu);
        if (fu) p->first_use = fu;
        if (!names || !rules || !fu) return UINT32_MAX;
        p->cap_sym = cap;
    }
    char *s = lean_strndup(name, len);
    if (!s) return UINT32_MAX;
    p->names[p->n_sym] = s;
    p->rules[p->n_sym] = (evec){0};
    p->first_use[p->n_sym] = use;
    return p->n_sym++;
}

/* A helper rule's symbol: base_N, N the next id (llama.cpp's generate_symbol_id). */
static uint32_t new_symbol(parser *p, const char *base, const char *use) {
    char name[128];
    int n = snprintf(name, sizeof name, "%s_%u", base, p->n_sym);
    return symbol_id(p, name, n < (int)sizeof name ? (size_t)n : sizeof name - 1, use);
}

/* Defines rule id (a later definition replaces an earlier one, as in llama.cpp). */
static void set_rule(parser *p, uint32_t id, evec *e) {
    p->n_elems -= p->rules[id].n;
    lean_free(p->rules[id].v);
    p->rules[id] = *e;
    *e = (evec){0};
}

/* ================================================================ 2. lexing */

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || is_digit(c); }

static const char *skip_space(const char *s, int newline_ok) {
    while (*s == ' ' || *s == '\t' || *s == '#' || (newline_ok && (*s == '\r' || *s == '\n'))) {
        if (*s == '#')
            while (*s && *s != '\r' && *s != '\n') s++;
        else
            s++;
    }
    return s;
}

/* One well-formed UTF-8 character (RFC 3629, as the matcher reads text): anything else is an
 * error, since no text could ever match it. */
static const char *decode_utf8(parser *p, const char *s, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    int n = u[0] < 0x80 ? 1 : u[0] >= 0xc2 && u[0] <= 0xdf ? 2 : u[0] >= 0xe0 && u[0] <= 0xef ? 3 : u[0] >= 0xf0 && u[0] <= 0xf4 ? 4 : 0;
    if (n == 0) return fail_at(p, s, LEAN_ERR_FORMAT, "invalid UTF-8");
    uint32_t v = n == 1 ? u[0] : u[0] & (0x7fu >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80) return fail_at(p, s, LEAN_ERR_FORMAT, "invalid UTF-8");
        v = (v << 6) | (u[i] & 0x3fu);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of[n] || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff) return fail_at(p, s, LEAN_ERR_FORMAT, "invalid UTF-8");
    *cp = v;
    return s + n;
}

static const char *parse_hex(parser *p, const char *s, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail_at(p, s + i, LEAN_ERR_FORMAT, digits == 2 ? "expecting 2 hex digits" : digits == 4 ? "expecting 4 hex digits" : "expecting 8 hex digits");
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return s + digits;
}

/* One character of a literal or class, escapes decoded */
static const char *parse_char(parser *p, const char *s, uint32_t *cp) {
    if (*s == '\\') {
        switch (s[1]) {
        case 'x': return parse_hex(p, s + 2, 2, cp);
        case 'u': return parse_hex(p, s + 2, 4, cp);
        case 'U': return parse_hex(p, s + 2, 8, cp);
        case 't': *cp = '\t'; return s + 2;
        case 'r': *cp = '\r'; return s + 2;
        case 'n': *cp = '\n'; return s + 2;
        case '\\': case '"': case '[': case ']': *cp = (uint8_t)s[1]; return s + 2;
        default: return fail_at(p, s, LEAN_ERR_FORMAT, "unknown escape");
        }
    }
    if (!*s) return fail_at(p, s, LEAN_ERR_FORMAT, "unexpected end of input");
    return decode_utf8(p, s, cp);
}

static const char *parse_int(parser *p, const char *s, uint64_t *out) {
    if (!is_digit(*s)) return fail_at(p, s, LEAN_ERR_FORMAT, "expecting an integer");
    uint64_t v = 0;
    for (; is_digit(*s); s++) v = v > UINT32_MAX ? v : v * 10 + (uint64_t)(*s - '0'); /* saturates past 2^32 */
    *out = v;
    return s;
}

/* <[id]>, or <text> that must be exactly one token of p->tok */
static const char *parse_token(parser *p, const char *s, uint32_t *id) {
    const char *start = s++;
    if (*s == '[') {
        uint64_t v;
        if (!(s = parse_int(p, s + 1, &v))) return NULL;
        if (*s != ']') return fail_at(p, s, LEAN_ERR_FORMAT, "expecting ']'");
        if (*++s != '>') return fail_at(p, s, LEAN_ERR_FORMAT, "expecting '>'");
        if (v > INT32_MAX || (p->tok && v >= (uint64_t)lean_tokenizer_n_tokens(p->tok)))
            return fail_at(p, start, LEAN_ERR_FORMAT, "token id outside the vocabulary");
        *id = (uint32_t)v;
        return s + 1;
    }
    while (*s && *s != '>') s++;
    if (*s != '>') return fail_at(p, s, LEAN_ERR_FORMAT, "expecting '>'");
    s++;
    if (!p->tok) return fail_at(p, start, LEAN_ERR_FORMAT, "a token by name needs the model's vocabulary");
    int32_t ids[2], n = 0;
    lean_error e;
    if (lean_tokenize(p->tok, start, (size_t)(s - start), LEAN_TOKENIZE_PARSE_SPECIAL, ids, 2, &n, &e) != LEAN_OK || n != 1)
        return fail_at(p, start, LEAN_ERR_FORMAT, "not exactly one token of the vocabulary");
    *id = (uint32_t)ids[0];
    return s;
}

/* ================================================================ 3. sequences and rules */

static const char *parse_alternates(parser *p, const char *s, const char *rule_name, uint32_t rule_id, int nested);

/* Rewrites rule[last_start..] as llama.cpp's handle_repetitions does: S{min,max}. */
static int repeat(parser *p, evec *rule, size_t last_start, uint64_t min, uint64_t max, uint64_t *n_prev_rules,
                  const char *rule_name, const char *at) {
    const int no_max = max == UINT64_MAX;
    if (last_start == rule->n) return fail_at(p, at, LEAN_ERR_FORMAT, "expecting an item before */+/?/{"), -1;
    uint64_t total = 1;
    if (!no_max && max > 0) total = max;
    else if (min > 0) total = min;
    if (*n_prev_rules * total >= LEAN_GRAMMAR_MAX_REPEAT)
        return fail_at(p, at, LEAN_ERR_FORMAT, "repetitions nested past 2000 copies"), -1;
    const size_t n_prev = rule->n - last_start;
    evec prev = {0};
    for (size_t i = 0; i < n_prev; i++)
        if (evec_push(p, &prev, rule->v[last_start + i].type, rule->v[last_start + i].value)) goto oom;
    if (min == 0) {
        p->n_elems -= rule->n - last_start;
        rule->n = last_start;
    } else {
        for (uint64_t k = 1; k < min; k++)
            for (size_t i = 0; i < n_prev; i++)
                if (evec_push(p, rule, prev.v[i].type, prev.v[i].value)) goto oom;
    }
    uint32_t last_rec = 0;
    const uint64_t n_opt = no_max ? 1 : max - min;
    for (uint64_t k = 0; k < n_opt; k++) {
        evec rec = {0};
        uint32_t rec_id = new_symbol(p, rule_name, at);
        if (rec_id == UINT32_MAX) goto oom;
        for (size_t i = 0; i < n_prev; i++)
            if (evec_push(p, &rec, prev.v[i].type, prev.v[i].value)) goto oom_rec;
        if ((k > 0 || no_max) && evec_push(p, &rec, GE_RULE_REF, no_max ? rec_id : last_rec)) goto oom_rec;
        if (evec_push(p, &rec, GE_ALT, 0) || evec_push(p, &rec, GE_END, 0)) goto oom_rec;
        set_rule(p, rec_id, &rec);
        last_rec = rec_id;
        continue;
    oom_rec:
        p->n_elems -= rec.n;
        lean_free(rec.v);
        goto oom;
    }
    if (n_opt > 0 && evec_push(p, rule, GE_RULE_REF, last_rec)) goto oom;
    *n_prev_rules *= total;
    p->n_elems -= prev.n;
    lean_free(prev.v);
    return 0;
oom:
    p->n_elems -= prev.n;
    lean_free(prev.v);
    if (p->n_elems >= GRAMMAR_MAX_ELEMS) fail_at(p, at, LEAN_ERR_FORMAT, "the grammar grows past 1M elements");
    else nomem(p, at);
    return -1;
}

static const char *parse_sequence(parser *p, const char *s, const char *rule_name, evec *rule, int nested) {
    size_t last_start = rule->n;
    uint64_t n_prev_rules = 1;
#define PUSH(t, v) do { if (evec_push(p, rule, (t), (v))) return p->n_elems >= GRAMMAR_MAX_ELEMS ? fail_at(p, s, LEAN_ERR_FORMAT, "the grammar grows past 1M elements") : nomem(p, s); } while (0)
    while (*s) {
        const char *at = s;
        if (*s == '"') {
            s++;
            last_start = rule->n;
            n_prev_rules = 1;
            while (*s != '"') {
                uint32_t cp;
                if (!*s) return fail_at(p, s, LEAN_ERR_FORMAT, "unterminated literal");
                if (!(s = parse_char(p, s, &cp))) return NULL;
                PUSH(GE_CHAR, cp);
            }
            s = skip_space(s + 1, nested);
        } else if (*s == '[') {
            s++;
            uint32_t start_type = GE_CHAR;
            if (*s == '^') s++, start_type = GE_CHAR_NOT;
            last_start = rule->n;
            n_prev_rules = 1;
            while (*s != ']') {
                uint32_t cp;
                if (!*s) return fail_at(p, s, LEAN_ERR_FORMAT, "unterminated character class");
                if (!(s = parse_char(p, s, &cp))) return NULL;
                PUSH(last_start < rule->n ? GE_CHAR_ALT : start_type, cp);
                if (s[0] == '-' && s[1] != ']') {
                    if (!s[1]) return fail_at(p, s + 1, LEAN_ERR_FORMAT, "unexpected end of input");
                    if (!(s = parse_char(p, s + 1, &cp))) return NULL;
                    PUSH(GE_CHAR_RNG_UPPER, cp);
                }
            }
            s = skip_space(s + 1, nested);
        } else if (*s == '<' || (*s == '!' && s[1] == '<')) {
            uint32_t type = *s == '!' ? GE_TOKEN_NOT : GE_TOKEN, id;
            if (*s == '!') s++;
            if (!(s = parse_token(p, s, &id))) return NULL;
            last_start = rule->n;
            n_prev_rules = 1;
            PUSH(type, id);
            s = skip_space(s, nested);
        } else if (is_word(*s)) {
            const char *end = s;
            while (is_word(*end)) end++;
            uint32_t ref = symbol_id(p, s, (size_t)(end - s), s);
            if (ref == UINT32_MAX) return nomem(p, s);
            s = skip_space(end, nested);
            last_start = rule->n;
            n_prev_rules = 1;
            PUSH(GE_RULE_REF, ref);
        } else if (*s == '(') {
            if (p->depth >= MAX_NESTING) return fail_at(p, s, LEAN_ERR_FORMAT, "groups nested deeper than 200");
            s = skip_space(s + 1, 1);
            uint32_t n_before = p->n_sym;
            uint32_t sub = new_symbol(p, rule_name, at);
            if (sub == UINT32_MAX) return nomem(p, at);
            p->depth++;
            s = parse_alternates(p, s, rule_name, sub, 1);
            p->depth--;
            if (!s) return NULL;
            n_prev_rules = p->n_sym - n_before > 1 ? p->n_sym - n_before : 1;
            last_start = rule->n;
            PUSH(GE_RULE_REF, sub);
            if (*s != ')') return fail_at(p, s, LEAN_ERR_FORMAT, "expecting ')'");
            s = skip_space(s + 1, nested);
        } else if (*s == '.') {
            last_start = rule->n;
            n_prev_rules = 1;
            PUSH(GE_CHAR_ANY, 0);
            s = skip_space(s + 1, nested);
        } else if (*s == '*' || *s == '+' || *s == '?') {
            const char op = *s;
            s = skip_space(s + 1, nested);
            if (repeat(p, rule, last_start, op == '+', op == '?' ? 1 : UINT64_MAX, &n_prev_rules, rule_name, at)) return NULL;
        } else if (*s == '{') {
            uint64_t min, max = UINT64_MAX;
            s = skip_space(s + 1, nested);
            if (!(s = parse_int(p, s, &min))) return NULL;
            s = skip_space(s, nested);
            if (*s == '}') {
                max = min;
                s = skip_space(s + 1, nested);
            } else if (*s == ',') {
                s = skip_space(s + 1, nested);
                if (is_digit(*s)) {
                    if (!(s = parse_int(p, s, &max))) return NULL;
                    s = skip_space(s, nested);
                }
                if (*s != '}') return fail_at(p, s, LEAN_ERR_FORMAT, "expecting '}'");
                s = skip_space(s + 1, nested);
            } else {
                return fail_at(p, s, LEAN_ERR_FORMAT, "expecting ',' or '}'");
            }
            if (min > LEAN_GRAMMAR_MAX_REPEAT) return fail_at(p, at, LEAN_ERR_FORMAT, "a repetition count above 2000");
            if (max != UINT64_MAX && max > LEAN_GRAMMAR_MAX_REPEAT) max = UINT64_MAX; /* llama.cpp: no upper bound then */
            if (max < min) return fail_at(p, at, LEAN_ERR_FORMAT, "a repetition's maximum below its minimum");
            if (repeat(p, rule, last_start, min, max, &n_prev_rules, rule_name, at)) return NULL;
        } else {
            break;
        }
    }
#undef PUSH
    return s;
}

static const char *parse_alternates(parser *p, const char *s, const char *rule_name, uint32_t rule_id, int nested) {
    evec rule = {0};
    s = parse_sequence(p, s, rule_name, &rule, nested);
    while (s && *s == '|') {
        if (evec_push(p, &rule, GE_ALT, 0)) s = nomem(p, s);
        else s = parse_sequence(p, skip_space(s + 1, 1), rule_name, &rule, nested);
    }
    if (s && evec_push(p, &rule, GE_END, 0)) s = nomem(p, s);
    if (s) set_rule(p, rule_id, &rule);
    p->n_elems -= rule.n;
    lean_free(rule.v);
    return s;
}

static const char *parse_rule(parser *p, const char *s) {
    const char *end = s;
    while (is_word(*end)) end++;
    if (end == s) return fail_at(p, s, LEAN_ERR_FORMAT, "expecting a rule name");
    uint32_t id = symbol_id(p, s, (size_t)(end - s), s);
    if (id == UINT32_MAX) return nomem(p, s);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(end - s), s);
    const char *q = skip_space(end, 0);
    if (!(q[0] == ':' && q[1] == ':' && q[2] == '=')) return fail_at(p, q, LEAN_ERR_FORMAT, "expecting ::=");
    q = parse_alternates(p, skip_space(q + 3, 1), name, id, 0);
    if (!q) return NULL;
    if (*q == '\r') q += q[1] == '\n' ? 2 : 1;
    else if (*q == '\n') q++;
    else if (*q) return fail_at(p, q, LEAN_ERR_FORMAT, "expecting a newline or the end");
    return skip_space(q, 1);
}

/* ================================================================ 4. checks and flattening */

static int is_end(const grammar_elem *e) { return e->type == GE_END || e->type == GE_ALT; }

/* llama.cpp's llama_grammar_detect_left_recursion */
static int left_recursive(const parser *p, uint32_t r, uint8_t *visited, uint8_t *in_progress, uint8_t *may_be_empty,
                          int depth) {
    if (in_progress[r] || depth > 10000) return 1;
    in_progress[r] = 1;
    const evec *rule = &p->rules[r];
    int at_start = 1;
    for (size_t i = 0; i < rule->n; i++) {
        if (is_end(&rule->v[i])) {
            if (at_start) {
                may_be_empty[r] = 1;
                break;
            }
            at_start = 1;
        } else {
            at_start = 0;
        }
    }
    int recurse = 1;
    for (size_t i = 0; i < rule->n; i++) {
        const grammar_elem *e = &rule->v[i];
        if (e->type == GE_RULE_REF && recurse) {
            if (left_recursive(p, e->value, visited, in_progress, may_be_empty, depth + 1)) return 1;
            if (!may_be_empty[e->value]) recurse = 0;
        } else {
            recurse = is_end(e);
        }
    }
    in_progress[r] = 0;
    visited[r] = 1;
    return 0;
}

static lean_status finish(parser *p, const char *root, grammar_rules *out) {
    for (uint32_t i = 0; i < p->n_sym; i++)
        if (p->rules[i].n == 0) {
            int line, col;
            where(p, p->first_use[i], &line, &col);
            return LEAN_FAIL(p->err, LEAN_ERR_FORMAT, "grammar line %d column %d: undefined rule '%s'", line, col,
                             p->names[i]);
        }
    uint32_t r = 0;
    while (r < p->n_sym && strcmp(p->names[r], root) != 0) r++;
    if (r == p->n_sym) return LEAN_FAIL(p->err, LEAN_ERR_FORMAT, "grammar: no rule named '%s' (the root)", root);
    uint8_t *marks = lean_calloc(p->n_sym, 3);
    if (!marks) return LEAN_FAIL(p->err, LEAN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < p->n_sym; i++)
        if (left_recursive(p, i, marks, marks + p->n_sym, marks + 2 * p->n_sym, 0)) {
            lean_free(marks);
            return LEAN_FAIL(p->err, LEAN_ERR_FORMAT, "grammar: rule '%s' is left recursive", p->names[i]);
        }
    lean_free(marks);
    out->elems = lean_malloc(p->n_elems * sizeof *out->elems);
    out->rule_start = lean_malloc(p->n_sym * sizeof *out->rule_start);
    if (!out->elems || !out->rule_start) return LEAN_FAIL(p->err, LEAN_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (uint32_t i = 0; i < p->n_sym; i++) {
        out->rule_start[i] = (uint32_t)n;
        memcpy(out->elems + n, p->rules[i].v, p->rules[i].n * sizeof *out->elems);
        n += p->rules[i].n;
    }
    out->n_elems = n;
    out->n_rules = p->n_sym;
    out->names = p->names;
    p->names = NULL;
    out->root = r;
    return LEAN_OK;
}

lean_status grammar_parse(const char *text, size_t len, const char *root, const lean_tokenizer *tok,
                          grammar_rules *out, lean_error *err) {
    *out = (grammar_rules){0};
    if (!text) return LEAN_FAIL(err, LEAN_ERR_ARG, "grammar text is NULL");
    const char *nul = memchr(text, 0, len);
    if (nul) return LEAN_FAIL(err, LEAN_ERR_FORMAT, "grammar: a NUL byte at offset %zu", (size_t)(nul - text));
    parser p = {.tok = tok, .err = err, .st = LEAN_OK};
    char *src = lean_strndup(text, len);
    if (!src) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    p.src = src;
    const char *s = skip_space(src, 1);
    while (s && *s) s = parse_rule(&p, s);
    lean_status st = p.st;
    if (st == LEAN_OK) st = finish(&p, root ? root : "root", out);
    for (uint32_t i = 0; i < p.n_sym; i++) {
        if (p.names) lean_free(p.names[i]);
        lean_free(p.rules[i].v);
    }
    lean_free(p.names);
    lean_free(p.rules);
    lean_free(p.first_use);
    lean_free(src);
    if (st != LEAN_OK) grammar_rules_free(out);
    return st;
}

void grammar_rules_free(grammar_rules *r) {
    if (r->names)
        for (uint32_t i = 0; i < r->n_rules; i++) lean_free(r->names[i]);
    lean_free(r->names);
    lean_free(r->elems);
    lean_free(r->rule_start);
    *r = (grammar_rules){0};
}
