/* template_parse.c — a Jinja template's text -> tokens -> syntax tree (tj_node), following
 * jinja2 3.1's lexer.py and parser.py rule for rule, with the settings transformers uses
 * (trim_blocks, lstrip_blocks, keep_trailing_newline off, the loopcontrols extension and
 * the {% generation %} tag).
 *
 * What it does not do: evaluate anything (template_eval.c), or accept what lean cannot
 * render: include/import/extends/block/call/autoescape, recursive loops, *args and **kwargs
 * are refused here with LEAN_ERR_UNSUPPORTED; so are filters and tests lean lacks, except
 * inside an if or an inline if, where jinja2 too waits until they are used.
 *
 * Sections:
 *   1. parser helpers  the token cursor (tokens from template_lex.c), node making, errors
 *   2. expressions     parse_tuple ... parse_primary, filters, tests, calls, subscripts
 *   3. statements      for, if, set, macro, filter, with, print, break/continue, generation
 *
 * Positions: line and column (1-based, columns in bytes) of the token that starts each
 * node; every error names them.
 */
#include "template/template.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. parser helpers ---- */

typedef struct parser {
    tj_ctx *c;
    tj_tok *t;
    size_t n, i;
    int depth;      /* TJ_MAX_PARSE_DEPTH */
    int loops;      /* for loops around here (break/continue need one) */
    bool soft;      /* inside an if / inline if: unknown filters and tests fail when used */
} parser;

static tj_tok *cur(parser *p) { return &p->t[p->i]; }
static tj_tok *look(parser *p) { return &p->t[p->i + 1 < p->n ? p->i + 1 : p->i]; }
static void advance(parser *p) {
    if (p->i + 1 < p->n) p->i++;
}
static bool is_name(const tj_tok *t, const char *name) { return t->type == TK_NAME && tj_str_eq(t->s, name); }
static bool is_op(const tj_tok *t, int op) { return t->type == TK_OP && t->op == op; }

static void describe(const tj_tok *t, char *out, size_t n) {
    switch (t->type) {
    case TK_DATA: snprintf(out, n, "template data"); break;
    case TK_VAR_BEGIN: snprintf(out, n, "'{{'"); break;
    case TK_VAR_END: snprintf(out, n, "end of print statement ('}}')"); break;
    case TK_BLOCK_BEGIN: snprintf(out, n, "'{%%'"); break;
    case TK_BLOCK_END: snprintf(out, n, "end of statement block ('%%}')"); break;
    case TK_NAME: snprintf(out, n, "'%.*s'", (int)(t->s.n > 40 ? 40 : t->s.n), t->s.p); break;
    case TK_STRING: snprintf(out, n, "string literal"); break;
    case TK_INT: snprintf(out, n, "integer literal"); break;
    case TK_FLOAT: snprintf(out, n, "float literal"); break;
    case TK_OP: snprintf(out, n, "'%s'", tj_op_text[t->op]); break;
    default: snprintf(out, n, "end of template"); break;
    }
}

static bool fail_at(parser *p, const tj_tok *t, lean_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail_at(parser *p, const tj_tok *t, lean_status st, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tj_fail(p->c, t->line, t->col, st, "%s", msg);
}

static bool unexpected(parser *p, const char *expected) {
    char what[64], msg[160];
    describe(cur(p), what, sizeof what);
    if (expected)
        snprintf(msg, sizeof msg, "expected %s, got %s", expected, what);
    else
        snprintf(msg, sizeof msg, "unexpected %s", what);
    return fail_at(p, cur(p), LEAN_ERR_FORMAT, "%s", msg);
}

static bool expect_op(parser *p, int op) {
    if (!is_op(cur(p), op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", tj_op_text[op]);
        return unexpected(p, e);
    }
    advance(p);
    return true;
}

static bool expect_type(parser *p, int type, const char *what) {
    if (cur(p)->type != type) return unexpected(p, what);
    advance(p);
    return true;
}

static tj_node *mk(parser *p, uint8_t kind, const tj_tok *at) {
    tj_node *nd = tj_alloc(p->c, sizeof *nd);
    if (!nd) return NULL;
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->line = at->line;
    nd->col = at->col;
    nd->builtin = -1;
    return nd;
}

typedef struct nodevec {
    tj_node **v;
    size_t n, cap;
} nodevec;

static bool vec_push(parser *p, nodevec *v, tj_node *nd) {
    if (!nd) return false;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        tj_node **q = tj_realloc(p->c, v->v, v->n * sizeof *q, cap * sizeof *q);
        if (!q) return false;
        v->v = q;
        v->cap = cap;
    }
    v->v[v->n++] = nd;
    return true;
}
static tj_nodes vec_done(nodevec *v) { return (tj_nodes){v->v, v->n}; }

static bool enter(parser *p) {
    if (++p->depth > TJ_MAX_PARSE_DEPTH)
        return fail_at(p, cur(p), LEAN_ERR_UNSUPPORTED, "template nested deeper than 100 levels");
    return true;
}
#define LEAVE(p) ((p)->depth--)

/* ---- 2. expressions ---- */

static tj_node *parse_expression(parser *p, bool with_condexpr);
static tj_node *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                            bool explicit_parens);
static tj_node *parse_unary(parser *p, bool with_filter);
static tj_node *parse_primary(parser *p);
static tj_node *parse_postfix(parser *p, tj_node *node);
static tj_node *parse_filter(parser *p, tj_node *node, bool start_inline);

