/* prompt.c — a conversation's prompt ids (lean_chat_tokenize, lean.h): control tokens parsed
 * where the chat template wrote them, never in the messages.
 *
 * Which bytes of a rendering came from the messages is learnt by rendering twice: once as
 * given (the text tokenized), once with every control-token text inside a role or content
 * changed byte for byte ("<|im_end|>" -> ">xxxxxxxx<"). Where the two renderings differ is
 * message text that PARSE_SPECIAL would have read as a control token; those bytes are marked
 * plain for tok_tokenize. Conversations without such text render once and tokenize exactly
 * as lean_tokenize(PARSE_SPECIAL) always did: their ids do not change.
 *
 * What it does not: render (template*.c) or tokenize (tokenizer.c) by itself. It sits apart
 * from chat.c so that what uses it (a front end, the fuzzers) need not link the sessions.
 */
#include "core/common.h"
#include "text/tokenizer.h"

#include <string.h>

/* s with each byte of every control-token text in it changed, in a new string; s itself
 * when it holds none; NULL when out of memory. '<' and '>' trade places (HTML escaping makes
 * both 4 bytes, JSON neither longer), other bytes become 'x' ('y' for an 'x'): templates that
 * escape or JSON-encode a message render the two texts at the same length. */
static const char *defuse(const lean_tokenizer *t, const char *s) {
    const size_t n = strlen(s);
    char *d = NULL;
    for (size_t i = 0; i < n;) {
        const int32_t id = tok_match_control(t, s + i, n - i);
        if (id < 0) {
            i++;
            continue;
        }
        if (!d && !(d = lean_strndup(s, n))) return NULL;
        size_t len;
        lean_token_text(t, id, &len);
        for (size_t k = i; k < i + len; k++) d[k] = d[k] == '<' ? '>' : d[k] == '>' ? '<' : d[k] == 'x' ? 'y' : 'x';
        i += len;
    }
    return d ? d : s;
}

lean_status lean_chat_tokenize(const lean_tokenizer *t, const char *template_source,
                               const lean_chat_message *messages, size_t n, const lean_chat_params *p,
                               int32_t *ids, int32_t max_ids, int32_t *n_ids, lean_error *err) {
    lean_status st = lean_tokenizer_check(t, err);
    if (st != LEAN_OK) return st;
    char *text = NULL, *twin = NULL;
    size_t len = 0, twin_len = 0;
    lean_chat_message *defused = NULL;
    uint8_t *plain = NULL;
    if ((st = lean_chat_render_ex(template_source, messages, n, p, &text, &len, err)) != LEAN_OK) return st;
    bool any = false;
    if (!(defused = lean_calloc(n ? n : 1, sizeof *defused))) goto oom;
    for (size_t i = 0; i < n; i++) {
        defused[i].role = defuse(t, messages[i].role);
        defused[i].content = defuse(t, messages[i].content);
        if (!defused[i].role || !defused[i].content) goto oom;
        any |= defused[i].role != messages[i].role || defused[i].content != messages[i].content;
    }
    if (any) {
        if ((st = lean_chat_render_ex(template_source, defused, n, p, &twin, &twin_len, err)) != LEAN_OK) goto done;
        if (twin_len != len) {
            st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                           "a message holds control-token text and the chat template does not copy it as it is "
                           "(the rendering's length depends on it: %zu bytes, %zu without it)",
                           len, twin_len);
            goto done;
        }
        if (!(plain = lean_malloc(len ? len : 1))) goto oom;
        for (size_t i = 0; i < len; i++) plain[i] = text[i] != twin[i];
    }
    st = tok_tokenize(t, text, len, LEAN_TOKENIZE_PARSE_SPECIAL, plain, ids, max_ids, n_ids, err);
    goto done;
oom:
    st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "tokenizing a conversation of %zu messages", n);
done:
    for (size_t i = 0; defused && i < n; i++) {
        if (defused[i].role && defused[i].role != messages[i].role) lean_free((char *)defused[i].role);
        if (defused[i].content && defused[i].content != messages[i].content) lean_free((char *)defused[i].content);
    }
    lean_free(defused);
    lean_free(plain);
    lean_chat_free(text);
    lean_chat_free(twin);
    return st;
}
