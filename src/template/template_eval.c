/* template_eval.c — rendering a parsed chat template: statements write text, expressions
 * compute Python values with Python's semantics, the way jinja2's generated code does
 * under ImmutableSandboxedEnvironment (default Undefined, autoescape off).
 *
 * What it does not do: builtins (filters, tests, methods, global functions and str/repr
 * formatting live in template_builtins.c), or parsing (template_parse.c).
 *
 * Sections:
 *   1. containers and frames   lists, dicts, variable scopes
 *   2. Python semantics        truth, ==, <, in, arithmetic (int64 with overflow checks)
 *   3. lookup                  getattr / getitem as the sandbox does them, slicing, iteration
 *   4. calls                   function values: builtins, bound methods, macros
 *   5. expressions             one switch over the node kinds
 *   6. statements              output, if, for (the loop object), set, macro, filter, with
 *
 * Scoping (jinja2 >= 2.9): a for loop runs every iteration in a fresh frame (a {% set %}
 * inside does not survive the iteration, hence namespace()); macros, set blocks, filter
 * blocks and with get their own frames; if does not. Lookup walks the frames outward,
 * then the render variables, then the globals (range, namespace, raise_exception, ...).
 */
#include "template/template.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- 1. containers and frames ---- */

tj_list *tj_list_new(tj_ctx *c, uint8_t kind, size_t cap) {
    tj_list *l = tj_alloc(c, sizeof *l);
    if (!l) return NULL;
    memset(l, 0, sizeof *l);
    l->kind = kind;
    if (cap) {
        l->v = tj_alloc_array(c, cap, sizeof(tj_value));
        if (!l->v) return NULL;
        l->cap = cap;
    }
    return l;
}

bool tj_list_push(tj_ctx *c, tj_list *l, tj_value v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        if (cap > (SIZE_MAX / sizeof(tj_value))) return tj_fail(c, 0, 0, LEAN_ERR_NOMEM, "chat template: list too long");
        tj_value *p = tj_realloc(c, l->v, l->n * sizeof(tj_value), cap * sizeof(tj_value));
        if (!p) return false;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return true;
}

tj_dict *tj_dict_new(tj_ctx *c, size_t cap) {
    tj_dict *d = tj_alloc(c, sizeof *d);
    if (!d) return NULL;
    memset(d, 0, sizeof *d);
    if (cap) {
        d->k = tj_alloc_array(c, cap, sizeof(tj_value));
        d->v = tj_alloc_array(c, cap, sizeof(tj_value));
        if (!d->k || !d->v) return NULL;
        d->cap = cap;
    }
    return d;
}

tj_value *tj_dict_get(tj_dict *d, tj_value k) {
    for (size_t i = 0; i < d->n; i++)
        if (tj_py_eq(&d->k[i], &k)) return &d->v[i];
    return NULL;
}

tj_value *tj_dict_get_str(tj_dict *d, tj_str k) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].type == TJ_STR && tj_str_same(d->k[i].u.s, k)) return &d->v[i];
    return NULL;
}