typedef struct callargs {
    nodevec args, kwvals;
    tj_str *kwnames;
    size_t cap_kw;
} callargs;

static bool parse_call_args(parser *p, callargs *ca) {
    tj_tok *open = cur(p);
    if (!expect_op(p, O_LPAREN)) return false;
    bool require_comma = false;
    while (!is_op(cur(p), O_RPAREN)) {
        if (require_comma) {
            if (!expect_op(p, O_COMMA)) return false;
            if (is_op(cur(p), O_RPAREN)) break;
        }
        if (is_op(cur(p), O_MUL) || is_op(cur(p), O_POW))
            return fail_at(p, cur(p), LEAN_ERR_UNSUPPORTED, "*args and **kwargs in calls are not supported");
        if (cur(p)->type == TK_NAME && is_op(look(p), O_ASSIGN)) {
            tj_str key = cur(p)->s;
            advance(p);
            advance(p);
            tj_node *v = parse_expression(p, true);
            if (!v) return false;
            if (ca->kwvals.n == ca->cap_kw) {
                size_t cap = ca->cap_kw ? ca->cap_kw * 2 : 4;
                tj_str *k = tj_realloc(p->c, ca->kwnames, ca->kwvals.n * sizeof *k, cap * sizeof *k);
                if (!k) return false;
                ca->kwnames = k;
                ca->cap_kw = cap;
            }
            ca->kwnames[ca->kwvals.n] = key;
            if (!vec_push(p, &ca->kwvals, v)) return false;
        } else {
            if (ca->kwvals.n) return fail_at(p, open, LEAN_ERR_FORMAT, "invalid syntax for function call expression (a positional argument after a keyword argument)");
            if (!vec_push(p, &ca->args, parse_expression(p, true))) return false;
        }
        require_comma = true;
    }
    return expect_op(p, O_RPAREN);
}

static void set_args(tj_node *nd, callargs *ca) {
    nd->args = vec_done(&ca->args);
    nd->kwvals = vec_done(&ca->kwvals);
    nd->kwnames = ca->kwnames;
}

static tj_node *parse_call(parser *p, tj_node *callee) {
    tj_node *nd = mk(p, TJ_N_CALL, cur(p));
    if (!nd) return NULL;
    callargs ca = {0};
    if (!parse_call_args(p, &ca)) return NULL;
    nd->a = callee;
    set_args(nd, &ca);
    return nd;
}

/* A dotted name after | or is: name(.name)* */
static bool parse_dotted(parser *p, tj_str *out) {
    if (cur(p)->type != TK_NAME) return unexpected(p, "a name");
    tj_str name = cur(p)->s;
    advance(p);
    if (is_op(cur(p), O_DOT)) return fail_at(p, cur(p), LEAN_ERR_UNSUPPORTED, "dotted filter and test names are not supported");
    *out = name;
    return true;
}

static bool resolve_builtin(parser *p, tj_node *nd, bool filter, const tj_tok *at) {
    bool known = false;
    nd->builtin = filter ? tj_filter_id(nd->name, &known) : tj_test_id(nd->name, &known);
    if (nd->builtin >= 0 || p->soft) return true; /* in an if, jinja2 too fails only on use */
    char msg[128];
    snprintf(msg, sizeof msg, known ? "%s '%.*s' is not supported" : "no %s named '%.*s'",
             filter ? "filter" : "test", (int)(nd->name.n > 60 ? 60 : nd->name.n), nd->name.p);
    return fail_at(p, at, known ? LEAN_ERR_UNSUPPORTED : LEAN_ERR_FORMAT, "%s", msg);
}

static tj_node *parse_filter(parser *p, tj_node *node, bool start_inline) {
    while (is_op(cur(p), O_PIPE) || start_inline) {
        if (!start_inline) advance(p);
        tj_tok *at = cur(p);
        tj_node *nd = mk(p, TJ_N_FILTER, at);
        if (!nd || !parse_dotted(p, &nd->name)) return NULL;
        if (!resolve_builtin(p, nd, true, at)) return NULL;
        if (is_op(cur(p), O_LPAREN)) {
            callargs ca = {0};
            if (!parse_call_args(p, &ca)) return NULL;
            set_args(nd, &ca);
        }
        nd->a = node;
        node = nd;
        start_inline = false;
    }
    return node;
}

