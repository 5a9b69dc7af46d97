/* template_builtins.c — jinja2's filters and tests and the template globals, each following
 * the jinja2 3.1 (filters.py, tests.py, defaults.py) or transformers function of its name;
 * where lean differs the comment says so.
 *
 * What it does not do: the filters refused at parse time (filesizeformat, groupby, pprint,
 * random, striptags, urlencode, urlize, wordwrap, xmlattr) and the globals lipsum, cycler,
 * joiner; Python's str semantics, formatting and methods (template_text.c).
 *
 * Sections:
 *   1. names     the filter / test / global tables (ids resolved when a template is parsed)
 *   2. filters   select/reject/map/tojson helpers, then one switch over the filter ids
 *   3. tests
 *   4. globals   range, dict, namespace, raise_exception, strftime_now
 *
 * Filters that return generators in jinja2 (select, reject, map, unique, batch, slice,
 * items, reverse) return a TJ_L_GEN list: truthy, without len(), consumed by one iteration.
 */
#include "template/template.h"
#include "text/unicode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RT(...) tj_fail_at(c, at, LEAN_ERR_ARG, __VA_ARGS__)
#define UNSUP(...) tj_fail_at(c, at, LEAN_ERR_UNSUPPORTED, __VA_ARGS__)

/* ---- 1. names ---- */

enum {
    F_ABS, F_ATTR, F_BATCH, F_CAPITALIZE, F_CENTER, F_COUNT, F_DEFAULT, F_DICTSORT, F_ESCAPE,
    F_FIRST, F_FLOAT, F_FORCEESCAPE, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LIST,
    F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE,
    F_SELECT, F_SELECTATTR, F_SLICE, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM,
    F_TRUNCATE, F_UNIQUE, F_UPPER, F_WORDCOUNT,
};
/* An id's first entry is its name in error messages; aliases follow it. */
typedef struct named { const char *name; int id; } named;
static const named filters[] = {
    {"abs", F_ABS}, {"attr", F_ATTR}, {"batch", F_BATCH}, {"capitalize", F_CAPITALIZE},
    {"center", F_CENTER}, {"default", F_DEFAULT}, {"d", F_DEFAULT},
    {"dictsort", F_DICTSORT}, {"escape", F_ESCAPE}, {"e", F_ESCAPE}, {"first", F_FIRST},
    {"float", F_FLOAT}, {"forceescape", F_FORCEESCAPE}, {"format", F_FORMAT}, {"indent", F_INDENT},
    {"int", F_INT}, {"items", F_ITEMS}, {"join", F_JOIN}, {"last", F_LAST}, {"length", F_COUNT}, {"count", F_COUNT},
    {"list", F_LIST}, {"lower", F_LOWER}, {"map", F_MAP}, {"max", F_MAX}, {"min", F_MIN},
    {"reject", F_REJECT}, {"rejectattr", F_REJECTATTR}, {"replace", F_REPLACE},
    {"reverse", F_REVERSE}, {"round", F_ROUND}, {"safe", F_SAFE}, {"select", F_SELECT},
    {"selectattr", F_SELECTATTR}, {"slice", F_SLICE}, {"sort", F_SORT}, {"string", F_STRING},
    {"sum", F_SUM}, {"title", F_TITLE}, {"tojson", F_TOJSON}, {"trim", F_TRIM},
    {"truncate", F_TRUNCATE}, {"unique", F_UNIQUE}, {"upper", F_UPPER}, {"wordcount", F_WORDCOUNT},
};
/* jinja2's other filters: known (so "not supported" rather than "no filter"), refused. */
static const char *const filters_refused[] = {
    "filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode", "urlize", "wordwrap", "xmlattr",
};

enum {
    T_ODD, T_EVEN, T_DIVISIBLEBY, T_DEFINED, T_UNDEFINED, T_FILTER, T_TEST, T_NONE, T_BOOLEAN,
    T_FALSE, T_TRUE, T_INTEGER, T_FLOAT, T_LOWER, T_UPPER, T_STRING, T_MAPPING, T_NUMBER,
    T_SEQUENCE, T_ITERABLE, T_CALLABLE, T_SAMEAS, T_ESCAPED, T_IN, T_EQ, T_NE, T_GT, T_GE, T_LT, T_LE,
};
static const named tests[] = {
    {"odd", T_ODD}, {"even", T_EVEN}, {"divisibleby", T_DIVISIBLEBY}, {"defined", T_DEFINED},
    {"undefined", T_UNDEFINED}, {"filter", T_FILTER}, {"test", T_TEST}, {"none", T_NONE},
    {"boolean", T_BOOLEAN}, {"false", T_FALSE}, {"true", T_TRUE}, {"integer", T_INTEGER},
    {"float", T_FLOAT}, {"lower", T_LOWER}, {"upper", T_UPPER}, {"string", T_STRING},
    {"mapping", T_MAPPING}, {"number", T_NUMBER}, {"sequence", T_SEQUENCE}, {"iterable", T_ITERABLE},
    {"callable", T_CALLABLE}, {"sameas", T_SAMEAS}, {"escaped", T_ESCAPED}, {"in", T_IN},
    {"eq", T_EQ}, {"==", T_EQ}, {"equalto", T_EQ}, {"ne", T_NE}, {"!=", T_NE}, {"gt", T_GT},
    {">", T_GT}, {"greaterthan", T_GT}, {"ge", T_GE}, {">=", T_GE}, {"lt", T_LT}, {"<", T_LT},
    {"lessthan", T_LT}, {"le", T_LE}, {"<=", T_LE},
};

enum { G_RANGE, G_DICT, G_NAMESPACE, G_RAISE, G_STRFTIME, G_LIPSUM, G_CYCLER, G_JOINER };
static const named globals[] = {
    {"range", G_RANGE}, {"dict", G_DICT}, {"namespace", G_NAMESPACE}, {"raise_exception", G_RAISE},
    {"strftime_now", G_STRFTIME}, {"lipsum", G_LIPSUM}, {"cycler", G_CYCLER}, {"joiner", G_JOINER},
};

static int lookup(const named *t, size_t n, tj_str name) {
    for (size_t i = 0; i < n; i++)
        if (tj_str_eq(name, t[i].name)) return t[i].id;
    return -1;
}

