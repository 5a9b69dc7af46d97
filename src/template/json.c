/* json.c — the strict JSON reader of json.h.
 *
 * Sections: the cursor and errors; values (literals, numbers, strings, arrays, objects);
 * json_free and json_get. Recursive descent, one level of C recursion per nesting level,
 * bounded by JSON_MAX_DEPTH. Arrays and objects grow by doubling (lean_realloc), so a
 * document of B bytes costs O(B) memory. */
#include "template/json.h"

#include <stdlib.h>
#include <string.h>

typedef struct jcur {
    const char *s;
    size_t n, i; /* bytes, cursor */
    lean_error *err;
    lean_status st;
} jcur;

static bool jfail(jcur *c, lean_status st, const char *what) {
    if (c->st == LEAN_OK) c->st = lean_fail(c->err, st, "JSON: %s at byte %zu", what, c->i);
    return false;
}

static void skip_ws(jcur *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static void free_contents(json_value *v);

static bool parse_value(jcur *c, json_value *v, int depth);

static bool literal(jcur *c, const char *word, json_type t, json_value *v) {
    size_t k = strlen(word);
    if (c->n - c->i < k || memcmp(c->s + c->i, word, k) != 0) return jfail(c, LEAN_ERR_FORMAT, "unexpected character");
    c->i += k;
    v->type = t;
    return true;
}

static bool parse_number(jcur *c, json_value *v) {
    size_t start = c->i;
    if (c->i < c->n && c->s[c->i] == '-') c->i++;
    if (c->i >= c->n) return jfail(c, LEAN_ERR_FORMAT, "bad number");
    if (c->s[c->i] == '0') {
        c->i++;
    } else if (c->s[c->i] >= '1' && c->s[c->i] <= '9') {
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
    } else {
        return jfail(c, LEAN_ERR_FORMAT, "bad number");
    }
    if (c->i < c->n && c->s[c->i] == '.') {
        c->i++;
        if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9') return jfail(c, LEAN_ERR_FORMAT, "bad number");
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
    }
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
        if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9') return jfail(c, LEAN_ERR_FORMAT, "bad number");
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
    }
    char tmp[64];
    size_t k = c->i - start;
    if (k >= sizeof tmp) k = sizeof tmp - 1; /* precision beyond 63 digits is not kept */
    memcpy(tmp, c->s + start, k);
    tmp[k] = 0;
    v->type = JSON_NUMBER;
    v->num = strtod(tmp, NULL);
    return true;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = s[k];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    /* the second byte's range for E0 (no overlong), ED (no surrogates), F0 (no overlong), F4 (<= U+10FFFF) */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)) return 0;
    return len;
}

/* Reads a string at the cursor (on its opening quote) into *out / *out_len (owned). */
static bool parse_string(jcur *c, char **out, size_t *out_len) {
    c->i++; /* the quote */
    /* The decoded text is never longer than the source: one pass to find the end. */
    size_t end = c->i;
    while (end < c->n && c->s[end] != '"') end += c->s[end] == '\\' ? 2 : 1;
    if (end >= c->n) return jfail(c, LEAN_ERR_FORMAT, "unterminated string");
    char *d = lean_malloc(end - c->i + 1);
    if (!d) return jfail(c, LEAN_ERR_NOMEM, "out of memory");
    size_t k = 0;
    while (c->s[c->i] != '"') {
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch < 0x20) {
            lean_free(d);
            return jfail(c, LEAN_ERR_FORMAT, "control character in a string");
        }
        if (ch >= 0x80) { /* JSON text is UTF-8 (RFC 8259 8.1) */
            size_t len = utf8_len((const unsigned char *)c->s + c->i, end - c->i);
            if (!len) {
                lean_free(d);
                return jfail(c, LEAN_ERR_FORMAT, "invalid UTF-8 in a string");
            }
            memcpy(d + k, c->s + c->i, len);
            k += len;
            c->i += len;
            continue;
        }
        if (ch != '\\') {
            d[k++] = (char)ch;
            c->i++;
            continue;
        }
        char e = c->s[c->i + 1];
        c->i += 2;
        switch (e) {
        case '"': d[k++] = '"'; break;
        case '\\': d[k++] = '\\'; break;
        case '/': d[k++] = '/'; break;
        case 'b': d[k++] = '\b'; break;
        case 'f': d[k++] = '\f'; break;
        case 'n': d[k++] = '\n'; break;
        case 'r': d[k++] = '\r'; break;
        case 't': d[k++] = '\t'; break;
        case 'u': {
            int cp = end - c->i >= 4 ? hex4(c->s + c->i) : -1;
            if (cp < 0) goto bad_escape;
            c->i += 4;
            uint32_t u = (uint32_t)cp;
            if (u >= 0xD800 && u <= 0xDBFF) {
                int lo = end - c->i >= 6 && c->s[c->i] == '\\' && c->s[c->i + 1] == 'u' ? hex4(c->s + c->i + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) goto bad_escape;
                c->i += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
                goto bad_escape;
            }
            /* \uXXXX is 6 source bytes for at most 3 output bytes; a pair 12 for 4. */
            if (u < 0x80) {
                d[k++] = (char)u;
            } else if (u < 0x800) {
                d[k++] = (char)(0xC0 | (u >> 6));
                d[k++] = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                d[k++] = (char)(0xE0 | (u >> 12));
                d[k++] = (char)(0x80 | ((u >> 6) & 0x3F));
                d[k++] = (char)(0x80 | (u & 0x3F));
            } else {
                d[k++] = (char)(0xF0 | (u >> 18));
                d[k++] = (char)(0x80 | ((u >> 12) & 0x3F));
                d[k++] = (char)(0x80 | ((u >> 6) & 0x3F));
                d[k++] = (char)(0x80 | (u & 0x3F));
            }
            break;
        }
        default:
        bad_escape:
            lean_free(d);
            return jfail(c, LEAN_ERR_FORMAT, "bad escape in a string");
        }
    }
    c->i++; /* the closing quote */
    d[k] = 0;
    *out = d;
    *out_len = k;
    return true;
}

