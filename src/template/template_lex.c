/* template_lex.c — a Jinja template's text -> tokens, following jinja2 3.1's lexer.py rule
 * for rule with the settings transformers uses: trim_blocks (a newline right after a block
 * or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or comment tag on
 * its own line are dropped), keep_trailing_newline off.
 *
 * What it does not do: parse (template_parse.c). Strings come out decoded the way jinja2
 * decodes them (Python's unicode-escape after backslashreplace); integers beyond 64 bits,
 * \N{...} escapes and surrogate escapes are refused.
 *
 * Sections:
 *   1. source   newlines normalized (\r\n, \r -> \n), one trailing \n dropped
 *   2. lexer    data, {{ }}, {% %}, {# #}, raw; -/+ whitespace control; names, numbers,
 *               strings, operators; brackets balanced (an end tag inside brackets is not one)
 */
#include "template/template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tj_op_text[O_COUNT] = {
    "+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(", ")", "{", "}", "==", "!=", ">",
    ">=", "<", "<=", "=", ".", ":", "|", ",", ";",
};

/* ---- 1. source ---- */

/* jinja2's tokeniter: lines split on \r\n, \r, \n and joined with \n; a last empty line
 * (one trailing newline) dropped. */
static bool normalize_source(tj_ctx *c, const char *src, size_t n, tj_str *out) {
    char *d = tj_alloc(c, n + 1);
    if (!d) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            d[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            d[k++] = src[i];
        }
    }
    if (k > 0 && d[k - 1] == '\n') k--;
    d[k] = 0;
    *out = (tj_str){d, k};
    return true;
}

/* ---- 2. lexer ---- */

typedef struct lexer {
    tj_ctx *c;
    const char *s;
    size_t n, pos;
    /* position -> line/col, advanced monotonically */
    size_t loc_pos, loc_line_start;
    int loc_line;
    tj_tok *toks;
    size_t n_toks, cap_toks;
    bool line_starting;
    char balance[TJ_MAX_PARSE_DEPTH]; /* expected closing brackets */
    int n_balance;
} lexer;

static void locate(lexer *lx, size_t pos, int *line, int *col) {
    if (pos < lx->loc_pos) { /* never expected; restart */
        lx->loc_pos = 0;
        lx->loc_line = 1;
        lx->loc_line_start = 0;
    }
    for (; lx->loc_pos < pos && lx->loc_pos < lx->n; lx->loc_pos++) {
        if (lx->s[lx->loc_pos] == '\n') {
            lx->loc_line++;
            lx->loc_line_start = lx->loc_pos + 1;
        }
    }
    *line = lx->loc_line;
    *col = (int)(pos - lx->loc_line_start) + 1;
}

static bool lex_fail(lexer *lx, size_t pos, lean_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool lex_fail(lexer *lx, size_t pos, lean_status st, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    locate(lx, pos, &line, &col);
    return tj_fail(lx->c, line, col, st, "%s", msg);
}

static tj_tok *push_tok(lexer *lx, uint8_t type, size_t pos) {
    if (lx->n_toks == lx->cap_toks) {
        size_t cap = lx->cap_toks ? lx->cap_toks * 2 : 64;
        tj_tok *t = tj_realloc(lx->c, lx->toks, lx->n_toks * sizeof(tj_tok), cap * sizeof(tj_tok));
        if (!t) return NULL;
        lx->toks = t;
        lx->cap_toks = cap;
    }
    tj_tok *t = &lx->toks[lx->n_toks++];
    memset(t, 0, sizeof *t);
    t->type = type;
    locate(lx, pos, &t->line, &t->col);
    return t;
}

/* Python's \s at pos: the byte length of the whitespace character there, or 0. */
static size_t ws_at(const char *s, size_t n, size_t pos) {
    if (pos >= n) return 0;
    unsigned char ch = (unsigned char)s[pos];
    if (ch < 0x80) return tj_py_space(ch) ? 1 : 0;
    size_t i = pos;
    uint32_t cp = tj_utf8_next(s, n, &i);
    return tj_py_space(cp) ? i - pos : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t pos) {
    size_t k;
    while ((k = ws_at(s, n, pos)) > 0) pos += k;
    return pos;
}

/* Python's str.rstrip(): the length of text without its trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1; /* back up to the start of the last character */
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80 && end - start < 4) start--;
        if (ws_at(s, end, start) != end - start) break;
        end = start;
    }
    return end;
}