int tj_filter_id(tj_str name, bool *known) {
    int id = lookup(filters, sizeof filters / sizeof filters[0], name);
    if (known) {
        *known = id >= 0;
        for (size_t i = 0; i < sizeof filters_refused / sizeof filters_refused[0]; i++)
            if (tj_str_eq(name, filters_refused[i])) *known = true;
    }
    return id;
}

int tj_test_id(tj_str name, bool *known) {
    int id = lookup(tests, sizeof tests / sizeof tests[0], name);
    if (known) *known = id >= 0;
    return id;
}

int tj_global_id(tj_str name) { return lookup(globals, sizeof globals / sizeof globals[0], name); }

/* An id's name for error messages (ids come from the tables, so one is always found). */
static tj_str name_of(const named *t, size_t n, int id) {
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id) return tj_cstr(t[i].name);
    return tj_cstr("?");
}

static tj_value markup(tj_str s) {
    tj_value v = tj_strv(s);
    v.flags = TJ_F_MARKUP;
    return v;
}

/* ---- 2. filters ---- */

static tj_value gen_of(tj_list *l) {
    l->kind = TJ_L_GEN;
    return tj_listv(l);
}

static bool len_of(tj_ctx *c, const tj_node *at, const tj_value *v, int64_t *out) {
    switch (v->type) {
    case TJ_UNDEF: *out = 0; return true;
    case TJ_STR: *out = (int64_t)tj_utf8_len(v->u.s); return true;
    case TJ_DICT: *out = (int64_t)v->u.d->n; return true;
    case TJ_LIST:
        if (v->u.l->kind == TJ_L_GEN) break;
        *out = (int64_t)v->u.l->n;
        return true;
    default: break;
    }
    return RT("object of type '%s' has no len()", tj_type_name(v));
}

/* jinja2's make_attrgetter: "a.b.0" looked up item by item (digits as integers). */
static bool attr_path(tj_ctx *c, const tj_node *at, const tj_value *item, const tj_value *attr, tj_value *out) {
    *out = *item;
    if (!attr || attr->type == TJ_NONE) return true;
    if (attr->type != TJ_STR) return tj_getitem(c, at, out, attr, out);
    tj_str s = attr->u.s;
    for (size_t i = 0; i <= s.n;) {
        size_t e = i;
        while (e < s.n && s.p[e] != '.') e++;
        tj_str part = {s.p + i, e - i};
        bool digits = part.n > 0;
        int64_t num = 0;
        for (size_t k = 0; k < part.n; k++) {
            if (part.p[k] < '0' || part.p[k] > '9') digits = false;
            else if (num < INT64_MAX / 10) num = num * 10 + (part.p[k] - '0');
        }
        tj_value key = digits ? tj_int(num) : tj_strv(part);
        tj_value next;
        if (!tj_getitem(c, at, out, &key, &next)) return false;
        *out = next;
        i = e + 1;
    }
    return true;
}

static bool lower_if_str(tj_ctx *c, tj_value *v) {
    if (v->type != TJ_STR) return true;
    tj_str s;
    if (!tj_map_case(c, v->u.s, TJ_CASE_LOWER, &s)) return false;
    v->u.s = s;
    return true;
}

static bool iter_list(tj_ctx *c, const tj_node *at, const tj_value *v, tj_list **out) { return tj_iterate(c, at, v, out); }

/* select / reject / selectattr / rejectattr */
static bool select_reject(tj_ctx *c, const tj_node *at, const tj_value *v, const tj_value *args, size_t n_args,
                          const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, bool attr, bool reject, tj_value *out) {
    tj_list *res = tj_list_new(c, TJ_L_LIST, 0);
    if (!res) return false;
    if (!tj_eval_to_bool(*v)) {
        *out = gen_of(res);
        return true;
    }
    size_t off = attr ? 1 : 0;
    if (attr && n_args < 1) return RT("Missing parameter for attribute name");
    int test = -1;
    if (n_args > off) {
        tj_str name;
        if (!tj_want_str(c, at, &args[off], "the test name", &name)) return false;
        bool known;
        test = tj_test_id(name, &known);
        if (test < 0) return known ? UNSUP("test '%.*s' is not supported", (int)name.n, name.p)
                                   : tj_fail_at(c, at, LEAN_ERR_FORMAT, "no test named '%.*s'", (int)name.n, name.p);
    }
    tj_list *items = NULL;
    if (!iter_list(c, at, v, &items)) return false;
    for (size_t i = 0; i < items->n; i++) {
        tj_value x = items->v[i], t;
        if (attr && !attr_path(c, at, &x, &args[0], &t)) return false;
        if (!attr) t = x;
        bool r;
        if (test >= 0) {
            if (!tj_call_test(c, at, test, &t, args + off + 1, n_args - off - 1, kwnames, kwvals, n_kw, &r)) return false;
        } else {
            r = tj_eval_to_bool(t);
        }
        if (r != reject && !tj_list_push(c, res, x)) return false;
    }
    *out = gen_of(res);
    return true;
}

static bool filter_map(tj_ctx *c, const tj_node *at, const tj_value *v, const tj_value *args, size_t n_args,
                       const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    tj_list *res = tj_list_new(c, TJ_L_LIST, 0);
    if (!res) return false;
    if (!tj_eval_to_bool(*v)) {
        *out = gen_of(res);
        return true;
    }
    const tj_value *attribute = NULL, *deflt = NULL;
    int filt = -1;
    if (n_args == 0) {
        for (size_t k = 0; k < n_kw; k++) {
            if (tj_str_eq(kwnames[k], "attribute")) attribute = &kwvals[k];
            else if (tj_str_eq(kwnames[k], "default")) deflt = &kwvals[k];
            else return RT("Unexpected keyword argument '%.*s'", (int)kwnames[k].n, kwnames[k].p);
        }
        if (!attribute) return RT("map requires a filter argument");
    } else {
        tj_str name;
        if (!tj_want_str(c, at, &args[0], "the filter name", &name)) return false;
        bool known;
        filt = tj_filter_id(name, &known);
        if (filt < 0) return known ? UNSUP("filter '%.*s' is not supported", (int)name.n, name.p)
                                   : tj_fail_at(c, at, LEAN_ERR_FORMAT, "no filter named '%.*s'", (int)name.n, name.p);
    }
    tj_list *items = NULL;
    if (!iter_list(c, at, v, &items)) return false;
    for (size_t i = 0; i < items->n; i++) {
        tj_value r;
        if (attribute) {
            if (!attr_path(c, at, &items->v[i], attribute, &r)) return false;
            if (deflt && deflt->type != TJ_NONE && r.type == TJ_UNDEF) r = *deflt;
        } else if (!tj_call_filter(c, at, filt, &items->v[i], args + 1, n_args - 1, kwnames, kwvals, n_kw, &r)) {
            return false;
        }
        if (!tj_list_push(c, res, r)) return false;
    }
    *out = gen_of(res);
    return true;
}