static tj_node *parse_test(parser *p, tj_node *node) {
    tj_tok *is_tok = cur(p);
    advance(p); /* is */
    bool negated = false;
    if (is_name(cur(p), "not")) {
        advance(p);
        negated = true;
    }
    tj_tok *at = cur(p);
    tj_node *nd = mk(p, TJ_N_TEST, is_tok);
    if (!nd || !parse_dotted(p, &nd->name)) return NULL;
    if (!resolve_builtin(p, nd, false, at)) return NULL;
    tj_tok *t = cur(p);
    if (is_op(t, O_LPAREN)) {
        callargs ca = {0};
        if (!parse_call_args(p, &ca)) return NULL;
        set_args(nd, &ca);
    } else if ((t->type == TK_NAME || t->type == TK_STRING || t->type == TK_INT || t->type == TK_FLOAT ||
                is_op(t, O_LPAREN) || is_op(t, O_LBRACKET) || is_op(t, O_LBRACE)) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) return fail_at(p, t, LEAN_ERR_FORMAT, "you cannot chain multiple tests with is"), (tj_node *)NULL;
        tj_node *arg = parse_postfix(p, parse_primary(p));
        if (!arg) return NULL;
        nodevec v = {0};
        if (!vec_push(p, &v, arg)) return NULL;
        nd->args = vec_done(&v);
    }
    nd->a = node;
    if (!negated) return nd;
    tj_node *n2 = mk(p, TJ_N_NOT, is_tok);
    if (!n2) return NULL;
    n2->a = nd;
    return n2;
}

static tj_node *parse_filter_expr(parser *p, tj_node *node) {
    while (node) {
        if (is_op(cur(p), O_PIPE)) node = parse_filter(p, node, false);
        else if (is_name(cur(p), "is")) node = parse_test(p, node);
        else if (is_op(cur(p), O_LPAREN)) node = parse_call(p, node);
        else break;
    }
    return node;
}

/* One subscript item: an expression or a slice a:b:c. */
static tj_node *parse_subscribed(parser *p, tj_node *obj, tj_tok *at) {
    tj_node *start = NULL, *stop = NULL, *step = NULL;
    if (is_op(cur(p), O_COLON)) {
        advance(p);
    } else {
        tj_node *e = parse_expression(p, true);
        if (!e) return NULL;
        if (!is_op(cur(p), O_COLON)) {
            tj_node *nd = mk(p, TJ_N_ITEM, at);
            if (!nd) return NULL;
            nd->a = obj;
            nd->b = e;
            return nd;
        }
        advance(p);
        start = e;
    }
    if (!is_op(cur(p), O_COLON) && !is_op(cur(p), O_RBRACKET) && !is_op(cur(p), O_COMMA)) {
        if (!(stop = parse_expression(p, true))) return NULL;
    }
    if (is_op(cur(p), O_COLON)) {
        advance(p);
        if (!is_op(cur(p), O_RBRACKET) && !is_op(cur(p), O_COMMA))
            if (!(step = parse_expression(p, true))) return NULL;
    }
    tj_node *nd = mk(p, TJ_N_SLICE, at);
    if (!nd) return NULL;
    nd->a = obj;
    nd->b = start;
    nd->c = stop;
    nd->d = step;
    return nd;
}

static tj_node *parse_subscript(parser *p, tj_node *node) {
    tj_tok *at = cur(p);
    if (is_op(at, O_DOT)) {
        advance(p);
        tj_tok *attr = cur(p);
        if (attr->type == TK_NAME) {
            advance(p);
            tj_node *nd = mk(p, TJ_N_ATTR, at);
            if (!nd) return NULL;
            nd->a = node;
            nd->name = attr->s;
            return nd;
        }
        if (attr->type != TK_INT) return unexpected(p, "a name or number"), (tj_node *)NULL;
        advance(p);
        tj_node *k = mk(p, TJ_N_CONST, attr), *nd = mk(p, TJ_N_ITEM, at);
        if (!k || !nd) return NULL;
        k->value = tj_int(attr->i);
        nd->a = node;
        nd->b = k;
        return nd;
    }
    advance(p); /* [ */
    nodevec items = {0};
    while (!is_op(cur(p), O_RBRACKET)) {
        if (items.n && !expect_op(p, O_COMMA)) return NULL;
        if (!vec_push(p, &items, parse_subscribed(p, node, at))) return NULL;
    }
    if (!expect_op(p, O_RBRACKET)) return NULL;
    if (items.n == 1) return items.v[0];
    if (items.n == 0) {
        fail_at(p, at, LEAN_ERR_UNSUPPORTED, "an empty subscript is not supported");
        return NULL;
    }
    /* x[a, b]: a tuple key (slices inside are refused) */
    tj_node *tup = mk(p, TJ_N_TUPLE, at), *nd = mk(p, TJ_N_ITEM, at);
    if (!tup || !nd) return NULL;
    for (size_t i = 0; i < items.n; i++) {
        if (items.v[i]->kind != TJ_N_ITEM) {
            fail_at(p, at, LEAN_ERR_UNSUPPORTED, "slices inside a tuple subscript are not supported");
            return NULL;
        }
        items.v[i] = items.v[i]->b;
    }
    tup->args = vec_done(&items);
    nd->a = node;
    nd->b = tup;
    return nd;
}