/* jinja2's OptionalLStrip: text before a tag, after the tag's whitespace control. */
static size_t strip_before_tag(lexer *lx, const char *text, size_t n, char sign, bool is_variable) {
    if (sign == '-') return rstrip_len(text, n);
    if (sign == '+' || is_variable) return n;
    size_t l_pos = 0; /* lstrip_blocks: the start of the line the tag is on */
    for (size_t i = n; i > 0; i--)
        if (text[i - 1] == '\n') {
            l_pos = i;
            break;
        }
    if (l_pos == 0 && !lx->line_starting) return n;
    if (l_pos == n) return n; /* nothing to strip (\s+ needs one character) */
    for (size_t i = l_pos; i < n;) {
        size_t k = ws_at(text, n, i);
        if (!k) return n;
        i += k;
    }
    return l_pos;
}

static bool emit_data(lexer *lx, size_t pos, size_t n) {
    if (n == 0) return true;
    tj_tok *t = push_tok(lx, TK_DATA, pos);
    if (!t) return false;
    t->s = (tj_str){lx->s + pos, n};
    return true;
}

static bool starts(const lexer *lx, size_t pos, const char *lit) {
    size_t k = strlen(lit);
    return lx->n - pos >= k && memcmp(lx->s + pos, lit, k) == 0;
}

/* After a block/comment/raw end: "+X" keeps what follows, "-X" strips all whitespace,
 * plain "X" drops one newline (trim_blocks). Returns the position after. */
static size_t end_tag_suffix(lexer *lx, size_t pos, char sign, size_t end_len, bool trim) {
    pos += end_len;
    if (sign == '-') {
        size_t p2 = skip_ws(lx->s, lx->n, pos);
        lx->line_starting = p2 > pos ? lx->s[p2 - 1] == '\n' : false;
        return p2;
    }
    if (sign != '+' && trim && pos < lx->n && lx->s[pos] == '\n') {
        lx->line_starting = true;
        return pos + 1;
    }
    lx->line_starting = false;
    return pos;
}

static bool is_name_start(unsigned char ch) { return ch == '_' || (unsigned)((ch | 32) - 'a') < 26u || ch >= 0x80; }
static bool is_name_char(unsigned char ch) { return is_name_start(ch) || (unsigned)(ch - '0') < 10u; }
static bool is_digit(char ch) { return (unsigned char)(ch - '0') < 10u; }

/* (\d+_)*\d+ at pos: the end, or pos when there is none. */
static size_t digits_end(const lexer *lx, size_t pos) {
    size_t i = pos;
    if (i >= lx->n || !is_digit(lx->s[i])) return pos;
    for (;;) {
        while (i < lx->n && is_digit(lx->s[i])) i++;
        if (i + 1 < lx->n && lx->s[i] == '_' && is_digit(lx->s[i + 1])) {
            i++;
            continue;
        }
        return i;
    }
}

/* jinja2's float_re: the end of a float literal at pos, or 0. */
static size_t float_end(const lexer *lx, size_t pos) {
    if (pos > 0 && lx->s[pos - 1] == '.') return 0;
    size_t i = digits_end(lx, pos);
    if (i == pos) return 0;
    /* (\.D)?e[+-]?D */
    size_t j = i;
    if (j < lx->n && lx->s[j] == '.') {
        size_t k = digits_end(lx, j + 1);
        if (k > j + 1) j = k;
    }
    if (j < lx->n && (lx->s[j] | 32) == 'e') {
        size_t k = j + 1;
        if (k < lx->n && (lx->s[k] == '+' || lx->s[k] == '-')) k++;
        size_t e = digits_end(lx, k);
        if (e > k) return e;
    }
    /* \.D */
    if (i < lx->n && lx->s[i] == '.') {
        size_t k = digits_end(lx, i + 1);
        if (k > i + 1) return k;
    }
    return 0;
}

