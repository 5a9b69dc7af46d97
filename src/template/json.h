/* json.h — a small strict JSON reader (RFC 8259) for the few places lean reads JSON:
 * conversations given as JSON messages (lean_chat_parse_messages) and test data.
 *
 * The whole document becomes a tree of json_value, every node and string owned by the
 * tree (lean_malloc'd) and freed by json_free. Strings are decoded to UTF-8 (\uXXXX
 * escapes, surrogate pairs joined; a lone surrogate is refused) and NUL-terminated (len
 * excludes the NUL; a string may hold \u0000, so trust len). Numbers are doubles.
 * Refused (LEAN_ERR_FORMAT, the message names the byte offset): anything not JSON, trailing
 * bytes after the value, raw control characters in strings, nesting deeper than
 * JSON_MAX_DEPTH. LEAN_ERR_NOMEM when an allocation fails (nothing leaks). */
#ifndef LEAN_JSON_H
#define LEAN_JSON_H

#include "core/common.h"

#define JSON_MAX_DEPTH 64

typedef enum json_type {
    JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    double num;         /* JSON_NUMBER */
    char *str;          /* JSON_STRING: owned, NUL-terminated */
    size_t len;         /* JSON_STRING: bytes */
    json_value *items;  /* JSON_ARRAY: the elements; JSON_OBJECT: the values (n, owned) */
    char **keys;        /* JSON_OBJECT: n keys, owned, NUL-terminated */
    size_t *key_lens;   /* JSON_OBJECT: bytes of each key */
    size_t n;
};

lean_status json_parse(const char *text, size_t len, json_value **out, lean_error *err);
void json_free(json_value *v);
/* The value of the first key equal to key in an object; NULL when absent or not an object.
 * O(n) string compares. */
const json_value *json_get(const json_value *obj, const char *key);

#endif