static bool filter_tojson(tj_ctx *c, const tj_node *at, const tj_value *v, const tj_value **a, tj_value *out) {
    tj_jsonopts o = {false, false, false, {"", 0}, {", ", 2}, {": ", 2}};
    if (a[0]) o.ensure_ascii = tj_eval_to_bool(*a[0]);
    if (a[1] && a[1]->type != TJ_NONE) {
        o.pretty = true;
        o.item_sep = tj_cstr(",");
        if (a[1]->type == TJ_STR) {
            o.indent = a[1]->u.s;
        } else {
            int64_t n;
            if (!tj_want_int(c, at, a[1], "indent", &n)) return false;
            if (n > 1000) return UNSUP("an indent over 1000 is not supported");
            char *sp = tj_alloc(c, n > 0 ? (size_t)n : 1);
            if (!sp) return false;
            for (int64_t i = 0; i < n; i++) sp[i] = ' ';
            o.indent = (tj_str){sp, n > 0 ? (size_t)n : 0};
        }
    }
    if (a[2] && a[2]->type != TJ_NONE) {
        tj_list *l = NULL;
        if (a[2]->type != TJ_LIST || !iter_list(c, at, a[2], &l) || l->n != 2 || l->v[0].type != TJ_STR ||
            l->v[1].type != TJ_STR)
            return c->status == LEAN_OK ? RT("separators must be a pair of strings") : false;
        o.item_sep = l->v[0].u.s;
        o.key_sep = l->v[1].u.s;
    }
    if (a[3]) o.sort_keys = tj_eval_to_bool(*a[3]);
    tj_buf b = {0};
    if (!tj_json_dump(c, at, v, &o, 0, &b)) return false;
    *out = tj_strv(tj_buf_str(&b));
    return true;
}