bool tj_dict_set(tj_ctx *c, tj_dict *d, tj_value k, tj_value v) {
    tj_value *slot = tj_dict_get(d, k);
    if (slot) {
        *slot = v;
        return true;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        tj_value *nk = tj_realloc(c, d->k, d->n * sizeof(tj_value), cap * sizeof(tj_value));
        if (!nk) return false;
        d->k = nk;
        tj_value *nv = tj_realloc(c, d->v, d->n * sizeof(tj_value), cap * sizeof(tj_value));
        if (!nv) return false;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return true;
}

tj_frame *tj_frame_new(tj_ctx *c, tj_frame *parent) {
    tj_frame *f = tj_alloc(c, sizeof *f);
    if (!f) return NULL;
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

bool tj_frame_set(tj_ctx *c, tj_frame *f, tj_str name, tj_value v) {
    for (size_t i = 0; i < f->n; i++)
        if (tj_str_same(f->names[i], name)) {
            f->vals[i] = v;
            return true;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        tj_str *nn = tj_realloc(c, f->names, f->n * sizeof(tj_str), cap * sizeof(tj_str));
        if (!nn) return false;
        f->names = nn;
        tj_value *nv = tj_realloc(c, f->vals, f->n * sizeof(tj_value), cap * sizeof(tj_value));
        if (!nv) return false;
        f->vals = nv;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
    return true;
}

static tj_value *frame_lookup(tj_frame *f, tj_str name) {
    for (; f; f = f->parent)
        for (size_t i = f->n; i > 0; i--)
            if (tj_str_same(f->names[i - 1], name)) return &f->vals[i - 1];
    return NULL;
}

/* ---- 2. Python semantics ---- */

/* Errors at a node: a runtime error jinja2 raises too, or a construct lean refuses. */
#define rt_fail(c, at, ...) tj_fail_at((c), (at), LEAN_ERR_ARG, __VA_ARGS__)
#define unsupported(c, at, ...) tj_fail_at((c), (at), LEAN_ERR_UNSUPPORTED, __VA_ARGS__)

static bool step(tj_ctx *c, const tj_node *at) {
    if (++c->steps <= TJ_MAX_STEPS) return true;
    return unsupported(c, at, "the template ran past %llu steps (limit)", (unsigned long long)TJ_MAX_STEPS);
}

const char *tj_type_name(const tj_value *v) {
    switch (v->type) {
    case TJ_UNDEF: return "Undefined";
    case TJ_NONE: return "NoneType";
    case TJ_BOOL: return "bool";
    case TJ_INT: return "int";
    case TJ_FLOAT: return "float";
    case TJ_STR: return v->flags & TJ_F_MARKUP ? "Markup" : "str";
    case TJ_LIST:
        switch (v->u.l->kind) {
        case TJ_L_TUPLE: return "tuple";
        case TJ_L_GEN: return "generator";
        case TJ_L_ITEMS: return "dict_items";
        case TJ_L_KEYS: return "dict_keys";
        case TJ_L_VALUES: return "dict_values";
        case TJ_L_RANGE: return "range";
        default: return "list";
        }
    case TJ_DICT: return "dict";
    case TJ_NS: return "Namespace";
    case TJ_LOOP: return "LoopContext";
    case TJ_FUNC: return v->u.fn->kind == TJ_FN_MACRO ? "Macro" : "function";
    }
    return "object";
}

bool tj_fail_undefined(tj_ctx *c, const tj_node *at, const tj_value *v) {
    tj_str s = v->u.s;
    int n = (int)(s.n > 200 ? 200 : s.n);
    if (v->flags & TJ_F_UNSAFE) return rt_fail(c, at, "access to attribute '%.*s' is unsafe (the sandbox refuses it)", n, s.p);
    if (v->flags & TJ_F_UNDEF_HINT) return rt_fail(c, at, "%.*s", n, s.p);
    if (v->flags & TJ_F_UNDEF_ATTR) return rt_fail(c, at, "the value has no attribute or item '%.*s'", n, s.p);
    return rt_fail(c, at, "'%.*s' is undefined", n, s.p);
}

static tj_value undef_hint(const char *msg) {
    tj_value v = tj_undef(tj_cstr(msg));
    v.flags = TJ_F_UNDEF_HINT;
    return v;
}
static tj_value undef_attr(tj_str name) {
    tj_value v = tj_undef(name);
    v.flags = TJ_F_UNDEF_ATTR;
    return v;
}

bool tj_eval_to_bool(tj_value v) {
    switch (v.type) {
    case TJ_UNDEF: case TJ_NONE: return false;
    case TJ_BOOL: return v.u.b;
    case TJ_INT: return v.u.i != 0;
    case TJ_FLOAT: return v.u.f != 0.0;
    case TJ_STR: return v.u.s.n > 0;
    case TJ_LIST: return v.u.l->kind == TJ_L_GEN || v.u.l->n > 0;
    case TJ_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

static bool is_number(const tj_value *v) { return v->type == TJ_BOOL || v->type == TJ_INT || v->type == TJ_FLOAT; }
static double num_f(const tj_value *v) {
    return v->type == TJ_FLOAT ? v->u.f : v->type == TJ_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const tj_value *v) { return v->type == TJ_INT ? v->u.i : (int64_t)v->u.b; }

/* Python's ==. Values nested deeper than TJ_MAX_CALL_DEPTH (only a loop wrapping a list in
 * itself makes them) compare unequal where Python would raise RecursionError. */
static bool py_eq(const tj_value *a, const tj_value *b, int depth);
bool tj_py_eq(const tj_value *a, const tj_value *b) { return py_eq(a, b, 0); }

static bool py_eq(const tj_value *a, const tj_value *b, int depth) {
    if (depth > TJ_MAX_CALL_DEPTH) return false;
    if (is_number(a) && is_number(b)) {
        if (a->type == TJ_FLOAT || b->type == TJ_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a->type != b->type) return false;
    switch (a->type) {
    case TJ_UNDEF: case TJ_NONE: return true;
    case TJ_STR: return tj_str_same(a->u.s, b->u.s);
    case TJ_LIST: {
        const tj_list *x = a->u.l, *y = b->u.l;
        if (x == y) return true;
        bool seq = (x->kind == TJ_L_LIST || x->kind == TJ_L_TUPLE || x->kind == TJ_L_RANGE);
        if (!seq || x->kind != y->kind || x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++)
            if (!py_eq(&x->v[i], &y->v[i], depth + 1)) return false;
        return true;
    }
    case TJ_DICT: {
        const tj_dict *x = a->u.d, *y = b->u.d;
        if (x == y) return true;
        if (x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++) {
            tj_value *o = tj_dict_get((tj_dict *)y, x->k[i]);
            if (!o || !py_eq(&x->v[i], o, depth + 1)) return false;
        }
        return true;
    }
    case TJ_NS: return a->u.d == b->u.d;
    case TJ_LOOP: return a->u.loop == b->u.loop;
    case TJ_FUNC: return a->u.fn == b->u.fn;
    default: return false;
    }
}

static int str_cmp(tj_str a, tj_str b) {
    size_t n = a.n < b.n ? a.n : b.n;
    int r = n ? memcmp(a.p, b.p, n) : 0; /* UTF-8 byte order is code point order */
    if (r) return r;
    return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
}

bool tj_py_lt(tj_ctx *c, const tj_node *at, const tj_value *a, const tj_value *b, bool *out) {
    if (a->type == TJ_UNDEF) return tj_fail_undefined(c, at, a);
    if (b->type == TJ_UNDEF) return tj_fail_undefined(c, at, b);
    if (is_number(a) && is_number(b)) {
        if (a->type == TJ_FLOAT || b->type == TJ_FLOAT) *out = num_f(a) < num_f(b);
        else *out = num_i(a) < num_i(b);
        return true;
    }
    if (a->type == TJ_STR && b->type == TJ_STR) {
        *out = str_cmp(a->u.s, b->u.s) < 0;
        return true;
    }
    if (a->type == TJ_LIST && b->type == TJ_LIST && a->u.l->kind == b->u.l->kind &&
        (a->u.l->kind == TJ_L_LIST || a->u.l->kind == TJ_L_TUPLE)) {
        const tj_list *x = a->u.l, *y = b->u.l;
        for (size_t i = 0; i < x->n && i < y->n; i++) {
            if (tj_py_eq(&x->v[i], &y->v[i])) continue;
            if (++c->eval_depth > TJ_MAX_EVAL_DEPTH) {
                c->eval_depth--;
                return unsupported(c, at, "values nested deeper than %d levels cannot be compared", TJ_MAX_EVAL_DEPTH);
            }
            bool ok = tj_py_lt(c, at, &x->v[i], &y->v[i], out);
            c->eval_depth--;
            return ok;
        }
        *out = x->n < y->n;
        return true;
    }
    return rt_fail(c, at, "'<' not supported between instances of '%s' and '%s'", tj_type_name(a), tj_type_name(b));
}

static bool find_sub(tj_str hay, tj_str needle) {
    if (needle.n == 0) return true;
    for (size_t i = 0; i + needle.n <= hay.n; i++)
        if (hay.p[i] == needle.p[0] && memcmp(hay.p + i, needle.p, needle.n) == 0) return true;
    return false;
}

static bool hashable_at(tj_ctx *c, const tj_node *at, const tj_value *k, int depth) {
    if (k->type == TJ_DICT || (k->type == TJ_LIST && k->u.l->kind != TJ_L_TUPLE))
        return rt_fail(c, at, "unhashable type: '%s'", tj_type_name(k));
    if (depth > TJ_MAX_CALL_DEPTH) return unsupported(c, at, "a key nested deeper than %d levels", TJ_MAX_CALL_DEPTH);
    if (k->type == TJ_LIST)
        for (size_t i = 0; i < k->u.l->n; i++)
            if (!hashable_at(c, at, &k->u.l->v[i], depth + 1)) return false;
    return true;
}
static bool hashable(tj_ctx *c, const tj_node *at, const tj_value *k) { return hashable_at(c, at, k, 0); }

bool tj_py_in(tj_ctx *c, const tj_node *at, const tj_value *a, const tj_value *b, bool *out) {
    switch (b->type) {
    case TJ_STR:
        if (a->type != TJ_STR) return rt_fail(c, at, "'in <string>' requires string as left operand, not %s", tj_type_name(a));
        *out = find_sub(b->u.s, a->u.s);
        return true;
    case TJ_DICT:
        if (!hashable(c, at, a)) return false;
        *out = tj_dict_get(b->u.d, *a) != NULL;
        return true;
    case TJ_UNDEF:
        *out = false; /* Undefined iterates as empty */
        return true;
    case TJ_LIST: {
        tj_list *l;
        if (!tj_iterate(c, at, b, &l)) return false;
        *out = false;
        for (size_t i = 0; i < l->n && !*out; i++) *out = tj_py_eq(&l->v[i], a);
        return true;
    }
    default:
        return rt_fail(c, at, "argument of type '%s' is not iterable", tj_type_name(b));
    }
}

static bool int_overflow(tj_ctx *c, const tj_node *at) {
    return unsupported(c, at, "integer overflow: lean's integers are 64-bit");
}

/* Python's float // and % (floatobject.c: float_divmod). */
static void float_divmod(double vx, double wx, double *floordiv, double *mod) {
    double m = fmod(vx, wx);
    double div = (vx - m) / wx;
    if (m != 0.0) {
        if ((wx < 0) != (m < 0)) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = copysign(0.0, wx);
    }
    double fd;
    if (div != 0.0) {
        fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
    } else {
        fd = copysign(0.0, vx / wx);
    }
    *floordiv = fd;
    *mod = m;
}

bool tj_html_escape(tj_ctx *c, tj_str s, tj_buf *b) {
    for (size_t i = 0; i < s.n; i++) {
        const char *r = NULL;
        switch (s.p[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        }
        if (r ? !tj_buf_puts(c, b, r) : !tj_buf_putc(c, b, s.p[i])) return false;
    }
    return true;
}

bool tj_arith(tj_ctx *c, const tj_node *at, int op, const tj_value *a, const tj_value *b, tj_value *out) {
    if (a->type == TJ_UNDEF) return tj_fail_undefined(c, at, a);
    if (b->type == TJ_UNDEF) return tj_fail_undefined(c, at, b);
    static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (is_number(a) && is_number(b)) {
        bool fl = a->type == TJ_FLOAT || b->type == TJ_FLOAT;
        if (op == TJ_OP_DIV) {
            if (num_f(b) == 0.0) return rt_fail(c, at, "division by zero");
            *out = tj_float(num_f(a) / num_f(b));
            return true;
        }
        if (fl) {
            double x = num_f(a), y = num_f(b), r = 0, fd, m;
            switch (op) {
            case TJ_OP_ADD: r = x + y; break;
            case TJ_OP_SUB: r = x - y; break;
            case TJ_OP_MUL: r = x * y; break;
            case TJ_OP_FLOORDIV: case TJ_OP_MOD:
                if (y == 0.0) return rt_fail(c, at, "float modulo or floor division by zero");
                float_divmod(x, y, &fd, &m);
                r = op == TJ_OP_MOD ? m : fd;
                break;
            case TJ_OP_POW:
                if (x == 0.0 && y < 0) return rt_fail(c, at, "0.0 cannot be raised to a negative power");
                if (x < 0 && y != floor(y)) return unsupported(c, at, "complex results of ** are not supported");
                r = pow(x, y);
                break;
            }
            *out = tj_float(r);
            return true;
        }
        int64_t x = num_i(a), y = num_i(b), r = 0;
        switch (op) {
        case TJ_OP_ADD: if (__builtin_add_overflow(x, y, &r)) return int_overflow(c, at); break;
        case TJ_OP_SUB: if (__builtin_sub_overflow(x, y, &r)) return int_overflow(c, at); break;
        case TJ_OP_MUL: if (__builtin_mul_overflow(x, y, &r)) return int_overflow(c, at); break;
        case TJ_OP_FLOORDIV: case TJ_OP_MOD: {
            if (y == 0) return rt_fail(c, at, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return int_overflow(c, at);
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                m += y;
                q -= 1;
            }
            r = op == TJ_OP_MOD ? m : q;
            break;
        }
        case TJ_OP_POW: {
            if (y < 0) {
                if (x == 0) return rt_fail(c, at, "0.0 cannot be raised to a negative power");
                *out = tj_float(pow((double)x, (double)y));
                return true;
            }
            int64_t base = x, e = y;
            r = 1;
            while (e > 0) {
                if (e & 1 && __builtin_mul_overflow(r, base, &r)) return int_overflow(c, at);
                e >>= 1;
                if (e && __builtin_mul_overflow(base, base, &base)) return int_overflow(c, at);
            }
            break;
        }
        }
        *out = tj_int(r);
        return true;
    }
    if (op == TJ_OP_ADD && a->type == TJ_STR && b->type == TJ_STR) {
        bool ma = a->flags & TJ_F_MARKUP, mb = b->flags & TJ_F_MARKUP;
        tj_buf buf = {0};
        /* markupsafe: Markup + str escapes the str */
        bool ok = (ma || !mb ? tj_buf_put(c, &buf, a->u.s.p, a->u.s.n) : tj_html_escape(c, a->u.s, &buf)) &&
                  (mb || !ma ? tj_buf_put(c, &buf, b->u.s.p, b->u.s.n) : tj_html_escape(c, b->u.s, &buf));
        if (!ok) return false;
        *out = tj_strv(tj_buf_str(&buf));
        if (ma || mb) out->flags = TJ_F_MARKUP;
        return true;
    }
    if (op == TJ_OP_ADD && a->type == TJ_LIST && b->type == TJ_LIST && a->u.l->kind == b->u.l->kind &&
        (a->u.l->kind == TJ_L_LIST || a->u.l->kind == TJ_L_TUPLE)) {
        tj_list *l = tj_list_new(c, a->u.l->kind, a->u.l->n + b->u.l->n);
        if (!l) return false;
        tj_copy(l->v, a->u.l->v, a->u.l->n * sizeof(tj_value));
        tj_copy(l->v + a->u.l->n, b->u.l->v, b->u.l->n * sizeof(tj_value));
        l->n = a->u.l->n + b->u.l->n;
        *out = tj_listv(l);
        return true;
    }
    if (op == TJ_OP_MUL && ((a->type == TJ_STR || a->type == TJ_LIST) && (b->type == TJ_INT || b->type == TJ_BOOL))) {
        int64_t k = num_i(b);
        if (a->type == TJ_LIST && a->u.l->kind != TJ_L_LIST && a->u.l->kind != TJ_L_TUPLE) goto type_error;
        size_t unit = a->type == TJ_STR ? a->u.s.n : a->u.l->n * sizeof(tj_value);
        if (k < 0) k = 0;
        if (unit && (uint64_t)k > TJ_MAX_BYTES / unit)
            return tj_fail(c, at->line, at->col, LEAN_ERR_NOMEM, "the repetition needs more than %llu MiB (limit)",
                           (unsigned long long)(TJ_MAX_BYTES >> 20));
        if (a->type == TJ_STR) {
            tj_buf buf = {0};
            for (int64_t i = 0; i < k; i++)
                if (!tj_buf_put(c, &buf, a->u.s.p, a->u.s.n)) return false;
            *out = tj_strv(tj_buf_str(&buf));
            out->flags = a->flags & TJ_F_MARKUP;
        } else {
            tj_list *l = tj_list_new(c, a->u.l->kind, (size_t)k * a->u.l->n);
            if (!l) return false;
            for (int64_t i = 0; i < k; i++)
                for (size_t j = 0; j < a->u.l->n; j++) l->v[l->n++] = a->u.l->v[j];
            *out = tj_listv(l);
        }
        return true;
    }
    if (op == TJ_OP_MUL && (b->type == TJ_STR || b->type == TJ_LIST) && (a->type == TJ_INT || a->type == TJ_BOOL))
        return tj_arith(c, at, op, b, a, out);
    if (op == TJ_OP_MOD && a->type == TJ_STR) return tj_py_percent(c, at, a->u.s, b, out);
type_error:
    return rt_fail(c, at, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], tj_type_name(a), tj_type_name(b));
}

/* ---- 3. lookup ---- */

static bool list_index(const tj_list *l, const tj_value *key, tj_value *out) {
    if (key->type != TJ_INT && key->type != TJ_BOOL) return false;
    int64_t i = num_i(key);
    if (i < 0) i += (int64_t)l->n;
    if (i < 0 || (uint64_t)i >= l->n) return false;
    *out = l->v[i];
    return true;
}

/* The byte offset of character index ci in s (ci in [0, len]). */
static size_t char_offset(tj_str s, size_t ci) {
    size_t i = 0;
    for (size_t k = 0; k < ci && i < s.n; k++) tj_utf8_next(s.p, s.n, &i);
    return i;
}

bool tj_getattr(tj_ctx *c, const tj_node *at, const tj_value *obj, tj_str name, tj_value *out) {
    if (obj->type == TJ_UNDEF) return tj_fail_undefined(c, at, obj);
    if (name.n && name.p[0] == '_') { /* the sandbox hides private attributes */
        *out = undef_attr(name);
        return true;
    }
    switch (obj->type) {
    case TJ_DICT: {
        if (tj_method_lookup(c, obj, name, out)) return c->status == LEAN_OK;
        tj_value *v = tj_dict_get_str(obj->u.d, name);
        *out = v ? *v : undef_attr(name);
        return true;
    }
    case TJ_NS: {
        tj_value *v = tj_dict_get_str(obj->u.d, name);
        *out = v ? *v : undef_attr(name);
        return true;
    }
    case TJ_LOOP: {
        const tj_loop *lp = obj->u.loop;
        int64_t len = (int64_t)lp->items->n, i0 = lp->index0;
        if (tj_str_eq(name, "index")) *out = tj_int(i0 + 1);
        else if (tj_str_eq(name, "index0")) *out = tj_int(i0);
        else if (tj_str_eq(name, "revindex")) *out = tj_int(len - i0);
        else if (tj_str_eq(name, "revindex0")) *out = tj_int(len - i0 - 1);
        else if (tj_str_eq(name, "first")) *out = tj_bool(i0 == 0);
        else if (tj_str_eq(name, "last")) *out = tj_bool(i0 == len - 1);
        else if (tj_str_eq(name, "length")) *out = tj_int(len);
        else if (tj_str_eq(name, "depth")) *out = tj_int(lp->depth);
        else if (tj_str_eq(name, "depth0")) *out = tj_int(lp->depth - 1);
        else if (tj_str_eq(name, "previtem"))
            *out = i0 > 0 ? lp->items->v[i0 - 1] : undef_hint("there is no previous item");
        else if (tj_str_eq(name, "nextitem"))
            *out = i0 + 1 < len ? lp->items->v[i0 + 1] : undef_hint("there is no next item");
        else if (!tj_method_lookup(c, obj, name, out))
            *out = undef_attr(name);
        return c->status == LEAN_OK;
    }
    default:
        if (!tj_method_lookup(c, obj, name, out)) *out = undef_attr(name);
        return c->status == LEAN_OK;
    }
}

bool tj_getitem(tj_ctx *c, const tj_node *at, const tj_value *obj, const tj_value *key, tj_value *out) {
    if (obj->type == TJ_UNDEF) return tj_fail_undefined(c, at, obj);
    switch (obj->type) {
    case TJ_DICT: {
        if (key->type == TJ_DICT || (key->type == TJ_LIST && key->u.l->kind != TJ_L_TUPLE)) break;
        tj_value *v = tj_dict_get(obj->u.d, *key);
        if (v) {
            *out = *v;
            return true;
        }
        break;
    }
    case TJ_LIST:
        if (obj->u.l->kind != TJ_L_GEN && obj->u.l->kind != TJ_L_ITEMS && obj->u.l->kind != TJ_L_KEYS &&
            obj->u.l->kind != TJ_L_VALUES && list_index(obj->u.l, key, out))
            return true;
        break;
    case TJ_STR:
        if (key->type == TJ_INT || key->type == TJ_BOOL) {
            int64_t len = (int64_t)tj_utf8_len(obj->u.s), i = num_i(key);
            if (i < 0) i += len;
            if (i >= 0 && i < len) {
                size_t b0 = char_offset(obj->u.s, (size_t)i), b1 = b0;
                tj_utf8_next(obj->u.s.p, obj->u.s.n, &b1);
                *out = tj_strv((tj_str){obj->u.s.p + b0, b1 - b0});
                return true;
            }
        }
        break;
    default:
        break;
    }
    /* obj[key] failed: a string key falls back to the attribute */
    if (key->type == TJ_STR) return tj_getattr(c, at, obj, key->u.s, out);
    if (key->type == TJ_INT) {
        tj_buf b = {0};
        if (!tj_buf_printf(c, &b, "'%s' object has no element %lld", tj_type_name(obj), (long long)key->u.i)) return false;
        *out = tj_undef(tj_buf_str(&b));
        out->flags = TJ_F_UNDEF_HINT;
    } else {
        *out = undef_hint("no such element");
    }
    return true;
}

/* Python's slice.indices(len): clamps start/stop for the step's direction. */
static bool slice_bounds(tj_ctx *c, const tj_node *at, const tj_value *sv, const tj_value *ev, const tj_value *stv,
                         int64_t len, int64_t *start, int64_t *stop, int64_t *stepv) {
    const tj_value *vals[3] = {sv, ev, stv};
    int64_t got[3] = {0, 0, 1};
    bool has[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
        if (!vals[k] || vals[k]->type == TJ_NONE) continue;
        if (vals[k]->type == TJ_UNDEF) return tj_fail_undefined(c, at, vals[k]);
        if (vals[k]->type != TJ_INT && vals[k]->type != TJ_BOOL)
            return rt_fail(c, at, "slice indices must be integers or None");
        got[k] = num_i(vals[k]);
        has[k] = true;
    }
    int64_t st = has[2] ? got[2] : 1;
    if (st == 0) return rt_fail(c, at, "slice step cannot be zero");
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? len - 1 : len;
    int64_t b = has[0] ? got[0] : (st < 0 ? hi : lo);
    int64_t e = has[1] ? got[1] : (st < 0 ? lo : hi);
    if (has[0]) {
        if (b < 0) { b += len; if (b < lo) b = lo; }
        else if (b > hi) b = hi;
    }
    if (has[1]) {
        if (e < 0) { e += len; if (e < lo) e = lo; }
        else if (e > hi) e = hi;
    }
    *start = b;
    *stop = e;
    *stepv = st;
    return true;
}

static bool do_slice(tj_ctx *c, const tj_node *at, const tj_value *obj, const tj_value *sv, const tj_value *ev,
                     const tj_value *stv, tj_value *out) {
    if (obj->type == TJ_UNDEF) return tj_fail_undefined(c, at, obj);
    bool is_str = obj->type == TJ_STR;
    bool is_seq = obj->type == TJ_LIST && (obj->u.l->kind == TJ_L_LIST || obj->u.l->kind == TJ_L_TUPLE ||
                                           obj->u.l->kind == TJ_L_RANGE);
    if (!is_str && !is_seq) {
        *out = undef_hint("the value cannot be sliced");
        return true;
    }
    int64_t len = is_str ? (int64_t)tj_utf8_len(obj->u.s) : (int64_t)obj->u.l->n;
    int64_t b = 0, e = 0, st = 1;
    if (!slice_bounds(c, at, sv, ev, stv, len, &b, &e, &st)) return false;
    if (is_str) {
        if (st == 1) { /* the common case: one byte range */
            if (e < b) e = b;
            size_t b0 = char_offset(obj->u.s, (size_t)b);
            size_t b1 = b0 + char_offset((tj_str){obj->u.s.p + b0, obj->u.s.n - b0}, (size_t)(e - b));
            *out = tj_strv((tj_str){obj->u.s.p + b0, b1 - b0});
        } else {
            /* character offsets, then pick */
            size_t *offs = tj_alloc_array(c, (size_t)len + 1, sizeof(size_t));
            if (!offs) return false;
            size_t i = 0;
            for (int64_t k = 0; k < len; k++) {
                offs[k] = i;
                tj_utf8_next(obj->u.s.p, obj->u.s.n, &i);
            }
            offs[len] = obj->u.s.n;
            tj_buf buf = {0};
            for (int64_t k = b; st > 0 ? k < e : k > e; k += st)
                if (!tj_buf_put(c, &buf, obj->u.s.p + offs[k], offs[k + 1] - offs[k])) return false;
            *out = tj_strv(tj_buf_str(&buf));
        }
        out->flags = obj->flags & TJ_F_MARKUP;
        return true;
    }
    const tj_list *src = obj->u.l;
    tj_list *l = tj_list_new(c, src->kind == TJ_L_TUPLE ? TJ_L_TUPLE : TJ_L_LIST, 0);
    if (!l) return false;
    for (int64_t k = b; st > 0 ? k < e : k > e; k += st)
        if (!tj_list_push(c, l, src->v[k])) return false;
    *out = tj_listv(l);
    return true;
}

bool tj_iterate(tj_ctx *c, const tj_node *at, const tj_value *v, tj_list **out) {
    switch (v->type) {
    case TJ_UNDEF:
        return (*out = tj_list_new(c, TJ_L_LIST, 0)) != NULL;
    case TJ_LIST:
        if (v->u.l->kind == TJ_L_GEN) {
            /* a generator runs once: hand its items over and leave it empty */
            tj_list *l = tj_list_new(c, TJ_L_LIST, 0);
            if (!l) return false;
            l->v = v->u.l->v;
            l->n = l->cap = v->u.l->n;
            v->u.l->v = NULL;
            v->u.l->n = v->u.l->cap = 0;
            *out = l;
            return true;
        }
        *out = v->u.l;
        return true;
    case TJ_DICT: {
        tj_list *l = tj_list_new(c, TJ_L_LIST, v->u.d->n);
        if (!l) return false;
        tj_copy(l->v, v->u.d->k, v->u.d->n * sizeof(tj_value));
        l->n = v->u.d->n;
        *out = l;
        return true;
    }
    case TJ_STR: {
        tj_list *l = tj_list_new(c, TJ_L_LIST, 0);
        if (!l) return false;
        for (size_t i = 0; i < v->u.s.n;) {
            size_t j = i;
            tj_utf8_next(v->u.s.p, v->u.s.n, &j);
            tj_value ch = tj_strv((tj_str){v->u.s.p + i, j - i});
            ch.flags = v->flags & TJ_F_MARKUP;
            if (!tj_list_push(c, l, ch)) return false;
            i = j;
        }
        *out = l;
        return true;
    }
    default:
        return rt_fail(c, at, "'%s' object is not iterable", tj_type_name(v));
    }
}

/* ---- 4. calls ---- */

static int exec_body(tj_ctx *c, const tj_nodes *body, tj_frame *f, tj_buf *out);
static bool eval(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_value *out);
enum { EX_OK, EX_BREAK, EX_CONTINUE, EX_ERR };

static bool call_macro(tj_ctx *c, const tj_node *at, const tj_func *fn, const tj_value *args, size_t n_args,
                       const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    const tj_node *m = fn->macro;
    int nm = (int)(m->name.n > 60 ? 60 : m->name.n);
    if (n_args > m->args.n)
        return rt_fail(c, at, "macro '%.*s' takes not more than %zu argument(s)", nm, m->name.p, m->args.n);
    for (size_t k = 0; k < n_kw; k++) {
        bool found = false;
        for (size_t i = 0; i < m->args.n && !found; i++) {
            if (!tj_str_same(m->args.v[i]->name, kwnames[k])) continue;
            if (i < n_args)
                return rt_fail(c, at, "macro '%.*s' got multiple values for argument '%.*s'", nm, m->name.p,
                               (int)kwnames[k].n, kwnames[k].p);
            found = true;
        }
        if (!found)
            return rt_fail(c, at, "macro '%.*s' takes no keyword argument '%.*s'", nm, m->name.p, (int)kwnames[k].n,
                           kwnames[k].p);
    }
    if (c->call_depth >= TJ_MAX_MACRO_DEPTH)
        return unsupported(c, at, "macro calls nested deeper than %d levels (limit)", TJ_MAX_MACRO_DEPTH);
    tj_frame *f = tj_frame_new(c, fn->closure);
    if (!f) return false;
    for (size_t i = 0; i < m->args.n; i++) {
        const tj_node *param = m->args.v[i];
        tj_value v;
        const tj_value *kv = NULL;
        for (size_t k = 0; k < n_kw; k++)
            if (tj_str_same(param->name, kwnames[k])) kv = &kwvals[k];
        if (i < n_args) v = args[i];
        else if (kv) v = *kv;
        else if (param->a) {
            if (!eval(c, param->a, f, &v)) return false;
        } else {
            v = undef_hint("a macro parameter was not provided");
        }
        if (!tj_frame_set(c, f, param->name, v)) return false;
    }
    tj_buf buf = {0};
    c->call_depth++;
    int r = exec_body(c, &m->body, f, &buf);
    c->call_depth--;
    if (r == EX_ERR) return false;
    *out = tj_strv(tj_buf_str(&buf));
    return true;
}

bool tj_call_value(tj_ctx *c, const tj_node *at, const tj_value *fn, const tj_value *args, size_t n_args,
                   const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    if (!step(c, at)) return false;
    if (fn->type == TJ_UNDEF) return tj_fail_undefined(c, at, fn);
    if (fn->type != TJ_FUNC) return rt_fail(c, at, "'%s' object is not callable", tj_type_name(fn));
    const tj_func *f = fn->u.fn;
    switch (f->kind) {
    case TJ_FN_MACRO: return call_macro(c, at, f, args, n_args, kwnames, kwvals, n_kw, out);
    case TJ_FN_GLOBAL: return tj_call_global(c, at, f->id, args, n_args, kwnames, kwvals, n_kw, out);
    default: return tj_call_method(c, at, f, args, n_args, kwnames, kwvals, n_kw, out);
    }
}

/* ---- 5. expressions ---- */

typedef struct evargs {
    tj_value *args, *kwvals;
    size_t n_args, n_kw;
} evargs;

static bool eval_args(tj_ctx *c, const tj_node *nd, tj_frame *f, evargs *ea) {
    ea->n_args = nd->args.n;
    ea->n_kw = nd->kwvals.n;
    ea->args = ea->kwvals = NULL;
    if (ea->n_args && !(ea->args = tj_alloc_array(c, ea->n_args, sizeof(tj_value)))) return false;
    if (ea->n_kw && !(ea->kwvals = tj_alloc_array(c, ea->n_kw, sizeof(tj_value)))) return false;
    for (size_t i = 0; i < ea->n_args; i++)
        if (!eval(c, nd->args.v[i], f, &ea->args[i])) return false;
    for (size_t i = 0; i < ea->n_kw; i++)
        if (!eval(c, nd->kwvals.v[i], f, &ea->kwvals[i])) return false;
    return true;
}

static bool missing_builtin(tj_ctx *c, const tj_node *nd, bool filter) {
    bool known = false;
    if (filter) tj_filter_id(nd->name, &known);
    else tj_test_id(nd->name, &known);
    int n = (int)(nd->name.n > 60 ? 60 : nd->name.n);
    if (known) return unsupported(c, nd, "%s '%.*s' is not supported", filter ? "filter" : "test", n, nd->name.p);
    return tj_fail(c, nd->line, nd->col, LEAN_ERR_FORMAT, "no %s named '%.*s'", filter ? "filter" : "test", n, nd->name.p);
}

static bool eval_filter(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_value *out) {
    tj_value v;
    if (nd->a) {
        if (!eval(c, nd->a, f, &v)) return false;
    } else {
        v = *c->block_input;
    }
    if (nd->builtin < 0) return missing_builtin(c, nd, true);
    evargs ea;
    if (!eval_args(c, nd, f, &ea) || !step(c, nd)) return false;
    return tj_call_filter(c, nd, nd->builtin, &v, ea.args, ea.n_args, nd->kwnames, ea.kwvals, ea.n_kw, out);
}

static bool eval_compare(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_value *out) {
    tj_value left;
    if (!eval(c, nd->a, f, &left)) return false;
    for (size_t i = 0; i < nd->args.n; i++) {
        const tj_node *o = nd->args.v[i];
        tj_value right;
        if (!eval(c, o->a, f, &right)) return false;
        bool r = false;
        switch (o->op) {
        case TJ_OP_EQ: r = tj_py_eq(&left, &right); break;
        case TJ_OP_NE: r = !tj_py_eq(&left, &right); break;
        case TJ_OP_LT: if (!tj_py_lt(c, o, &left, &right, &r)) return false; break;
        case TJ_OP_GT: if (!tj_py_lt(c, o, &right, &left, &r)) return false; break;
        case TJ_OP_LTEQ:
            if (!tj_py_lt(c, o, &right, &left, &r)) return false;
            r = !r;
            break;
        case TJ_OP_GTEQ:
            if (!tj_py_lt(c, o, &left, &right, &r)) return false;
            r = !r;
            break;
        case TJ_OP_IN: if (!tj_py_in(c, o, &left, &right, &r)) return false; break;
        case TJ_OP_NOTIN:
            if (!tj_py_in(c, o, &left, &right, &r)) return false;
            r = !r;
            break;
        }
        if (!r) {
            *out = tj_bool(false);
            return true;
        }
        left = right;
    }
    *out = tj_bool(true);
    return true;
}

static bool eval_node(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_value *out) {
    switch (nd->kind) {
    case TJ_N_CONST:
        *out = nd->value;
        return true;
    case TJ_N_NAME: {
        tj_value *v = frame_lookup(f, nd->name);
        if (v) {
            *out = *v;
            return true;
        }
        int id = tj_global_id(nd->name);
        if (id >= 0) {
            tj_func *fn = tj_alloc(c, sizeof *fn);
            if (!fn) return false;
            memset(fn, 0, sizeof *fn);
            fn->kind = TJ_FN_GLOBAL;
            fn->id = id;
            fn->name = nd->name;
            out->type = TJ_FUNC;
            out->flags = 0;
            out->u.fn = fn;
            return true;
        }
        *out = tj_undef(nd->name);
        return true;
    }
    case TJ_N_ATTR: {
        tj_value obj;
        return eval(c, nd->a, f, &obj) && tj_getattr(c, nd, &obj, nd->name, out);
    }
    case TJ_N_ITEM: {
        tj_value obj, key;
        return eval(c, nd->a, f, &obj) && eval(c, nd->b, f, &key) && tj_getitem(c, nd, &obj, &key, out);
    }
    case TJ_N_SLICE: {
        tj_value obj, v[3];
        const tj_node *parts[3] = {nd->b, nd->c, nd->d};
        if (!eval(c, nd->a, f, &obj)) return false;
        for (int k = 0; k < 3; k++)
            if (parts[k] && !eval(c, parts[k], f, &v[k])) return false;
        return do_slice(c, nd, &obj, nd->b ? &v[0] : NULL, nd->c ? &v[1] : NULL, nd->d ? &v[2] : NULL, out);
    }
    case TJ_N_CALL: {
        tj_value fn;
        evargs ea;
        if (!eval(c, nd->a, f, &fn) || !eval_args(c, nd, f, &ea)) return false;
        return tj_call_value(c, nd, &fn, ea.args, ea.n_args, nd->kwnames, ea.kwvals, ea.n_kw, out);
    }
    case TJ_N_FILTER:
        return eval_filter(c, nd, f, out);
    case TJ_N_TEST: {
        tj_value v;
        evargs ea;
        bool r;
        if (!eval(c, nd->a, f, &v)) return false;
        if (nd->builtin < 0) return missing_builtin(c, nd, false);
        if (!eval_args(c, nd, f, &ea) ||
            !tj_call_test(c, nd, nd->builtin, &v, ea.args, ea.n_args, nd->kwnames, ea.kwvals, ea.n_kw, &r))
            return false;
        *out = tj_bool(r);
        return true;
    }
    case TJ_N_NEG: case TJ_N_POS: {
        tj_value v;
        if (!eval(c, nd->a, f, &v)) return false;
        if (v.type == TJ_UNDEF) return tj_fail_undefined(c, nd, &v);
        if (!is_number(&v)) return rt_fail(c, nd, "bad operand type for unary %s: '%s'", nd->kind == TJ_N_NEG ? "-" : "+", tj_type_name(&v));
        if (v.type == TJ_FLOAT) *out = tj_float(nd->kind == TJ_N_NEG ? -v.u.f : v.u.f);
        else if (nd->kind == TJ_N_NEG && num_i(&v) == INT64_MIN) return int_overflow(c, nd);
        else *out = tj_int(nd->kind == TJ_N_NEG ? -num_i(&v) : num_i(&v));
        return true;
    }
    case TJ_N_NOT: {
        tj_value v;
        if (!eval(c, nd->a, f, &v)) return false;
        *out = tj_bool(!tj_eval_to_bool(v));
        return true;
    }
    case TJ_N_AND: case TJ_N_OR: {
        tj_value a;
        if (!eval(c, nd->a, f, &a)) return false;
        bool t = tj_eval_to_bool(a);
        if (nd->kind == TJ_N_AND ? !t : t) {
            *out = a;
            return true;
        }
        return eval(c, nd->b, f, out);
    }
    case TJ_N_BIN: {
        tj_value a, b;
        return eval(c, nd->a, f, &a) && eval(c, nd->b, f, &b) && tj_arith(c, nd, nd->op, &a, &b, out);
    }
    case TJ_N_CONCAT: {
        tj_buf buf = {0};
        for (size_t i = 0; i < nd->args.n; i++) {
            tj_value v;
            if (!eval(c, nd->args.v[i], f, &v) || !tj_py_str(c, nd, &v, &buf)) return false;
        }
        *out = tj_strv(tj_buf_str(&buf));
        return true;
    }
    case TJ_N_COMPARE:
        return eval_compare(c, nd, f, out);
    case TJ_N_COND: {
        tj_value t;
        if (!eval(c, nd->a, f, &t)) return false;
        if (tj_eval_to_bool(t)) return eval(c, nd->b, f, out);
        if (nd->c) return eval(c, nd->c, f, out);
        *out = undef_hint("the inline if-expression evaluated to false and no else section was defined");
        return true;
    }
    case TJ_N_LIST: case TJ_N_TUPLE: {
        tj_list *l = tj_list_new(c, nd->kind == TJ_N_LIST ? TJ_L_LIST : TJ_L_TUPLE, nd->args.n);
        if (!l) return false;
        for (size_t i = 0; i < nd->args.n; i++)
            if (!eval(c, nd->args.v[i], f, &l->v[l->n++])) return false;
        *out = tj_listv(l);
        return true;
    }
    case TJ_N_DICT: {
        tj_dict *d = tj_dict_new(c, nd->args.n);
        if (!d) return false;
        for (size_t i = 0; i < nd->args.n; i++) {
            tj_value k, v;
            if (!eval(c, nd->args.v[i], f, &k) || !hashable(c, nd->args.v[i], &k) ||
                !eval(c, nd->kwvals.v[i], f, &v) || !tj_dict_set(c, d, k, v))
                return false;
        }
        *out = tj_dictv(d);
        return true;
    }
    default:
        return unsupported(c, nd, "this expression cannot be evaluated");
    }
}

static bool eval(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_value *out) {
    if (++c->eval_depth > TJ_MAX_EVAL_DEPTH) {
        c->eval_depth--;
        return unsupported(c, nd, "the template nests deeper than %d levels while rendering (limit)", TJ_MAX_EVAL_DEPTH);
    }
    bool ok = eval_node(c, nd, f, out);
    c->eval_depth--;
    return ok;
}

/* ---- 6. statements ---- */

static bool assign(tj_ctx *c, const tj_node *target, tj_frame *f, const tj_value *v) {
    if (target->kind == TJ_N_NAME) return tj_frame_set(c, f, target->name, *v);
    if (target->kind == TJ_N_NSREF) {
        tj_value *ns = frame_lookup(f, target->name);
        if (!ns || ns->type != TJ_NS) return rt_fail(c, target, "cannot assign attribute on non-namespace object");
        bool ok = true;
        tj_str key = tj_strdup(c, target->kwnames[0].p, target->kwnames[0].n, &ok);
        return ok && tj_dict_set(c, ns->u.d, tj_strv(key), *v);
    }
    /* a tuple of names: unpack */
    tj_list *items = NULL;
    if (v->type == TJ_UNDEF) return tj_fail_undefined(c, target, v);
    if (!tj_iterate(c, target, v, &items)) return false;
    if (items->n != target->args.n)
        return rt_fail(c, target, items->n > target->args.n ? "too many values to unpack (expected %zu)"
                                                            : "not enough values to unpack (expected %zu)",
                       target->args.n);
    for (size_t i = 0; i < items->n; i++)
        if (!assign(c, target->args.v[i], f, &items->v[i])) return false;
    return true;
}

static bool run_loop(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_list *items, tj_buf *out, bool *completed);

static int exec_for(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_buf *out) {
    tj_value seq;
    tj_list *items = NULL;
    if (!eval(c, nd->b, f, &seq) || !tj_iterate(c, nd->b, &seq, &items)) return EX_ERR;
    if (nd->c) { /* {% for x in xs if cond %}: the loop sees only what passes */
        tj_list *kept = tj_list_new(c, TJ_L_LIST, 0);
        if (!kept) return EX_ERR;
        for (size_t i = 0; i < items->n; i++) {
            tj_frame *tf = tj_frame_new(c, f);
            tj_value cond;
            if (!tf || !assign(c, nd->a, tf, &items->v[i]) || !eval(c, nd->c, tf, &cond)) return EX_ERR;
            if (tj_eval_to_bool(cond) && !tj_list_push(c, kept, items->v[i])) return EX_ERR;
        }
        items = kept;
    }
    /* jinja2 runs the else block unless some iteration ran its body to the end (a break
     * or continue in every iteration counts as none) */
    bool completed = false;
    if (items->n > 0 && !run_loop(c, nd, f, items, out, &completed)) return EX_ERR;
    if (completed || !nd->orelse.n) return EX_OK;
    tj_frame *ef = tj_frame_new(c, f);
    return ef ? exec_body(c, &nd->orelse, ef, out) : EX_ERR;
}

static bool run_loop(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_list *items, tj_buf *out, bool *completed) {
    tj_loop *lp = tj_alloc(c, sizeof *lp);
    if (!lp) return false;
    memset(lp, 0, sizeof *lp);
    lp->items = items;
    lp->depth = 1;
    tj_value loopv = {TJ_LOOP, 0, {0}};
    loopv.u.loop = lp;
    tj_frame *lf = NULL;
    for (size_t i = 0; i < items->n; i++) {
        if (!step(c, nd)) return false;
        lp->index0 = (int64_t)i;
        /* a fresh scope per iteration; reused when no macro captured the last one */
        if (!lf || lf->captured) {
            if (!(lf = tj_frame_new(c, f))) return false;
        } else {
            lf->n = 0;
        }
        if (!tj_frame_set(c, lf, tj_cstr("loop"), loopv) || !assign(c, nd->a, lf, &items->v[i])) return false;
        int r = exec_body(c, &nd->body, lf, out);
        if (r == EX_ERR) return false;
        if (r == EX_OK) *completed = true;
        if (r == EX_BREAK) break;
    }
    return true;
}

static bool render_block(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_value *out) {
    tj_frame *bf = tj_frame_new(c, f);
    tj_buf buf = {0};
    if (!bf || exec_body(c, &nd->body, bf, &buf) == EX_ERR) return false;
    tj_value body = tj_strv(tj_buf_str(&buf));
    if (!nd->c) {
        *out = body;
        return true;
    }
    tj_value *saved = c->block_input;
    c->block_input = &body;
    bool ok = eval(c, nd->c, f, out);
    c->block_input = saved;
    return ok;
}

static int exec_node(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_buf *out) {
    switch (nd->kind) {
    case TJ_N_DATA:
        return tj_buf_put(c, out, nd->value.u.s.p, nd->value.u.s.n) ? EX_OK : EX_ERR;
    case TJ_N_OUTPUT: {
        tj_value v;
        return eval(c, nd->a, f, &v) && tj_py_str(c, nd, &v, out) ? EX_OK : EX_ERR;
    }
    case TJ_N_IF: {
        tj_value t;
        if (!eval(c, nd->a, f, &t)) return EX_ERR;
        return exec_body(c, tj_eval_to_bool(t) ? &nd->body : &nd->orelse, f, out);
    }
    case TJ_N_FOR:
        return exec_for(c, nd, f, out);
    case TJ_N_SET: {
        tj_value v;
        return eval(c, nd->b, f, &v) && assign(c, nd->a, f, &v) ? EX_OK : EX_ERR;
    }
    case TJ_N_SETBLOCK: {
        tj_value v;
        return render_block(c, nd, f, &v) && assign(c, nd->a, f, &v) ? EX_OK : EX_ERR;
    }
    case TJ_N_FILTERBLOCK: {
        tj_value v;
        return render_block(c, nd, f, &v) && tj_py_str(c, nd, &v, out) ? EX_OK : EX_ERR;
    }
    case TJ_N_MACRO: {
        tj_func *fn = tj_alloc(c, sizeof *fn);
        if (!fn) return EX_ERR;
        memset(fn, 0, sizeof *fn);
        fn->kind = TJ_FN_MACRO;
        fn->name = nd->name;
        fn->macro = nd;
        fn->closure = f;
        f->captured = true; /* see exec_for: this scope must outlive its iteration */
        tj_value v = {TJ_FUNC, 0, {0}};
        v.u.fn = fn;
        return tj_frame_set(c, f, nd->name, v) ? EX_OK : EX_ERR;
    }
    case TJ_N_WITH: {
        tj_frame *wf = tj_frame_new(c, f);
        if (!wf) return EX_ERR;
        for (size_t i = 0; i < nd->args.n; i++) {
            tj_value v;
            if (!eval(c, nd->kwvals.v[i], f, &v) || !tj_frame_set(c, wf, nd->args.v[i]->name, v)) return EX_ERR;
        }
        return exec_body(c, &nd->body, wf, out);
    }
    case TJ_N_BODY:
        return exec_body(c, &nd->body, f, out);
    case TJ_N_BREAK:
        return EX_BREAK;
    case TJ_N_CONTINUE:
        return EX_CONTINUE;
    default:
        unsupported(c, nd, "this statement cannot be executed");
        return EX_ERR;
    }
}

static int exec_stmt(tj_ctx *c, const tj_node *nd, tj_frame *f, tj_buf *out) {
    if (!step(c, nd)) return EX_ERR;
    if (++c->eval_depth > TJ_MAX_EVAL_DEPTH) {
        c->eval_depth--;
        unsupported(c, nd, "the template nests deeper than %d levels while rendering (limit)", TJ_MAX_EVAL_DEPTH);
        return EX_ERR;
    }
    int r = exec_node(c, nd, f, out);
    c->eval_depth--;
    return r;
}

static int exec_body(tj_ctx *c, const tj_nodes *body, tj_frame *f, tj_buf *out) {
    for (size_t i = 0; i < body->n; i++) {
        int r = exec_stmt(c, body->v[i], f, out);
        if (r != EX_OK) return r;
    }
    return EX_OK;
}

bool tj_render(tj_ctx *c, const tj_node *root, tj_frame *globals, tj_buf *out) {
    tj_frame *top = tj_frame_new(c, globals);
    if (!top) return false;
    int r = exec_body(c, &root->body, top, out);
    return r != EX_ERR && c->status == LEAN_OK;
}
