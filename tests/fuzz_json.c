/* fuzz_json.c — the libFuzzer target for the JSON reader (src/core/json.c) and the JSON
 * conversations built on it (lean_chat_parse_messages).
 *
 *   make fuzz         build-fuzz/fuzz_json   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it (with the other targets) on a fresh copy of tests/data/fuzz_json/
 *
 * Each input is parsed; a refusal must be LEAN_ERR_FORMAT with a message (never NOMEM: the
 * allocator does not fail here). A tree that parses is walked and held to json.h's promises
 * (strings NUL-terminated at len, keys too, depth <= JSON_MAX_DEPTH, json_get finds the first
 * equal key), written back as JSON by this file's own writer and parsed again: the two trees
 * must be equal (numbers bit for bit; non-finite numbers, which JSON cannot write, are not
 * written back). lean_chat_parse_messages must accept exactly the arrays of {"role",
 * "content"} string objects without NUL, and give back those strings.
 */
#include "template/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_json: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                    \
        }                                                                        \
    } while (0)

typedef struct out {
    char *p;
    size_t n, cap;
} out;

static void put(out *o, const void *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        o->cap = (o->n + n + 1) * 2;
        o->p = realloc(o->p, o->cap);
        REQUIRE(o->p);
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void put_str(out *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, &s[i], 1);
        }
    }
    put(o, "\"", 1);
}

/* Writes v as JSON; false when it holds a number JSON cannot write. */
static bool write_value(out *o, const json_value *v) {
    char num[40];
    switch (v->type) {
    case JSON_NULL: put(o, "null", 4); return true;
    case JSON_FALSE: put(o, "false", 5); return true;
    case JSON_TRUE: put(o, "true", 4); return true;
    case JSON_NUMBER:
        if (!isfinite(v->num)) return false;
        put(o, num, (size_t)snprintf(num, sizeof num, "%.17g", v->num));
        return true;
    case JSON_STRING: put_str(o, v->str, v->len); return true;
    case JSON_ARRAY: case JSON_OBJECT:
        put(o, v->type == JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) put(o, ",", 1);
            if (v->type == JSON_OBJECT) {
                put_str(o, v->keys[i], v->key_lens[i]);
                put(o, ":", 1);
            }
            if (!write_value(o, &v->items[i])) return false;
        }
        put(o, v->type == JSON_ARRAY ? "]" : "}", 1);
        return true;
    }
    REQUIRE(0);
    return false;
}

static void touch(const json_value *v, int depth) {
    REQUIRE(depth <= JSON_MAX_DEPTH + 1);
    REQUIRE(v->type <= JSON_OBJECT);
    if (v->type == JSON_STRING) REQUIRE(v->str && v->str[v->len] == 0);
    if (v->type != JSON_ARRAY && v->type != JSON_OBJECT) return;
    REQUIRE(v->n == 0 || v->items);
    for (size_t i = 0; i < v->n; i++) {
        if (v->type == JSON_OBJECT) {
            REQUIRE(v->keys[i] && v->keys[i][v->key_lens[i]] == 0);
            const json_value *first = json_get(v, v->keys[i]);
            /* json_get compares C strings: a key with a NUL inside may find an earlier one */
            if (strlen(v->keys[i]) == v->key_lens[i]) {
                REQUIRE(first);
                size_t j = (size_t)(first - v->items);
                REQUIRE(j <= i && strcmp(v->keys[j], v->keys[i]) == 0);
            }
        }
        touch(&v->items[i], depth + 1);
    }
}

static bool equal(const json_value *a, const json_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case JSON_NUMBER: return memcmp(&a->num, &b->num, sizeof a->num) == 0;
    case JSON_STRING: return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case JSON_ARRAY: case JSON_OBJECT:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) {
            if (a->type == JSON_OBJECT &&
                (a->key_lens[i] != b->key_lens[i] || memcmp(a->keys[i], b->keys[i], a->key_lens[i]) != 0))
                return false;
            if (!equal(&a->items[i], &b->items[i])) return false;
        }
        return true;
    default: return true;
    }
}

/* What lean_chat_parse_messages must accept: an array of objects whose first "role" and
 * "content" keys are strings without a NUL. */
static bool is_conversation(const json_value *v) {
    if (v->type != JSON_ARRAY) return false;
    for (size_t i = 0; i < v->n; i++) {
        const json_value *m = &v->items[i];
        const json_value *r = json_get(m, "role"), *c = json_get(m, "content");
        if (m->type != JSON_OBJECT || !r || !c || r->type != JSON_STRING || c->type != JSON_STRING ||
            strlen(r->str) != r->len || strlen(c->str) != c->len)
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_value *v = NULL;
    lean_error e = {0};
    lean_status st = json_parse((const char *)data, size, &v, &e);
    lean_chat_message *msgs = NULL;
    size_t n_msgs = 0;
    lean_error e2 = {0};
    lean_status st2 = lean_chat_parse_messages((const char *)data, size, &msgs, &n_msgs, &e2);
    if (st != LEAN_OK) {
        REQUIRE(st == LEAN_ERR_FORMAT && e.msg[0] && !v);
        REQUIRE(st2 == st && msgs == NULL);
        return 0;
    }
    touch(v, 1);
    const bool conv = is_conversation(v);
    REQUIRE((st2 == LEAN_OK) == conv);
    if (conv) {
        REQUIRE(n_msgs == v->n);
        for (size_t i = 0; i < n_msgs; i++) {
            REQUIRE(strcmp(msgs[i].role, json_get(&v->items[i], "role")->str) == 0);
            REQUIRE(strcmp(msgs[i].content, json_get(&v->items[i], "content")->str) == 0);
        }
        lean_chat_messages_free(msgs, n_msgs);
    } else {
        REQUIRE(st2 == LEAN_ERR_FORMAT && e2.msg[0]);
    }
    out o = {0};
    if (write_value(&o, v)) {
        json_value *w = NULL;
        st = json_parse(o.p, o.n, &w, &e);
        if (st != LEAN_OK) fprintf(stderr, "fuzz_json: the reader refused its own tree: %s\n%.*s\n", e.msg, (int)o.n, o.p);
        REQUIRE(st == LEAN_OK && equal(v, w));
        json_free(w);
    }
    free(o.p);
    json_free(v);
    return 0;
}
