/* template.c — chat templates: the public API (lean_chat_*), the ChatML fallback
 * and the engine's shared plumbing (arena, errors, buffers, UTF-8); the model's template
 * and its BOS / EOS texts are read in core/model.c.
 *
 * What it does: lean_chat_render_ex parses the template (template_parse.c), builds the
 * variables transformers passes (messages, add_generation_prompt, bos_token, eos_token,
 * tools, documents), renders (template_eval.c) and hands back a malloc'd copy of the text.
 * What it does not: tokenize the text (the tokenizer's job), or fall back to ChatML by
 * itself — the caller asks for that by passing a NULL template.
 *
 * Sections:
 *   1. the arena        one bump allocator per render, chunks from lean_malloc
 *   2. errors           tj_fail: the first failure, with the template position
 *   3. buffers, UTF-8   growable output, code point decoding, Python's whitespace
 *   4. the public API   render, ChatML, JSON messages
 */
#include "template/template.h"

#include "template/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- 1. the arena ---- */

struct tj_chunk {
    tj_chunk *next;
    size_t used, cap; /* bytes of data[] */
    _Alignas(16) unsigned char data[];
};
#define TJ_ALIGN 16u

void tj_ctx_init(tj_ctx *c, lean_error *err) {
    memset(c, 0, sizeof *c);
    c->err = err;
    c->status = LEAN_OK;
    c->arena.chunk_bytes = TJ_CHUNK_BYTES;
}

void tj_ctx_free(tj_ctx *c) {
    tj_chunk *ch = c->arena.head;
    while (ch) {
        tj_chunk *next = ch->next;
        lean_free(ch);
        ch = next;
    }
    c->arena.head = NULL;
    c->arena.total_bytes = 0;
}

void *tj_alloc(tj_ctx *c, size_t bytes) {
    if (c->status != LEAN_OK) return NULL; /* after a failure, nothing more is built */
    size_t need = (bytes + TJ_ALIGN - 1) & ~(size_t)(TJ_ALIGN - 1);
    if (need < bytes) goto too_big;
    tj_chunk *ch = c->arena.head;
    if (!ch || ch->cap - ch->used < need) {
        size_t cap = c->arena.chunk_bytes;
        if (cap < need) cap = need;
        if (cap > TJ_MAX_BYTES || c->arena.total_bytes + cap > TJ_MAX_BYTES) goto too_big;
        ch = lean_malloc(sizeof(tj_chunk) + cap);
        if (!ch) {
            tj_fail(c, 0, 0, LEAN_ERR_NOMEM, "chat template: out of memory (%zu bytes)", cap);
            return NULL;
        }
        ch->used = 0;
        ch->cap = cap;
        ch->next = c->arena.head;
        c->arena.head = ch;
        c->arena.total_bytes += cap;
    }
    void *p = ch->data + ch->used;
    ch->used += need;
    return p;
too_big:
    tj_fail(c, 0, 0, LEAN_ERR_NOMEM,
            "chat template: the render needs more than %llu MiB (limit)",
            (unsigned long long)(TJ_MAX_BYTES >> 20));
    return NULL;
}

void *tj_alloc_array(tj_ctx *c, size_t n, size_t elem_bytes) {
    uint64_t bytes;
    if (!lean_mul_u64(n, elem_bytes, &bytes) || bytes > TJ_MAX_BYTES) {
        tj_fail(c, 0, 0, LEAN_ERR_NOMEM,
                "chat template: the render needs more than %llu MiB (limit)",
                (unsigned long long)(TJ_MAX_BYTES >> 20));
        return NULL;
    }
    return tj_alloc(c, (size_t)bytes);
}

void *tj_realloc(tj_ctx *c, void *p, size_t old_bytes, size_t new_bytes) {
    tj_chunk *ch = c->arena.head;
    if (p && ch && c->status == LEAN_OK) {
        /* The latest allocation of the newest chunk grows in place when there is room. */
        size_t off = (size_t)((unsigned char *)p - ch->data);
        size_t old_need = (old_bytes + TJ_ALIGN - 1) & ~(size_t)(TJ_ALIGN - 1);
        size_t new_need = (new_bytes + TJ_ALIGN - 1) & ~(size_t)(TJ_ALIGN - 1);
        if ((unsigned char *)p >= ch->data && off <= ch->used && off + old_need == ch->used &&
            new_need >= new_bytes && off + new_need <= ch->cap) {
            ch->used = off + new_need;
            return p;
        }
    }
    void *q = tj_alloc(c, new_bytes);
    if (q && p && old_bytes) memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
    return q;
}

tj_str tj_strdup(tj_ctx *c, const char *p, size_t n, bool *ok) {
    char *q = tj_alloc(c, n + 1);
    if (!q) {
        *ok = false;
        return (tj_str){"", 0};
    }
    if (n) memcpy(q, p, n);
    q[n] = 0;
    return (tj_str){q, n};
}

