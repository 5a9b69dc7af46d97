/* test_grammar.c — src/core/grammar*.c: GBNF parsing and matching, JSON Schema to GBNF, masks.
 *
 *   llama     llama.cpp's grammar integration tests (tests/test-grammar-integration.cpp at
 *             3f545be), as data: tests/data/grammar/llama_integration.json, written by
 *             scripts/extract_llama_grammar_tests.py. Every test_grammar case accepts and
 *             rejects what llama.cpp says; every test_schema case inside lean's subset too,
 *             and those outside it are refused naming the keyword (a known list); every
 *             test_build_grammar_fails grammar fails. Plus its hand-written failures
 *             (missing root, missing reference, custom root).
 *   errors    malformed grammars and schemas: the message names the line and column, or the
 *             schema path and keyword.
 *   mask      with a real vocabulary (build/vocab/smollm2.gguf, `make test-data`): at several
 *             points of a JSON grammar, a token is in the mask exactly when accepting it
 *             succeeds (every token of the vocabulary checked); tokens spanning several
 *             symbols and ending inside a UTF-8 character; end-of-generation only when
 *             complete; a dead end is an error, not a crash.
 *   oom       every allocation of schema -> GBNF -> grammar -> mask -> accept failing in
 *             turn: LEAN_ERR_NOMEM, no crash, no leak (ASan), then success.
 */
#include "test.h"

#include "core/common.h"
#include "lean.h"
#include "template/json.h"

#include <stdlib.h>
#include <string.h>

/* Feeds a string of the data file (text, or a list of text and token ids) to g; 1 when every
 * piece fits and the grammar is complete at the end (llama.cpp's match_string). In a list,
 * llama.cpp's harness feeds each character of the text as token 0 with that character's
 * bytes; its cases mixing tokens and text have only token elements, so token 0 it is here. */
static int match(lean_grammar *g, const json_value *s) {
    lean_error err;
    if (lean_grammar_reset(g, &err) != LEAN_OK) return 0;
    const json_value *pieces = s->type == JSON_ARRAY ? s->items : s;
    const size_t n = s->type == JSON_ARRAY ? s->n : 1;
    for (size_t i = 0; i < n; i++) {
        const json_value *p = &pieces[i];
        if (p->type == JSON_NUMBER) {
            if (lean_grammar_accept_token(g, (int32_t)p->num, &err) != LEAN_OK) return 0;
        } else if (s->type == JSON_ARRAY) {
            for (size_t k = 0; k < p->len; k++)
                if (((uint8_t)p->str[k] & 0xc0) != 0x80 && lean_grammar_accept_token(g, 0, &err) != LEAN_OK) return 0;
        } else if (lean_grammar_accept_text(g, p->str, p->len, &err) != LEAN_OK) {
            return 0;
        }
    }
    return lean_grammar_complete(g);
}

/* the keywords lean's schema subset leaves out, as the llama.cpp cases use them */
static int outside_subset(const char *msg) {
    static const char *const words[] = {"'minimum'", "'maximum'", "'exclusiveMinimum'", "'exclusiveMaximum'",
                                        "'pattern'", "'format'", "'prefixItems'", "additionalProperties beside properties",
                                        "(tuples)", NULL};
    for (int i = 0; words[i]; i++)
        if (strstr(msg, words[i])) return 1;
    return 0;
}