static int digit_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch |= 32;
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 10;
    return 99;
}

/* jinja2's integer_re: 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*. Returns the end (0: none). */
static size_t int_end(const lexer *lx, size_t pos, int *base) {
    const char *s = lx->s;
    size_t n = lx->n, i = pos;
    if (i >= n || !is_digit(s[i])) return 0;
    if (s[i] == '0' && i + 1 < n && ((s[i + 1] | 32) == 'b' || (s[i + 1] | 32) == 'o' || (s[i + 1] | 32) == 'x')) {
        char kind = (char)(s[i + 1] | 32);
        int b = kind == 'b' ? 2 : kind == 'o' ? 8 : 16;
        size_t j = i + 2, last = 0;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') k++;
            if (k < n && digit_value(s[k]) < b) {
                j = k + 1;
                last = j;
            } else {
                break;
            }
        }
        if (last) {
            *base = b;
            return last;
        }
    }
    *base = 10;
    if (s[i] == '0') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') k++;
            if (k < n && s[k] == '0') j = k + 1;
            else break;
        }
        return j;
    }
    size_t j = i + 1;
    for (;;) {
        size_t k = j;
        if (k < n && s[k] == '_') k++;
        if (k < n && is_digit(s[k])) j = k + 1;
        else break;
    }
    return j;
}

static bool hexval(const char *s, size_t n, int digits, uint32_t *out) {
    uint32_t v = 0;
    if (n < (size_t)digits) return false;
    for (int k = 0; k < digits; k++) {
        int d = digit_value(s[k]);
        if (d >= 16) return false;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return true;
}

/* A string literal's body as Python's .encode("ascii", "backslashreplace")
 * .decode("unicode-escape") reads it (what jinja2's lexer does). */
static bool decode_string(lexer *lx, size_t pos, const char *s, size_t n, tj_str *out) {
    tj_ctx *c = lx->c;
    tj_buf b = {0};
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            size_t j = i;
            while (j < n && s[j] != '\\') j++;
            if (!tj_buf_put(c, &b, s + i, j - i)) return false;
            i = j;
            continue;
        }
        if (i + 1 >= n) return lex_fail(lx, pos, LEAN_ERR_FORMAT, "bad escape at the end of a string");
        unsigned char e = (unsigned char)s[i + 1];
        i += 2;
        uint32_t cp;
        switch (e) {
        case '\n': continue; /* line continuation */
        case '\\': cp = '\\'; break;
        case '\'': cp = '\''; break;
        case '"': cp = '"'; break;
        case 'a': cp = 7; break;
        case 'b': cp = 8; break;
        case 'f': cp = 12; break;
        case 'n': cp = 10; break;
        case 'r': cp = 13; break;
        case 't': cp = 9; break;
        case 'v': cp = 11; break;
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (!hexval(s + i, n - i, digits, &cp))
                return lex_fail(lx, pos, LEAN_ERR_FORMAT, "truncated \\%s escape in a string literal",
                                e == 'x' ? "x" : e == 'u' ? "u" : "U");
            i += (size_t)digits;
            if (cp > 0x10FFFF)
                return lex_fail(lx, pos, LEAN_ERR_FORMAT, "illegal Unicode character in a string literal");
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return lex_fail(lx, pos, LEAN_ERR_UNSUPPORTED,
                                "a surrogate code point in a string literal is not supported");
            break;
        }
        case 'N':
            return lex_fail(lx, pos, LEAN_ERR_UNSUPPORTED, "\\N{...} escapes are not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = e - '0';
                for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
                break;
            }
            if (e >= 0x80) {
                /* backslashreplace turned the character into \xhh / \uhhhh / \Uhhhhhhhh,
                 * whose backslash the escaped backslash then consumed: the text stays. */
                size_t k = i - 1;
                uint32_t u = tj_utf8_next(s, n, &k);
                i = k;
                if (!tj_buf_putc(c, &b, '\\')) return false;
                bool ok = u < 0x100 ? tj_buf_printf(c, &b, "x%02x", (unsigned)u)
                        : u < 0x10000 ? tj_buf_printf(c, &b, "u%04x", (unsigned)u)
                                      : tj_buf_printf(c, &b, "U%08x", (unsigned)u);
                if (!ok) return false;
                continue;
            }
            if (!tj_buf_putc(c, &b, '\\') || !tj_buf_putc(c, &b, (char)e)) return false;
            continue;
        }
        if (!tj_buf_put_cp(c, &b, cp)) return false;
    }
    *out = b.n ? tj_buf_str(&b) : (tj_str){"", 0};
    return true;
}