static tj_node *parse_postfix(parser *p, tj_node *node) {
    while (node) {
        if (is_op(cur(p), O_DOT) || is_op(cur(p), O_LBRACKET)) node = parse_subscript(p, node);
        else if (is_op(cur(p), O_LPAREN)) node = parse_call(p, node);
        else break;
    }
    return node;
}

static tj_node *parse_list(parser *p) {
    tj_node *nd = mk(p, TJ_N_LIST, cur(p));
    if (!nd) return NULL;
    advance(p);
    nodevec items = {0};
    while (!is_op(cur(p), O_RBRACKET)) {
        if (items.n && !expect_op(p, O_COMMA)) return NULL;
        if (is_op(cur(p), O_RBRACKET)) break;
        if (!vec_push(p, &items, parse_expression(p, true))) return NULL;
    }
    if (!expect_op(p, O_RBRACKET)) return NULL;
    nd->args = vec_done(&items);
    return nd;
}

static tj_node *parse_dict(parser *p) {
    tj_node *nd = mk(p, TJ_N_DICT, cur(p));
    if (!nd) return NULL;
    advance(p);
    nodevec keys = {0}, vals = {0};
    while (!is_op(cur(p), O_RBRACE)) {
        if (keys.n && !expect_op(p, O_COMMA)) return NULL;
        if (is_op(cur(p), O_RBRACE)) break;
        if (!vec_push(p, &keys, parse_expression(p, true))) return NULL;
        if (!expect_op(p, O_COLON)) return NULL;
        if (!vec_push(p, &vals, parse_expression(p, true))) return NULL;
    }
    if (!expect_op(p, O_RBRACE)) return NULL;
    nd->args = vec_done(&keys);
    nd->kwvals = vec_done(&vals);
    return nd;
}

static tj_node *parse_primary(parser *p) {
    tj_tok *t = cur(p);
    tj_node *nd;
    if (t->type == TK_NAME) {
        nd = mk(p, TJ_N_CONST, t);
        if (!nd) return NULL;
        if (is_name(t, "true") || is_name(t, "True")) nd->value = tj_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) nd->value = tj_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) nd->value = tj_none();
        else {
            nd->kind = TJ_N_NAME;
            nd->name = t->s;
        }
        advance(p);
        return nd;
    }
    if (t->type == TK_STRING) {
        nd = mk(p, TJ_N_CONST, t);
        if (!nd) return NULL;
        tj_str s = t->s;
        advance(p);
        if (cur(p)->type == TK_STRING) { /* adjacent literals join */
            tj_buf b = {0};
            if (!tj_buf_put(p->c, &b, s.p, s.n)) return NULL;
            while (cur(p)->type == TK_STRING) {
                if (!tj_buf_put(p->c, &b, cur(p)->s.p, cur(p)->s.n)) return NULL;
                advance(p);
            }
            s = tj_buf_str(&b);
        }
        nd->value = tj_strv(s);
        return nd;
    }
    if (t->type == TK_INT || t->type == TK_FLOAT) {
        nd = mk(p, TJ_N_CONST, t);
        if (!nd) return NULL;
        nd->value = t->type == TK_INT ? tj_int(t->i) : tj_float(t->f);
        advance(p);
        return nd;
    }
    if (is_op(t, O_LPAREN)) {
        advance(p);
        nd = parse_tuple(p, false, true, NULL, true);
        if (!nd || !expect_op(p, O_RPAREN)) return NULL;
        return nd;
    }
    if (is_op(t, O_LBRACKET)) return parse_list(p);
    if (is_op(t, O_LBRACE)) return parse_dict(p);
    unexpected(p, NULL);
    return NULL;
}

static tj_node *parse_unary(parser *p, bool with_filter) {
    tj_tok *t = cur(p);
    tj_node *node;
    if (is_op(t, O_SUB) || is_op(t, O_ADD)) {
        if (!enter(p)) return NULL;
        advance(p);
        node = mk(p, is_op(t, O_SUB) ? TJ_N_NEG : TJ_N_POS, t);
        tj_node *inner = parse_unary(p, false);
        LEAVE(p);
        if (!node || !inner) return NULL;
        node->a = inner;
    } else {
        node = parse_primary(p);
    }
    node = parse_postfix(p, node);
    if (with_filter) node = parse_filter_expr(p, node);
    return node;
}

static tj_node *binary(parser *p, uint8_t kind, uint8_t op, const tj_tok *at, tj_node *a, tj_node *b) {
    if (!a || !b) return NULL;
    tj_node *nd = mk(p, kind, at);
    if (!nd) return NULL;
    nd->op = op;
    nd->a = a;
    nd->b = b;
    return nd;
}