bool tj_call_filter(tj_ctx *c, const tj_node *at, int id, const tj_value *v, const tj_value *args, size_t n_args,
                    const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    const tj_str fname = name_of(filters, sizeof filters / sizeof filters[0], id);
    tj_str s;
    switch (id) {
    case F_ABS: {
        BIND(fname, NULL);
        (void)a_;
        if (v->type == TJ_FLOAT) *out = tj_float(fabs(v->u.f));
        else if (v->type == TJ_INT || v->type == TJ_BOOL) {
            int64_t i = v->type == TJ_INT ? v->u.i : v->u.b;
            if (i == INT64_MIN) return UNSUP("integer overflow: lean's integers are 64-bit");
            *out = tj_int(i < 0 ? -i : i);
        } else if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
        else return RT("bad operand type for abs(): '%s'", tj_type_name(v));
        return true;
    }
    case F_ATTR: {
        BIND(fname, "name");
        if (!a_[0]) return RT("attr() missing the attribute name");
        if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
        if (!tj_to_str(c, at, a_[0], &s)) return false;
        if (v->type == TJ_NS || v->type == TJ_LOOP) return tj_getattr(c, at, v, s, out);
        if (!tj_method_lookup(c, v, s, out)) *out = tj_undef(s);
        return c->status == LEAN_OK;
    }
    case F_BATCH: case F_SLICE: {
        BIND(fname, "n", "fill_with");
        int64_t k;
        tj_list *items, *res = tj_list_new(c, TJ_L_LIST, 0);
        if (!a_[0]) return RT("%s() missing its count", id == F_BATCH ? "batch" : "slice");
        if (!res || !tj_want_int(c, at, a_[0], "the count", &k) || !iter_list(c, at, v, &items)) return false;
        const tj_value *fill = a_[1] && a_[1]->type != TJ_NONE ? a_[1] : NULL;
        if (id == F_BATCH) {
            tj_list *tmp = NULL;
            for (size_t i = 0; i <= items->n; i++) {
                if (tmp && (i == items->n || (int64_t)tmp->n == k)) {
                    if (i == items->n && fill)
                        while ((int64_t)tmp->n < k)
                            if (!tj_list_push(c, tmp, *fill)) return false;
                    if (!tj_list_push(c, res, tj_listv(tmp))) return false;
                    tmp = NULL;
                }
                if (i == items->n) break;
                if (!tmp && !(tmp = tj_list_new(c, TJ_L_LIST, 0))) return false;
                if (!tj_list_push(c, tmp, items->v[i])) return false;
            }
        } else {
            if (k <= 0) return RT("slice() needs a positive count");
            int64_t len = (int64_t)items->n, per = len / k, extra = len % k, offset = 0;
            for (int64_t sn = 0; sn < k; sn++) {
                int64_t start = offset + sn * per;
                if (sn < extra) offset++;
                int64_t end = offset + (sn + 1) * per;
                tj_list *tmp = tj_list_new(c, TJ_L_LIST, 0);
                if (!tmp) return false;
                for (int64_t i = start; i < end && i < len; i++)
                    if (!tj_list_push(c, tmp, items->v[i])) return false;
                if (fill && sn >= extra && !tj_list_push(c, tmp, *fill)) return false;
                if (!tj_list_push(c, res, tj_listv(tmp))) return false;
            }
        }
        *out = gen_of(res);
        return true;
    }
    case F_CAPITALIZE: case F_LOWER: case F_UPPER: case F_TITLE: {
        BIND(fname, NULL);
        (void)a_;
        if (!tj_to_str(c, at, v, &s)) return false;
        tj_casemode m = id == F_CAPITALIZE ? TJ_CASE_CAPITALIZE : id == F_LOWER ? TJ_CASE_LOWER : id == F_UPPER ? TJ_CASE_UPPER : TJ_CASE_TITLE_JINJA;
        if (!tj_map_case(c, s, m, &s)) return false;
        *out = tj_strv(s);
        out->flags = v->flags & TJ_F_MARKUP;
        return true;
    }
    case F_CENTER: {
        BIND(fname, "width");
        int64_t w = 80;
        if (a_[0] && !tj_want_int(c, at, a_[0], "width", &w)) return false;
        if (w > 100000) return UNSUP("a width over 100000 is not supported");
        if (!tj_to_str(c, at, v, &s) || !tj_pad(c, s, w, tj_cstr(" "), 0, &s)) return false;
        *out = tj_strv(s);
        return true;
    }
    case F_COUNT: {
        BIND(fname, NULL);
        (void)a_;
        int64_t n = 0;
        if (!len_of(c, at, v, &n)) return false;
        *out = tj_int(n);
        return true;
    }
    case F_DEFAULT: {
        BIND(fname, "default_value", "boolean");
        bool boolean = a_[1] && tj_eval_to_bool(*a_[1]);
        if (v->type == TJ_UNDEF || (boolean && !tj_eval_to_bool(*v))) *out = a_[0] ? *a_[0] : tj_strv((tj_str){"", 0});
        else *out = *v;
        return true;
    }
    case F_DICTSORT: {
        BIND(fname, "case_sensitive", "by", "reverse");
        if (v->type != TJ_DICT) return RT("dictsort needs a mapping, not '%s'", tj_type_name(v));
        int pos = 0;
        if (a_[1]) {
            if (!tj_want_str(c, at, a_[1], "by", &s)) return false;
            if (tj_str_eq(s, "value")) pos = 1;
            else if (!tj_str_eq(s, "key")) return RT("You can only sort by either \"key\" or \"value\"");
        }
        const tj_dict *d = v->u.d;
        tj_value *keys = tj_alloc_array(c, d->n ? d->n : 1, sizeof(tj_value));
        size_t *idx = tj_alloc_array(c, d->n ? d->n : 1, sizeof(size_t));
        tj_list *res = tj_list_new(c, TJ_L_LIST, d->n);
        if (!keys || !idx || !res) return false;
        for (size_t i = 0; i < d->n; i++) {
            idx[i] = i;
            keys[i] = pos ? d->v[i] : d->k[i];
            if (!(a_[0] && tj_eval_to_bool(*a_[0])) && !lower_if_str(c, &keys[i])) return false;
        }
        if (!tj_sort_values(c, at, keys, idx, d->n, a_[2] && tj_eval_to_bool(*a_[2]))) return false;
        for (size_t i = 0; i < d->n; i++) {
            tj_list *pair = tj_list_new(c, TJ_L_TUPLE, 2);
            if (!pair) return false;
            pair->v[0] = d->k[idx[i]];
            pair->v[1] = d->v[idx[i]];
            pair->n = 2;
            res->v[res->n++] = tj_listv(pair);
        }
        *out = tj_listv(res);
        return true;
    }
    case F_ESCAPE: case F_FORCEESCAPE: {
        BIND(fname, NULL);
        (void)a_;
        if (id == F_ESCAPE && v->type == TJ_STR && (v->flags & TJ_F_MARKUP)) {
            *out = *v;
            return true;
        }
        tj_buf b = {0};
        if (!tj_to_str(c, at, v, &s) || !tj_html_escape(c, s, &b)) return false;
        *out = markup(tj_buf_str(&b));
        return true;
    }
    case F_FIRST: case F_LAST: {
        BIND(fname, NULL);
        (void)a_;
        tj_list *items = NULL;
        if (id == F_LAST && v->type == TJ_LIST && v->u.l->kind == TJ_L_GEN) return RT("'generator' object is not reversible");
        if (!iter_list(c, at, v, &items)) return false;
        if (items->n == 0) {
            *out = tj_undef(tj_cstr(id == F_FIRST ? "No first item, sequence was empty." : "No last item, sequence was empty."));
            out->flags = TJ_F_UNDEF_HINT;
        } else {
            *out = items->v[id == F_FIRST ? 0 : items->n - 1];
        }
        return true;
    }
    case F_FLOAT: {
        BIND(fname, "default");
        double f;
        if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
        if (v->type == TJ_FLOAT) *out = *v;
        else if (v->type == TJ_INT || v->type == TJ_BOOL) *out = tj_float(v->type == TJ_INT ? (double)v->u.i : v->u.b);
        else if (v->type == TJ_STR && tj_parse_float(v->u.s, &f)) *out = tj_float(f);
        else *out = a_[0] ? *a_[0] : tj_float(0.0);
        return true;
    }
    case F_FORMAT: {
        if (n_args && n_kw) return RT("can't handle positional and keyword arguments at the same time");
        if (n_kw) return UNSUP("format with keyword arguments is not supported");
        tj_list *tup = tj_list_new(c, TJ_L_TUPLE, n_args);
        if (!tup || !tj_to_str(c, at, v, &s)) return false;
        for (size_t i = 0; i < n_args; i++) tup->v[tup->n++] = args[i];
        tj_value tv = tj_listv(tup);
        return tj_py_percent(c, at, s, &tv, out);
    }
    case F_INDENT: {
        BIND(fname, "width", "first", "blank");
        tj_str ind = tj_cstr("    ");
        if (a_[0]) {
            if (a_[0]->type == TJ_STR) ind = a_[0]->u.s;
            else {
                int64_t w;
                if (!tj_want_int(c, at, a_[0], "width", &w)) return false;
                if (w > 10000) return UNSUP("an indent over 10000 is not supported");
                char *sp = tj_alloc(c, w > 0 ? (size_t)w : 1);
                if (!sp) return false;
                for (int64_t i = 0; i < w; i++) sp[i] = ' ';
                ind = (tj_str){sp, w > 0 ? (size_t)w : 0};
            }
        }
        if (!tj_want_str(c, at, v, "the indented value", &s)) return false;
        tj_buf withnl = {0};
        tj_list *lines;
        if (!tj_buf_put(c, &withnl, s.p, s.n) || !tj_buf_putc(c, &withnl, '\n') || !tj_splitlines(c, tj_buf_str(&withnl), false, &lines))
            return false;
        bool blank = a_[2] && tj_eval_to_bool(*a_[2]);
        tj_buf b = {0};
        if (a_[1] && tj_eval_to_bool(*a_[1]) && !tj_buf_put(c, &b, ind.p, ind.n)) return false;
        for (size_t i = 0; i < lines->n; i++) {
            tj_str line = lines->v[i].u.s;
            if (i && !tj_buf_putc(c, &b, '\n')) return false;
            if (i && (blank || line.n) && !tj_buf_put(c, &b, ind.p, ind.n)) return false;
            if (!tj_buf_put(c, &b, line.p, line.n)) return false;
        }
        *out = tj_strv(tj_buf_str(&b));
        out->flags = v->flags & TJ_F_MARKUP;
        return true;
    }
    case F_INT: {
        BIND(fname, "default", "base");
        int64_t base = 10, r;
        bool ok;
        if (a_[1] && !tj_want_int(c, at, a_[1], "base", &base)) return false;
        if (!tj_to_int(c, at, v, base, &ok, &r)) return false;
        *out = ok ? tj_int(r) : a_[0] ? *a_[0] : tj_int(0);
        return true;
    }
    case F_ITEMS: {
        BIND(fname, NULL);
        (void)a_;
        tj_list *res = tj_list_new(c, TJ_L_LIST, 0);
        if (!res) return false;
        if (v->type == TJ_DICT) {
            for (size_t i = 0; i < v->u.d->n; i++) {
                tj_list *pair = tj_list_new(c, TJ_L_TUPLE, 2);
                if (!pair) return false;
                pair->v[0] = v->u.d->k[i];
                pair->v[1] = v->u.d->v[i];
                pair->n = 2;
                if (!tj_list_push(c, res, tj_listv(pair))) return false;
            }
        } else if (v->type != TJ_UNDEF) {
            return RT("Can only get item pairs from a mapping.");
        }
        *out = gen_of(res);
        return true;
    }
    case F_JOIN: {
        BIND(fname, "d", "attribute");
        tj_str sep = {"", 0};
        tj_list *items = NULL;
        if ((a_[0] && !tj_to_str(c, at, a_[0], &sep)) || !iter_list(c, at, v, &items)) return false;
        tj_buf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            tj_value x;
            if (!attr_path(c, at, &items->v[i], a_[1], &x)) return false;
            if ((i && !tj_buf_put(c, &b, sep.p, sep.n)) || !tj_py_str(c, at, &x, &b)) return false;
        }
        *out = tj_strv(tj_buf_str(&b));
        return true;
    }
    case F_LIST: {
        BIND(fname, NULL);
        (void)a_;
        tj_list *items, *res;
        if (!iter_list(c, at, v, &items) || !(res = tj_list_new(c, TJ_L_LIST, items->n))) return false;
        tj_copy(res->v, items->v, items->n * sizeof(tj_value));
        res->n = items->n;
        *out = tj_listv(res);
        return true;
    }
    case F_MAP:
        return filter_map(c, at, v, args, n_args, kwnames, kwvals, n_kw, out);
    case F_MAX: case F_MIN: {
        BIND(fname, "case_sensitive", "attribute");
        tj_list *items = NULL;
        if (!iter_list(c, at, v, &items)) return false;
        if (items->n == 0) {
            *out = tj_undef(tj_cstr("No aggregated item, sequence was empty."));
            out->flags = TJ_F_UNDEF_HINT;
            return true;
        }
        size_t best = 0;
        tj_value bk;
        for (size_t i = 0; i < items->n; i++) {
            tj_value k;
            if (!attr_path(c, at, &items->v[i], a_[1], &k)) return false;
            if (!(a_[0] && tj_eval_to_bool(*a_[0])) && !lower_if_str(c, &k)) return false;
            if (i == 0) {
                bk = k;
                continue;
            }
            bool better;
            if (!tj_py_lt(c, at, id == F_MAX ? &bk : &k, id == F_MAX ? &k : &bk, &better)) return false;
            if (better) {
                best = i;
                bk = k;
            }
        }
        *out = items->v[best];
        return true;
    }
    case F_REJECT: case F_SELECT: case F_REJECTATTR: case F_SELECTATTR:
        return select_reject(c, at, v, args, n_args, kwnames, kwvals, n_kw, id == F_REJECTATTR || id == F_SELECTATTR,
                             id == F_REJECT || id == F_REJECTATTR, out);
    case F_REPLACE: {
        BIND(fname, "old", "new", "count");
        tj_str old, nw;
        int64_t count = -1;
        if (!a_[0] || !a_[1]) return RT("replace() needs old and new");
        if (a_[2] && a_[2]->type != TJ_NONE && !tj_want_int(c, at, a_[2], "count", &count)) return false;
        if (!tj_to_str(c, at, v, &s) || !tj_to_str(c, at, a_[0], &old) || !tj_to_str(c, at, a_[1], &nw) ||
            !tj_str_replace(c, s, old, nw, count, &s))
            return false;
        *out = tj_strv(s);
        return true;
    }
    case F_REVERSE: {
        BIND(fname, NULL);
        (void)a_;
        if (v->type == TJ_STR) {
            tj_buf b = {0};
            for (size_t e = v->u.s.n; e > 0;) {
                size_t st = e - 1;
                while (st > 0 && ((unsigned char)v->u.s.p[st] & 0xC0) == 0x80 && e - st < 4) st--;
                if (!tj_buf_put(c, &b, v->u.s.p + st, e - st)) return false;
                e = st;
            }
            *out = tj_strv(tj_buf_str(&b));
            return true;
        }
        bool was_gen = v->type == TJ_LIST && v->u.l->kind == TJ_L_GEN;
        tj_list *items, *res;
        if (!iter_list(c, at, v, &items) || !(res = tj_list_new(c, TJ_L_LIST, items->n))) return false;
        for (size_t i = items->n; i > 0; i--) res->v[res->n++] = items->v[i - 1];
        *out = was_gen ? tj_listv(res) : gen_of(res); /* a generator comes back as a list */
        return true;
    }
    case F_ROUND: {
        BIND(fname, "precision", "method");
        int64_t prec = 0;
        if (a_[0] && !tj_want_int(c, at, a_[0], "precision", &prec)) return false;
        int method = 0;
        if (a_[1]) {
            if (!tj_want_str(c, at, a_[1], "method", &s)) return false;
            method = tj_str_eq(s, "common") ? 0 : tj_str_eq(s, "ceil") ? 1 : tj_str_eq(s, "floor") ? 2 : -1;
            if (method < 0) return RT("method must be common, ceil or floor");
        }
        if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
        if (v->type != TJ_INT && v->type != TJ_BOOL && v->type != TJ_FLOAT)
            return RT("type %s doesn't define __round__ method", tj_type_name(v));
        if (prec < -300 || prec > 300) return UNSUP("round() precision outside -300..300 is not supported");
        double x = v->type == TJ_FLOAT ? v->u.f : v->type == TJ_INT ? (double)v->u.i : v->u.b;
        if (method == 0) {
            if (v->type != TJ_FLOAT) { /* round(int, n) stays an int */
                *out = tj_int(v->type == TJ_INT ? v->u.i : v->u.b);
                if (prec < 0) return UNSUP("round() of an integer to negative digits is not supported");
                return true;
            }
            if (!isfinite(x)) {
                *out = *v;
                return true;
            }
            if (prec >= 0) { /* correctly rounded, half to even, like CPython's dtoa mode 3 */
                char tmp[400];
                snprintf(tmp, sizeof tmp, "%.*f", (int)prec, x);
                *out = tj_float(strtod(tmp, NULL));
            } else {
                double p10 = pow(10.0, (double)-prec);
                *out = tj_float(nearbyint(x / p10) * p10);
            }
            return true;
        }
        double p10 = pow(10.0, (double)prec);
        *out = tj_float((method == 1 ? ceil(x * p10) : floor(x * p10)) / p10);
        return true;
    }
    case F_SAFE: {
        BIND(fname, NULL);
        (void)a_;
        if (!tj_to_str(c, at, v, &s)) return false;
        *out = markup(s);
        return true;
    }
    case F_SORT: {
        BIND(fname, "reverse", "case_sensitive", "attribute");
        tj_list *items, *res;
        if (!iter_list(c, at, v, &items)) return false;
        size_t n = items->n;
        tj_value *keys = tj_alloc_array(c, n ? n : 1, sizeof(tj_value));
        size_t *idx = tj_alloc_array(c, n ? n : 1, sizeof(size_t));
        if (!keys || !idx || !(res = tj_list_new(c, TJ_L_LIST, n))) return false;
        bool multi = a_[2] && a_[2]->type == TJ_STR && memchr(a_[2]->u.s.p, ',', a_[2]->u.s.n);
        for (size_t i = 0; i < n; i++) {
            idx[i] = i;
            if (multi) { /* "a,b": the key is the list of both */
                tj_list *kl = tj_list_new(c, TJ_L_LIST, 0);
                if (!kl) return false;
                tj_str spec = a_[2]->u.s;
                for (size_t p = 0; p <= spec.n;) {
                    size_t e = p;
                    while (e < spec.n && spec.p[e] != ',') e++;
                    tj_value part = tj_strv((tj_str){spec.p + p, e - p}), k;
                    if (!attr_path(c, at, &items->v[i], &part, &k)) return false;
                    if (!(a_[1] && tj_eval_to_bool(*a_[1])) && !lower_if_str(c, &k)) return false;
                    if (!tj_list_push(c, kl, k)) return false;
                    p = e + 1;
                }
                keys[i] = tj_listv(kl);
            } else {
                if (!attr_path(c, at, &items->v[i], a_[2], &keys[i])) return false;
                if (!(a_[1] && tj_eval_to_bool(*a_[1])) && !lower_if_str(c, &keys[i])) return false;
            }
        }
        if (!tj_sort_values(c, at, keys, idx, n, a_[0] && tj_eval_to_bool(*a_[0]))) return false;
        for (size_t i = 0; i < n; i++) res->v[res->n++] = items->v[idx[i]];
        *out = tj_listv(res);
        return true;
    }
    case F_STRING: {
        BIND(fname, NULL);
        (void)a_;
        if (!tj_to_str(c, at, v, &s)) return false;
        *out = tj_strv(s);
        out->flags = v->type == TJ_STR ? v->flags & TJ_F_MARKUP : 0;
        return true;
    }
    case F_SUM: {
        BIND(fname, "attribute", "start");
        tj_value acc = a_[1] ? *a_[1] : tj_int(0);
        tj_list *items = NULL;
        if (!iter_list(c, at, v, &items)) return false;
        for (size_t i = 0; i < items->n; i++) {
            tj_value x;
            if (!attr_path(c, at, &items->v[i], a_[0], &x) || !tj_arith(c, at, TJ_OP_ADD, &acc, &x, &acc)) return false;
        }
        *out = acc;
        return true;
    }
    case F_TOJSON: {
        BIND(fname, "ensure_ascii", "indent", "separators", "sort_keys");
        return filter_tojson(c, at, v, a_, out);
    }
    case F_TRIM: {
        BIND(fname, "chars");
        tj_str chars;
        if (a_[0] && a_[0]->type != TJ_NONE && !tj_want_str(c, at, a_[0], "chars", &chars)) return false;
        if (!tj_to_str(c, at, v, &s)) return false;
        *out = tj_strv(tj_strip(s, a_[0] && a_[0]->type != TJ_NONE ? &chars : NULL, true, true));
        out->flags = v->type == TJ_STR ? v->flags & TJ_F_MARKUP : 0;
        return true;
    }
    case F_TRUNCATE: {
        BIND(fname, "length", "killwords", "end", "leeway");
        int64_t length = 255, leeway = 5;
        tj_str end = tj_cstr("...");
        if ((a_[0] && !tj_want_int(c, at, a_[0], "length", &length)) || (a_[2] && !tj_want_str(c, at, a_[2], "end", &end)) ||
            (a_[3] && a_[3]->type != TJ_NONE && !tj_want_int(c, at, a_[3], "leeway", &leeway)) || !tj_want_str(c, at, v, "the value", &s))
            return false;
        int64_t endlen = (int64_t)tj_utf8_len(end), len = (int64_t)tj_utf8_len(s);
        if (length < endlen) return RT("expected length >= %lld, got %lld", (long long)endlen, (long long)length);
        if (leeway < 0) return RT("expected leeway >= 0, got %lld", (long long)leeway);
        if (len <= length + leeway) {
            *out = *v;
            return true;
        }
        size_t off = 0;
        for (int64_t i = 0; i < length - endlen; i++) tj_utf8_next(s.p, s.n, &off);
        tj_str head = {s.p, off};
        if (!(a_[1] && tj_eval_to_bool(*a_[1]))) { /* rsplit(" ", 1)[0] */
            int64_t k = tj_find(head, tj_cstr(" "), true);
            if (k >= 0) head.n = (size_t)k;
        }
        tj_buf b = {0};
        if (!tj_buf_put(c, &b, head.p, head.n) || !tj_buf_put(c, &b, end.p, end.n)) return false;
        *out = tj_strv(tj_buf_str(&b));
        return true;
    }
    case F_UNIQUE: {
        BIND(fname, "case_sensitive", "attribute");
        tj_list *items, *res = tj_list_new(c, TJ_L_LIST, 0), *seen = tj_list_new(c, TJ_L_LIST, 0);
        if (!res || !seen || !iter_list(c, at, v, &items)) return false;
        for (size_t i = 0; i < items->n; i++) {
            tj_value k;
            if (!attr_path(c, at, &items->v[i], a_[1], &k)) return false;
            if (!(a_[0] && tj_eval_to_bool(*a_[0])) && !lower_if_str(c, &k)) return false;
            if (k.type == TJ_DICT || (k.type == TJ_LIST && k.u.l->kind != TJ_L_TUPLE))
                return RT("unhashable type: '%s'", tj_type_name(&k));
            bool dup = false;
            for (size_t j = 0; j < seen->n && !dup; j++) dup = tj_py_eq(&seen->v[j], &k);
            if (dup) continue;
            if (!tj_list_push(c, seen, k) || !tj_list_push(c, res, items->v[i])) return false;
        }
        *out = gen_of(res);
        return true;
    }
    case F_WORDCOUNT: {
        BIND(fname, NULL);
        (void)a_;
        if (!tj_to_str(c, at, v, &s)) return false;
        int64_t n = 0;
        bool in_word = false;
        for (size_t i = 0; i < s.n;) { /* re's \w: letters, numbers, marks... approximated as L, N, _ */
            size_t j = i;
            uint32_t cp = tj_utf8_next(s.p, s.n, &j);
            bool w = cp == '_' || lean_is_letter(cp) || lean_is_number(cp);
            if (w && !in_word) n++;
            in_word = w;
            i = j;
        }
        *out = tj_int(n);
        return true;
    }
    default:
        return UNSUP("this filter is not supported");
    }
}

