/* template_text.c — Python's str as chat templates use it: str()/repr() of any value, float
 * repr, json.dumps (transformers' tojson), % and str.format, the str/dict/list/loop methods,
 * and the helpers the filters share (strip, split, replace, padding, case mapping, sorting,
 * int()/float() parsing, argument binding, errors at a node).
 *
 * What it does not do: Unicode case mapping (upper/lower/title/capitalize change ASCII
 * letters only; other characters are copied), format specs in str.format, %(name)s formats.
 * Character classes (repr's printable, isalpha, isdigit, \w) come from unicode.h.
 *
 * Sections:
 *   1. arguments     binding positional and keyword arguments to parameters
 *   2. text helpers  case mapping, whitespace, searching, splitting, padding, sorting
 *   3. formatting    str(), repr(), float repr, json.dumps, % and str.format
 *   4. methods       the method table, then str, dict, list and loop methods
 */
#include "template/template.h"
#include "text/unicode.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool tj_fail_at(tj_ctx *c, const tj_node *at, lean_status st, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tj_fail(c, at ? at->line : 0, at ? at->col : 0, st, "%s", msg);
}
#define RT(...) tj_fail_at(c, at, LEAN_ERR_ARG, __VA_ARGS__)
#define UNSUP(...) tj_fail_at(c, at, LEAN_ERR_UNSUPPORTED, __VA_ARGS__)

/* ---- 1. arguments ---- */

/* Binds args/kwargs to the parameter names; slots[i] = the value or NULL (not given). The
 * names end at the first NULL: a builtin without parameters declares {NULL}, and a keyword
 * argument is then unexpected rather than compared with a NULL name. */
bool tj_bind(tj_ctx *c, const tj_node *at, tj_str fname, const char *const *params, int n_params,
             const tj_value *args, size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw,
             const tj_value **slots) {
    int fn = (int)(fname.n > 40 ? 40 : fname.n), np = 0;
    for (int i = 0; i < n_params; i++) slots[i] = NULL;
    while (np < n_params && params[np]) np++;
    if (n_args > (size_t)np) {
        if (np == 0) return RT("%.*s() takes no arguments (%zu given)", fn, fname.p, n_args);
        return RT("%.*s() takes at most %d argument(s) (%zu given)", fn, fname.p, np, n_args);
    }
    for (size_t i = 0; i < n_args; i++) slots[i] = &args[i];
    for (size_t k = 0; k < n_kw; k++) {
        int found = -1;
        for (int i = 0; i < np; i++)
            if (tj_str_eq(kwnames[k], params[i])) found = i;
        if (found < 0) return tj_no_kwargs(c, at, fname, &kwnames[k], 1);
        if (slots[found]) return RT("%.*s() got multiple values for argument '%s'", fn, fname.p, params[found]);
        slots[found] = &kwvals[k];
    }
    return true;
}

bool tj_no_kwargs(tj_ctx *c, const tj_node *at, tj_str fname, const tj_str *kwnames, size_t n_kw) {
    if (n_kw == 0) return true;
    return RT("%.*s() got an unexpected keyword argument '%.*s'", (int)(fname.n > 40 ? 40 : fname.n), fname.p,
              (int)(kwnames[0].n > 60 ? 60 : kwnames[0].n), kwnames[0].p);
}

bool tj_want_int(tj_ctx *c, const tj_node *at, const tj_value *v, const char *what, int64_t *out) {
    if (v->type == TJ_INT || v->type == TJ_BOOL) {
        *out = v->type == TJ_INT ? v->u.i : v->u.b;
        return true;
    }
    if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
    return RT("%s must be an integer, not '%s'", what, tj_type_name(v));
}

bool tj_want_str(tj_ctx *c, const tj_node *at, const tj_value *v, const char *what, tj_str *out) {
    if (v->type == TJ_STR) {
        *out = v->u.s;
        return true;
    }
    if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
    return RT("%s must be a string, not '%s'", what, tj_type_name(v));
}

/* ---- 2. text helpers ---- */

static char up(char ch) { return ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch; }
static char low(char ch) { return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch; }
static bool is_alpha(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

/* ASCII letters only (lean's documented limit); other bytes are copied. */
bool tj_map_case(tj_ctx *c, tj_str s, tj_casemode mode, tj_str *out) {
    char *d = tj_alloc(c, s.n + 1);
    if (!d) return false;
    bool prev_cased = false, word_start = true;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        switch (mode) {
        case TJ_CASE_UPPER: d[i] = up(ch); break;
        case TJ_CASE_LOWER: d[i] = low(ch); break;
        case TJ_CASE_SWAP: d[i] = is_alpha(ch) ? (char)(ch ^ 32) : ch; break;
        case TJ_CASE_CAPITALIZE: d[i] = i == 0 ? up(ch) : low(ch); break;
        case TJ_CASE_TITLE_PY:
            d[i] = is_alpha(ch) ? (prev_cased ? low(ch) : up(ch)) : ch;
            prev_cased = is_alpha(ch);
            break;
        case TJ_CASE_TITLE_JINJA: {
            /* jinja2's title: words split at runs of [-\s({\[<]; a word's first character
             * upper, the rest lower */
            if ((unsigned char)ch >= 0x80) {
                size_t j = i;
                bool sep = tj_py_space(tj_utf8_next(s.p, s.n, &j));
                memcpy(d + i, s.p + i, j - i);
                i = j - 1;
                word_start = sep;
                continue;
            }
            bool sep = ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<' || tj_py_space((unsigned char)ch);
            d[i] = sep ? ch : word_start ? up(ch) : low(ch);
            word_start = sep;
            break;
        }
        }
    }
    d[s.n] = 0;
    *out = (tj_str){d, s.n};
    return true;
}

/* Python's str.strip / lstrip / rstrip: chars NULL = whitespace. */
static bool in_chars(uint32_t cp, const tj_str *chars) {
    if (!chars) return tj_py_space(cp);
    for (size_t i = 0; i < chars->n;)
        if (tj_utf8_next(chars->p, chars->n, &i) == cp) return true;
    return false;
}

tj_str tj_strip(tj_str s, const tj_str *chars, bool left, bool right) {
    size_t b = 0, e = s.n;
    if (left)
        while (b < e) {
            size_t j = b;
            if (!in_chars(tj_utf8_next(s.p, s.n, &j), chars)) break;
            b = j;
        }
    if (right)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)s.p[st] & 0xC0) == 0x80 && e - st < 4) st--;
            size_t j = st;
            uint32_t cp = tj_utf8_next(s.p, s.n, &j);
            if (j != e || !in_chars(cp, chars)) break;
            e = st;
        }
    return (tj_str){s.p + b, e - b};
}

/* The byte offset of the first (or last) occurrence of needle in hay[from, to), or -1. */
int64_t tj_find(tj_str hay, tj_str needle, bool last) {
    if (needle.n > hay.n) return -1;
    if (!last) {
        for (size_t i = 0; i + needle.n <= hay.n; i++)
            if (memcmp(hay.p + i, needle.p, needle.n) == 0) return (int64_t)i;
    } else {
        for (size_t i = hay.n - needle.n + 1; i-- > 0;)
            if (memcmp(hay.p + i, needle.p, needle.n) == 0) return (int64_t)i;
    }
    return -1;
}

static int64_t char_index(tj_str s, size_t byte_off) {
    return (int64_t)tj_utf8_len((tj_str){s.p, byte_off});
}