static tj_node *parse_pow(parser *p) {
    tj_node *left = parse_unary(p, true);
    while (left && is_op(cur(p), O_POW)) {
        tj_tok *at = cur(p);
        advance(p);
        left = binary(p, TJ_N_BIN, TJ_OP_POW, at, left, parse_unary(p, true));
    }
    return left;
}

static tj_node *parse_math2(parser *p) {
    tj_node *left = parse_pow(p);
    while (left) {
        tj_tok *at = cur(p);
        int op = is_op(at, O_MUL) ? TJ_OP_MUL : is_op(at, O_DIV) ? TJ_OP_DIV
               : is_op(at, O_FLOORDIV) ? TJ_OP_FLOORDIV : is_op(at, O_MOD) ? TJ_OP_MOD : -1;
        if (op < 0) break;
        advance(p);
        left = binary(p, TJ_N_BIN, (uint8_t)op, at, left, parse_pow(p));
    }
    return left;
}

static tj_node *parse_concat(parser *p) {
    tj_tok *at = cur(p);
    tj_node *first = parse_math2(p);
    if (!first || !is_op(cur(p), O_TILDE)) return first;
    nodevec args = {0};
    if (!vec_push(p, &args, first)) return NULL;
    while (is_op(cur(p), O_TILDE)) {
        advance(p);
        if (!vec_push(p, &args, parse_math2(p))) return NULL;
    }
    tj_node *nd = mk(p, TJ_N_CONCAT, at);
    if (!nd) return NULL;
    nd->args = vec_done(&args);
    return nd;
}

static tj_node *parse_math1(parser *p) {
    tj_node *left = parse_concat(p);
    while (left && (is_op(cur(p), O_ADD) || is_op(cur(p), O_SUB))) {
        tj_tok *at = cur(p);
        advance(p);
        left = binary(p, TJ_N_BIN, is_op(at, O_ADD) ? TJ_OP_ADD : TJ_OP_SUB, at, left, parse_concat(p));
    }
    return left;
}

static tj_node *parse_compare(parser *p) {
    tj_tok *at = cur(p);
    tj_node *expr = parse_math1(p);
    if (!expr) return NULL;
    nodevec ops = {0};
    for (;;) {
        tj_tok *t = cur(p);
        int op = is_op(t, O_EQ) ? TJ_OP_EQ : is_op(t, O_NE) ? TJ_OP_NE : is_op(t, O_LT) ? TJ_OP_LT
               : is_op(t, O_LTEQ) ? TJ_OP_LTEQ : is_op(t, O_GT) ? TJ_OP_GT : is_op(t, O_GTEQ) ? TJ_OP_GTEQ : -1;
        if (op >= 0) {
            advance(p);
        } else if (is_name(t, "in")) {
            advance(p);
            op = TJ_OP_IN;
        } else if (is_name(t, "not") && is_name(look(p), "in")) {
            advance(p);
            advance(p);
            op = TJ_OP_NOTIN;
        } else {
            break;
        }
        tj_node *o = mk(p, TJ_N_OPERAND, t);
        if (!o) return NULL;
        o->op = (uint8_t)op;
        if (!(o->a = parse_math1(p)) || !vec_push(p, &ops, o)) return NULL;
    }
    if (ops.n == 0) return expr;
    tj_node *nd = mk(p, TJ_N_COMPARE, at);
    if (!nd) return NULL;
    nd->a = expr;
    nd->args = vec_done(&ops);
    return nd;
}

static tj_node *parse_not(parser *p) {
    if (!is_name(cur(p), "not")) return parse_compare(p);
    tj_tok *at = cur(p);
    if (!enter(p)) return NULL;
    advance(p);
    tj_node *nd = mk(p, TJ_N_NOT, at), *inner = parse_not(p);
    LEAVE(p);
    if (!nd || !inner) return NULL;
    nd->a = inner;
    return nd;
}

/* "and" over not, "or" over and: a left-leaning chain of the keyword over the next level. */
static tj_node *parse_logic(parser *p, const char *keyword, uint8_t kind, tj_node *(*operand)(parser *)) {
    tj_node *left = operand(p);
    while (left && is_name(cur(p), keyword)) {
        tj_tok *at = cur(p);
        advance(p);
        left = binary(p, kind, 0, at, left, operand(p));
    }
    return left;
}

static tj_node *parse_and(parser *p) { return parse_logic(p, "and", TJ_N_AND, parse_not); }
static tj_node *parse_or(parser *p) { return parse_logic(p, "or", TJ_N_OR, parse_and); }

static tj_node *parse_condexpr(parser *p) {
    tj_tok *at = cur(p);
    tj_node *expr1 = parse_or(p);
    while (expr1 && is_name(cur(p), "if")) {
        bool soft = p->soft;
        p->soft = true; /* jinja2 compiles an inline if in a soft frame */
        advance(p);
        tj_node *nd = mk(p, TJ_N_COND, at);
        tj_node *expr2 = parse_or(p), *expr3 = NULL;
        if (nd && expr2 && is_name(cur(p), "else")) {
            advance(p);
            expr3 = parse_condexpr(p);
            if (!expr3) nd = NULL;
        }
        p->soft = soft;
        if (!nd || !expr2) return NULL;
        nd->a = expr2;
        nd->b = expr1;
        nd->c = expr3;
        expr1 = nd;
        at = cur(p);
    }
    return expr1;
}

