/* grammar_schema.c — a JSON Schema written as GBNF (lean_json_schema_to_gbnf), the way
 * llama.cpp's common/json-schema-to-grammar.cpp writes it, for the common subset:
 *   type (a name or a list of names): object, array, string, number, integer, boolean, null;
 *   object: properties (in their order), required, additionalProperties (false or absent: no
 *     other keys; true or a schema: other keys, only when there are no properties);
 *   array: items, minItems, maxItems;  string: minLength, maxLength;
 *   enum, const, anyOf, oneOf (as anyOf: the grammar cannot count matches), $ref to
 *   #/$defs/NAME or #/definitions/NAME (recursion allowed), the empty schema / true (any JSON).
 * Words that only annotate (title, description, $schema, $id, $comment, default, examples) are
 * ignored; any other keyword changes what is valid, and is refused (LEAN_ERR_UNSUPPORTED,
 * naming it and its schema path) rather than silently ignored, so every output of the
 * grammar validates against the schema. The JSON allowed is llama.cpp's: its `space` rule
 * between tokens, keys in the order the schema lists them.
 *
 * It lives beside the JSON reader it reads schemas with (template/json.h); the grammar itself is
 * core's (src/core/grammar*.c), which takes the text this writes.
 *
 * Sections: 1. text buffer and rules  2. literals  3. visiting a schema  4. the entry point */
#include "template/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ================================================================ 1. buffers and rules */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = lean_realloc(b->s, cap);
        if (!v) {
            b->oom = 1;
            return;
        }
        b->s = v;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
__attribute__((format(printf, 2, 3))) static void sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_add(b, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

#define NAME_CAP 96

typedef struct conv {
    const json_value *doc;  /* the whole schema: $ref resolves against it */
    sbuf rules;             /* "name ::= body\n" lines */
    char **names;           /* rules made so far */
    size_t n_names, cap_names;
    const char **refs;      /* $refs seen, each with its rule's name (recursion ends there) */
    char (*ref_names)[NAME_CAP];
    size_t n_refs;
    unsigned counter;       /* for names that would grow too long */
    lean_error *err;
    lean_status st;
    int depth;
    char path[256];         /* the schema path of the node visited, for messages */
} conv;

static int conv_fail(conv *c, lean_status st, const char *what, const char *word) {
    if (c->st == LEAN_OK)
        c->st = LEAN_FAIL(c->err, st, "JSON schema at %s: %s%s%s%s", c->path[0] ? c->path : "#", what, word ? " '" : "",
                          word ? word : "", word ? "'" : "");
    return -1;
}

static int has_rule(const conv *c, const char *name) {
    for (size_t i = 0; i < c->n_names; i++)
        if (strcmp(c->names[i], name) == 0) return 1;
    return 0;
}

/* Adds rule name ::= body; when name is taken, name-N instead. out (nullable, NAME_CAP bytes)
 * gets the name used. */
static int add_rule_as(conv *c, const char *name, const char *body, char *out) {
    char uniq[NAME_CAP];
    const size_t len = strnlen(name, NAME_CAP - 12); /* names are made shorter than that */
    memcpy(uniq, name, len);
    uniq[len] = 0;
    for (unsigned k = 1; has_rule(c, uniq); k++) snprintf(uniq + len, sizeof uniq - len, "-%u", k % 100000000u);
    name = uniq;
    if (out) memcpy(out, uniq, strlen(uniq) + 1);
    if (c->n_names == c->cap_names) {
        size_t cap = c->cap_names ? c->cap_names * 2 : 32;
        char **v = lean_realloc(c->names, cap * sizeof *v);
        if (!v) return conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
        c->names = v;
        c->cap_names = cap;
    }
    if (!(c->names[c->n_names] = lean_strndup(name, strlen(name)))) return conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
    c->n_names++;
    sb_str(&c->rules, name);
    sb_str(&c->rules, " ::= ");
    sb_str(&c->rules, body);
    sb_str(&c->rules, "\n");
    return c->rules.oom ? conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL) : 0;
}