/* ---- 2. errors ---- */

bool tj_fail(tj_ctx *c, int line, int col, lean_status st, const char *fmt, ...) {
    if (c->status != LEAN_OK) return false; /* the first error is the one reported */
    c->status = st;
    char msg[sizeof(((lean_error *)0)->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        lean_fail(c->err, st, "template line %d col %d: %s", line, col, msg);
    else
        lean_fail(c->err, st, "%s", msg);
    return false;
}

/* ---- 3. buffers and UTF-8 ---- */

bool tj_buf_put(tj_ctx *c, tj_buf *b, const char *s, size_t n) {
    if (n == 0) return c->status == LEAN_OK;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > TJ_MAX_BYTES) {
                return tj_fail(c, 0, 0, LEAN_ERR_NOMEM,
                               "chat template: the render needs more than %llu MiB (limit)",
                               (unsigned long long)(TJ_MAX_BYTES >> 20));
            }
            cap *= 2;
        }
        char *p = tj_realloc(c, b->p, b->n, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return true;
}

bool tj_buf_puts(tj_ctx *c, tj_buf *b, const char *s) { return tj_buf_put(c, b, s, strlen(s)); }
bool tj_buf_putc(tj_ctx *c, tj_buf *b, char ch) { return tj_buf_put(c, b, &ch, 1); }

bool tj_buf_printf(tj_ctx *c, tj_buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) return tj_fail(c, 0, 0, LEAN_ERR_ARG, "chat template: internal format overflow");
    return tj_buf_put(c, b, tmp, (size_t)n);
}

uint32_t tj_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = *i;
    uint32_t c0 = u[k];
    int len = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 0;
    if (len <= 1 || k + (size_t)len > n) {
        *i = k + 1;
        return c0; /* ASCII, or an invalid byte taken as itself */
    }
    uint32_t cp = c0 & (0x7Fu >> len);
    for (int j = 1; j < len; j++) {
        if ((u[k + (size_t)j] & 0xC0) != 0x80) {
            *i = k + 1;
            return c0;
        }
        cp = (cp << 6) | (u[k + (size_t)j] & 0x3F);
    }
    *i = k + (size_t)len;
    return cp;
}

size_t tj_utf8_len(tj_str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.n; n++) tj_utf8_next(s.p, s.n, &i);
    return n;
}

bool tj_buf_put_cp(tj_ctx *c, tj_buf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return tj_buf_put(c, b, t, n);
}