static tj_node *parse_expression(parser *p, bool with_condexpr) {
    if (!enter(p)) return NULL;
    tj_node *nd = with_condexpr ? parse_condexpr(p) : parse_or(p);
    LEAVE(p);
    return nd;
}

static bool is_tuple_end(parser *p, const char *extra_end) {
    tj_tok *t = cur(p);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || is_op(t, O_RPAREN)) return true;
    return extra_end && is_name(t, extra_end);
}

static tj_node *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                            bool explicit_parens) {
    tj_tok *at = cur(p);
    nodevec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n && !expect_op(p, O_COMMA)) return NULL;
        if (is_tuple_end(p, extra_end)) break;
        tj_node *e = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        if (!vec_push(p, &args, e)) return NULL;
        if (is_op(cur(p), O_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens) {
            unexpected(p, "an expression");
            return NULL;
        }
    }
    tj_node *nd = mk(p, TJ_N_TUPLE, at);
    if (!nd) return NULL;
    nd->args = vec_done(&args);
    return nd;
}

/* ---- 3. statements ---- */

static bool subparse(parser *p, const char *const *end_names, tj_nodes *out);

/* The body of a statement up to one of end_names (left current, after "{%"). */
static bool parse_statements(parser *p, const char *const *end_names, bool drop_needle, const tj_tok *opener,
                             tj_nodes *out) {
    if (is_op(cur(p), O_COLON)) advance(p);
    if (!expect_type(p, TK_BLOCK_END, "end of statement block ('%}')")) return false;
    if (!enter(p)) return false;
    bool ok = subparse(p, end_names, out);
    LEAVE(p);
    if (!ok) return false;
    if (cur(p)->type == TK_EOF) {
        char msg[160];
        snprintf(msg, sizeof msg, "unexpected end of template: the '%.*s' at line %d col %d is not closed (expected '%s')",
                 (int)opener->s.n, opener->s.p, opener->line, opener->col, end_names[0]);
        return fail_at(p, cur(p), LEAN_ERR_FORMAT, "%s", msg);
    }
    if (drop_needle) advance(p);
    return true;
}

/* The body of a set, macro, with or filter block up to {% end<tag> %}, in a frame of its own:
 * unknown filters and tests fail at once there (not soft); loops: the for loops around it that
 * break and continue may reach (a macro's body: none). */
static bool parse_block_body(parser *p, const char *end, int loops, const tj_tok *opener, tj_nodes *out) {
    const char *const ends[] = {end, NULL};
    const bool soft = p->soft;
    const int outer_loops = p->loops;
    p->soft = false;
    p->loops = loops;
    bool ok = parse_statements(p, ends, true, opener, out);
    p->soft = soft;
    p->loops = outer_loops;
    return ok;
}

static bool can_assign(const tj_node *t) {
    if (t->kind == TJ_N_NAME) return true;
    if (t->kind == TJ_N_TUPLE) {
        for (size_t i = 0; i < t->args.n; i++)
            if (!can_assign(t->args.v[i])) return false;
        return true;
    }
    return false;
}

static tj_node *parse_assign_target(parser *p, bool with_namespace, bool name_only, const char *extra_end) {
    tj_tok *at = cur(p);
    tj_node *target;
    if (with_namespace && at->type == TK_NAME && is_op(look(p), O_DOT)) {
        target = mk(p, TJ_N_NSREF, at);
        if (!target) return NULL;
        target->name = at->s;
        advance(p);
        advance(p);
        if (cur(p)->type != TK_NAME) return unexpected(p, "a name"), (tj_node *)NULL;
        target->kwnames = tj_alloc(p->c, sizeof(tj_str));
        if (!target->kwnames) return NULL;
        target->kwnames[0] = cur(p)->s;
        advance(p);
        return target;
    }
    if (name_only) {
        if (at->type != TK_NAME) return unexpected(p, "a name"), (tj_node *)NULL;
        target = mk(p, TJ_N_NAME, at);
        if (!target) return NULL;
        target->name = at->s;
        advance(p);
    } else {
        target = parse_tuple(p, true, true, extra_end, false);
        if (!target) return NULL;
    }
    if (!can_assign(target) ||
        (target->kind == TJ_N_NAME && (tj_str_eq(target->name, "true") || tj_str_eq(target->name, "false") ||
                                       tj_str_eq(target->name, "none")))) {
        fail_at(p, at, LEAN_ERR_FORMAT, "can't assign to this expression");
        return NULL;
    }
    return target;
}