/* ---- 3. tests ---- */

bool tj_call_test(tj_ctx *c, const tj_node *at, int id, const tj_value *v, const tj_value *args, size_t n_args,
                  const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, bool *out) {
    const char *const pn[] = {"value"};
    const tj_value *a[1];
    if (!tj_bind(c, at, name_of(tests, sizeof tests / sizeof tests[0], id), pn, 1, args, n_args, kwnames, kwvals,
                 n_kw, a))
        return false;
    bool needs_arg = id == T_DIVISIBLEBY || id == T_SAMEAS || id == T_IN || id >= T_EQ;
    if (needs_arg && !a[0]) return RT("the test needs an argument");
    switch (id) {
    case T_ODD: case T_EVEN: case T_DIVISIBLEBY: {
        tj_value two = tj_int(2), m, want = tj_int(id == T_ODD ? 1 : 0);
        if (!tj_arith(c, at, TJ_OP_MOD, v, id == T_DIVISIBLEBY ? a[0] : &two, &m)) return false;
        *out = tj_py_eq(&m, &want);
        return true;
    }
    case T_DEFINED: *out = v->type != TJ_UNDEF; return true;
    case T_UNDEFINED: *out = v->type == TJ_UNDEF; return true;
    case T_FILTER: case T_TEST: {
        bool known = false;
        if (v->type == TJ_STR) {
            if (id == T_FILTER) tj_filter_id(v->u.s, &known);
            else tj_test_id(v->u.s, &known);
        }
        *out = known;
        return true;
    }
    case T_NONE: *out = v->type == TJ_NONE; return true;
    case T_BOOLEAN: *out = v->type == TJ_BOOL; return true;
    case T_FALSE: *out = v->type == TJ_BOOL && !v->u.b; return true;
    case T_TRUE: *out = v->type == TJ_BOOL && v->u.b; return true;
    case T_INTEGER: *out = v->type == TJ_INT; return true;
    case T_FLOAT: *out = v->type == TJ_FLOAT; return true;
    case T_LOWER: case T_UPPER: {
        tj_str s;
        if (!tj_to_str(c, at, v, &s)) return false;
        *out = tj_cased_test(s, id == T_LOWER);
        return true;
    }
    case T_STRING: *out = v->type == TJ_STR; return true;
    case T_MAPPING: *out = v->type == TJ_DICT; return true;
    case T_NUMBER: *out = v->type == TJ_BOOL || v->type == TJ_INT || v->type == TJ_FLOAT; return true;
    case T_SEQUENCE:
        *out = v->type == TJ_STR || v->type == TJ_DICT || v->type == TJ_UNDEF ||
               (v->type == TJ_LIST && (v->u.l->kind == TJ_L_LIST || v->u.l->kind == TJ_L_TUPLE || v->u.l->kind == TJ_L_RANGE));
        return true;
    case T_ITERABLE:
        *out = v->type == TJ_STR || v->type == TJ_DICT || v->type == TJ_UNDEF || v->type == TJ_LIST || v->type == TJ_LOOP;
        return true;
    case T_CALLABLE: *out = v->type == TJ_FUNC || v->type == TJ_LOOP || v->type == TJ_UNDEF; return true;
    case T_SAMEAS:
        if (v->type != a[0]->type) *out = false;
        else if (v->type == TJ_NONE || v->type == TJ_UNDEF) *out = v->type == TJ_NONE || v->u.s.p == a[0]->u.s.p;
        else if (v->type == TJ_BOOL) *out = v->u.b == a[0]->u.b;
        else if (v->type == TJ_INT) *out = v->u.i == a[0]->u.i && v->u.i >= -5 && v->u.i <= 256; /* CPython's small ints */
        else if (v->type == TJ_STR) *out = v->u.s.p == a[0]->u.s.p && v->u.s.n == a[0]->u.s.n;
        else *out = v->u.l == a[0]->u.l; /* the same object (any pointer member) */
        return true;
    case T_ESCAPED: *out = v->type == TJ_STR && (v->flags & TJ_F_MARKUP); return true;
    case T_IN: return tj_py_in(c, at, v, a[0], out);
    case T_EQ: *out = tj_py_eq(v, a[0]); return true;
    case T_NE: *out = !tj_py_eq(v, a[0]); return true;
    case T_LT: return tj_py_lt(c, at, v, a[0], out);
    case T_GT: return tj_py_lt(c, at, a[0], v, out);
    case T_LE: if (!tj_py_lt(c, at, a[0], v, out)) return false; *out = !*out; return true;
    case T_GE: if (!tj_py_lt(c, at, v, a[0], out)) return false; *out = !*out; return true;
    default: return UNSUP("this test is not supported");
    }
}