static void test_llama(void) {
    size_t len;
    uint8_t *text = test_read_file("tests/data/grammar/llama_integration.json", &len);
    CHECK(text != NULL, "cannot read tests/data/grammar/llama_integration.json");
    if (!text) return;
    json_value *doc;
    lean_error err;
    CHECK(json_parse((const char *)text, len, &doc, &err) == LEAN_OK, "%s", err.msg);
    int n_run = 0, n_outside = 0, n_strings = 0;
    for (size_t i = 0; i < doc->n; i++) {
        const json_value *c = &doc->items[i];
        const char *kind = json_get(c, "kind")->str, *desc = json_get(c, "desc")->str;
        const json_value *src = json_get(c, "text");
        lean_grammar *g = NULL;
        if (strcmp(kind, "fails") == 0) {
            lean_status st = lean_grammar_create(src->str, src->len, NULL, NULL, &g, &err);
            CHECK(st == LEAN_ERR_FORMAT && strstr(err.msg, "left recursive"), "%s: %d %s", desc, st, st ? err.msg : "");
            lean_grammar_free(g);
            continue;
        }
        char *gbnf = NULL;
        if (strcmp(kind, "schema") == 0) {
            lean_status st = lean_json_schema_to_gbnf(src->str, src->len, &gbnf, &err);
            if (st == LEAN_ERR_UNSUPPORTED) {
                CHECK(outside_subset(err.msg), "schema '%s' refused for an unexpected reason: %s", desc, err.msg);
                n_outside++;
                continue;
            }
            CHECK(st == LEAN_OK, "schema '%s': %s", desc, err.msg);
            if (st != LEAN_OK) continue;
        }
        const char *gtext = gbnf ? gbnf : src->str;
        lean_status st = lean_grammar_create(gtext, strlen(gtext), NULL, NULL, &g, &err);
        CHECK(st == LEAN_OK, "%s '%s': %s\n%s", kind, desc, err.msg, gtext);
        if (st == LEAN_OK) {
            n_run++;
            const json_value *good = json_get(c, "pass"), *bad = json_get(c, "fail");
            for (size_t k = 0; k < good->n; k++, n_strings++)
                CHECK(match(g, &good->items[k]), "%s '%s': should accept item %zu", kind, desc, k);
            for (size_t k = 0; k < bad->n; k++, n_strings++)
                CHECK(!match(g, &bad->items[k]), "%s '%s': should reject item %zu", kind, desc, k);
        }
        lean_grammar_free(g);
        lean_grammar_text_free(gbnf);
    }
    printf("llama.cpp cases: %d grammars run (%d strings), %d schemas outside the subset\n", n_run, n_strings, n_outside);
    CHECK(n_run >= 30, "only %d cases ran", n_run);
    json_free(doc);
    free(text);

    /* test_failure_missing_root, _missing_reference, _missing_root_symbol, _custom_root */
    lean_grammar *g = NULL;
    const char *no_root = "rot ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= number\nnumber ::= [0-9]+";
    CHECK(lean_grammar_create(no_root, strlen(no_root), NULL, NULL, &g, &err) == LEAN_ERR_FORMAT &&
              strstr(err.msg, "'root'"), "%s", err.msg);
    const char *missing = "root ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= numero\n        number ::= [0-9]+";
    CHECK(lean_grammar_create(missing, strlen(missing), NULL, NULL, &g, &err) == LEAN_ERR_FORMAT &&
              strstr(err.msg, "line 3 column 18: undefined rule 'numero'"), "%s", err.msg);
    const char *foobar = "\n        foobar ::= \"foobar\"\n    ";
    CHECK(lean_grammar_create(foobar, strlen(foobar), "nonexistent", NULL, &g, &err) == LEAN_ERR_FORMAT, "custom root");
    CHECK(lean_grammar_create(foobar, strlen(foobar), "root", NULL, &g, &err) == LEAN_ERR_FORMAT, "custom root");
    CHECK(lean_grammar_create(foobar, strlen(foobar), "foobar", NULL, &g, &err) == LEAN_OK, "%s", err.msg);
    lean_grammar_free(g);
}

/* every grammar example llama.cpp ships (its grammars/ directory) parses */
static void test_examples(void) {
    static const char *const files[] = {"arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list", NULL};
    for (int i = 0; files[i]; i++) {
        char path[128];
        snprintf(path, sizeof path, "tests/data/grammar/%s.gbnf", files[i]);
        size_t len;
        uint8_t *text = test_read_file(path, &len);
        CHECK(text != NULL, "cannot read %s", path);
        if (!text) continue;
        lean_grammar *g;
        lean_error err;
        lean_status st = lean_grammar_create((const char *)text, len, NULL, NULL, &g, &err);
        CHECK(st == LEAN_OK, "%s: %s", path, err.msg);
        if (st == LEAN_OK && strcmp(files[i], "json") == 0) {
            const char *ok = "{\"a\": [1, 2.5e3, \"x\\u00e9\"], \"b\": {\"c\": null}}";
            CHECK(lean_grammar_accept_text(g, ok, strlen(ok), &err) == LEAN_OK && lean_grammar_complete(g), "%s", err.msg);
            lean_grammar_reset(g, &err);
            CHECK(lean_grammar_accept_text(g, "{\"a\" 1}", 7, &err) == LEAN_ERR_ARG, "json.gbnf took bad JSON");
        }
        if (st == LEAN_OK && strcmp(files[i], "arithmetic") == 0) {
            CHECK(lean_grammar_accept_text(g, "(1+2)*3\n", 8, &err) == LEAN_OK, "%s", err.msg);
        }
        lean_grammar_free(g);
        free(text);
    }
}