static tj_node *parse_for(parser *p, tj_tok *opener) {
    tj_node *nd = mk(p, TJ_N_FOR, opener);
    if (!nd) return NULL;
    advance(p);
    if (!(nd->a = parse_assign_target(p, false, false, "in"))) return NULL;
    if (!is_name(cur(p), "in")) return unexpected(p, "'in'"), (tj_node *)NULL;
    advance(p);
    if (!(nd->b = parse_tuple(p, false, false, "recursive", false))) return NULL;
    bool soft = p->soft;
    p->soft = false; /* the loop's own frame */
    p->loops++;
    bool ok = true;
    if (is_name(cur(p), "if")) {
        advance(p);
        ok = (nd->c = parse_expression(p, true)) != NULL;
    }
    if (ok && is_name(cur(p), "recursive"))
        ok = fail_at(p, cur(p), LEAN_ERR_UNSUPPORTED, "recursive for loops are not supported");
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const ends2[] = {"endfor", NULL};
    ok = ok && parse_statements(p, ends, false, opener, &nd->body);
    p->loops--;
    if (ok && is_name(cur(p), "else")) {
        advance(p);
        ok = parse_statements(p, ends2, true, opener, &nd->orelse);
    } else if (ok) {
        advance(p); /* endfor */
    }
    p->soft = soft;
    return ok ? nd : NULL;
}

static tj_node *parse_if(parser *p, tj_tok *opener) {
    static const char *const ends[] = {"endif", "elif", "else", NULL};
    static const char *const ends2[] = {"endif", NULL};
    bool soft = p->soft;
    p->soft = true;
    tj_node *result = mk(p, TJ_N_IF, opener), *node = result;
    advance(p);
    bool ok = result != NULL;
    while (ok) {
        ok = (node->a = parse_tuple(p, false, false, NULL, false)) != NULL &&
             parse_statements(p, ends, false, opener, &node->body);
        if (!ok) break;
        tj_tok *t = cur(p);
        advance(p);
        if (is_name(t, "elif")) {
            tj_node *next = mk(p, TJ_N_IF, t);
            nodevec v = {0};
            ok = next && vec_push(p, &v, next);
            if (ok) node->orelse = vec_done(&v);
            node = next;
            continue;
        }
        if (is_name(t, "else")) ok = parse_statements(p, ends2, true, opener, &node->orelse);
        break;
    }
    p->soft = soft;
    return ok ? result : NULL;
}

static tj_node *parse_set(parser *p, tj_tok *opener) {
    advance(p);
    tj_node *target = parse_assign_target(p, true, false, NULL);
    if (!target) return NULL;
    if (is_op(cur(p), O_ASSIGN)) {
        advance(p);
        tj_node *nd = mk(p, TJ_N_SET, opener);
        if (!nd || !(nd->b = parse_tuple(p, false, true, NULL, false))) return NULL;
        nd->a = target;
        return nd;
    }
    tj_node *nd = mk(p, TJ_N_SETBLOCK, opener);
    if (!nd) return NULL;
    nd->a = target;
    if (is_op(cur(p), O_PIPE) && !(nd->c = parse_filter(p, NULL, false))) return NULL;
    return parse_block_body(p, "endset", p->loops, opener, &nd->body) ? nd : NULL;
}

static tj_node *parse_macro(parser *p, tj_tok *opener) {
    tj_node *nd = mk(p, TJ_N_MACRO, opener);
    if (!nd) return NULL;
    advance(p);
    if (cur(p)->type != TK_NAME) return unexpected(p, "a macro name"), (tj_node *)NULL;
    nd->name = cur(p)->s;
    advance(p);
    if (!expect_op(p, O_LPAREN)) return NULL;
    nodevec params = {0};
    bool defaults = false;
    while (!is_op(cur(p), O_RPAREN)) {
        if (params.n && !expect_op(p, O_COMMA)) return NULL;
        tj_node *arg = parse_assign_target(p, false, true, NULL);
        if (!arg) return NULL;
        if (is_op(cur(p), O_ASSIGN)) {
            advance(p);
            if (!(arg->a = parse_expression(p, true))) return NULL;
            defaults = true;
        } else if (defaults) {
            return fail_at(p, cur(p), LEAN_ERR_FORMAT, "non-default argument follows default argument"), (tj_node *)NULL;
        }
        if (!vec_push(p, &params, arg)) return NULL;
    }
    advance(p);
    nd->args = vec_done(&params);
    return parse_block_body(p, "endmacro", 0, opener, &nd->body) ? nd : NULL;
}

static tj_node *parse_with(parser *p, tj_tok *opener) {
    tj_node *nd = mk(p, TJ_N_WITH, opener);
    if (!nd) return NULL;
    advance(p);
    nodevec targets = {0}, values = {0};
    while (cur(p)->type != TK_BLOCK_END) {
        if (targets.n && !expect_op(p, O_COMMA)) return NULL;
        tj_node *t = parse_assign_target(p, false, false, NULL);
        if (!t) return NULL;
        if (t->kind != TJ_N_NAME)
            return fail_at(p, opener, LEAN_ERR_UNSUPPORTED, "tuple targets in with are not supported"), (tj_node *)NULL;
        if (!vec_push(p, &targets, t) || !expect_op(p, O_ASSIGN)) return NULL;
        if (!vec_push(p, &values, parse_expression(p, true))) return NULL;
    }
    nd->args = vec_done(&targets);
    nd->kwvals = vec_done(&values);
    return parse_block_body(p, "endwith", p->loops, opener, &nd->body) ? nd : NULL;
}

