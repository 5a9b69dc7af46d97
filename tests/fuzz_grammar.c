/* fuzz_grammar.c — the libFuzzer target for the GBNF parser and matcher (src/core/grammar*.c)
 * and the JSON Schema converter.
 *
 *   make fuzz         build-fuzz/fuzz_grammar   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it (with the other targets) on a fresh copy of tests/data/fuzz_grammar/
 *
 * An input is "G" + GBNF, or "S" + a JSON Schema, each optionally followed by a NUL and a
 * text to match. A refusal must be LEAN_ERR_FORMAT or LEAN_ERR_UNSUPPORTED with a message (a
 * grammar too ambiguous to match may be NOMEM: MAX_STACKS). A schema that converts must give
 * GBNF that parses (the converter writes only grammars the parser takes, or a left-recursive
 * $ref cycle it names). The text is then fed in pieces of 1..3 bytes: each accept either
 * succeeds or fails leaving the state as it was (the next piece is still tried), and
 * complete/done must agree (done implies complete).
 */
#include "lean.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                               \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_grammar: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                       \
        }                                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || (data[0] != 'G' && data[0] != 'S')) return 0;
    const char *src = (const char *)data + 1;
    size_t n_src = size - 1;
    const char *nul = memchr(src, 0, n_src);
    const char *text = nul ? nul + 1 : "";
    size_t n_text = nul ? (size_t)((const char *)data + size - text) : 0;
    if (nul) n_src = (size_t)(nul - src);
    lean_error err = {0};
    char *gbnf = NULL;
    if (data[0] == 'S') {
        lean_status st = lean_json_schema_to_gbnf(src, n_src, &gbnf, &err);
        if (st != LEAN_OK) {
            REQUIRE((st == LEAN_ERR_FORMAT || st == LEAN_ERR_UNSUPPORTED) && err.msg[0]);
            REQUIRE(gbnf == NULL);
            return 0;
        }
        REQUIRE(gbnf != NULL);
        src = gbnf;
        n_src = strlen(gbnf);
    }
    lean_grammar *g = NULL;
    lean_status st = lean_grammar_create(src, n_src, NULL, NULL, &g, &err);
    if (st != LEAN_OK) {
        REQUIRE(g == NULL && err.msg[0]);
        REQUIRE(st == LEAN_ERR_FORMAT || st == LEAN_ERR_NOMEM);
        /* converted schemas parse, but for a $ref cycle without progress */
        REQUIRE(!gbnf || strstr(err.msg, "left recursive") || st == LEAN_ERR_NOMEM);
        lean_grammar_text_free(gbnf);
        return 0;
    }
    for (size_t k = 0; k < n_text;) {
        size_t step = 1 + (size_t)((unsigned char)text[k] % 3);
        if (step > n_text - k) step = n_text - k;
        int was_complete = lean_grammar_complete(g);
        st = lean_grammar_accept_text(g, text + k, step, &err);
        REQUIRE(st == LEAN_OK || st == LEAN_ERR_ARG || st == LEAN_ERR_NOMEM);
        if (st != LEAN_OK) REQUIRE(lean_grammar_complete(g) == was_complete);
        REQUIRE(!lean_grammar_done(g) || lean_grammar_complete(g));
        k += step;
    }
    lean_grammar_free(g);
    lean_grammar_text_free(gbnf);
    return 0;
}