static void expect_error(const char *gbnf, lean_status want, const char *needle) {
    lean_grammar *g = NULL;
    lean_error err = {0};
    lean_status st = lean_grammar_create(gbnf, strlen(gbnf), NULL, NULL, &g, &err);
    CHECK(st == want && strstr(err.msg, needle), "grammar <<%s>>: status %d, message '%s' lacks '%s'", gbnf, st, err.msg,
          needle);
    CHECK(g == NULL, "a failed create hands out a grammar");
}

static void expect_schema_error(const char *schema, lean_status want, const char *needle) {
    char *gbnf = NULL;
    lean_error err = {0};
    lean_status st = lean_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err);
    CHECK(st == want && strstr(err.msg, needle), "schema %s: status %d, message '%s' lacks '%s'", schema, st, err.msg, needle);
    CHECK(gbnf == NULL, "a failed conversion hands out text");
}

static void test_errors(void) {
    expect_error("root ::= \"abc", LEAN_ERR_FORMAT, "line 1 column 14: unterminated literal");
    expect_error("root ::= [a-", LEAN_ERR_FORMAT, "line 1 column 13: unexpected end");
    expect_error("root ::= x\n\nx ::= (\"a\" | \"b\"", LEAN_ERR_FORMAT, "line 3 column 17: expecting ')'");
    expect_error("root := \"a\"", LEAN_ERR_FORMAT, "line 1 column 6: expecting ::=");
    expect_error("root ::= \"a\"{3", LEAN_ERR_FORMAT, "line 1 column 15: expecting ',' or '}'");
    expect_error("root ::= \"a\"{3001}", LEAN_ERR_FORMAT, "a repetition count above 2000");
    expect_error("root ::= \"a\"{5,2}", LEAN_ERR_FORMAT, "maximum below its minimum");
    expect_error("root ::= * \"a\"", LEAN_ERR_FORMAT, "line 1 column 10: expecting an item before");
    expect_error("root ::= \"\\q\"", LEAN_ERR_FORMAT, "line 1 column 11: unknown escape");
    expect_error("root ::= \"\\x4\"", LEAN_ERR_FORMAT, "expecting 2 hex digits");
    /* bytes no UTF-8 text can hold: a stray continuation, a lead past F4, an overlong form, a
     * surrogate, a lead cut short by the closing quote */
    expect_error("root ::= \"b\x80\"", LEAN_ERR_FORMAT, "line 1 column 12: invalid UTF-8");
    expect_error("root ::= \"\xff\xff\xff\"", LEAN_ERR_FORMAT, "line 1 column 11: invalid UTF-8");
    expect_error("root ::= [\xc0\xaf]", LEAN_ERR_FORMAT, "invalid UTF-8");
    expect_error("root ::= \"\xed\xa0\x80\"", LEAN_ERR_FORMAT, "invalid UTF-8");
    expect_error("root ::= \"\xe2\x82\"", LEAN_ERR_FORMAT, "invalid UTF-8");
    expect_error("root ::= <hello>", LEAN_ERR_FORMAT, "needs the model's vocabulary");
    expect_error("root ::= \"a\" )", LEAN_ERR_FORMAT, "line 1 column 14: expecting a newline");
    expect_error("root ::= a\na ::= a \"x\"", LEAN_ERR_FORMAT, "is left recursive");
    expect_error("", LEAN_ERR_FORMAT, "no rule named 'root'");
    char deep[1024];
    size_t k = (size_t)snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 300; i++) deep[k++] = '(';
    deep[k] = 0;
    expect_error(deep, LEAN_ERR_FORMAT, "nested deeper than 200");
    const char nul[] = "root ::= \"a\"\0";
    lean_grammar *g = NULL;
    lean_error err;
    CHECK(lean_grammar_create(nul, sizeof nul - 1, NULL, NULL, &g, &err) == LEAN_ERR_FORMAT && strstr(err.msg, "NUL byte at offset 12"),
          "%s", err.msg);
    /* repetitions nested past the limit: refused, not grown */
    expect_error("root ::= ((\"a\"{0,100}){0,100})", LEAN_ERR_FORMAT, "past 2000");

    /* JSON text is UTF-8: a property name with a byte that cannot be matched is refused */
    expect_schema_error("{\"type\": \"object\", \"properties\": {\"b\xff\": {\"enum\": [1]}}}", LEAN_ERR_FORMAT,
                        "invalid UTF-8 in a string at byte 36");
    expect_schema_error("{\"const\": \"\xed\xbf\xbf\"}", LEAN_ERR_FORMAT, "invalid UTF-8 in a string");
    expect_schema_error("{\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\", \"minimum\": 3}}}",
                        LEAN_ERR_UNSUPPORTED, "JSON schema at #/properties/age: unsupported keyword 'minimum'");
    expect_schema_error("{\"type\": \"strin\"}", LEAN_ERR_FORMAT, "at #: unknown type 'strin'");
    expect_schema_error("{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": -1}}", LEAN_ERR_FORMAT,
                        "at #/items: expecting a non-negative integer for 'maxLength'");
    expect_schema_error("{\"$ref\": \"#/$defs/missing\"}", LEAN_ERR_FORMAT, "$ref to nothing: '#/$defs/missing'");
    expect_schema_error("{\"anyOf\": []}", LEAN_ERR_FORMAT, "non-empty array for 'anyOf'");
    expect_schema_error("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}", LEAN_ERR_UNSUPPORTED,
                        "required key without a property schema: 'b'");
    expect_schema_error("{\"type\": ", LEAN_ERR_FORMAT, "at byte 9");
    expect_schema_error("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 1}", LEAN_ERR_FORMAT, "maximum below the minimum");
}