/* The tokens inside {{ }} or {% %}, up to and including the end tag. */
static bool lex_tag(lexer *lx, bool block, size_t open_pos) {
    const char *s = lx->s;
    size_t n = lx->n;
    lx->n_balance = 0;
    for (;;) {
        size_t pos = lx->pos;
        if (lx->n_balance == 0) {
            if (block && (starts(lx, pos, "+%}") || starts(lx, pos, "-%}") || starts(lx, pos, "%}"))) {
                char sign = s[pos] == '%' ? 0 : s[pos];
                if (!push_tok(lx, TK_BLOCK_END, pos)) return false;
                lx->pos = end_tag_suffix(lx, pos, sign, sign ? 3 : 2, true);
                return true;
            }
            if (!block && (starts(lx, pos, "-}}") || starts(lx, pos, "}}"))) {
                char sign = s[pos] == '-' ? '-' : 0;
                if (!push_tok(lx, TK_VAR_END, pos)) return false;
                lx->pos = end_tag_suffix(lx, pos, sign, sign ? 3 : 2, false);
                return true;
            }
        }
        if (pos >= n) {
            int line, col;
            locate(lx, open_pos, &line, &col);
            char what[64];
            snprintf(what, sizeof what, "the %s at line %d col %d", block ? "{%" : "{{", line, col);
            return lex_fail(lx, pos, LEAN_ERR_FORMAT, "unexpected end of template: %s is not closed", what);
        }
        size_t k = ws_at(s, n, pos);
        if (k) {
            lx->pos = skip_ws(s, n, pos);
            continue;
        }
        size_t e;
        int base;
        if ((e = float_end(lx, pos)) > 0) {
            char tmp[128];
            size_t m = 0;
            for (size_t i = pos; i < e && m < sizeof tmp - 1; i++)
                if (s[i] != '_') tmp[m++] = s[i];
            tmp[m] = 0;
            tj_tok *t = push_tok(lx, TK_FLOAT, pos);
            if (!t) return false;
            t->f = strtod(tmp, NULL);
            lx->pos = e;
            continue;
        }
        if ((e = int_end(lx, pos, &base)) > 0) {
            size_t i = pos + (base == 10 ? 0 : 2);
            uint64_t v = 0;
            for (; i < e; i++) {
                if (s[i] == '_') continue;
                uint64_t d = (uint64_t)digit_value(s[i]);
                if (v > (UINT64_MAX - d) / (uint64_t)base || v * (uint64_t)base + d > (uint64_t)INT64_MAX)
                    return lex_fail(lx, pos, LEAN_ERR_UNSUPPORTED, "integers beyond 64 bits are not supported");
                v = v * (uint64_t)base + d;
            }
            tj_tok *t = push_tok(lx, TK_INT, pos);
            if (!t) return false;
            t->i = (int64_t)v;
            lx->pos = e;
            continue;
        }
        if (is_name_start((unsigned char)s[pos])) {
            e = pos + 1;
            while (e < n && is_name_char((unsigned char)s[e])) e++;
            tj_tok *t = push_tok(lx, TK_NAME, pos);
            if (!t) return false;
            t->s = (tj_str){s + pos, e - pos};
            lx->pos = e;
            continue;
        }
        if (s[pos] == '\'' || s[pos] == '"') {
            char q = s[pos];
            e = pos + 1;
            while (e < n && s[e] != q) e += s[e] == '\\' ? 2 : 1;
            if (e >= n) return lex_fail(lx, pos, LEAN_ERR_FORMAT, "unterminated string literal");
            tj_tok *t = push_tok(lx, TK_STRING, pos);
            if (!t) return false;
            size_t ti = lx->n_toks - 1;
            tj_str v;
            if (!decode_string(lx, pos, s + pos + 1, e - pos - 1, &v)) return false;
            lx->toks[ti].s = v;
            lx->pos = e + 1;
            continue;
        }
        int op = -1;
        for (int o = 0; o < (int)(sizeof tj_op_text / sizeof tj_op_text[0]); o++) {
            size_t len = strlen(tj_op_text[o]);
            if (starts(lx, pos, tj_op_text[o]) && (op < 0 || len > strlen(tj_op_text[op]))) op = o;
        }
        if (op < 0) {
            char ch[8];
            size_t i = pos;
            tj_utf8_next(s, n, &i);
            snprintf(ch, sizeof ch, "%.*s", (int)(i - pos), s + pos);
            return lex_fail(lx, pos, LEAN_ERR_FORMAT, "unexpected character '%s'", ch);
        }
        if (op == O_LPAREN || op == O_LBRACKET || op == O_LBRACE) {
            if (lx->n_balance >= TJ_MAX_PARSE_DEPTH)
                return lex_fail(lx, pos, LEAN_ERR_UNSUPPORTED, "brackets nested deeper than 100 levels");
            lx->balance[lx->n_balance++] = op == O_LPAREN ? ')' : op == O_LBRACKET ? ']' : '}';
        } else if (op == O_RPAREN || op == O_RBRACKET || op == O_RBRACE) {
            if (lx->n_balance == 0) return lex_fail(lx, pos, LEAN_ERR_FORMAT, "unexpected '%s'", tj_op_text[op]);
            char want = lx->balance[--lx->n_balance];
            if (want != tj_op_text[op][0]) {
                char msg[8] = {want, 0};
                char buf[48];
                snprintf(buf, sizeof buf, "'%s', expected '%s'", tj_op_text[op], msg);
                return lex_fail(lx, pos, LEAN_ERR_FORMAT, "unexpected %s", buf);
            }
        }
        tj_tok *t = push_tok(lx, TK_OP, pos);
        if (!t) return false;
        t->op = (uint8_t)op;
        lx->pos = pos + strlen(tj_op_text[op]);
    }
}