/* ---- 4. globals ---- */

bool tj_call_global(tj_ctx *c, const tj_node *at, int id, const tj_value *args, size_t n_args, const tj_str *kwnames,
                    const tj_value *kwvals, size_t n_kw, tj_value *out) {
    switch (id) {
    case G_RANGE: {
        if (!tj_no_kwargs(c, at, tj_cstr("range"), kwnames, n_kw)) return false;
        if (n_args < 1 || n_args > 3) return RT("range expected 1 to 3 arguments, got %zu", n_args);
        int64_t v[3] = {0, 0, 1};
        for (size_t i = 0; i < n_args; i++)
            if (!tj_want_int(c, at, &args[i], "range() argument", &v[n_args == 1 ? 1 : i])) return false;
        if (v[2] == 0) return RT("range() arg 3 must not be zero");
        int64_t n = 0;
        if (v[2] > 0 && v[1] > v[0]) n = (int64_t)(((uint64_t)v[1] - (uint64_t)v[0] - 1) / (uint64_t)v[2] + 1);
        if (v[2] < 0 && v[1] < v[0]) n = (int64_t)(((uint64_t)v[0] - (uint64_t)v[1] - 1) / (uint64_t)(-(v[2] + 1) + 1) + 1);
        if (n > 100000) return RT("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        tj_list *l = tj_list_new(c, TJ_L_RANGE, (size_t)n);
        if (!l) return false;
        for (int64_t i = 0; i < n; i++) l->v[l->n++] = tj_int(v[0] + i * v[2]);
        l->r_start = v[0];
        l->r_stop = v[1];
        l->r_step = v[2];
        *out = tj_listv(l);
        return true;
    }
    case G_DICT: case G_NAMESPACE: {
        tj_dict *d = tj_dict_new(c, 0);
        if (!d) return false;
        if (n_args > 1) return RT("%s expected at most 1 positional argument", id == G_DICT ? "dict" : "namespace");
        if (n_args == 1) {
            const tj_value *src = &args[0];
            if (src->type == TJ_DICT) {
                for (size_t i = 0; i < src->u.d->n; i++)
                    if (!tj_dict_set(c, d, src->u.d->k[i], src->u.d->v[i])) return false;
            } else {
                tj_list *items = NULL;
                if (!tj_iterate(c, at, src, &items)) return false;
                for (size_t i = 0; i < items->n; i++) {
                    tj_list *pair;
                    if (items->v[i].type != TJ_LIST || !tj_iterate(c, at, &items->v[i], &pair) || pair->n != 2)
                        return c->status == LEAN_OK ? RT("dictionary update sequence element #%zu has the wrong length", i) : false;
                    if (!tj_dict_set(c, d, pair->v[0], pair->v[1])) return false;
                }
            }
        }
        for (size_t k = 0; k < n_kw; k++)
            if (!tj_dict_set(c, d, tj_strv(kwnames[k]), kwvals[k])) return false;
        *out = tj_dictv(d);
        if (id == G_NAMESPACE) out->type = TJ_NS;
        return true;
    }
    case G_RAISE: {
        const char *const pn[] = {"message"};
        const tj_value *a[1];
        tj_str msg = {"", 0};
        if (!tj_bind(c, at, tj_cstr("raise_exception"), pn, 1, args, n_args, kwnames, kwvals, n_kw, a)) return false;
        if (a[0] && !tj_to_str(c, at, a[0], &msg)) return false;
        return RT("template raised: %.*s", (int)(msg.n > 300 ? 300 : msg.n), msg.p);
    }
    case G_STRFTIME: {
        const char *const pn[] = {"format"};
        const tj_value *a[1];
        tj_str fmt;
        if (!tj_bind(c, at, tj_cstr("strftime_now"), pn, 1, args, n_args, kwnames, kwvals, n_kw, a)) return false;
        if (!a[0]) return RT("strftime_now() missing its format");
        if (!tj_want_str(c, at, a[0], "the format", &fmt)) return false;
        char *f = tj_alloc(c, fmt.n + 1);
        if (!f) return false;
        memcpy(f, fmt.p, fmt.n);
        f[fmt.n] = 0;
        time_t t = (time_t)c->now_s;
        struct tm tmv;
        if (!gmtime_r(&t, &tmv)) return RT("strftime_now: the clock is out of range");
        size_t cap = 256 + fmt.n * 8;
        char *buf = tj_alloc(c, cap);
        if (!buf) return false;
        size_t n = fmt.n ? strftime(buf, cap, f, &tmv) : 0;
        if (n == 0 && fmt.n) return UNSUP("strftime_now: the format '%s' is not supported", f);
        *out = tj_strv((tj_str){buf, n});
        return true;
    }
    default: {
        static const char *const names[] = {"range", "dict", "namespace", "raise_exception", "strftime_now", "lipsum", "cycler", "joiner"};
        return UNSUP("the global '%s' is not supported", names[id >= 0 && id < 8 ? id : 5]);
    }
    }
}

