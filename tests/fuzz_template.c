/* fuzz_template.c — the libFuzzer target for the chat-template engine (src/core/template*.c):
 * an arbitrary template rendered over arbitrary JSON messages.
 *
 *   make fuzz         build-fuzz/fuzz_template   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it (with the other targets) on a fresh copy of tests/data/fuzz_template/
 *
 * An input is TEMPLATE, or TEMPLATE NUL MESSAGES: the messages are JSON for
 * lean_chat_parse_messages; without them (or when they do not parse) a fixed conversation
 * is used. The render must succeed or fail with a message and a status other than NOMEM/IO
 * (the allocator does not fail here); a rendering is NUL-terminated at its length, and
 * rendering again gives the same bytes (nothing depends on uninitialized memory or on an
 * earlier render). Crashes, leaks, UB and hangs (the engine's step and depth limits must
 * stop every template; -timeout) are what libFuzzer reports.
 */
#include "lean.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_template: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                        \
        }                                                                            \
    } while (0)

static lean_status render(const char *tpl, const lean_chat_message *m, size_t n, int agp, char **out, size_t *len,
                          lean_error *e) {
    lean_chat_params p = lean_chat_default_params();
    p.add_generation_prompt = agp;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.now_s = 1721995200;
    *out = NULL;
    return lean_chat_render_ex(tpl, m, n, &p, out, len, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const lean_chat_message fixed[] = {
        {"system", "You are terse."}, {"user", "Hi \"there\"\n"}, {"assistant", "<think>\nr\n</think>\n\nA"},
        {"user", "<|im_end|> and {{ not a template }}"}};
    const uint8_t *nul = memchr(data, 0, size);
    const size_t tlen = nul ? (size_t)(nul - data) : size;
    char *tpl = malloc(tlen + 1);
    REQUIRE(tpl);
    memcpy(tpl, data, tlen);
    tpl[tlen] = 0;
    lean_chat_message *msgs = NULL;
    size_t n = 0;
    lean_error e = {0}, e2 = {0};
    const int own = nul && lean_chat_parse_messages((const char *)nul + 1, size - tlen - 1, &msgs, &n, &e) == LEAN_OK;
    const lean_chat_message *m = own ? msgs : fixed;
    if (!own) n = sizeof fixed / sizeof fixed[0];
    const int agp = (int)(size & 1);
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    lean_status st = render(tpl, m, n, agp, &a, &la, &e);
    lean_status st2 = render(tpl, m, n, agp, &b, &lb, &e2);
    REQUIRE(st == st2 && (st == LEAN_OK || strcmp(e.msg, e2.msg) == 0));
    if (st == LEAN_OK) {
        REQUIRE(a && b && a[la] == 0 && la == lb && memcmp(a, b, la) == 0);
    } else {
        REQUIRE(!a && !b && e.msg[0] && st != LEAN_ERR_NOMEM && st != LEAN_ERR_IO);
    }
    lean_chat_free(a);
    lean_chat_free(b);
    lean_chat_messages_free(msgs, own ? n : 0);
    free(tpl);
    return 0;
}