/* {% raw %} ... {% endraw %}: lx->pos is just after the raw tag. */
static bool lex_raw(lexer *lx, size_t open_pos) {
    const char *s = lx->s;
    for (size_t q = lx->pos; q + 1 < lx->n; q++) {
        if (s[q] != '{' || s[q + 1] != '%') continue;
        size_t p = q + 2;
        char sign = 0;
        if (p < lx->n && (s[p] == '-' || s[p] == '+')) sign = s[p++];
        p = skip_ws(s, lx->n, p);
        if (!starts(lx, p, "endraw")) continue;
        p = skip_ws(s, lx->n, p + 6);
        char esign;
        size_t elen;
        if (starts(lx, p, "+%}")) esign = '+', elen = 3;
        else if (starts(lx, p, "-%}")) esign = '-', elen = 3;
        else if (starts(lx, p, "%}")) esign = 0, elen = 2;
        else continue;
        size_t keep = strip_before_tag(lx, s + lx->pos, q - lx->pos, sign, false);
        if (!emit_data(lx, lx->pos, keep)) return false;
        lx->pos = end_tag_suffix(lx, p, esign, elen, true);
        return true;
    }
    return lex_fail(lx, open_pos, LEAN_ERR_FORMAT, "missing end of raw directive ({%% endraw %%})");
}

