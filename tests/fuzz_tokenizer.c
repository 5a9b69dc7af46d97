/* fuzz_tokenizer.c — the libFuzzer target for the tokenizers (src/core/tokenizer*.c,
 * unicode.c) and chat prompts (lean_chat_tokenize), over real vocabularies.
 *
 *   make fuzz         build-fuzz/fuzz_tokenizer   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it (with the other targets) on a fresh copy of tests/data/fuzz_tokenizer/
 *
 * The vocabularies are build/vocab/{gpt2,llama2,llama3,qwen}.gguf (`make test-data` makes
 * them; fuzz-run depends on it), read from the working directory, the repository root:
 * byte-level BPE with three pre-tokenizers (GPT-2, Llama 3, Qwen2 with NFC) and a
 * SentencePiece vocabulary with byte fallback. Input byte 0 picks the vocabulary (bits 0-1)
 * and lean_tokenize's flags (bits 2-3); the rest is the text. Held to lean.h:
 *   - tokenize succeeds on any bytes; counting (max_ids 0) gives the same count; at most
 *     3 * bytes + 3 ids; without PARSE_SPECIAL no CONTROL id but the BOS/EOS ADD_SPECIAL adds
 *   - detokenize succeeds and writes valid UTF-8, with and without SKIP_SPECIAL; for gpt2,
 *     llama2 and llama3 without PARSE_SPECIAL it gives the text back (invalid UTF-8 as
 *     U+FFFD; for llama2 U+2581 as a space, as HF decodes it), as tests/test_tokenizer.c
 *     holds them to
 *   - the text stream's pieces, concatenated, are detokenize's text, for those ids and for
 *     the text's bytes read as arbitrary ids
 *   - lean_chat_tokenize with the text as a user message (ChatML): the same control ids,
 *     in order, as with an empty message (no control token comes from a message)
 */
#include "lean.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                 \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz_tokenizer: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                         \
        }                                                                             \
    } while (0)

static const char *const names[4] = {"gpt2", "llama2", "llama3", "qwen"};
static lean_tokenizer *toks[4];
static int32_t *frame[4], n_frame[4]; /* chat_controls of an empty message, per vocabulary */
static int32_t *chat_controls(const lean_tokenizer *t, const char *content, int32_t *n_out);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof path, "build/vocab/%s.gguf", names[i]);
        lean_error e = {0};
        if (lean_tokenizer_load_file(path, &toks[i], &e) != LEAN_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s (run it from the repository root after `make test-data`)\n",
                    path, e.msg);
            exit(1);
        }
        frame[i] = chat_controls(toks[i], "", &n_frame[i]);
    }
    return 0;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || (k == 2 && c < 0xC2) || i + k > n) return false;
        uint32_t cp = k == 1 ? c : c & (0x7F >> k);
        for (size_t j = 1; j < k; j++) {
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | ((unsigned char)s[i + j] & 0x3F);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

/* The text as the tokenizer sees it: each maximal invalid subpart as U+FFFD (malloc'd), as
 * tests/test_tokenizer.c computes it; spm: U+2581 as the space SentencePiece decodes it to. */
static char *cleaned(const char *s, size_t n, bool spm, size_t *out_n) {
    char *o = malloc(3 * n + 1);
    REQUIRE(o);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        const size_t l = lean_utf8_next((const uint8_t *)s + i, n - i, &cp, &ok);
        if (spm && ok && cp == 0x2581) o[k++] = ' ';
        else memcpy(o + k, ok ? s + i : "\xEF\xBF\xBD", ok ? l : 3), k += ok ? l : 3;
        i += l;
    }
    *out_n = k;
    return o;
}

static int32_t *tokenize(const lean_tokenizer *t, const char *s, size_t n, uint32_t flags, int32_t *n_ids) {
    lean_error e = {0};
    int32_t cnt = -1;
    REQUIRE(lean_tokenize(t, s, n, flags, NULL, 0, &cnt, &e) == LEAN_OK);
    REQUIRE(cnt >= 0 && (uint64_t)cnt <= 3 * (uint64_t)n + 3);
    int32_t *ids = malloc(sizeof *ids * ((size_t)cnt + 1));
    REQUIRE(ids && lean_tokenize(t, s, n, flags, ids, cnt, n_ids, &e) == LEAN_OK && *n_ids == cnt);
    return ids;
}

static char *detokenize(const lean_tokenizer *t, const int32_t *ids, int32_t n, uint32_t flags, size_t *len) {
    lean_error e = {0};
    REQUIRE(lean_detokenize(t, ids, n, flags, NULL, 0, len, &e) == LEAN_OK);
    char *s = malloc(*len + 1);
    size_t len2 = 0;
    REQUIRE(s && lean_detokenize(t, ids, n, flags, s, *len + 1, &len2, &e) == LEAN_OK && len2 == *len);
    REQUIRE(s[*len] == 0 && valid_utf8(s, *len));
    return s;
}