bool tj_str_replace(tj_ctx *c, tj_str s, tj_str old, tj_str new_, int64_t count, tj_str *out) {
    tj_buf b = {0};
    if (count < 0) count = INT64_MAX;
    if (old.n == 0) { /* Python inserts new before every character and at the end */
        size_t i = 0;
        int64_t done = 0;
        while (done < count) {
            if (!tj_buf_put(c, &b, new_.p, new_.n)) return false;
            done++;
            if (i >= s.n) break;
            size_t j = i;
            tj_utf8_next(s.p, s.n, &j);
            if (!tj_buf_put(c, &b, s.p + i, j - i)) return false;
            i = j;
        }
        if (!tj_buf_put(c, &b, s.p + i, s.n - i)) return false;
    } else {
        size_t i = 0;
        int64_t done = 0;
        while (done < count) {
            int64_t k = tj_find((tj_str){s.p + i, s.n - i}, old, false);
            if (k < 0) break;
            if (!tj_buf_put(c, &b, s.p + i, (size_t)k) || !tj_buf_put(c, &b, new_.p, new_.n)) return false;
            i += (size_t)k + old.n;
            done++;
        }
        if (!tj_buf_put(c, &b, s.p + i, s.n - i)) return false;
    }
    *out = tj_buf_str(&b);
    return true;
}

/* Python's str.tj_splitlines() line breaks. */
static size_t line_break_at(tj_str s, size_t i) {
    unsigned char ch = (unsigned char)s.p[i];
    if (ch == '\r') return i + 1 < s.n && s.p[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == 0x0B || ch == 0x0C || (ch >= 0x1C && ch <= 0x1E)) return 1;
    if (ch >= 0x80) {
        size_t j = i;
        uint32_t cp = tj_utf8_next(s.p, s.n, &j);
        if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) return j - i;
    }
    return 0;
}

bool tj_splitlines(tj_ctx *c, tj_str s, bool keepends, tj_list **out) {
    tj_list *l = tj_list_new(c, TJ_L_LIST, 0);
    if (!l) return false;
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        size_t k = line_break_at(s, i);
        if (!k) {
            i++;
            continue;
        }
        if (!tj_list_push(c, l, tj_strv((tj_str){s.p + start, (keepends ? i + k : i) - start}))) return false;
        i += k;
        start = i;
    }
    if (start < s.n && !tj_list_push(c, l, tj_strv((tj_str){s.p + start, s.n - start}))) return false;
    *out = l;
    return true;
}

/* Python's str.split / rsplit. sep NULL: runs of whitespace, empty strings dropped. */
static bool split(tj_ctx *c, const tj_node *at, tj_str s, const tj_str *sep, int64_t maxsplit, bool right, tj_list **out) {
    tj_list *l = tj_list_new(c, TJ_L_LIST, 0);
    if (!l) return false;
    if (sep && sep->n == 0) return RT("empty separator");
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (!right) {
        size_t i = 0;
        int64_t done = 0;
        if (!sep) {
            for (;;) {
                while (i < s.n) { /* skip whitespace */
                    size_t j = i;
                    if (!tj_py_space(tj_utf8_next(s.p, s.n, &j))) break;
                    i = j;
                }
                if (i >= s.n) break;
                if (done == maxsplit) {
                    tj_str rest = tj_strip((tj_str){s.p + i, s.n - i}, NULL, false, true);
                    if (!tj_list_push(c, l, tj_strv(rest))) return false;
                    break;
                }
                size_t st = i;
                while (i < s.n) {
                    size_t j = i;
                    if (tj_py_space(tj_utf8_next(s.p, s.n, &j))) break;
                    i = j;
                }
                if (!tj_list_push(c, l, tj_strv((tj_str){s.p + st, i - st}))) return false;
                done++;
            }
        } else {
            while (done < maxsplit) {
                int64_t k = tj_find((tj_str){s.p + i, s.n - i}, *sep, false);
                if (k < 0) break;
                if (!tj_list_push(c, l, tj_strv((tj_str){s.p + i, (size_t)k}))) return false;
                i += (size_t)k + sep->n;
                done++;
            }
            if (!tj_list_push(c, l, tj_strv((tj_str){s.p + i, s.n - i}))) return false;
        }
        *out = l;
        return true;
    }
    /* rsplit: collect from the right, then reverse */
    size_t e = s.n;
    int64_t done = 0;
    if (!sep) {
        for (;;) {
            while (e > 0 && tj_py_space((unsigned char)s.p[e - 1])) e--;
            if (e == 0) break;
            if (done == maxsplit) {
                tj_str rest = tj_strip((tj_str){s.p, e}, NULL, true, false);
                if (!tj_list_push(c, l, tj_strv(rest))) return false;
                break;
            }
            size_t st = e;
            while (st > 0 && !tj_py_space((unsigned char)s.p[st - 1])) st--;
            if (!tj_list_push(c, l, tj_strv((tj_str){s.p + st, e - st}))) return false;
            e = st;
            done++;
        }
    } else {
        while (done < maxsplit) {
            int64_t k = tj_find((tj_str){s.p, e}, *sep, true);
            if (k < 0) break;
            if (!tj_list_push(c, l, tj_strv((tj_str){s.p + k + sep->n, e - (size_t)k - sep->n}))) return false;
            e = (size_t)k;
            done++;
        }
        if (!tj_list_push(c, l, tj_strv((tj_str){s.p, e}))) return false;
    }
    for (size_t i = 0; i < l->n / 2; i++) {
        tj_value t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    *out = l;
    return true;
}

/* Python's str.center / ljust / rjust (widths in characters). */
bool tj_pad(tj_ctx *c, tj_str s, int64_t width, tj_str fill, int where, tj_str *out) {
    int64_t len = (int64_t)tj_utf8_len(s);
    if (width <= len) {
        *out = s;
        return true;
    }
    int64_t marg = width - len, left;
    if (where < 0) left = 0;
    else if (where > 0) left = marg;
    else left = marg / 2 + (marg & width & 1);
    tj_buf b = {0};
    for (int64_t i = 0; i < left; i++)
        if (!tj_buf_put(c, &b, fill.p, fill.n)) return false;
    if (!tj_buf_put(c, &b, s.p, s.n)) return false;
    for (int64_t i = 0; i < marg - left; i++)
        if (!tj_buf_put(c, &b, fill.p, fill.n)) return false;
    *out = tj_buf_str(&b);
    return true;
}

/* Stable merge sort of idx by keys (Python's sorted; reverse keeps equal keys in order). */
bool tj_sort_values(tj_ctx *c, const tj_node *at, tj_value *keys, size_t *idx, size_t n, bool reverse) {
    if (n < 2) return true;
    size_t *tmp = tj_alloc_array(c, n, sizeof(size_t));
    if (!tmp) return false;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool take_right;
                if (!tj_py_lt(c, at, reverse ? &keys[idx[i]] : &keys[idx[j]], reverse ? &keys[idx[j]] : &keys[idx[i]], &take_right))
                    return false;
                tmp[k++] = take_right ? idx[j++] : idx[i++];
            }
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        tj_copy(idx, tmp, n * sizeof(size_t));
    }
    return true;
}

bool tj_cased_test(tj_str s, bool want_lower) {
    bool any = false;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (!is_alpha(ch)) continue;
        any = true;
        if (want_lower != (ch >= 'a' && ch <= 'z')) return false;
    }
    return any;
}

/* ---- 3. formatting ---- */