bool tj_py_space(uint32_t cp) {
    /* Python's str.isspace(): bidirectional class WS/B/S or category Zs. */
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- 4. the public API ---- */

static const char chatml_source[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char *lean_chat_template_chatml(void) { return chatml_source; }

lean_chat_params lean_chat_default_params(void) {
    lean_chat_params p;
    memset(&p, 0, sizeof p);
    p.now_s = LEAN_CHAT_NOW;
    return p;
}

void lean_chat_free(char *s) { lean_free(s); }

static bool set_str(tj_ctx *c, tj_dict *d, const char *key, const char *val) {
    bool ok = true;
    tj_str v = tj_strdup(c, val, strlen(val), &ok);
    return ok && tj_dict_set(c, d, tj_strv(tj_cstr(key)), tj_strv(v));
}

/* The render variables transformers passes (apply_chat_template -> render). */
static tj_frame *make_globals(tj_ctx *c, const lean_chat_message *msgs, size_t n,
                              const lean_chat_params *p) {
    tj_frame *g = tj_frame_new(c, NULL);
    tj_list *list = tj_list_new(c, TJ_L_LIST, n);
    if (!g || !list) return NULL;
    for (size_t i = 0; i < n; i++) {
        tj_dict *m = tj_dict_new(c, 2);
        if (!m || !set_str(c, m, "role", msgs[i].role) || !set_str(c, m, "content", msgs[i].content) ||
            !tj_list_push(c, list, tj_dictv(m)))
            return NULL;
    }
    bool ok = tj_frame_set(c, g, tj_cstr("messages"), tj_listv(list)) &&
              tj_frame_set(c, g, tj_cstr("tools"), tj_none()) &&
              tj_frame_set(c, g, tj_cstr("documents"), tj_none()) &&
              tj_frame_set(c, g, tj_cstr("add_generation_prompt"), tj_bool(p->add_generation_prompt != 0));
    const char *names[2] = {"bos_token", "eos_token"};
    const char *vals[2] = {p->bos_token, p->eos_token};
    for (int i = 0; ok && i < 2; i++) {
        if (!vals[i]) continue;
        tj_str s = tj_strdup(c, vals[i], strlen(vals[i]), &ok);
        ok = ok && tj_frame_set(c, g, tj_cstr(names[i]), tj_strv(s));
    }
    return ok ? g : NULL;
}

lean_status tj_chat_render(const char *template_source, const lean_chat_message *messages, size_t n,
                           const lean_chat_params *p, size_t chunk_bytes, char **out, size_t *out_len,
                           lean_error *err) {
    if (!out || !p) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_render: out and params are required");
    if (n && !messages) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_render: %zu messages but messages is NULL", n);
    for (size_t i = 0; i < n; i++)
        if (!messages[i].role || !messages[i].content)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_render: message %zu has a NULL %s", i,
                             messages[i].role ? "content" : "role");
    const char *src = template_source ? template_source : chatml_source;

    tj_ctx c;
    tj_ctx_init(&c, err);
    if (chunk_bytes) c.arena.chunk_bytes = chunk_bytes;
    c.now_s = p->now_s == LEAN_CHAT_NOW ? (int64_t)time(NULL) : p->now_s;
    tj_node *root = NULL;
    tj_frame *globals = NULL;
    tj_buf buf = {0};
    char *text = NULL;
    if (!tj_parse(&c, src, strlen(src), &root)) goto done;
    if (!(globals = make_globals(&c, messages, n, p))) goto done;
    if (!tj_render(&c, root, globals, &buf)) goto done;
    text = lean_malloc(buf.n + 1);
    if (!text) {
        tj_fail(&c, 0, 0, LEAN_ERR_NOMEM, "chat template: out of memory (%zu bytes)", buf.n + 1);
        goto done;
    }
    if (buf.n) memcpy(text, buf.p, buf.n);
    text[buf.n] = 0;
    *out = text;
    if (out_len) *out_len = buf.n;
done:
    if (!text && c.status == LEAN_OK) /* every failure sets a reason; this would be a lean bug */
        tj_fail(&c, 0, 0, LEAN_ERR_ARG, "chat template: the render stopped without a reason");
    lean_status st = c.status;
    tj_ctx_free(&c);
    return st;
}

lean_status lean_chat_render_ex(const char *template_source, const lean_chat_message *messages,
                                size_t n, const lean_chat_params *p, char **out, size_t *out_len,
                                lean_error *err) {
    return tj_chat_render(template_source, messages, n, p, 0, out, out_len, err);
}

lean_status lean_chat_render(const char *template_source, const lean_chat_message *messages, size_t n,
                             int add_generation_prompt, const char *bos_token, const char *eos_token,
                             char **out, size_t *out_len, lean_error *err) {
    lean_chat_params p = lean_chat_default_params();
    p.add_generation_prompt = add_generation_prompt != 0;
    p.bos_token = bos_token;
    p.eos_token = eos_token;
    return lean_chat_render_ex(template_source, messages, n, &p, out, out_len, err);
}

void lean_chat_messages_free(lean_chat_message *messages, size_t n) {
    if (!messages) return;
    for (size_t i = 0; i < n; i++) {
        lean_free((char *)messages[i].role);
        lean_free((char *)messages[i].content);
    }
    lean_free(messages);
}

lean_status lean_chat_parse_messages(const char *text, size_t len, lean_chat_message **out, size_t *n,
                                     lean_error *err) {
    if (!text || !out || !n) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_chat_parse_messages: NULL argument");
    json_value *root = NULL;
    lean_status st = json_parse(text, len, &root, err);
    if (st != LEAN_OK) return st;
    lean_chat_message *msgs = NULL;
    size_t count = 0;
    if (root->type != JSON_ARRAY) {
        st = LEAN_FAIL(err, LEAN_ERR_FORMAT, "messages: expected a JSON array of {\"role\", \"content\"} objects");
        goto done;
    }
    msgs = lean_calloc(root->n ? root->n : 1, sizeof *msgs);
    if (!msgs) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "messages: out of memory");
        goto done;
    }
    for (size_t i = 0; i < root->n; i++) {
        const json_value *m = &root->items[i];
        const json_value *role = m->type == JSON_OBJECT ? json_get(m, "role") : NULL;
        const json_value *content = m->type == JSON_OBJECT ? json_get(m, "content") : NULL;
        if (m->type != JSON_OBJECT || !role || role->type != JSON_STRING || !content ||
            content->type != JSON_STRING) {
            st = LEAN_FAIL(err, LEAN_ERR_FORMAT,
                           "messages[%zu]: expected an object with string \"role\" and \"content\"", i);
            goto done;
        }
        msgs[i].role = lean_strndup(role->str, role->len);
        msgs[i].content = lean_strndup(content->str, content->len);
        count = i + 1;
        if (!msgs[i].role || !msgs[i].content) {
            st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "messages: out of memory");
            goto done;
        }
        if (strlen(msgs[i].role) != role->len || strlen(msgs[i].content) != content->len) {
            st = LEAN_FAIL(err, LEAN_ERR_FORMAT, "messages[%zu]: a string holds a NUL character (\\u0000)", i);
            goto done;
        }
    }
    *out = msgs;
    *n = root->n;
    msgs = NULL;
done:
    lean_chat_messages_free(msgs, count);
    json_free(root);
    return st;
}