/* One {% ... %} statement; the cursor is on its name. Appends to out. */
static bool parse_statement(parser *p, nodevec *out) {
    tj_tok *t = cur(p);
    if (t->type != TK_NAME) return unexpected(p, "a tag name");
    static const char *const refused[] = {"block", "extends", "include", "import", "from", "call", "autoescape", NULL};
    for (int i = 0; refused[i]; i++)
        if (is_name(t, refused[i]))
            return fail_at(p, t, LEAN_ERR_UNSUPPORTED, "tag '%s' is not supported", refused[i]);
    tj_node *nd = NULL;
    if (is_name(t, "for")) {
        nd = parse_for(p, t);
    } else if (is_name(t, "if")) {
        nd = parse_if(p, t);
    } else if (is_name(t, "set")) {
        nd = parse_set(p, t);
    } else if (is_name(t, "macro")) {
        nd = parse_macro(p, t);
    } else if (is_name(t, "with")) {
        nd = parse_with(p, t);
    } else if (is_name(t, "filter")) {
        nd = mk(p, TJ_N_FILTERBLOCK, t);
        advance(p);
        if (!nd || !(nd->c = parse_filter(p, NULL, true))) return false;
        if (!parse_block_body(p, "endfilter", p->loops, t, &nd->body)) return false;
    } else if (is_name(t, "generation")) {
        nd = mk(p, TJ_N_BODY, t);
        advance(p);
        static const char *const ends[] = {"endgeneration", NULL};
        if (!nd || !parse_statements(p, ends, true, t, &nd->body)) return false;
    } else if (is_name(t, "print")) {
        advance(p);
        size_t before = out->n;
        while (cur(p)->type != TK_BLOCK_END) {
            if (out->n > before && !expect_op(p, O_COMMA)) return false;
            tj_node *o = mk(p, TJ_N_OUTPUT, cur(p));
            if (!o || !(o->a = parse_expression(p, true)) || !vec_push(p, out, o)) return false;
        }
        return true;
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (p->loops == 0)
            return fail_at(p, t, LEAN_ERR_FORMAT, "'%s' outside a for loop", is_name(t, "break") ? "break" : "continue");
        nd = mk(p, is_name(t, "break") ? TJ_N_BREAK : TJ_N_CONTINUE, t);
        advance(p);
    } else {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(t->s.n > 40 ? 40 : t->s.n), t->s.p);
        return fail_at(p, t, LEAN_ERR_FORMAT, "unknown tag '%s'", name);
    }
    return vec_push(p, out, nd);
}

static bool subparse(parser *p, const char *const *end_names, tj_nodes *out) {
    nodevec body = {0};
    for (;;) {
        tj_tok *t = cur(p);
        if (t->type == TK_EOF) break;
        if (t->type == TK_DATA) {
            tj_node *nd = mk(p, TJ_N_DATA, t);
            if (!nd) return false;
            nd->value = tj_strv(t->s);
            if (!vec_push(p, &body, nd)) return false;
            advance(p);
        } else if (t->type == TK_VAR_BEGIN) {
            advance(p);
            tj_node *nd = mk(p, TJ_N_OUTPUT, t);
            if (!nd || !(nd->a = parse_tuple(p, false, true, NULL, false))) return false;
            if (!vec_push(p, &body, nd) || !expect_type(p, TK_VAR_END, "end of print statement ('}}')")) return false;
        } else if (t->type == TK_BLOCK_BEGIN) {
            advance(p);
            if (end_names) {
                bool end = false;
                for (int i = 0; end_names[i]; i++) end = end || is_name(cur(p), end_names[i]);
                if (end) break;
            }
            if (!parse_statement(p, &body)) return false;
            if (!expect_type(p, TK_BLOCK_END, "end of statement block ('%}')")) return false;
        } else {
            return unexpected(p, NULL);
        }
    }
    *out = vec_done(&body);
    return true;
}

bool tj_parse(tj_ctx *c, const char *src, size_t n, tj_node **out) {
    tj_tok *toks = NULL;
    size_t n_toks = 0;
    if (!tj_lex(c, src, n, &toks, &n_toks)) return false;
    parser p = {c, toks, n_toks, 0, 0, 0, false};
    tj_node *root = mk(&p, TJ_N_BODY, &toks[0]);
    if (!root || !subparse(&p, NULL, &root->body)) return false;
    if (cur(&p)->type != TK_EOF) return unexpected(&p, NULL);
    *out = root;
    return true;
}