static bool lex(tj_ctx *c, tj_str src, tj_tok **out, size_t *n_out) {
    lexer lx;
    memset(&lx, 0, sizeof lx);
    lx.c = c;
    lx.s = src.p;
    lx.n = src.n;
    lx.loc_line = 1;
    lx.line_starting = true;
    const char *s = src.p;
    size_t n = src.n;
    while (lx.pos < n) {
        /* the next {{, {% or {# */
        size_t tag = lx.pos;
        for (;;) {
            const char *hit = memchr(s + tag, '{', n - tag);
            if (!hit) {
                tag = n;
                break;
            }
            tag = (size_t)(hit - s);
            if (tag + 1 < n && (s[tag + 1] == '{' || s[tag + 1] == '%' || s[tag + 1] == '#')) break;
            tag++;
        }
        if (tag >= n) {
            if (!emit_data(&lx, lx.pos, n - lx.pos)) return false;
            lx.pos = n;
            break;
        }
        char kind = s[tag + 1];
        size_t p = tag + 2;
        char sign = 0;
        if (p < n && (s[p] == '-' || s[p] == '+')) sign = s[p++];
        /* {% raw %}: {%(-|+|)\s*raw\s*(-%}\s*|%}) */
        bool raw = false;
        size_t raw_end = 0;
        char raw_close_sign = 0;
        if (kind == '%') {
            size_t r = skip_ws(s, n, p);
            if (starts(&lx, r, "raw")) {
                r = skip_ws(s, n, r + 3);
                if (starts(&lx, r, "-%}")) raw = true, raw_end = r, raw_close_sign = '-';
                else if (starts(&lx, r, "%}")) raw = true, raw_end = r;
            }
        }
        size_t keep = strip_before_tag(&lx, s + lx.pos, tag - lx.pos, sign, kind == '{');
        if (!emit_data(&lx, lx.pos, keep)) return false;
        lx.line_starting = false;
        if (raw) {
            lx.pos = raw_close_sign ? skip_ws(s, n, raw_end + 3) : raw_end + 2;
            lx.line_starting = lx.pos > raw_end && s[lx.pos - 1] == '\n';
            if (!lex_raw(&lx, tag)) return false;
        } else if (kind == '#') {
            /* the first #}; a - or + right before it belongs to it */
            size_t e = p;
            for (;;) {
                const char *hit = e < n ? memchr(s + e, '#', n - e) : NULL;
                if (!hit) return lex_fail(&lx, tag, LEAN_ERR_FORMAT, "missing end of comment tag (#})");
                e = (size_t)(hit - s);
                if (e + 1 < n && s[e + 1] == '}') break;
                e++;
            }
            char csign = e > p && (s[e - 1] == '-' || s[e - 1] == '+') ? s[e - 1] : 0;
            lx.pos = end_tag_suffix(&lx, csign ? e - 1 : e, csign, csign ? 3 : 2, true);
        } else {
            if (!push_tok(&lx, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, tag)) return false;
            lx.pos = p;
            if (!lex_tag(&lx, kind == '%', tag)) return false;
        }
    }
    if (!push_tok(&lx, TK_EOF, n)) return false;
    *out = lx.toks;
    *n_out = lx.n_toks;
    return true;
}

bool tj_lex(tj_ctx *c, const char *src, size_t n, tj_tok **out, size_t *n_out) {
    tj_str text;
    return normalize_source(c, src, n, &text) && lex(c, text, out, n_out);
}