void tj_float_repr(double f, char out[32]) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0.0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* the shortest %.Ne that reads back as f: its digits and decimal exponent */
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[24];
    int nd = 0, exp10;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1; /* digits are 0.d1d2... x 10^decpt */
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt > -4 && decpt <= 16) { /* Python's repr: fixed notation */
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else {
            for (int i = 0; i < decpt; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > decpt)
                for (int i = decpt; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        snprintf(o, 16, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

/* Python's repr of a str (unicode_repr): quote choice, escapes, printable characters kept. */
static bool repr_str(tj_ctx *c, tj_str s, tj_buf *b) {
    bool has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (!tj_buf_putc(c, b, q)) return false;
    for (size_t i = 0; i < s.n;) {
        size_t j = i;
        uint32_t cp = tj_utf8_next(s.p, s.n, &j);
        bool ok;
        if (cp == (uint32_t)q || cp == '\\') ok = tj_buf_putc(c, b, '\\') && tj_buf_putc(c, b, (char)cp);
        else if (cp == '\t') ok = tj_buf_puts(c, b, "\\t");
        else if (cp == '\n') ok = tj_buf_puts(c, b, "\\n");
        else if (cp == '\r') ok = tj_buf_puts(c, b, "\\r");
        else if (cp < 0x20 || cp == 0x7F) ok = tj_buf_printf(c, b, "\\x%02x", (unsigned)cp);
        else if (cp < 0x7F) ok = tj_buf_putc(c, b, (char)cp);
        else {
            /* str.isprintable(): not Cc, Cf, Cs, Co, Cn, Zl, Zp or Zs (lean's tables are
             * Unicode 15.0, CPython 3.11's 14.0: they differ on characters new in 15.0) */
            enum lean_ucat cat = lean_ucat_of(cp);
            bool np = cat == LEAN_UCAT_CC || cat == LEAN_UCAT_CF || cat == LEAN_UCAT_CS || cat == LEAN_UCAT_CO ||
                      cat == LEAN_UCAT_CN || cat == LEAN_UCAT_ZL || cat == LEAN_UCAT_ZP || cat == LEAN_UCAT_ZS;
            if (!np) ok = tj_buf_put(c, b, s.p + i, j - i);
            else if (cp < 0x100) ok = tj_buf_printf(c, b, "\\x%02x", (unsigned)cp);
            else if (cp < 0x10000) ok = tj_buf_printf(c, b, "\\u%04x", (unsigned)cp);
            else ok = tj_buf_printf(c, b, "\\U%08x", (unsigned)cp);
        }
        if (!ok) return false;
        i = j;
    }
    return tj_buf_putc(c, b, q);
}

bool tj_py_repr(tj_ctx *c, const tj_node *at, const tj_value *v, tj_buf *b, int depth) {
    if (depth > TJ_MAX_CALL_DEPTH) return UNSUP("a value nested deeper than %d levels cannot be printed", TJ_MAX_CALL_DEPTH);
    char tmp[40];
    switch (v->type) {
    case TJ_UNDEF: return tj_buf_puts(c, b, "Undefined");
    case TJ_NONE: return tj_buf_puts(c, b, "None");
    case TJ_BOOL: return tj_buf_puts(c, b, v->u.b ? "True" : "False");
    case TJ_INT: return tj_buf_printf(c, b, "%lld", (long long)v->u.i);
    case TJ_FLOAT: tj_float_repr(v->u.f, tmp); return tj_buf_puts(c, b, tmp);
    case TJ_STR:
        if (v->flags & TJ_F_MARKUP) return tj_buf_puts(c, b, "Markup(") && repr_str(c, v->u.s, b) && tj_buf_putc(c, b, ')');
        return repr_str(c, v->u.s, b);
    case TJ_LIST: {
        const tj_list *l = v->u.l;
        const char *open = "[", *close = "]";
        switch (l->kind) {
        case TJ_L_GEN: return UNSUP("printing a generator is not supported (jinja2 prints its memory address)");
        case TJ_L_RANGE:
            if (l->r_step == 1) return tj_buf_printf(c, b, "range(%lld, %lld)", (long long)l->r_start, (long long)l->r_stop);
            return tj_buf_printf(c, b, "range(%lld, %lld, %lld)", (long long)l->r_start, (long long)l->r_stop, (long long)l->r_step);
        case TJ_L_TUPLE: open = "("; close = l->n == 1 ? ",)" : ")"; break;
        case TJ_L_ITEMS: open = "dict_items(["; close = "])"; break;
        case TJ_L_KEYS: open = "dict_keys(["; close = "])"; break;
        case TJ_L_VALUES: open = "dict_values(["; close = "])"; break;
        }
        if (!tj_buf_puts(c, b, open)) return false;
        for (size_t i = 0; i < l->n; i++)
            if ((i && !tj_buf_puts(c, b, ", ")) || !tj_py_repr(c, at, &l->v[i], b, depth + 1)) return false;
        return tj_buf_puts(c, b, close);
    }
    case TJ_DICT: case TJ_NS: {
        const tj_dict *d = v->u.d;
        if (v->type == TJ_NS && !tj_buf_puts(c, b, "<Namespace ")) return false;
        if (!tj_buf_putc(c, b, '{')) return false;
        for (size_t i = 0; i < d->n; i++)
            if ((i && !tj_buf_puts(c, b, ", ")) || !tj_py_repr(c, at, &d->k[i], b, depth + 1) ||
                !tj_buf_puts(c, b, ": ") || !tj_py_repr(c, at, &d->v[i], b, depth + 1))
                return false;
        return tj_buf_putc(c, b, '}') && (v->type != TJ_NS || tj_buf_putc(c, b, '>'));
    }
    case TJ_LOOP:
        return tj_buf_printf(c, b, "<LoopContext %lld/%zu>", (long long)v->u.loop->index0 + 1, v->u.loop->items->n);
    default:
        return UNSUP("printing a %s is not supported", tj_type_name(v));
    }
}

bool tj_py_str(tj_ctx *c, const tj_node *at, const tj_value *v, tj_buf *b) {
    if (v->type == TJ_STR) return tj_buf_put(c, b, v->u.s.p, v->u.s.n);
    if (v->type == TJ_UNDEF) return true;
    return tj_py_repr(c, at, v, b, 0);
}

bool tj_to_str(tj_ctx *c, const tj_node *at, const tj_value *v, tj_str *out) {
    if (v->type == TJ_STR) {
        *out = v->u.s;
        return true;
    }
    tj_buf b = {0};
    if (!tj_py_str(c, at, v, &b)) return false;
    *out = b.n ? tj_buf_str(&b) : (tj_str){"", 0};
    return true;
}

static bool json_str(tj_ctx *c, tj_str s, bool ensure_ascii, tj_buf *b) {
    if (!tj_buf_putc(c, b, '"')) return false;
    for (size_t i = 0; i < s.n;) {
        size_t j = i;
        uint32_t cp = tj_utf8_next(s.p, s.n, &j);
        bool ok;
        switch (cp) {
        case '"': ok = tj_buf_puts(c, b, "\\\""); break;
        case '\\': ok = tj_buf_puts(c, b, "\\\\"); break;
        case '\n': ok = tj_buf_puts(c, b, "\\n"); break;
        case '\r': ok = tj_buf_puts(c, b, "\\r"); break;
        case '\t': ok = tj_buf_puts(c, b, "\\t"); break;
        case '\b': ok = tj_buf_puts(c, b, "\\b"); break;
        case '\f': ok = tj_buf_puts(c, b, "\\f"); break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp >= 0x7F && cp < 0x10000)) ok = tj_buf_printf(c, b, "\\u%04x", (unsigned)cp);
            else if (ensure_ascii && cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                ok = tj_buf_printf(c, b, "\\u%04x\\u%04x", (unsigned)(0xD800 + (v >> 10)), (unsigned)(0xDC00 + (v & 0x3FF)));
            } else {
                ok = tj_buf_put(c, b, s.p + i, j - i);
            }
        }
        if (!ok) return false;
        i = j;
    }
    return tj_buf_putc(c, b, '"');
}

static bool json_newline(tj_ctx *c, const tj_jsonopts *o, int level, tj_buf *b) {
    if (!tj_buf_putc(c, b, '\n')) return false;
    for (int i = 0; i < level; i++)
        if (!tj_buf_put(c, b, o->indent.p, o->indent.n)) return false;
    return true;
}

static bool json_float(tj_ctx *c, double f, tj_buf *b) {
    if (isnan(f)) return tj_buf_puts(c, b, "NaN");
    if (isinf(f)) return tj_buf_puts(c, b, f < 0 ? "-Infinity" : "Infinity");
    char tmp[32];
    tj_float_repr(f, tmp);
    return tj_buf_puts(c, b, tmp);
}

bool tj_json_dump(tj_ctx *c, const tj_node *at, const tj_value *v, const tj_jsonopts *o, int level, tj_buf *b) {
    if (level > TJ_MAX_CALL_DEPTH) return UNSUP("a value nested deeper than %d levels cannot be written as JSON", TJ_MAX_CALL_DEPTH);
    switch (v->type) {
    case TJ_NONE: return tj_buf_puts(c, b, "null");
    case TJ_BOOL: return tj_buf_puts(c, b, v->u.b ? "true" : "false");
    case TJ_INT: return tj_buf_printf(c, b, "%lld", (long long)v->u.i);
    case TJ_FLOAT: return json_float(c, v->u.f, b);
    case TJ_STR: return json_str(c, v->u.s, o->ensure_ascii, b);
    case TJ_LIST: {
        const tj_list *l = v->u.l;
        if (l->kind != TJ_L_LIST && l->kind != TJ_L_TUPLE) break;
        if (l->n == 0) return tj_buf_puts(c, b, "[]");
        if (!tj_buf_putc(c, b, '[')) return false;
        for (size_t i = 0; i < l->n; i++) {
            if (i && !tj_buf_put(c, b, o->item_sep.p, o->item_sep.n)) return false;
            if (o->pretty && !json_newline(c, o, level + 1, b)) return false;
            if (!tj_json_dump(c, at, &l->v[i], o, level + 1, b)) return false;
        }
        if (o->pretty && !json_newline(c, o, level, b)) return false;
        return tj_buf_putc(c, b, ']');
    }
    case TJ_DICT: {
        const tj_dict *d = v->u.d;
        if (d->n == 0) return tj_buf_puts(c, b, "{}");
        size_t *idx = tj_alloc_array(c, d->n, sizeof(size_t));
        if (!idx) return false;
        for (size_t i = 0; i < d->n; i++) idx[i] = i;
        if (o->sort_keys && !tj_sort_values(c, at, d->k, idx, d->n, false)) return false;
        if (!tj_buf_putc(c, b, '{')) return false;
        for (size_t k = 0; k < d->n; k++) {
            const tj_value *key = &d->k[idx[k]];
            if (k && !tj_buf_put(c, b, o->item_sep.p, o->item_sep.n)) return false;
            if (o->pretty && !json_newline(c, o, level + 1, b)) return false;
            bool ok;
            switch (key->type) {
            case TJ_STR: ok = json_str(c, key->u.s, o->ensure_ascii, b); break;
            case TJ_INT: ok = tj_buf_printf(c, b, "\"%lld\"", (long long)key->u.i); break;
            case TJ_BOOL: ok = tj_buf_puts(c, b, key->u.b ? "\"true\"" : "\"false\""); break;
            case TJ_NONE: ok = tj_buf_puts(c, b, "\"null\""); break;
            case TJ_FLOAT: ok = tj_buf_putc(c, b, '"') && json_float(c, key->u.f, b) && tj_buf_putc(c, b, '"'); break;
            default: return RT("keys must be str, int, float, bool or None, not %s", tj_type_name(key));
            }
            if (!ok || !tj_buf_put(c, b, o->key_sep.p, o->key_sep.n) || !tj_json_dump(c, at, &d->v[idx[k]], o, level + 1, b))
                return false;
        }
        if (o->pretty && !json_newline(c, o, level, b)) return false;
        return tj_buf_putc(c, b, '}');
    }
    default:
        break;
    }
    return RT("Object of type %s is not JSON serializable", tj_type_name(v));
}

/* Python's printf-style formatting (str % args). */
bool tj_py_percent(tj_ctx *c, const tj_node *at, tj_str fmt, const tj_value *args, tj_value *out) {
    const tj_value *items = args;
    size_t n_items = 1, next = 0;
    if (args->type == TJ_LIST && args->u.l->kind == TJ_L_TUPLE) {
        items = args->u.l->v;
        n_items = args->u.l->n;
    }
    tj_buf b = {0};
    for (size_t i = 0; i < fmt.n; i++) {
        if (fmt.p[i] != '%') {
            if (!tj_buf_putc(c, &b, fmt.p[i])) return false;
            continue;
        }
        if (++i >= fmt.n) return RT("incomplete format");
        if (fmt.p[i] == '%') {
            if (!tj_buf_putc(c, &b, '%')) return false;
            continue;
        }
        if (fmt.p[i] == '(') return UNSUP("%%(name) formats are not supported");
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (i < fmt.n && strchr("-+ 0#", fmt.p[i]) && k < 10) spec[k++] = fmt.p[i++];
        while (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9' && k < 20) spec[k++] = fmt.p[i++];
        if (i < fmt.n && fmt.p[i] == '.') {
            spec[k++] = fmt.p[i++];
            while (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9' && k < 28) spec[k++] = fmt.p[i++];
        }
        if (i >= fmt.n) return RT("incomplete format");
        spec[k] = 0;
        {
            const char *w = spec + 1;
            while (*w && strchr("-+ 0#", *w)) w++;
            if (strtol(w, (char **)&w, 10) > 1000 || (*w == '.' && strtol(w + 1, NULL, 10) > 300))
                return UNSUP("%% formats wider than 1000 or more precise than 300 are not supported");
        }
        char conv = fmt.p[i];
        if (next >= n_items) return RT("not enough arguments for format string");
        const tj_value *a = &items[next++];
        if (conv == 's' || conv == 'r' || conv == 'a') {
            tj_buf t = {0};
            if (!(conv == 's' ? tj_py_str(c, at, a, &t) : tj_py_repr(c, at, a, &t, 0))) return false;
            /* width / precision / '-' on strings: in characters */
            long width = 0, prec = -1;
            bool left = strchr(spec, '-') != NULL;
            const char *w = spec + 1;
            while (*w && strchr("-+ 0#", *w)) w++;
            width = strtol(w, (char **)&w, 10);
            if (*w == '.') prec = strtol(w + 1, NULL, 10);
            tj_str s = tj_buf_str(&t);
            if (prec >= 0) {
                size_t off = 0;
                for (long q = 0; q < prec && off < t.n; q++) tj_utf8_next(t.p, t.n, &off);
                s = (tj_str){t.p, off};
            }
            tj_str padded;
            if (!tj_pad(c, s, width, tj_cstr(" "), left ? -1 : 1, &padded) || !tj_buf_put(c, &b, padded.p, padded.n)) return false;
            continue;
        }
        if (a->type == TJ_UNDEF) return tj_fail_undefined(c, at, a);
        if (conv == 'c') {
            if (a->type == TJ_STR && tj_utf8_len(a->u.s) == 1) {
                if (!tj_buf_put(c, &b, a->u.s.p, a->u.s.n)) return false;
                continue;
            }
            if (a->type != TJ_INT || a->u.i < 0 || a->u.i > 0x10FFFF) return RT("%%c requires an int in range(0x110000) or a char");
            if (!tj_buf_put_cp(c, &b, (uint32_t)a->u.i)) return false;
            continue;
        }
        if (a->type != TJ_INT && a->type != TJ_BOOL && a->type != TJ_FLOAT)
            return RT("%%%c format: a real number is required, not %s", conv, tj_type_name(a));
        char cbuf[512];
        if (strchr("diu", conv)) {
            double f = a->type == TJ_FLOAT ? a->u.f : 0;
            if (a->type == TJ_FLOAT && (isnan(f) || isinf(f))) return RT("cannot convert float to integer");
            long long iv = a->type == TJ_FLOAT ? (long long)f : a->type == TJ_INT ? (long long)a->u.i : (long long)a->u.b;
            memcpy(spec + k, "lld", 4);
            snprintf(cbuf, sizeof cbuf, spec, iv);
        } else if (strchr("xXo", conv)) {
            if (a->type == TJ_FLOAT) return RT("%%%c format: an integer is required, not float", conv);
            long long iv = a->type == TJ_INT ? (long long)a->u.i : (long long)a->u.b;
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = conv;
            spec[k] = 0;
            if (iv < 0) { /* Python prints -ff, C would print two's complement */
                snprintf(cbuf, sizeof cbuf, spec, -iv);
                memmove(cbuf + 1, cbuf, strlen(cbuf) + 1);
                cbuf[0] = '-';
            } else {
                snprintf(cbuf, sizeof cbuf, spec, iv);
            }
        } else if (strchr("eEfFgG", conv)) {
            double f = a->type == TJ_FLOAT ? a->u.f : a->type == TJ_INT ? (double)a->u.i : (double)a->u.b;
            spec[k++] = conv;
            spec[k] = 0;
            snprintf(cbuf, sizeof cbuf, spec, f);
        } else {
            return UNSUP("the %%%c format is not supported", conv);
        }
        if (!tj_buf_puts(c, &b, cbuf)) return false;
    }
    if (next < n_items && !(args->type == TJ_DICT)) return RT("not all arguments converted during string formatting");
    *out = tj_strv(tj_buf_str(&b));
    return true;
}

/* str.format with {}, {N}, {name}, !s / !r; format specs and field indexing are refused. */
static bool str_format(tj_ctx *c, const tj_node *at, tj_str fmt, const tj_value *args, size_t n_args,
                       const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    tj_buf b = {0};
    size_t auto_idx = 0;
    for (size_t i = 0; i < fmt.n; i++) {
        char ch = fmt.p[i];
        if (ch == '}' ) {
            if (i + 1 < fmt.n && fmt.p[i + 1] == '}') i++;
            else return RT("Single '}' encountered in format string");
            if (!tj_buf_putc(c, &b, '}')) return false;
            continue;
        }
        if (ch != '{') {
            if (!tj_buf_putc(c, &b, ch)) return false;
            continue;
        }
        if (i + 1 < fmt.n && fmt.p[i + 1] == '{') {
            i++;
            if (!tj_buf_putc(c, &b, '{')) return false;
            continue;
        }
        size_t e = i + 1;
        while (e < fmt.n && fmt.p[e] != '}') e++;
        if (e >= fmt.n) return RT("Single '{' encountered in format string");
        tj_str field = {fmt.p + i + 1, e - i - 1};
        char conv = 's';
        for (size_t q = 0; q < field.n; q++) {
            if (field.p[q] == ':' || field.p[q] == '.' || field.p[q] == '[')
                return UNSUP("str.format field '%.*s' is not supported", (int)field.n, field.p);
            if (field.p[q] == '!') {
                if (q + 2 != field.n || (field.p[q + 1] != 's' && field.p[q + 1] != 'r'))
                    return UNSUP("str.format conversion in '%.*s' is not supported", (int)field.n, field.p);
                conv = field.p[q + 1];
                field.n = q;
                break;
            }
        }
        const tj_value *v = NULL;
        if (field.n == 0 || (field.p[0] >= '0' && field.p[0] <= '9')) {
            size_t idx = field.n == 0 ? auto_idx++ : (size_t)strtoul(field.p, NULL, 10);
            if (idx >= n_args) return RT("Replacement index %zu out of range for positional args tuple", idx);
            v = &args[idx];
        } else {
            for (size_t k = 0; k < n_kw; k++)
                if (tj_str_same(kwnames[k], field)) v = &kwvals[k];
            if (!v) return RT("KeyError: '%.*s'", (int)field.n, field.p);
        }
        if (!(conv == 's' ? tj_py_str(c, at, v, &b) : tj_py_repr(c, at, v, &b, 0))) return false;
        i = e;
    }
    *out = tj_strv(tj_buf_str(&b));
    return true;
}

/* The methods: the name, the receiver kinds it belongs to, and what lean does with it. */
enum { K_STR = 1, K_DICT = 2, K_LIST = 4, K_TUPLE = 8, K_LOOP = 16 };
enum { M_OK, M_UNSAFE, M_NOTIMPL };
enum {
    M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_SPLITLINES, M_STARTSWITH, M_ENDSWITH,
    M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE, M_SWAPCASE, M_REPLACE, M_FIND, M_RFIND, M_INDEX,
    M_RINDEX, M_COUNT, M_JOIN, M_FORMAT, M_ISDIGIT, M_ISALPHA, M_ISALNUM, M_ISSPACE, M_ISLOWER,
    M_ISUPPER, M_CENTER, M_LJUST, M_RJUST, M_ZFILL, M_REMOVEPREFIX, M_REMOVESUFFIX,
    M_GET, M_ITEMS, M_KEYS, M_VALUES, M_COPY, M_CYCLE, M_CHANGED, M_OTHER,
};
typedef struct method { const char *name; int kinds; int id; int status; } method;
static const method methods[] = {
    {"strip", K_STR, M_STRIP, M_OK}, {"lstrip", K_STR, M_LSTRIP, M_OK}, {"rstrip", K_STR, M_RSTRIP, M_OK},
    {"split", K_STR, M_SPLIT, M_OK}, {"rsplit", K_STR, M_RSPLIT, M_OK}, {"splitlines", K_STR, M_SPLITLINES, M_OK},
    {"startswith", K_STR, M_STARTSWITH, M_OK}, {"endswith", K_STR, M_ENDSWITH, M_OK},
    {"upper", K_STR, M_UPPER, M_OK}, {"lower", K_STR, M_LOWER, M_OK}, {"title", K_STR, M_TITLE, M_OK},
    {"capitalize", K_STR, M_CAPITALIZE, M_OK}, {"swapcase", K_STR, M_SWAPCASE, M_OK},
    {"replace", K_STR, M_REPLACE, M_OK}, {"find", K_STR, M_FIND, M_OK}, {"rfind", K_STR, M_RFIND, M_OK},
    {"index", K_STR | K_LIST | K_TUPLE, M_INDEX, M_OK}, {"rindex", K_STR, M_RINDEX, M_OK},
    {"count", K_STR | K_LIST | K_TUPLE, M_COUNT, M_OK}, {"join", K_STR, M_JOIN, M_OK},
    {"format", K_STR, M_FORMAT, M_OK}, {"isdigit", K_STR, M_ISDIGIT, M_OK}, {"isdecimal", K_STR, M_ISDIGIT, M_OK},
    {"isnumeric", K_STR, M_ISDIGIT, M_OK}, {"isalpha", K_STR, M_ISALPHA, M_OK}, {"isalnum", K_STR, M_ISALNUM, M_OK},
    {"isspace", K_STR, M_ISSPACE, M_OK}, {"islower", K_STR, M_ISLOWER, M_OK}, {"isupper", K_STR, M_ISUPPER, M_OK},
    {"center", K_STR, M_CENTER, M_OK}, {"ljust", K_STR, M_LJUST, M_OK}, {"rjust", K_STR, M_RJUST, M_OK},
    {"zfill", K_STR, M_ZFILL, M_OK}, {"removeprefix", K_STR, M_REMOVEPREFIX, M_OK},
    {"removesuffix", K_STR, M_REMOVESUFFIX, M_OK},
    {"casefold", K_STR, M_OTHER, M_NOTIMPL}, {"encode", K_STR, M_OTHER, M_NOTIMPL},
    {"expandtabs", K_STR, M_OTHER, M_NOTIMPL}, {"format_map", K_STR, M_OTHER, M_NOTIMPL},
    {"isascii", K_STR, M_OTHER, M_NOTIMPL}, {"isidentifier", K_STR, M_OTHER, M_NOTIMPL},
    {"isprintable", K_STR, M_OTHER, M_NOTIMPL}, {"istitle", K_STR, M_OTHER, M_NOTIMPL},
    {"maketrans", K_STR, M_OTHER, M_NOTIMPL}, {"partition", K_STR, M_OTHER, M_NOTIMPL},
    {"rpartition", K_STR, M_OTHER, M_NOTIMPL}, {"translate", K_STR, M_OTHER, M_NOTIMPL},
    {"get", K_DICT, M_GET, M_OK}, {"items", K_DICT, M_ITEMS, M_OK}, {"keys", K_DICT, M_KEYS, M_OK},
    {"values", K_DICT, M_VALUES, M_OK}, {"copy", K_DICT | K_LIST, M_COPY, M_OK},
    {"fromkeys", K_DICT, M_OTHER, M_NOTIMPL},
    {"clear", K_DICT, M_OTHER, M_UNSAFE}, {"pop", K_DICT, M_OTHER, M_UNSAFE},
    {"popitem", K_DICT, M_OTHER, M_UNSAFE}, {"setdefault", K_DICT, M_OTHER, M_UNSAFE},
    {"update", K_DICT, M_OTHER, M_UNSAFE},
    {"append", K_LIST, M_OTHER, M_UNSAFE}, {"reverse", K_LIST, M_OTHER, M_UNSAFE},
    {"insert", K_LIST, M_OTHER, M_UNSAFE}, {"sort", K_LIST, M_OTHER, M_UNSAFE},
    {"extend", K_LIST, M_OTHER, M_UNSAFE}, {"remove", K_LIST, M_OTHER, M_UNSAFE},
    /* list.pop and list.clear pass jinja2's sandbox and mutate; lean's values are immutable */
    {"pop", K_LIST, M_OTHER, M_NOTIMPL}, {"clear", K_LIST, M_OTHER, M_NOTIMPL},
    {"cycle", K_LOOP, M_CYCLE, M_OK}, {"changed", K_LOOP, M_CHANGED, M_OK},
};

static int kind_of(const tj_value *v) {
    switch (v->type) {
    case TJ_STR: return K_STR;
    case TJ_DICT: return K_DICT;
    case TJ_LOOP: return K_LOOP;
    case TJ_LIST: return v->u.l->kind == TJ_L_LIST ? K_LIST : v->u.l->kind == TJ_L_TUPLE ? K_TUPLE : 0;
    default: return 0;
    }
}

bool tj_method_lookup(tj_ctx *c, const tj_value *obj, tj_str name, tj_value *out) {
    int k = kind_of(obj);
    if (!k) return false;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        const method *m = &methods[i];
        if (!(m->kinds & k) || !tj_str_eq(name, m->name)) continue;
        if (m->status == M_UNSAFE) {
            *out = tj_undef(name);
            out->flags = TJ_F_UNSAFE;
            return true;
        }
        tj_func *fn = tj_alloc(c, sizeof *fn);
        if (!fn) return false;
        memset(fn, 0, sizeof *fn);
        fn->kind = TJ_FN_METHOD;
        fn->id = m->status == M_NOTIMPL ? -1 : m->id;
        fn->name = name;
        fn->self = *obj;
        out->type = TJ_FUNC;
        out->flags = 0;
        out->u.fn = fn;
        return true;
    }
    return false;
}

/* ---- 4. methods ---- */

bool tj_to_int(tj_ctx *c, const tj_node *at, const tj_value *v, int64_t base, bool *ok, int64_t *out) {
    *ok = false;
    if (v->type == TJ_UNDEF) return tj_fail_undefined(c, at, v);
    if (v->type == TJ_INT || v->type == TJ_BOOL) {
        *out = v->type == TJ_INT ? v->u.i : v->u.b;
        *ok = true;
        return true;
    }
    if (v->type == TJ_FLOAT) {
        if (!isfinite(v->u.f)) return RT("cannot convert float %s to integer", isnan(v->u.f) ? "NaN" : "infinity");
        if (v->u.f >= 9.2e18 || v->u.f <= -9.2e18) return UNSUP("integer overflow: lean's integers are 64-bit");
        *out = (int64_t)v->u.f;
        *ok = true;
        return true;
    }
    if (v->type != TJ_STR) return true;
    /* int(str, base): whitespace, sign, optional prefix, digits with single underscores */
    tj_str s = tj_strip(v->u.s, NULL, true, true);
    size_t i = 0;
    bool neg = false;
    if (i < s.n && (s.p[i] == '+' || s.p[i] == '-')) neg = s.p[i++] == '-';
    int64_t b = base;
    if (i + 1 < s.n && s.p[i] == '0') {
        char k = (char)(s.p[i + 1] | 32);
        int pb = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
        if (pb && (b == pb || b == 0)) {
            b = pb;
            i += 2;
            if (i < s.n && s.p[i] == '_') i++;
        }
    }
    if (b == 0) b = 10;
    if (b < 2 || b > 36) return RT("int() base must be >= 2 and <= 36, or 0");
    uint64_t acc = 0;
    bool any = false, prev_us = true;
    for (; i < s.n; i++) {
        if (s.p[i] == '_') {
            if (prev_us) goto not_int;
            prev_us = true;
            continue;
        }
        int d = s.p[i] >= '0' && s.p[i] <= '9' ? s.p[i] - '0' : (s.p[i] | 32) >= 'a' && (s.p[i] | 32) <= 'z' ? (s.p[i] | 32) - 'a' + 10 : 99;
        if (d >= b) goto not_int;
        if (acc > ((uint64_t)INT64_MAX - (uint64_t)d) / (uint64_t)b) return UNSUP("integer overflow: lean's integers are 64-bit");
        acc = acc * (uint64_t)b + (uint64_t)d;
        any = true;
        prev_us = false;
    }
    if (!any || prev_us) goto not_int;
    *out = neg ? -(int64_t)acc : (int64_t)acc;
    *ok = true;
    return true;
not_int:; /* jinja2: then int(float(value)) */
    double f;
    if (tj_parse_float(v->u.s, &f) && isfinite(f) && f < 9.2e18 && f > -9.2e18) {
        *out = (int64_t)f;
        *ok = true;
    }
    return true;
}

/* Python's float(str): whitespace, sign, digits with single underscores, inf/nan. */
bool tj_parse_float(tj_str s, double *out) {
    s = tj_strip(s, NULL, true, true);
    char tmp[128];
    size_t k = 0;
    bool prev_digit = false;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (ch == '_') {
            if (!prev_digit || i + 1 >= s.n || s.p[i + 1] < '0' || s.p[i + 1] > '9') return false;
            continue;
        }
        if (k >= sizeof tmp - 1 || !(strchr("0123456789+-.eEinfatyINFATY", ch))) return false;
        tmp[k++] = ch;
        prev_digit = ch >= '0' && ch <= '9';
    }
    tmp[k] = 0;
    if (k == 0) return false;
    const char *p = tmp + (tmp[0] == '+' || tmp[0] == '-');
    char word[16];
    size_t m = 0;
    for (; p[m] && m < sizeof word - 1; m++) word[m] = low(p[m]);
    word[m] = 0;
    if (!strcmp(word, "inf") || !strcmp(word, "infinity") || !strcmp(word, "nan")) {
        double v = word[0] == 'n' ? NAN : INFINITY;
        *out = tmp[0] == '-' ? -v : v;
        return true;
    }
    for (const char *q = p; *q; q++)
        if (strchr("inftyaINFTYA", *q)) return false;
    char *end;
    *out = strtod(tmp, &end);
    return *end == 0 && end != tmp;
}

/* fname: the method's name as called (errors name it). */
static bool str_method(tj_ctx *c, const tj_node *at, int id, tj_str fname, tj_str self, const tj_value *args,
                       size_t n_args, const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    tj_str s;
    switch (id) {
    case M_STRIP: case M_LSTRIP: case M_RSTRIP: {
        BIND(fname, "chars");
        tj_str chars;
        bool has = a_[0] && a_[0]->type != TJ_NONE;
        if (has && !tj_want_str(c, at, a_[0], "chars", &chars)) return false;
        *out = tj_strv(tj_strip(self, has ? &chars : NULL, id != M_RSTRIP, id != M_LSTRIP));
        return true;
    }
    case M_SPLIT: case M_RSPLIT: {
        BIND(fname, "sep", "maxsplit");
        tj_str sep;
        int64_t maxsplit = -1;
        bool has = a_[0] && a_[0]->type != TJ_NONE;
        tj_list *l = NULL;
        if ((has && !tj_want_str(c, at, a_[0], "sep", &sep)) || (a_[1] && !tj_want_int(c, at, a_[1], "maxsplit", &maxsplit)) ||
            !split(c, at, self, has ? &sep : NULL, maxsplit, id == M_RSPLIT, &l))
            return false;
        *out = tj_listv(l);
        return true;
    }
    case M_SPLITLINES: {
        BIND(fname, "keepends");
        tj_list *l = NULL;
        if (!tj_splitlines(c, self, a_[0] && tj_eval_to_bool(*a_[0]), &l)) return false;
        *out = tj_listv(l);
        return true;
    }
    case M_STARTSWITH: case M_ENDSWITH: {
        BIND(fname, "prefix", "start", "end");
        if (!a_[0]) return RT("%.*s() needs an argument", (int)fname.n, fname.p);
        if (a_[1] || a_[2]) return UNSUP("startswith/endswith with start/end are not supported");
        const tj_value *cands = a_[0];
        size_t nc = 1;
        if (a_[0]->type == TJ_LIST && a_[0]->u.l->kind == TJ_L_TUPLE) {
            cands = a_[0]->u.l->v;
            nc = a_[0]->u.l->n;
        }
        *out = tj_bool(false);
        for (size_t i = 0; i < nc; i++) {
            tj_str p;
            if (!tj_want_str(c, at, &cands[i], "the prefix", &p)) return false;
            if (p.n <= self.n && memcmp(id == M_STARTSWITH ? self.p : self.p + self.n - p.n, p.p, p.n) == 0)
                *out = tj_bool(true);
        }
        return true;
    }
    case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE: case M_SWAPCASE: {
        BIND(fname, NULL);
        (void)a_;
        tj_casemode m = id == M_UPPER ? TJ_CASE_UPPER : id == M_LOWER ? TJ_CASE_LOWER : id == M_TITLE ? TJ_CASE_TITLE_PY
                   : id == M_CAPITALIZE ? TJ_CASE_CAPITALIZE : TJ_CASE_SWAP;
        if (!tj_map_case(c, self, m, &s)) return false;
        *out = tj_strv(s);
        return true;
    }
    case M_REPLACE: {
        BIND(fname, "old", "new", "count");
        tj_str old, nw;
        int64_t count = -1;
        if (!a_[0] || !a_[1]) return RT("replace() needs old and new");
        if (!tj_want_str(c, at, a_[0], "old", &old) || !tj_want_str(c, at, a_[1], "new", &nw) ||
            (a_[2] && !tj_want_int(c, at, a_[2], "count", &count)) || !tj_str_replace(c, self, old, nw, count, &s))
            return false;
        *out = tj_strv(s);
        return true;
    }
    case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX: case M_COUNT: {
        BIND(fname, "sub", "start", "end");
        tj_str sub;
        if (!a_[0]) return RT("%.*s() needs an argument", (int)fname.n, fname.p);
        if (a_[1] || a_[2]) return UNSUP("find/index/count with start/end are not supported");
        if (!tj_want_str(c, at, a_[0], "the substring", &sub)) return false;
        if (id == M_COUNT) {
            int64_t n = 0;
            if (sub.n == 0) n = (int64_t)tj_utf8_len(self) + 1;
            else
                for (size_t i = 0; i + sub.n <= self.n;) {
                    if (memcmp(self.p + i, sub.p, sub.n) == 0) {
                        n++;
                        i += sub.n;
                    } else {
                        i++;
                    }
                }
            *out = tj_int(n);
            return true;
        }
        int64_t k = tj_find(self, sub, id == M_RFIND || id == M_RINDEX);
        if (k < 0 && (id == M_INDEX || id == M_RINDEX)) return RT("substring not found");
        *out = tj_int(k < 0 ? -1 : char_index(self, (size_t)k));
        return true;
    }
    case M_JOIN: {
        BIND(fname, "iterable");
        tj_list *items = NULL;
        if (!a_[0]) return RT("join() needs an argument");
        if (!tj_iterate(c, at, a_[0], &items)) return false;
        tj_buf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->v[i].type != TJ_STR) return RT("sequence item %zu: expected str instance, %s found", i, tj_type_name(&items->v[i]));
            if ((i && !tj_buf_put(c, &b, self.p, self.n)) || !tj_buf_put(c, &b, items->v[i].u.s.p, items->v[i].u.s.n)) return false;
        }
        *out = tj_strv(tj_buf_str(&b));
        return true;
    }
    case M_FORMAT:
        return str_format(c, at, self, args, n_args, kwnames, kwvals, n_kw, out);
    case M_ISDIGIT: case M_ISALPHA: case M_ISALNUM: case M_ISSPACE: case M_ISLOWER: case M_ISUPPER: {
        BIND(fname, NULL);
        (void)a_;
        bool r = self.n > 0;
        if (id == M_ISLOWER || id == M_ISUPPER) {
            r = tj_cased_test(self, id == M_ISLOWER);
        } else {
            for (size_t i = 0; i < self.n && r;) {
                size_t j = i;
                uint32_t cp = tj_utf8_next(self.p, self.n, &j);
                enum lean_ucat cat = lean_ucat_of(cp);
                bool d = cat == LEAN_UCAT_ND, al = cat >= LEAN_UCAT_LU && cat <= LEAN_UCAT_LO;
                r = id == M_ISDIGIT ? d : id == M_ISALPHA ? al : id == M_ISALNUM ? (d || al) : tj_py_space(cp);
                i = j;
            }
        }
        *out = tj_bool(r);
        return true;
    }
    case M_CENTER: case M_LJUST: case M_RJUST: {
        BIND(fname, "width", "fillchar");
        int64_t w;
        tj_str fill = tj_cstr(" ");
        if (!a_[0]) return RT("%.*s() needs a width", (int)fname.n, fname.p);
        if (!tj_want_int(c, at, a_[0], "width", &w) || (a_[1] && !tj_want_str(c, at, a_[1], "fillchar", &fill))) return false;
        if (tj_utf8_len(fill) != 1) return RT("The fill character must be exactly one character long");
        if (w > 100000) return UNSUP("a width over 100000 is not supported");
        if (!tj_pad(c, self, w, fill, id == M_CENTER ? 0 : id == M_LJUST ? -1 : 1, &s)) return false;
        *out = tj_strv(s);
        return true;
    }
    case M_ZFILL: {
        BIND(fname, "width");
        int64_t w;
        if (!a_[0] || !tj_want_int(c, at, a_[0], "width", &w)) return c->status == LEAN_OK ? RT("zfill() needs a width") : false;
        int64_t len = (int64_t)tj_utf8_len(self);
        if (w > 100000) return UNSUP("a width over 100000 is not supported");
        tj_buf b = {0};
        size_t sign = self.n && (self.p[0] == '+' || self.p[0] == '-') ? 1 : 0;
        if (!tj_buf_put(c, &b, self.p, sign)) return false;
        for (int64_t i = len; i < w; i++)
            if (!tj_buf_putc(c, &b, '0')) return false;
        if (!tj_buf_put(c, &b, self.p + sign, self.n - sign)) return false;
        *out = tj_strv(tj_buf_str(&b));
        return true;
    }
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
        BIND(fname, "affix");
        tj_str p;
        if (!a_[0] || !tj_want_str(c, at, a_[0], "the affix", &p)) return c->status == LEAN_OK ? RT("%.*s() needs an argument", (int)fname.n, fname.p) : false;
        s = self;
        if (p.n <= s.n && memcmp(id == M_REMOVEPREFIX ? s.p : s.p + s.n - p.n, p.p, p.n) == 0) {
            if (id == M_REMOVEPREFIX) s.p += p.n;
            s.n -= p.n;
        }
        *out = tj_strv(s);
        return true;
    }
    default:
        return UNSUP("this str method is not supported");
    }
}