/* The subset's features, each accepting and rejecting what JSON Schema says */
static void test_schema_subset(void) {
    static const struct {
        const char *schema, *good[4], *bad[4];
    } cases[] = {
        {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"}, "
         "\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"name\"]}",
         {"{\"name\": \"x\"}", "{\"name\":\"x\",\"ok\":true}", "{\"name\": \"x\", \"age\": -3, \"ok\": false}"},
         {"{}", "{\"age\": 1}", "{\"name\": \"x\", \"ok\": true, \"age\": 1}", "{\"name\": 1}"}},
        {"{\"type\": \"array\", \"items\": {\"enum\": [\"red\", 2, null]}, \"minItems\": 1, \"maxItems\": 3}",
         {"[\"red\"]", "[2, null, \"red\"]"},
         {"[]", "[\"blue\"]", "[2, 2, 2, 2]"}},
        {"{\"oneOf\": [{\"type\": \"number\"}, {\"const\": {\"a\": [1, \"b\"]}}]}",
         {"1.5e3", "{\"a\":[1,\"b\"]}"},
         {"{\"a\": [1]}", "\"x\""}},
        {"{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"next\": {\"anyOf\": [{\"$ref\": \"#/$defs/node\"}, "
         "{\"type\": \"null\"}]}}, \"required\": [\"next\"]}}, \"$ref\": \"#/$defs/node\"}",
         {"{\"next\": null}", "{\"next\": {\"next\": {\"next\": null}}}"},
         {"{\"next\": {}}", "null"}},
        {"{\"type\": [\"string\", \"null\"], \"minLength\": 2, \"maxLength\": 3}",
         {"\"ab\"", "\"abc\"", "null"},
         {"\"a\"", "\"abcd\"", "3"}},
        {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
         {"{}", "{\"x\": 1, \"y\": 2}"},
         {"{\"x\": \"1\"}"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *gbnf = NULL;
        lean_error err;
        lean_status st = lean_json_schema_to_gbnf(cases[i].schema, strlen(cases[i].schema), &gbnf, &err);
        CHECK(st == LEAN_OK, "schema %zu: %s", i, err.msg);
        if (st != LEAN_OK) continue;
        lean_grammar *g;
        st = lean_grammar_create(gbnf, strlen(gbnf), NULL, NULL, &g, &err);
        CHECK(st == LEAN_OK, "schema %zu: %s\n%s", i, err.msg, gbnf);
        for (int k = 0; st == LEAN_OK && k < 4 && cases[i].good[k]; k++) {
            lean_grammar_reset(g, &err);
            CHECK(lean_grammar_accept_text(g, cases[i].good[k], strlen(cases[i].good[k]), &err) == LEAN_OK &&
                      lean_grammar_complete(g), "schema %zu should accept %s (%s)\n%s", i, cases[i].good[k], err.msg, gbnf);
        }
        for (int k = 0; st == LEAN_OK && k < 4 && cases[i].bad[k]; k++) {
            lean_grammar_reset(g, &err);
            CHECK(lean_grammar_accept_text(g, cases[i].bad[k], strlen(cases[i].bad[k]), &err) != LEAN_OK || !lean_grammar_complete(g),
                  "schema %zu should reject %s\n%s", i, cases[i].bad[k], gbnf);
        }
        if (st == LEAN_OK) lean_grammar_free(g);
        lean_grammar_text_free(gbnf);
    }
}

/* Every token: in the mask exactly when accepting it succeeds, after prefix. */
static void check_mask(const lean_tokenizer *t, lean_grammar *g, const char *prefix, int32_t n_vocab, uint32_t *bits) {
    lean_error err;
    lean_grammar_reset(g, &err);
    CHECK(lean_grammar_accept_text(g, prefix, strlen(prefix), &err) == LEAN_OK, "prefix '%s': %s", prefix, err.msg);
    int32_t n_allowed = 0;
    CHECK(lean_grammar_mask(g, bits, n_vocab, &n_allowed, &err) == LEAN_OK, "mask after '%s': %s", prefix, err.msg);
    int bad = 0, multi = 0;
    for (int32_t id = 0; id < n_vocab && bad < 5; id++) {
        lean_status st = lean_grammar_accept_token(g, id, &err);
        const int in_mask = lean_mask_allows(bits, id);
        if ((st == LEAN_OK) != in_mask) {
            size_t n;
            const char *piece = lean_token_piece(t, id, &n);
            CHECK(0, "after '%s': token %d '%.*s' in the mask %d, accepted %d", prefix, id, (int)n, piece, in_mask, st == LEAN_OK);
            bad++;
        }
        if (st == LEAN_OK) {
            size_t n;
            lean_token_piece(t, id, &n);
            multi += n > 1;
            lean_grammar_reset(g, &err);
            lean_grammar_accept_text(g, prefix, strlen(prefix), &err);
        }
    }
    CHECK(bad == 0, "mask and accept disagree after '%s'", prefix);
    CHECK(n_allowed > 0, "nothing allowed after '%s'", prefix);
    printf("after %-24s %6d tokens allowed, %d of several bytes\n", prefix, n_allowed, multi);
}

static void test_mask(void) {
    lean_tokenizer *t;
    lean_error err;
    if (lean_tokenizer_load_file("build/vocab/smollm2.gguf", &t, &err) != LEAN_OK) {
        CHECK(0, "build/vocab/smollm2.gguf: %s (make test-data makes it)", err.msg);
        return;
    }
    const int32_t n_vocab = lean_tokenizer_n_tokens(t);
    uint32_t *bits = malloc(LEAN_MASK_WORDS(n_vocab) * sizeof *bits);
    const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"n\": {\"type\": "
                         "\"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"caf\\u00e9\", \"x y\"]}}}, "
                         "\"required\": [\"name\", \"n\", \"tags\"]}";
    char *gbnf;
    CHECK(lean_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err) == LEAN_OK, "%s", err.msg);
    lean_grammar *g;
    CHECK(lean_grammar_create(gbnf, strlen(gbnf), NULL, t, &g, &err) == LEAN_OK, "%s", err.msg);
    static const char *const prefixes[] = {"", "{", "{\"name\": \"", "{\"name\": \"ab", "{\"name\":\"a\",\"n\":1",
                                           "{\"name\":\"a\",\"n\":12,\"tags\":[\"caf", "{\"name\":\"a\",\"n\":12,\"tags\":[\"caf\xc3", NULL};
    for (int i = 0; prefixes[i]; i++) check_mask(t, g, prefixes[i], n_vocab, bits);
    /* end of generation: only when complete */
    const int32_t eos = lean_token_eos(t);
    const char *whole = "{\"name\":\"a\",\"n\":1,\"tags\":[]}";
    lean_grammar_reset(g, &err);
    lean_grammar_accept_text(g, whole, strlen(whole) - 1, &err);
    lean_grammar_mask(g, bits, n_vocab, NULL, &err);
    CHECK(eos >= 0 && !lean_mask_allows(bits, eos), "eos allowed before the end");
    lean_grammar_accept_text(g, "}", 1, &err);
    CHECK(lean_grammar_complete(g) && !lean_grammar_done(g), "complete; a space may still follow");
    lean_grammar_mask(g, bits, n_vocab, NULL, &err);
    CHECK(lean_mask_allows(bits, eos), "eos not allowed at the end");
    CHECK(lean_grammar_accept_token(g, eos, &err) == LEAN_OK && lean_grammar_done(g), "%s", err.msg);
    lean_grammar_free(g);
    lean_grammar_text_free(gbnf);

    /* a grammar that ends: done after its last character, then only end-of-generation */
    const char *fixed = "root ::= \"ok\"";
    CHECK(lean_grammar_create(fixed, strlen(fixed), NULL, t, &g, &err) == LEAN_OK, "%s", err.msg);
    lean_grammar_accept_text(g, "ok", 2, &err);
    int32_t n_allowed = 0;
    CHECK(lean_grammar_done(g) && lean_grammar_mask(g, bits, n_vocab, &n_allowed, &err) == LEAN_OK && n_allowed >= 1 &&
              lean_mask_allows(bits, eos), "after the end only eog: %d allowed", n_allowed);
    lean_grammar_free(g);

    /* a dead end: a class no character matches; the mask says so, nothing crashes */
    const char *dead = "root ::= \"a\" [^\\x00-\\U0010FFFF]";
    CHECK(lean_grammar_create(dead, strlen(dead), NULL, t, &g, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_grammar_accept_text(g, "a", 1, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_grammar_mask(g, bits, n_vocab, &n_allowed, &err) == LEAN_ERR_ARG && strstr(err.msg, "no token") &&
              n_allowed == 0, "dead end: %s", err.msg);
    lean_grammar_free(g);
    /* a mask too small for the vocabulary is refused */
    CHECK(lean_grammar_create(fixed, strlen(fixed), NULL, t, &g, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_grammar_mask(g, bits, 100, NULL, &err) == LEAN_ERR_ARG, "a short mask taken");
    lean_grammar_free(g);
    free(bits);
    lean_tokenizer_free(t);
}

static void test_alloc_failures(void) {
    lean_tokenizer *t;
    lean_error err;
    if (lean_tokenizer_load_file("build/vocab/smollm2.gguf", &t, &err) != LEAN_OK) {
        CHECK(0, "build/vocab/smollm2.gguf: %s", err.msg);
        return;
    }
    const int32_t n_vocab = lean_tokenizer_n_tokens(t);
    uint32_t *bits = malloc(LEAN_MASK_WORDS(n_vocab) * sizeof *bits);
    const char *schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [\"x\", 1]}, \"b\": {\"type\": "
                         "\"array\", \"items\": {\"$ref\": \"#/$defs/s\"}, \"maxItems\": 2}}, \"required\": [\"a\"], "
                         "\"$defs\": {\"s\": {\"type\": \"string\", \"maxLength\": 2}}}";
    const char *text = "{\"a\": \"x\", \"b\": [\"q";
    uint64_t k, total = 0;
    for (k = 1; k < 100000; k++) {
        char *gbnf = NULL;
        lean_grammar *g = NULL;
        lean_alloc_fail_at(k, false);
        lean_status st = lean_json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err);
        if (st == LEAN_OK) st = lean_grammar_create(gbnf, strlen(gbnf), NULL, t, &g, &err);
        if (st == LEAN_OK) st = lean_grammar_accept_text(g, text, strlen(text), &err);
        if (st == LEAN_OK) st = lean_grammar_mask(g, bits, n_vocab, NULL, &err);
        if (st == LEAN_OK) st = lean_grammar_accept_token(g, lean_tokenizer_n_tokens(t) > 66 ? 66 : 0, &err) == LEAN_ERR_NOMEM
                                    ? LEAN_ERR_NOMEM : LEAN_OK; /* fits or not: only running out matters */
        const uint64_t used = lean_alloc_fail_at(0, false);
        lean_grammar_free(g);
        lean_grammar_text_free(gbnf);
        if (st == LEAN_OK) {
            total = k;
            CHECK(used < k, "no failure injected at %llu", (unsigned long long)k);
            break;
        }
        CHECK(st == LEAN_ERR_NOMEM, "allocation %llu: status %d (%s)", (unsigned long long)k, st, err.msg);
        if (st != LEAN_ERR_NOMEM) break;
    }
    CHECK(total > 50, "the OOM loop ran %llu steps", (unsigned long long)total);
    printf("out of memory at each of %llu allocations: clean\n", (unsigned long long)total);
    free(bits);
    lean_tokenizer_free(t);
}

int main(void) {
    test_llama();
    test_examples();
    test_errors();
    test_schema_subset();
    test_mask();
    test_alloc_failures();
    return test_finish("test_grammar");
}