/* The text stream over ids gives exactly detokenize's text. */
static void check_stream(const lean_tokenizer *t, const int32_t *ids, int32_t n, uint32_t flags) {
    size_t want_n;
    char *want = detokenize(t, ids, n, flags, &want_n);
    lean_text_stream *ts = NULL;
    lean_error e = {0};
    REQUIRE(lean_text_stream_create(t, flags, &ts, &e) == LEAN_OK);
    char *got = malloc(want_n + 1);
    size_t got_n = 0;
    for (int32_t i = 0; i <= n; i++) {
        const char *piece = NULL;
        size_t pn = 0;
        REQUIRE((i < n ? lean_text_stream_push(ts, ids[i], &piece, &pn, &e) : lean_text_stream_flush(ts, &piece, &pn, &e)) ==
                LEAN_OK);
        REQUIRE(got_n + pn <= want_n && (pn == 0 || memcmp(want + got_n, piece, pn) == 0));
        got_n += pn;
    }
    REQUIRE(got_n == want_n);
    lean_text_stream_free(ts);
    free(got);
    free(want);
}

static bool is_control(const lean_tokenizer *t, int32_t id) {
    const int32_t ty = lean_token_get_type(t, id);
    return ty == LEAN_TOKEN_CONTROL || ty == LEAN_TOKEN_UNKNOWN;
}

/* lean_chat_tokenize of [{user, content}] (ChatML): its control ids, malloc'd. One call:
 * the rendering adds 64 bytes to the content, and a byte makes at most 3 ids (+ 3). */
static int32_t *chat_controls(const lean_tokenizer *t, const char *content, int32_t *n_out) {
    const lean_chat_message m[] = {{"user", content}};
    lean_chat_params p = lean_chat_default_params();
    p.add_generation_prompt = 1;
    lean_error e = {0};
    const int32_t cap = 3 * ((int32_t)strlen(content) + 64) + 3;
    int32_t n = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    REQUIRE(ids);
    lean_status st = lean_chat_tokenize(t, NULL, m, 1, &p, ids, cap, &n, &e);
    if (st != LEAN_OK) fprintf(stderr, "fuzz_tokenizer: lean_chat_tokenize: %s\n", e.msg);
    REQUIRE(st == LEAN_OK && n <= cap);
    *n_out = 0;
    for (int32_t i = 0; i < n; i++)
        if (is_control(t, ids[i])) ids[(*n_out)++] = ids[i];
    return ids;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const int v = data[0] & 3;
    const uint32_t flags = (data[0] >> 2) & 3;
    const lean_tokenizer *t = toks[v];
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;

    int32_t n_ids = 0;
    int32_t *ids = tokenize(t, text, n, flags, &n_ids);
    const int32_t bos = lean_token_bos(t), eos = lean_token_eos(t);
    if (!(flags & LEAN_TOKENIZE_PARSE_SPECIAL))
        for (int32_t i = 0; i < n_ids; i++)
            REQUIRE(!is_control(t, ids[i]) || lean_token_get_type(t, ids[i]) == LEAN_TOKEN_UNKNOWN ||
                    ((flags & LEAN_TOKENIZE_ADD_SPECIAL) &&
                     ((i == 0 && ids[i] == bos) || (i == n_ids - 1 && ids[i] == eos))));
    size_t back_n = 0;
    char *back = detokenize(t, ids, n_ids, LEAN_DETOKENIZE_SKIP_SPECIAL, &back_n);
    if (v != 3 && !(flags & LEAN_TOKENIZE_PARSE_SPECIAL)) { /* qwen normalizes to NFC: not the identity */
        size_t cn = 0;
        char *clean = cleaned(text, n, v == 1, &cn);
        if (back_n != cn || memcmp(back, clean, cn) != 0)
            fprintf(stderr, "fuzz_tokenizer: %s does not give the text back:\n  in:   [%.*s]\n  back: [%.*s]\n",
                    names[v], (int)cn, clean, (int)back_n, back);
        REQUIRE(back_n == cn && memcmp(back, clean, cn) == 0);
        free(clean);
    }
    free(back);
    check_stream(t, ids, n_ids, 0);
    check_stream(t, ids, n_ids, LEAN_DETOKENIZE_SKIP_SPECIAL);
    free(ids);

    /* the bytes as arbitrary ids */
    const int32_t n_tok = lean_tokenizer_n_tokens(t);
    int32_t raw[256];
    int32_t n_raw = 0;
    for (size_t i = 0; i + 3 < n && n_raw < 256; i += 4) {
        uint32_t u;
        memcpy(&u, text + i, 4);
        raw[n_raw++] = (int32_t)(u % (uint32_t)n_tok);
    }
    check_stream(t, raw, n_raw, flags & 1 ? LEAN_DETOKENIZE_SKIP_SPECIAL : 0);

    /* a user message: control ids only where ChatML wrote them */
    const size_t cl = strnlen(text, n);
    char *content = malloc(cl + 1);
    REQUIRE(content);
    memcpy(content, text, cl);
    content[cl] = 0;
    int32_t k_got = 0;
    int32_t *got = chat_controls(t, content, &k_got);
    REQUIRE(k_got == n_frame[v] && memcmp(got, frame[v], sizeof *got * (size_t)k_got) == 0);
    free(got);
    free(content);
    return 0;
}