bool tj_call_method(tj_ctx *c, const tj_node *at, const tj_func *fn, const tj_value *args, size_t n_args,
                    const tj_str *kwnames, const tj_value *kwvals, size_t n_kw, tj_value *out) {
    const tj_value *self = &fn->self;
    int nn = (int)(fn->name.n > 40 ? 40 : fn->name.n);
    if (fn->id < 0) return UNSUP("the method %s.%.*s() is not supported", tj_type_name(self), nn, fn->name.p);
    if (self->type == TJ_STR) return str_method(c, at, fn->id, fn->name, self->u.s, args, n_args, kwnames, kwvals, n_kw, out);
    switch (fn->id) {
    case M_GET: {
        BIND(fn->name, "key", "default");
        if (!a_[0]) return RT("get expected at least 1 argument, got 0");
        if (a_[0]->type == TJ_DICT || (a_[0]->type == TJ_LIST && a_[0]->u.l->kind != TJ_L_TUPLE))
            return RT("unhashable type: '%s'", tj_type_name(a_[0]));
        tj_value *v = tj_dict_get(self->u.d, *a_[0]);
        *out = v ? *v : a_[1] ? *a_[1] : tj_none();
        return true;
    }
    case M_ITEMS: case M_KEYS: case M_VALUES: {
        BIND(fn->name, NULL);
        (void)a_;
        const tj_dict *d = self->u.d;
        tj_list *l = tj_list_new(c, fn->id == M_ITEMS ? TJ_L_ITEMS : fn->id == M_KEYS ? TJ_L_KEYS : TJ_L_VALUES, d->n);
        if (!l) return false;
        for (size_t i = 0; i < d->n; i++) {
            if (fn->id == M_ITEMS) {
                tj_list *pair = tj_list_new(c, TJ_L_TUPLE, 2);
                if (!pair) return false;
                pair->v[0] = d->k[i];
                pair->v[1] = d->v[i];
                pair->n = 2;
                l->v[l->n++] = tj_listv(pair);
            } else {
                l->v[l->n++] = fn->id == M_KEYS ? d->k[i] : d->v[i];
            }
        }
        *out = tj_listv(l);
        return true;
    }
    case M_COPY: {
        BIND(fn->name, NULL);
        (void)a_;
        if (self->type == TJ_DICT) {
            tj_dict *d = tj_dict_new(c, self->u.d->n);
            if (!d) return false;
            tj_copy(d->k, self->u.d->k, self->u.d->n * sizeof(tj_value));
            tj_copy(d->v, self->u.d->v, self->u.d->n * sizeof(tj_value));
            d->n = self->u.d->n;
            *out = tj_dictv(d);
        } else {
            tj_list *l = tj_list_new(c, TJ_L_LIST, self->u.l->n);
            if (!l) return false;
            tj_copy(l->v, self->u.l->v, self->u.l->n * sizeof(tj_value));
            l->n = self->u.l->n;
            *out = tj_listv(l);
        }
        return true;
    }
    case M_INDEX: case M_COUNT: {
        if (!tj_no_kwargs(c, at, fn->name, kwnames, n_kw)) return false;
        if (n_args != 1) return RT("%.*s() takes exactly one argument (%zu given)", nn, fn->name.p, n_args);
        int64_t n = 0;
        for (size_t i = 0; i < self->u.l->n; i++) {
            if (!tj_py_eq(&self->u.l->v[i], &args[0])) continue;
            if (fn->id == M_INDEX) {
                *out = tj_int((int64_t)i);
                return true;
            }
            n++;
        }
        if (fn->id == M_INDEX) return RT("the value is not in the list");
        *out = tj_int(n);
        return true;
    }
    case M_CYCLE: {
        if (!tj_no_kwargs(c, at, fn->name, kwnames, n_kw)) return false;
        if (n_args == 0) return RT("no items for cycling given");
        *out = args[(size_t)self->u.loop->index0 % n_args];
        return true;
    }
    case M_CHANGED: {
        if (!tj_no_kwargs(c, at, fn->name, kwnames, n_kw)) return false;
        tj_loop *lp = self->u.loop;
        tj_list *l = tj_list_new(c, TJ_L_LIST, n_args);
        if (!l) return false;
        tj_copy(l->v, args, n_args * sizeof(tj_value));
        l->n = n_args;
        tj_value now = tj_listv(l);
        bool changed = !lp->has_changed || !tj_py_eq(&lp->last_changed, &now);
        lp->last_changed = now;
        lp->has_changed = true;
        *out = tj_bool(changed);
        return true;
    }
    default:
        return UNSUP("the method %s.%.*s() is not supported", tj_type_name(self), nn, fn->name.p);
    }
}