/* llama.cpp's PRIMITIVE_RULES and SPACE_RULE, each added with what it needs */
static int add_rule(conv *c, const char *name, const char *body) { return add_rule_as(c, name, body, NULL); }

static const char *primitive(conv *c, const char *name) {
    static const struct { const char *name, *body, *deps; } prims[] = {
        {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", ""},
        {"boolean", "(\"true\" | \"false\") space", "space"},
        {"decimal-part", "[0-9]{1,16}", ""},
        {"integral-part", "[0] | [1-9] [0-9]{0,15}", ""},
        {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space", "integral-part decimal-part space"},
        {"integer", "(\"-\"? integral-part) space", "integral-part space"},
        {"value", "object | array | string | number | boolean | null", "object array string number boolean null"},
        {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space", "string value space"},
        {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", "value space"},
        {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", ""},
        {"string", "\"\\\"\" char* \"\\\"\" space", "char space"},
        {"null", "\"null\" space", "space"},
    };
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++) {
        if (strcmp(prims[i].name, name) != 0) continue;
        if (has_rule(c, name)) return prims[i].name;
        if (add_rule(c, name, prims[i].body)) return NULL;
        char dep[32];
        for (const char *d = prims[i].deps; *d;) {
            size_t n = strcspn(d, " ");
            snprintf(dep, sizeof dep, "%.*s", (int)n, d);
            if (!primitive(c, dep)) return NULL;
            d += n + (d[n] == ' ');
        }
        return prims[i].name;
    }
    return NULL;
}

/* ================================================================ 2. literals */

/* JSON text of a value (compact, as json.dumps(separators=(",", ":")) writes it) */
static void json_dump(sbuf *b, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: sb_str(b, "null"); break;
    case JSON_FALSE: sb_str(b, "false"); break;
    case JSON_TRUE: sb_str(b, "true"); break;
    case JSON_NUMBER:
        if (v->num == floor(v->num) && fabs(v->num) < 1e15) sb_fmt(b, "%.0f", v->num);
        else sb_fmt(b, "%.17g", v->num);
        break;
    case JSON_STRING:
        sb_str(b, "\"");
        for (size_t i = 0; i < v->len; i++) {
            unsigned char ch = (unsigned char)v->str[i];
            if (ch == '"' || ch == '\\') sb_fmt(b, "\\%c", ch);
            else if (ch == '\n') sb_str(b, "\\n");
            else if (ch == '\t') sb_str(b, "\\t");
            else if (ch == '\r') sb_str(b, "\\r");
            else if (ch < 0x20) sb_fmt(b, "\\u%04x", ch);
            else sb_add(b, (const char *)&ch, 1);
        }
        sb_str(b, "\"");
        break;
    case JSON_ARRAY:
        sb_str(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            json_dump(b, &v->items[i]);
        }
        sb_str(b, "]");
        break;
    case JSON_OBJECT:
        sb_str(b, "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            json_value k = {.type = JSON_STRING, .str = v->keys[i], .len = v->key_lens[i]};
            json_dump(b, &k);
            sb_str(b, ":");
            json_dump(b, &v->items[i]);
        }
        sb_str(b, "}");
        break;
    }
}

/* text as a GBNF "literal" */
static void gbnf_literal(sbuf *b, const char *s, size_t n) {
    sb_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') sb_fmt(b, "\\%c", ch);
        else if (ch == '\n') sb_str(b, "\\n");
        else if (ch == '\r') sb_str(b, "\\r");
        else if (ch == '\t') sb_str(b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) sb_fmt(b, "\\x%02X", ch);
        else sb_add(b, (const char *)&ch, 1);
    }
    sb_str(b, "\"");
}

/* A value's JSON text as a GBNF literal followed by space */
static void value_literal(conv *c, sbuf *b, const json_value *v) {
    sbuf t = {0};
    json_dump(&t, v);
    if (t.oom) b->oom = 1;
    else gbnf_literal(b, t.s, t.n);
    lean_free(t.s);
    sb_str(b, " space");
    primitive(c, "space");
}

/* ================================================================ 3. visiting */

static const char *visit(conv *c, const json_value *s, const char *name, sbuf *ref);

#define MAX_REFS 256

static int taken_ref(const conv *c, const char *name) {
    for (size_t i = 0; i < c->n_refs; i++)
        if (strcmp(c->ref_names[i], name) == 0) return 1;
    return 0;
}

/* name + "-" + part, with characters outside [a-zA-Z0-9-] as '-' */
static void sub_name(conv *c, char *out, size_t cap, const char *name, const char *part) {
    const size_t nn = strlen(name), np = strlen(part);
    if (nn + np + 2 > cap - 16) {
        snprintf(out, cap, "r-%u", c->counter++);
    } else {
        memcpy(out, name, nn);
        size_t k = nn;
        if (nn) out[k++] = '-';
        memcpy(out + k, part, np + 1);
    }
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-')) *p = '-';
}

/* Appends "/part" to the path for the duration of a visit; returns the old length. */
static size_t path_push(conv *c, const char *part) {
    size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, "/%s", part);
    return n;
}

static const char *const ignored_words[] = {"title", "description", "$schema", "$id", "$comment", "default", "examples",
                                            "$defs", "definitions", "deprecated", "readOnly", "writeOnly", NULL};
static const char *const known_words[] = {"type", "properties", "required", "additionalProperties", "items", "minItems",
                                          "maxItems", "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "$ref", NULL};

static int in_list(const char *const *list, const char *w) {
    for (; *list; list++)
        if (strcmp(*list, w) == 0) return 1;
    return 0;
}

/* A non-negative integer keyword: -1 when absent, -2 after a failure */
static long long count_word(conv *c, const json_value *s, const char *word) {
    const json_value *v = json_get(s, word);
    if (!v) return -1;
    if (v->type != JSON_NUMBER || v->num < 0 || v->num != floor(v->num) || v->num > 1e9)
        return conv_fail(c, LEAN_ERR_FORMAT, "expecting a non-negative integer for", word), -2;
    return (long long)v->num;
}

/* x{min,max} in GBNF (max < 0: no bound); refuses counts past the grammar's limit */
static int repetition(conv *c, sbuf *b, const char *item, long long min, long long max) {
    if (min > LEAN_GRAMMAR_MAX_REPEAT || max > LEAN_GRAMMAR_MAX_REPEAT) return conv_fail(c, LEAN_ERR_UNSUPPORTED, "a count above 2000 in", "minItems/maxItems/minLength/maxLength");
    if (max >= 0 && max < min) return conv_fail(c, LEAN_ERR_FORMAT, "a maximum below the minimum", NULL);
    if (max < 0) sb_fmt(b, "%s{%lld,}", item, min);
    else sb_fmt(b, "%s{%lld,%lld}", item, min, max);
    return 0;
}

static int object_rule(conv *c, const json_value *s, const char *name, sbuf *body) {
    const json_value *props = json_get(s, "properties"), *req = json_get(s, "required");
    const json_value *addl = json_get(s, "additionalProperties");
    if (props && props->type != JSON_OBJECT) return conv_fail(c, LEAN_ERR_FORMAT, "expecting an object for", "properties");
    if (req && req->type != JSON_ARRAY) return conv_fail(c, LEAN_ERR_FORMAT, "expecting an array for", "required");
    if (addl && addl->type != JSON_FALSE && addl->type != JSON_TRUE && addl->type != JSON_OBJECT)
        return conv_fail(c, LEAN_ERR_FORMAT, "expecting a boolean or a schema for", "additionalProperties");
    const size_t n_props = props ? props->n : 0;
    if (req)
        for (size_t i = 0; i < req->n; i++) {
            if (req->items[i].type != JSON_STRING) return conv_fail(c, LEAN_ERR_FORMAT, "expecting strings in", "required");
            if (!json_get(props ? props : s, req->items[i].str) || !props)
                return conv_fail(c, LEAN_ERR_UNSUPPORTED, "a required key without a property schema:", req->items[i].str);
        }
    if (addl && addl->type != JSON_FALSE) {
        if (n_props) return conv_fail(c, LEAN_ERR_UNSUPPORTED, "additionalProperties beside properties", NULL);
        /* a map: any string keys, values of the schema (or any JSON) */
        char vname[NAME_CAP];
        sub_name(c, vname, sizeof vname, name, "value");
        sbuf vref = {0};
        size_t mark = path_push(c, "additionalProperties");
        const char *v = addl->type == JSON_OBJECT ? visit(c, addl, vname, &vref) : primitive(c, "value");
        c->path[mark] = 0;
        if (!v) return lean_free(vref.s), -1;
        const char *vr = addl->type == JSON_OBJECT ? vref.s : v;
        if (!primitive(c, "string")) return lean_free(vref.s), -1;
        sb_fmt(body, "\"{\" space ( string \":\" space %s ( \",\" space string \":\" space %s )* )? \"}\" space", vr, vr);
        lean_free(vref.s);
        return 0;
    }
    /* kv rules: name-KEY-kv ::= "\"KEY\"" space ":" space VALUE */
    char (*kv)[NAME_CAP] = n_props ? lean_calloc(n_props, sizeof *kv) : NULL;
    uint8_t *is_req = n_props ? lean_calloc(n_props, 1) : NULL;
    if (n_props && (!kv || !is_req)) {
        lean_free(kv);
        lean_free(is_req);
        return conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
    }
    int rc = 0;
    for (size_t i = 0; i < n_props && rc == 0; i++) {
        const char *key = props->keys[i];
        for (size_t j = 0; req && j < req->n; j++)
            if (strcmp(req->items[j].str, key) == 0) is_req[i] = 1;
        char pname[NAME_CAP];
        sub_name(c, pname, sizeof pname, name, key);
        size_t mark = path_push(c, "properties");
        path_push(c, key);
        sbuf ref = {0};
        const char *v = visit(c, &props->items[i], pname, &ref);
        c->path[mark] = 0;
        if (!v) {
            lean_free(ref.s);
            rc = -1;
            break;
        }
        sbuf kvb = {0};
        json_value k = {.type = JSON_STRING, .str = props->keys[i], .len = props->key_lens[i]};
        sbuf kt = {0};
        json_dump(&kt, &k);
        if (kt.oom) kvb.oom = 1;
        else gbnf_literal(&kvb, kt.s, kt.n);
        lean_free(kt.s);
        sb_fmt(&kvb, " space \":\" space ");
        sb_str(&kvb, ref.s ? ref.s : "");
        lean_free(ref.s);
        char kvname[NAME_CAP + 4];
        snprintf(kvname, sizeof kvname, "%s-kv", pname);
        if (kvb.oom) rc = conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
        else rc = add_rule_as(c, kvname, kvb.s, kv[i]);
        lean_free(kvb.s);
    }
    if (rc == 0) {
        sb_str(body, "\"{\" space ");
        size_t n_req = 0, n_opt = 0;
        for (size_t i = 0; i < n_props; i++) {
            if (!is_req[i]) {
                n_opt++;
                continue;
            }
            if (n_req++) sb_str(body, " \",\" space ");
            sb_str(body, kv[i]);
        }
        if (n_opt) {
            /* llama.cpp's get_recursive_refs: the optional keys in order, any subset of them;
             * NAME-KEY-rest ::= ( "," space KEY2-kv )? NAME-KEY2-rest */
            size_t *opt = lean_malloc(n_opt * sizeof *opt), k = 0;
            char (*rest)[NAME_CAP] = lean_calloc(n_opt, sizeof *rest); /* rest[j]: what may follow opt[j] */
            if (!opt || !rest) {
                rc = conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
            } else {
                for (size_t i = 0; i < n_props; i++)
                    if (!is_req[i]) opt[k++] = i;
                for (size_t j = n_opt - 1; j-- > 0 && rc == 0;) { /* the rest rules, last first */
                    sbuf rb = {0};
                    sb_fmt(&rb, "( \",\" space %s )?", kv[opt[j + 1]]);
                    if (j + 2 < n_opt) sb_fmt(&rb, " %s", rest[j + 1]);
                    char rname[NAME_CAP];
                    sub_name(c, rname, sizeof rname, name, props->keys[opt[j]]);
                    strncat(rname, "-rest", sizeof rname - strlen(rname) - 1);
                    rc = rb.oom ? conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL) : add_rule_as(c, rname, rb.s, rest[j]);
                    lean_free(rb.s);
                }
                sb_str(body, n_req ? " ( \",\" space ( " : " ( ");
                for (size_t i = 0; i < n_opt; i++) {
                    if (i) sb_str(body, " | ");
                    sb_str(body, kv[opt[i]]);
                    if (i + 1 < n_opt) sb_fmt(body, " %s", rest[i]);
                }
                sb_str(body, n_req ? " ) )?" : " )?");
            }
            lean_free(opt);
            lean_free(rest);
        }
        sb_str(body, " \"}\" space");
        if (!primitive(c, "space")) rc = -1;
    }
    lean_free(kv);
    lean_free(is_req);
    return rc;
}

static int array_rule(conv *c, const json_value *s, const char *name, sbuf *body) {
    const json_value *items = json_get(s, "items");
    long long min = count_word(c, s, "minItems"), max = count_word(c, s, "maxItems");
    if (min == -2 || max == -2) return -1;
    if (min < 0) min = 0;
    sbuf ref = {0};
    const char *item;
    if (items) {
        if (items->type != JSON_OBJECT && items->type != JSON_TRUE)
            return conv_fail(c, LEAN_ERR_UNSUPPORTED, "items as a list (tuples) is not supported:", "items");
        char iname[NAME_CAP];
        sub_name(c, iname, sizeof iname, name, "item");
        size_t mark = path_push(c, "items");
        item = visit(c, items, iname, &ref);
        c->path[mark] = 0;
        if (item) item = ref.s;
    } else {
        item = primitive(c, "value");
    }
    if (!item || !primitive(c, "space")) return lean_free(ref.s), -1;
    sb_str(body, "\"[\" space ");
    char more[NAME_CAP + 32];
    snprintf(more, sizeof more, "( \",\" space %s )", item);
    int rc = 0;
    if (max == 0) {
    } else if (min == 0) {
        sb_fmt(body, "( %s ", item);
        rc = repetition(c, body, more, 0, max < 0 ? -1 : max - 1);
        sb_str(body, " )?");
    } else {
        sb_fmt(body, "%s ", item);
        rc = repetition(c, body, more, min - 1, max < 0 ? -1 : max - 1);
    }
    sb_str(body, " \"]\" space");
    lean_free(ref.s);
    return rc;
}

static int string_rule(conv *c, const json_value *s, sbuf *body) {
    long long min = count_word(c, s, "minLength"), max = count_word(c, s, "maxLength");
    if (min == -2 || max == -2) return -1;
    if (min < 0 && max < 0) return primitive(c, "string") ? (sb_str(body, "string"), 0) : -1;
    if (!primitive(c, "char") || !primitive(c, "space")) return -1;
    sb_str(body, "\"\\\"\" ");
    int rc = repetition(c, body, "char", min < 0 ? 0 : min, max);
    sb_str(body, " \"\\\"\" space");
    return rc;
}

/* One type name's body */
static int type_rule(conv *c, const json_value *s, const char *type, const char *name, sbuf *body) {
    if (strcmp(type, "object") == 0) return object_rule(c, s, name, body);
    if (strcmp(type, "array") == 0) return array_rule(c, s, name, body);
    if (strcmp(type, "string") == 0) return string_rule(c, s, body);
    if (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0 || strcmp(type, "boolean") == 0 ||
        strcmp(type, "null") == 0) {
        if (!primitive(c, type)) return -1;
        sb_str(body, type);
        return 0;
    }
    return conv_fail(c, LEAN_ERR_FORMAT, "unknown type", type);
}

/* Visits schema s: writes into *ref the GBNF that matches it (a rule name, made if needed)
 * and returns ref->s; NULL after a failure. */
static const char *visit(conv *c, const json_value *s, const char *name, sbuf *ref) {
    if (c->st != LEAN_OK) return NULL;
    if (++c->depth > JSON_MAX_DEPTH) {
        conv_fail(c, LEAN_ERR_FORMAT, "nested too deeply", NULL);
        c->depth--;
        return NULL;
    }
    sbuf body = {0};
    int rc = 0;
    const char *rule_name = name[0] ? name : "root";
    if (s->type == JSON_TRUE) {
        rc = primitive(c, "value") ? (sb_str(&body, "value"), 0) : -1;
    } else if (s->type == JSON_OBJECT && s->n == 0) { /* {}: any object, as llama.cpp has it (a subset of what {} allows) */
        rc = primitive(c, "object") ? (sb_str(&body, "object"), 0) : -1;
    } else if (s->type != JSON_OBJECT) {
        rc = conv_fail(c, LEAN_ERR_FORMAT, "expecting a schema (an object or true)", NULL);
    } else {
        for (size_t i = 0; i < s->n && rc == 0; i++)
            if (!in_list(known_words, s->keys[i]) && !in_list(ignored_words, s->keys[i]))
                rc = conv_fail(c, LEAN_ERR_UNSUPPORTED, "unsupported keyword", s->keys[i]);
        const json_value *v;
        if (rc) {
        } else if ((v = json_get(s, "$ref"))) {
            if (v->type != JSON_STRING) {
                rc = conv_fail(c, LEAN_ERR_FORMAT, "expecting a string for", "$ref");
            } else {
                const char *r = v->str;
                const char *defs = strncmp(r, "#/$defs/", 8) == 0 ? "$defs" : strncmp(r, "#/definitions/", 14) == 0 ? "definitions" : NULL;
                const json_value *target = defs ? json_get(json_get(c->doc, defs), r + (defs[0] == '$' ? 8 : 14)) : NULL;
                if (!defs) rc = conv_fail(c, LEAN_ERR_UNSUPPORTED, "a $ref outside #/$defs/ and #/definitions/:", r);
                else if (!target) rc = conv_fail(c, LEAN_ERR_FORMAT, "$ref to nothing:", r);
                else {
                    size_t k = 0;
                    while (k < c->n_refs && strcmp(c->refs[k], r) != 0) k++;
                    if (k == c->n_refs) {
                        if (c->n_refs >= MAX_REFS) {
                            rc = conv_fail(c, LEAN_ERR_UNSUPPORTED, "more than 256 distinct $refs", NULL);
                        } else {
                            /* named before it is visited: recursion refers to the name */
                            char want[NAME_CAP];
                            sub_name(c, want, sizeof want, "ref", r + (defs[0] == '$' ? 8 : 14));
                            snprintf(c->ref_names[k], NAME_CAP, "%s", want);
                            for (unsigned u = 1; has_rule(c, c->ref_names[k]) || taken_ref(c, c->ref_names[k]); u++)
                                snprintf(c->ref_names[k], NAME_CAP, "%.*s-%u", NAME_CAP - 12, want, u);
                            c->refs[c->n_refs++] = r;
                            char saved[sizeof c->path];
                            memcpy(saved, c->path, sizeof saved);
                            snprintf(c->path, sizeof c->path, "%s", r);
                            sbuf tr = {0};
                            if (!visit(c, target, c->ref_names[k], &tr)) rc = -1;
                            memcpy(c->path, saved, sizeof saved);
                            lean_free(tr.s);
                        }
                    }
                    if (rc == 0) sb_str(&body, c->ref_names[k]);
                }
            }
        } else if ((v = json_get(s, "const"))) {
            value_literal(c, &body, v);
        } else if ((v = json_get(s, "enum"))) {
            if (v->type != JSON_ARRAY || v->n == 0) rc = conv_fail(c, LEAN_ERR_FORMAT, "expecting a non-empty array for", "enum");
            else {
                sb_str(&body, "(");
                for (size_t i = 0; i < v->n; i++) {
                    sb_str(&body, i ? " | " : " ");
                    sbuf t = {0};
                    json_dump(&t, &v->items[i]);
                    if (t.oom) body.oom = 1;
                    else gbnf_literal(&body, t.s, t.n);
                    lean_free(t.s);
                }
                sb_str(&body, " ) space");
                if (!primitive(c, "space")) rc = -1;
            }
        } else if ((v = json_get(s, "anyOf")) || (v = json_get(s, "oneOf"))) {
            const char *word = json_get(s, "anyOf") ? "anyOf" : "oneOf";
            if (v->type != JSON_ARRAY || v->n == 0) rc = conv_fail(c, LEAN_ERR_FORMAT, "expecting a non-empty array for", word);
            for (size_t i = 0; rc == 0 && i < v->n; i++) {
                char an[NAME_CAP], idx[24];
                snprintf(idx, sizeof idx, "%zu", i);
                sub_name(c, an, sizeof an, rule_name, idx);
                size_t mark = path_push(c, word);
                path_push(c, idx);
                sbuf ar = {0};
                if (!visit(c, &v->items[i], an, &ar)) rc = -1;
                c->path[mark] = 0;
                if (rc == 0) {
                    if (i) sb_str(&body, " | ");
                    sb_str(&body, ar.s);
                }
                lean_free(ar.s);
            }
        } else if ((v = json_get(s, "type"))) {
            if (v->type == JSON_STRING) {
                rc = type_rule(c, s, v->str, rule_name, &body);
            } else if (v->type == JSON_ARRAY && v->n > 0) {
                for (size_t i = 0; rc == 0 && i < v->n; i++) {
                    if (v->items[i].type != JSON_STRING) {
                        rc = conv_fail(c, LEAN_ERR_FORMAT, "expecting type names in", "type");
                        break;
                    }
                    sbuf tb = {0};
                    char tn[NAME_CAP];
                    sub_name(c, tn, sizeof tn, rule_name, v->items[i].str);
                    rc = type_rule(c, s, v->items[i].str, tn, &tb);
                    if (rc == 0) rc = tb.oom ? conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL) : add_rule_as(c, tn, tb.s, tn);
                    if (rc == 0) sb_fmt(&body, "%s%s", i ? " | " : "", tn);
                    lean_free(tb.s);
                }
            } else {
                rc = conv_fail(c, LEAN_ERR_FORMAT, "expecting a name or a list of names for", "type");
            }
        } else if (json_get(s, "properties")) {
            rc = object_rule(c, s, rule_name, &body);
        } else if (json_get(s, "items")) {
            rc = array_rule(c, s, rule_name, &body);
        } else {
            rc = primitive(c, "value") ? (sb_str(&body, "value"), 0) : -1;
        }
    }
    c->depth--;
    if (rc == 0 && body.oom) rc = conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
    if (rc == 0) {
        /* a rule of its own for the node ($ref targets keep the name chosen for them) */
        char used[NAME_CAP];
        rc = add_rule_as(c, rule_name, body.s, used);
        sb_str(ref, used);
        if (ref->oom) rc = conv_fail(c, LEAN_ERR_NOMEM, "out of memory", NULL);
    }
    lean_free(body.s);
    return rc == 0 ? ref->s : NULL;
}

/* ================================================================ 4. entry point */

lean_status lean_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, lean_error *err) {
    if (!schema || !gbnf) return LEAN_FAIL(err, LEAN_ERR_ARG, "schema or gbnf is NULL");
    *gbnf = NULL;
    json_value *doc = NULL;
    lean_status st = json_parse(schema, len, &doc, err);
    if (st != LEAN_OK) return st;
    conv c = {.doc = doc, .err = err, .st = LEAN_OK, .path = "#"};
    const char *refs[MAX_REFS];
    c.refs = refs;
    c.ref_names = lean_malloc(MAX_REFS * sizeof *c.ref_names);
    sbuf ref = {0};
    if (!c.ref_names) conv_fail(&c, LEAN_ERR_NOMEM, "out of memory", NULL);
    else visit(&c, doc, "root", &ref);
    lean_free(c.ref_names);
    lean_free(ref.s);
    for (size_t i = 0; i < c.n_names; i++) lean_free(c.names[i]);
    lean_free(c.names);
    json_free(doc);
    if (c.st != LEAN_OK) {
        lean_free(c.rules.s);
        return c.st;
    }
    *gbnf = c.rules.s;
    return LEAN_OK;
}

void lean_grammar_text_free(char *gbnf) { lean_free(gbnf); }