/* Grows a (items[, keys, key_lens]) triple to hold one more element. */
static bool grow(jcur *c, json_value *v, size_t *cap, bool object) {
    if (v->n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 4;
    json_value *items = lean_realloc(v->items, nc * sizeof *items);
    if (!items) return jfail(c, LEAN_ERR_NOMEM, "out of memory");
    v->items = items;
    if (object) {
        char **keys = lean_realloc(v->keys, nc * sizeof *keys);
        if (!keys) return jfail(c, LEAN_ERR_NOMEM, "out of memory");
        v->keys = keys;
        size_t *lens = lean_realloc(v->key_lens, nc * sizeof *lens);
        if (!lens) return jfail(c, LEAN_ERR_NOMEM, "out of memory");
        v->key_lens = lens;
    }
    *cap = nc;
    return true;
}

static bool parse_container(jcur *c, json_value *v, int depth, bool object) {
    if (depth >= JSON_MAX_DEPTH) return jfail(c, LEAN_ERR_FORMAT, "nesting deeper than 64 levels");
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    char close = object ? '}' : ']';
    size_t cap = 0;
    c->i++;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == close) {
        c->i++;
        return true;
    }
    for (;;) {
        skip_ws(c);
        if (!grow(c, v, &cap, object)) return false;
        json_value *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (object) {
            if (c->i >= c->n || c->s[c->i] != '"') return jfail(c, LEAN_ERR_FORMAT, "expected a key string");
            char *key;
            size_t klen;
            if (!parse_string(c, &key, &klen)) return false;
            v->keys[v->n] = key;
            v->key_lens[v->n] = klen;
            v->n++; /* counted now so that json_free releases the key on failure */
            skip_ws(c);
            if (c->i >= c->n || c->s[c->i] != ':') return jfail(c, LEAN_ERR_FORMAT, "expected ':'");
            c->i++;
            if (!parse_value(c, item, depth + 1)) return false;
        } else {
            v->n++;
            if (!parse_value(c, item, depth + 1)) return false;
        }
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == close) {
            c->i++;
            return true;
        }
        return jfail(c, LEAN_ERR_FORMAT, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool parse_value(jcur *c, json_value *v, int depth) {
    skip_ws(c);
    if (c->i >= c->n) return jfail(c, LEAN_ERR_FORMAT, "unexpected end of input");
    switch (c->s[c->i]) {
    case 'n': return literal(c, "null", JSON_NULL, v);
    case 't': return literal(c, "true", JSON_TRUE, v);
    case 'f': return literal(c, "false", JSON_FALSE, v);
    case '"':
        v->type = JSON_STRING;
        return parse_string(c, &v->str, &v->len);
    case '[': return parse_container(c, v, depth, false);
    case '{': return parse_container(c, v, depth, true);
    default: return parse_number(c, v);
    }
}

lean_status json_parse(const char *text, size_t len, json_value **out, lean_error *err) {
    jcur c = {text, len, 0, err, LEAN_OK};
    if (!text || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "json_parse: NULL argument");
    json_value *v = lean_calloc(1, sizeof *v);
    if (!v) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "JSON: out of memory");
    if (parse_value(&c, v, 0)) {
        skip_ws(&c);
        if (c.i != c.n) jfail(&c, LEAN_ERR_FORMAT, "trailing characters after the value");
    }
    if (c.st != LEAN_OK) {
        json_free(v);
        return c.st;
    }
    *out = v;
    return LEAN_OK;
}

static void free_contents(json_value *v) {
    if (v->type == JSON_STRING) lean_free(v->str);
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            free_contents(&v->items[i]);
            if (v->type == JSON_OBJECT) lean_free(v->keys[i]);
        }
        lean_free(v->items);
        lean_free(v->keys);
        lean_free(v->key_lens);
    }
}

void json_free(json_value *v) {
    if (!v) return;
    free_contents(v);
    lean_free(v);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t k = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == k && memcmp(obj->keys[i], key, k) == 0) return &obj->items[i];
    return NULL;
}
