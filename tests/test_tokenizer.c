/* test_tokenizer.c — src/text/tokenizer.c, tokenizer_bpe.c and unicode.c.
 *
 * 1. references   every line of tests/data/tokenizer/refs.tsv: the ids HF tokenizers gives
 *                 for a corpus string with a real vocabulary (scripts/make_tokenizer_refs.mjs),
 *                 lean's ids must be the same, decoding them must give HF's text (with and
 *                 without special tokens), and where HF's decode gives the input back, so
 *                 must lean's. Prints the agreement per vocabulary.
 * 2. streaming    for the same ids: the text stream's output after every id is a prefix of
 *                 the full decode, valid UTF-8, and all of it equals the full decode.
 * 3. flags        BOS/EOS as the file says, special tokens parsed only when asked.
 * 4. files        a vocab-only GGUF, a model's own tokenizer, a model whose tokenizer is broken.
 * 5. malformed    tokenizer metadata broken in one named way each: a clear error naming it.
 * 6. API edges    buffer sizes, bad ids, bad arguments; an OOM loop over a small vocabulary;
 *                 a small SentencePiece vocabulary (scores, byte fallback, <unk>); random
 *                 strings (invalid UTF-8 too) that must decode back to themselves.
 * 7. unicode      UTF-8 maximal subparts, categories, NFC.
 *
 * Vocabularies (build/vocab/, made by scripts/make_vocabs.sh): llama2.gguf, mistral.gguf, gpt2.gguf (also read with pre "smollm",
 * StarCoder's/SmolLM2's pre-tokenizer), llama3.gguf, qwen.gguf (Qwen3; cut to its first
 * 151665 tokens it is Qwen2.5's); and "demo", the committed demo model's own tokenizer
 * (models/lean-demo.gguf: 4096 tokens, pre "gpt-2", trained by scripts/demo/bpe.py).
 */
#include "dev/lean_dev.h"
#include "dev/gguf_writer.h"
#include "core/model.h"
#include "test.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DATA "tests/data/tokenizer/"
/* The vocabulary GGUFs are not committed: scripts/make_vocabs.sh converts the pinned npm
 * packages' tokenizer.json files into build/vocab/ (`make test-data` runs it). */
#define VOCAB "build/vocab/"

/* ---------------------------------------------------------------- helpers */

static gguf_file *read_gguf(const char *path) {
    size_t n;
    uint8_t *data = test_read_file(path, &n);
    if (!data) {
        CHECK(0, "cannot read %s", path);
        return NULL;
    }
    lean_mapped_file m = {data, n};
    gguf_file *f = NULL;
    lean_error err = {0};
    lean_status st = gguf_read(lean_read_mapped, &m, n, &f, &err);
    CHECK(st == LEAN_OK, "%s: %s", path, err.msg);
    free(data);
    return f;
}

static gguf_kv *find_kv(gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key.ptr, key) == 0) return &f->kv[i];
    return NULL;
}

static void set_str(gguf_file *f, const char *key, const char *v) {
    gguf_kv *kv = find_kv(f, key);
    if (!kv) return;
    lean_free(kv->value.v.str.ptr);
    kv->value.v.str.ptr = lean_strndup(v, strlen(v));
    kv->value.v.str.len = strlen(v);
}

static int hexval(int c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* hex -> bytes (malloc'd, NUL-terminated) */
static char *unhex(const char *h, size_t hl, size_t *n) {
    char *o = malloc(hl / 2 + 1);
    for (size_t i = 0; i + 1 < hl + 1 && i < hl; i += 2) o[i / 2] = (char)(hexval(h[i]) * 16 + hexval(h[i + 1]));
    o[hl / 2] = 0;
    *n = hl / 2;
    return o;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        i += lean_utf8_next((const uint8_t *)s + i, n - i, &cp, &ok);
        if (!ok) return false;
    }
    return true;
}

/* tokenizes into a fresh array (*n ids); NULL on failure (err filled) */
static int32_t *tokenize(const lean_tokenizer *t, const char *s, size_t n, uint32_t flags, int32_t *n_ids,
                         lean_error *err) {
    int32_t need = 0;
    if (lean_tokenize(t, s, n, flags, NULL, 0, &need, err) != LEAN_OK) return NULL;
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    int32_t got = -1;
    if (lean_tokenize(t, s, n, flags, ids, need, &got, err) != LEAN_OK || got != need) {
        free(ids);
        return NULL;
    }
    *n_ids = got;
    return ids;
}

static char *detokenize(const lean_tokenizer *t, const int32_t *ids, int32_t n, uint32_t flags, size_t *len,
                        lean_error *err) {
    size_t need = 0;
    if (lean_detokenize(t, ids, n, flags, NULL, 0, &need, err) != LEAN_OK) return NULL;
    char *s = malloc(need + 1);
    if (lean_detokenize(t, ids, n, flags, s, need + 1, len, err) != LEAN_OK || *len != need) {
        free(s);
        return NULL;
    }
    return s;
}

/* ---------------------------------------------------------------- the vocabularies */

typedef struct vocab {
    const char *name;
    lean_tokenizer *tok;
    int rows, ids_ok, dec_ok, skip_ok, stream_ok, roundtrip;
} vocab;

static vocab vocabs[] = {{.name = "llama2"}, {.name = "mistral"}, {.name = "gpt2"}, {.name = "smollm"},
                         {.name = "llama3"}, {.name = "qwen2.5"}, {.name = "qwen3"}, {.name = "demo"}};
#define N_VOCABS (int)(sizeof vocabs / sizeof vocabs[0])

static lean_tokenizer *load_vocab(const char *name) {
    lean_tokenizer *t = NULL;
    lean_error err = {0};
    if (strcmp(name, "smollm") == 0 || strcmp(name, "qwen2.5") == 0) {
        /* derived in memory: gpt2 read with SmolLM2's pre-tokenizer; Qwen3's vocabulary cut
         * to Qwen2.5's 151665 tokens (its last four added tokens are Qwen3's own) */
        const bool smol = name[0] == 's';
        gguf_file *f = read_gguf(smol ? VOCAB "gpt2.gguf" : VOCAB "qwen.gguf");
        if (!f) return NULL;
        uint64_t saved[2] = {0};
        gguf_kv *cut[2] = {find_kv(f, "tokenizer.ggml.tokens"), find_kv(f, "tokenizer.ggml.token_type")};
        if (smol) {
            set_str(f, "tokenizer.ggml.pre", "smollm");
        } else {
            for (int i = 0; i < 2; i++) saved[i] = cut[i]->value.v.arr.count, cut[i]->value.v.arr.count = 151665;
        }
        lean_status st = lean_tokenizer_build(f, &t, &err);
        CHECK(st == LEAN_OK, "%s: %s", name, err.msg);
        if (!smol)
            for (int i = 0; i < 2; i++) cut[i]->value.v.arr.count = saved[i];
        gguf_free(f);
        return t;
    }
    char path[128];
    if (strcmp(name, "demo") == 0) snprintf(path, sizeof path, "models/lean-demo.gguf");
    else snprintf(path, sizeof path, VOCAB "%s.gguf", strcmp(name, "qwen3") == 0 ? "qwen" : name);
    lean_status st = lean_tokenizer_load_file(path, &t, &err);
    CHECK(st == LEAN_OK, "%s: %s", path, err.msg);
    return t;
}

/* One vocabulary loaded at a time (the one asked for last): a big one costs ~40 MB, and
 * Node's wasm runtime has been seen to crash growing memory much past 100 MB. */
static vocab *get_vocab(const char *name) {
    vocab *want = NULL;
    for (int i = 0; i < N_VOCABS; i++) {
        if (strcmp(vocabs[i].name, name) == 0) want = &vocabs[i];
        else if (vocabs[i].tok) lean_tokenizer_free(vocabs[i].tok), vocabs[i].tok = NULL;
    }
    if (want && !want->tok) want->tok = load_vocab(name);
    return want && want->tok ? want : NULL;
}

/* ---------------------------------------------------------------- 1, 2. references and streaming */

static void print_ids(const char *label, const int32_t *v, int32_t n) {
    fprintf(stderr, "  %s:", label);
    for (int32_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Streams ids one at a time; 1 when every step is a valid prefix of want and all equals it. */
static int stream_matches(const lean_tokenizer *t, const int32_t *ids, int32_t n, uint32_t flags,
                          const char *want, size_t want_n) {
    lean_text_stream *s = NULL;
    lean_error err = {0};
    if (lean_text_stream_create(t, flags, &s, &err) != LEAN_OK) return 0;
    size_t at = 0;
    int ok = 1;
    for (int32_t i = 0; i <= n && ok; i++) {
        const char *txt;
        size_t len;
        lean_status st = i < n ? lean_text_stream_push(s, ids[i], &txt, &len, &err)
                               : lean_text_stream_flush(s, &txt, &len, &err);
        if (st != LEAN_OK || at + len > want_n || memcmp(want + at, txt, len) != 0 || !valid_utf8(txt, len))
            ok = 0;
        at += len;
    }
    lean_text_stream_free(s);
    return ok && at == want_n;
}

static void test_refs(void) {
    size_t n;
    char *data = (char *)test_read_file(DATA "refs.tsv", &n);
    CHECK(data != NULL, "cannot read " DATA "refs.tsv");
    if (!data) return;
    int failures_shown = 0;
    for (char *line = data, *next; line < data + n; line = next) {
        char *nl = memchr(line, '\n', (size_t)(data + n - line));
        next = nl ? nl + 1 : data + n;
        if (nl) *nl = 0;
        if (*line == '#' || *line == 0) continue;
        char *col[6];
        int nc = 0;
        for (char *p = line; nc < 6; nc++) {
            col[nc] = p;
            char *tab = strchr(p, '\t');
            if (!tab) {
                nc++;
                break;
            }
            *tab = 0;
            p = tab + 1;
        }
        CHECK(nc == 6, "refs.tsv: a line with %d columns", nc);
        if (nc != 6) continue;
        vocab *v = get_vocab(col[0]);
        if (!v) continue;
        const bool special = strcmp(col[1], "special") == 0;
        const uint32_t flags = special ? LEAN_TOKENIZE_ADD_SPECIAL | LEAN_TOKENIZE_PARSE_SPECIAL : 0;
        size_t in_n, dec_n, skip_n; /* "=": the same as the column before */
        char *in = unhex(col[2], strlen(col[2]), &in_n);
        if (strcmp(col[4], "=") == 0) col[4] = col[2];
        if (strcmp(col[5], "=") == 0) col[5] = col[4];
        char *dec = unhex(col[4], strlen(col[4]), &dec_n);
        char *skip = unhex(col[5], strlen(col[5]), &skip_n);
        static int32_t want[8192];
        int32_t nw = 0;
        for (char *p = col[3]; *p && nw < 8192;) {
            want[nw++] = (int32_t)strtol(p, &p, 10);
            if (*p == ',') p++;
        }
        v->rows++;
        lean_error err = {0};
        int32_t got_n = 0;
        int32_t *got = tokenize(v->tok, in, in_n, flags, &got_n, &err);
        const bool ids_ok = got && got_n == nw && memcmp(got, want, (size_t)nw * sizeof *got) == 0;
        v->ids_ok += ids_ok;
        CHECK(ids_ok, "%s %s: ids differ from HF for \"%.60s\" (%s)", col[0], col[1], in, got ? "" : err.msg);
        if (!ids_ok && got && failures_shown++ < 12) {
            print_ids("hf  ", want, nw);
            print_ids("lean", got, got_n);
        }
        /* decoding HF's ids */
        size_t len;
        char *text = detokenize(v->tok, want, nw, 0, &len, &err);
        const bool dec_ok = text && len == dec_n && memcmp(text, dec, len) == 0;
        v->dec_ok += dec_ok;
        CHECK(dec_ok, "%s %s: decode of \"%.60s\" differs from HF's: \"%.60s\"", col[0], col[1], dec,
              text ? text : err.msg);
        if (text && dec_n == in_n && memcmp(dec, in, in_n) == 0) {
            v->roundtrip++;
            CHECK(len == in_n && memcmp(text, in, in_n) == 0, "%s: no round trip for \"%.60s\"", col[0], in);
        }
        free(text);
        text = detokenize(v->tok, want, nw, LEAN_DETOKENIZE_SKIP_SPECIAL, &len, &err);
        const bool skip_ok = text && len == skip_n && memcmp(text, skip, len) == 0;
        v->skip_ok += skip_ok;
        CHECK(skip_ok, "%s %s: decode (skip special) of \"%.60s\" differs: \"%.60s\"", col[0], col[1], skip,
              text ? text : err.msg);
        free(text);
        /* streaming, with and without special tokens */
        const bool st_ok = stream_matches(v->tok, want, nw, 0, dec, dec_n) &&
                           stream_matches(v->tok, want, nw, LEAN_DETOKENIZE_SKIP_SPECIAL, skip, skip_n);
        v->stream_ok += st_ok;
        CHECK(st_ok, "%s %s: streamed text of \"%.60s\" differs from the full decode", col[0], col[1], dec);
        free(got);
        free(in);
        free(dec);
        free(skip);
    }
    free(data);
    for (int i = 0; i < N_VOCABS; i++) {
        const vocab *v = &vocabs[i];
        CHECK(v->rows > 0, "refs.tsv has no lines for %s", v->name);
        printf("%-8s ids %d/%d agree with HF, decode %d/%d, decode skipping special %d/%d, stream %d/%d, "
               "round trips %d\n", v->name, v->ids_ok, v->rows, v->dec_ok, v->rows, v->skip_ok, v->rows,
               v->stream_ok, v->rows, v->roundtrip);
    }
}

/* A character split over byte tokens comes out of the stream whole, at its last byte. */
static void test_stream_split(void) {
    vocab *v = get_vocab("gpt2");
    if (!v) return;
    lean_error err = {0};
    const char *s = "\xF0\x9F\x91\x8D!"; /* U+1F44D: GPT-2 spells it with byte tokens */
    int32_t n = 0;
    int32_t *ids = tokenize(v->tok, s, strlen(s), 0, &n, &err);
    CHECK(ids && n >= 3, "thumbs up: %d ids", n);
    if (!ids) return;
    lean_text_stream *st;
    CHECK(lean_text_stream_create(v->tok, 0, &st, &err) == LEAN_OK, "%s", err.msg);
    const char *txt;
    size_t len, total = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        CHECK(lean_text_stream_push(st, ids[i], &txt, &len, &err) == LEAN_OK, "%s", err.msg);
        total += len;
        CHECK(len == 0 || (len == 4 && memcmp(txt, s, 4) == 0), "partial emoji emitted (%zu bytes)", len);
    }
    CHECK(total == 4, "the emoji came out as %zu bytes", total);
    /* an unfinished character at the end becomes U+FFFD at flush, and the stream restarts */
    CHECK(lean_text_stream_push(st, ids[0], &txt, &len, &err) == LEAN_OK && len == 0, "a lone lead byte is held");
    CHECK(lean_text_stream_flush(st, &txt, &len, &err) == LEAN_OK && len == 3 && memcmp(txt, "\xEF\xBF\xBD", 3) == 0,
          "flush of a held lead byte: %zu bytes", len);
    CHECK(lean_text_stream_push(st, -1, &txt, &len, &err) == LEAN_ERR_ARG && strstr(err.msg, "id -1"), "%s", err.msg);
    lean_text_stream_free(st);
    free(ids);

    /* SentencePiece: the prefix space is dropped once per sequence, also after a flush */
    v = get_vocab("llama2");
    if (!v) return;
    ids = tokenize(v->tok, "Hi there", 8, 0, &n, &err);
    CHECK(ids != NULL, "%s", err.msg);
    if (!ids) return;
    CHECK(lean_text_stream_create(v->tok, 0, &st, &err) == LEAN_OK, "%s", err.msg);
    for (int round = 0; round < 2; round++) {
        char buf[64];
        size_t at = 0;
        for (int32_t i = 0; i <= n; i++) {
            lean_status s2 = i < n ? lean_text_stream_push(st, ids[i], &txt, &len, &err)
                                   : lean_text_stream_flush(st, &txt, &len, &err);
            CHECK(s2 == LEAN_OK && at + len < sizeof buf, "%s", err.msg);
            memcpy(buf + at, txt, len);
            at += len;
        }
        CHECK(at == 8 && memcmp(buf, "Hi there", 8) == 0, "round %d: \"%.*s\"", round, (int)at, buf);
    }
    lean_text_stream_free(st);
    free(ids);
}

/* ---------------------------------------------------------------- 3. flags */

static bool contains(const int32_t *v, int32_t n, int32_t id) {
    for (int32_t i = 0; i < n; i++)
        if (v[i] == id) return true;
    return false;
}

static void test_flags(void) {
    lean_error err = {0};
    struct {
        const char *vocab;
        int32_t bos; /* expected BOS with ADD_SPECIAL, -1 for none added */
    } cases[] = {{"llama2", 1}, {"llama3", 128000}, {"qwen3", -1}, {"gpt2", -1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vocab *v = get_vocab(cases[c].vocab);
        if (!v) continue;
        int32_t n0 = 0, n1 = 0;
        int32_t *a = tokenize(v->tok, "Hello world", 11, 0, &n0, &err);
        int32_t *b = tokenize(v->tok, "Hello world", 11, LEAN_TOKENIZE_ADD_SPECIAL, &n1, &err);
        CHECK(a && b, "%s: %s", cases[c].vocab, err.msg);
        if (a && b) {
            if (cases[c].bos >= 0)
                CHECK(n1 == n0 + 1 && b[0] == cases[c].bos && memcmp(a, b + 1, (size_t)n0 * sizeof *a) == 0,
                      "%s: BOS %d added", cases[c].vocab, cases[c].bos);
            else
                CHECK(n1 == n0 && memcmp(a, b, (size_t)n0 * sizeof *a) == 0, "%s: nothing added", cases[c].vocab);
        }
        free(a);
        free(b);
    }
    /* special tokens: parsed only when asked, never split; user-defined ones always */
    vocab *q = get_vocab("qwen3");
    if (q) {
        const char *s = "<|im_start|>user\nHi<|im_end|><think>";
        int32_t n0 = 0, n1 = 0;
        int32_t *a = tokenize(q->tok, s, strlen(s), 0, &n0, &err);
        int32_t *b = tokenize(q->tok, s, strlen(s), LEAN_TOKENIZE_PARSE_SPECIAL, &n1, &err);
        if (a && b) {
            CHECK(!contains(a, n0, 151644) && !contains(a, n0, 151645), "control tokens parsed without the flag");
            CHECK(contains(a, n0, 151667), "user-defined <think> not matched without the flag");
            CHECK(n1 == 6 && b[0] == 151644 && b[4] == 151645 && b[5] == 151667, "parsed: %d ids", n1);
            CHECK(lean_token_is_eog(q->tok, 151645) && lean_token_is_eog(q->tok, 151643) &&
                      !lean_token_is_eog(q->tok, 151644),
                  "qwen end-of-generation tokens");
            CHECK(lean_token_eot(q->tok) == 151645, "qwen eot %d", lean_token_eot(q->tok));
        }
        free(a);
        free(b);
    }
    vocab *l3 = get_vocab("llama3");
    if (l3) {
        const int32_t eot = lean_token_eot(l3->tok);
        size_t len;
        const char *txt = lean_token_text(l3->tok, eot, &len);
        CHECK(txt && strcmp(txt, "<|eot_id|>") == 0 && lean_token_is_eog(l3->tok, eot), "llama3 eot");
        CHECK(lean_token_bos(l3->tok) == 128000 && !lean_token_is_eog(l3->tok, 128000), "llama3 bos");
    }
    vocab *l2 = get_vocab("llama2");
    if (l2) {
        CHECK(lean_token_eos(l2->tok) == 2 && lean_token_is_eog(l2->tok, 2), "llama2 eos");
        size_t len;
        const char *p = lean_token_piece(l2->tok, 13, &len); /* <0x0A> */
        CHECK(p && len == 1 && p[0] == '\n' && lean_token_get_type(l2->tok, 13) == LEAN_TOKEN_BYTE, "byte token");
        lean_tokenizer_info in;
        lean_tokenizer_get_info(l2->tok, &in);
        CHECK(strcmp(in.model, "llama") == 0 && in.n_tokens == 32000 && in.add_bos && !in.add_eos &&
                  in.add_space_prefix && in.unk == 0,
              "llama2 info");
    }
    /* add_eos from the file */
    gguf_file *f = read_gguf(VOCAB "llama2.gguf");
    if (f) {
        gguf_kv *kv = find_kv(f, "tokenizer.ggml.add_eos_token");
        if (kv) kv->value.v.u64 = 1;
        lean_tokenizer *t = NULL;
        CHECK(lean_tokenizer_build(f, &t, &err) == LEAN_OK, "%s", err.msg);
        int32_t n = 0;
        int32_t *ids = t ? tokenize(t, "a", 1, LEAN_TOKENIZE_ADD_SPECIAL, &n, &err) : NULL;
        CHECK(kv && ids && n == 3 && ids[0] == 1 && ids[2] == 2, "add_eos: %d ids", n);
        free(ids);
        lean_tokenizer_free(t);
        gguf_free(f);
    }
}

/* ---------------------------------------------------------------- 4, 5, 6: built vocabularies */

/* A small byte-level vocabulary: the 256 bytes, a few merges, two control tokens and a
 * user-defined one. Each `breakage` spoils one thing. */
enum breakage {
    OK_VOCAB, NO_MODEL, BAD_MODEL, NO_PRE, BAD_PRE, NO_TOKENS, TOKENS_I32, TYPES_SHORT, TYPE_BAD,
    NO_MERGES, MERGE_UNKNOWN, MERGE_NO_SPACE, MERGE_NO_RESULT, BOS_RANGE, ADD_BOS_NO_BOS, ADD_BOS_U32,
    MERGES_U8, LONG_TOKEN,
};

static const char *const extra_tokens[] = {"Ġt", "he", "Ġthe", "<|end|>", "<|start|>", "<tool>"};
#define N_SMALL (256 + 6)

static lean_status small_vocab(enum breakage b, lean_mapped_file *out, lean_error *err) {
    gguf_writer *w = gguf_writer_new();
    char bytes[256][4];
    const char *toks[N_SMALL + 1];
    int32_t types[N_SMALL];
    for (int i = 0; i < 256; i++) {
        size_t n = lean_utf8_put(tok_byte_to_cp((uint8_t)i), (uint8_t *)bytes[i]);
        bytes[i][n] = 0;
        toks[i] = bytes[i];
        types[i] = LEAN_TOKEN_NORMAL;
    }
    for (int i = 0; i < 6; i++) toks[256 + i] = extra_tokens[i], types[256 + i] = LEAN_TOKEN_NORMAL;
    types[259] = types[260] = LEAN_TOKEN_CONTROL;
    types[261] = LEAN_TOKEN_USER_DEFINED;
    static char long_token[LEAN_TOK_MAX_TOKEN_BYTES + 2];
    if (b == LONG_TOKEN) {
        memset(long_token, 'x', sizeof long_token - 1);
        toks[261] = long_token;
    }
    if (b == TYPE_BAD) types[7] = 9;
    const char *merges[] = {"Ġ t", "h e", "Ġt he"};
    if (b == MERGE_UNKNOWN) merges[1] = "h zz";
    if (b == MERGE_NO_SPACE) merges[1] = "he";
    if (b == MERGE_NO_RESULT) merges[1] = "e h";
    if (b != NO_MODEL) gguf_w_str(w, "tokenizer.ggml.model", b == BAD_MODEL ? "bert" : "gpt2");
    if (b != NO_PRE) gguf_w_str(w, "tokenizer.ggml.pre", b == BAD_PRE ? "klingon" : "gpt-2");
    if (b == TOKENS_I32) gguf_w_arr(w, "tokenizer.ggml.tokens", GGUF_I32, types, N_SMALL);
    else if (b != NO_TOKENS) gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, N_SMALL);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, b == TYPES_SHORT ? N_SMALL - 2 : N_SMALL);
    if (b == MERGES_U8) gguf_w_arr(w, "tokenizer.ggml.merges", GGUF_U8, "abc", 3);
    else if (b != NO_MERGES) gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 3);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 259);
    if (b != ADD_BOS_NO_BOS) gguf_w_u32(w, "tokenizer.ggml.bos_token_id", b == BOS_RANGE ? 5000 : 260);
    if (b == ADD_BOS_U32) gguf_w_u32(w, "tokenizer.ggml.add_bos_token", 1);
    else gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    void *data;
    uint64_t size;
    lean_status st = gguf_writer_write_mem(w, &data, &size, err);
    gguf_writer_free(w);
    if (st != LEAN_OK) return st;
    *out = (lean_mapped_file){data, size};
    return LEAN_OK;
}

static lean_status load_small(enum breakage b, lean_tokenizer **t, lean_error *err) {
    lean_mapped_file m;
    *t = NULL;
    lean_status st = small_vocab(b, &m, err);
    if (st != LEAN_OK) return st;
    st = lean_tokenizer_load_stream(lean_read_mapped, &m, m.size, t, err);
    lean_free(m.data);
    return st;
}

static void test_malformed(void) {
    const struct {
        enum breakage b;
        lean_status st;
        const char *msg;
    } cases[] = {
        {NO_MODEL, LEAN_ERR_MODEL, "'tokenizer.ggml.model' is missing"},
        {BAD_MODEL, LEAN_ERR_UNSUPPORTED, "tokenizer.ggml.model is 'bert'"},
        {NO_PRE, LEAN_ERR_UNSUPPORTED, "'tokenizer.ggml.pre' is missing"},
        {BAD_PRE, LEAN_ERR_UNSUPPORTED, "pre-tokenizer 'klingon'"},
        {NO_TOKENS, LEAN_ERR_MODEL, "missing key 'tokenizer.ggml.tokens'"},
        {TOKENS_I32, LEAN_ERR_MODEL, "'tokenizer.ggml.tokens' has type array of i32; expected array of string"},
        {TYPES_SHORT, LEAN_ERR_MODEL, "tokenizer.ggml.token_type has 260 entries for 262 tokens"},
        {TYPE_BAD, LEAN_ERR_MODEL, "tokenizer.ggml.token_type[7] is 9"},
        {NO_MERGES, LEAN_ERR_MODEL, "missing key 'tokenizer.ggml.merges'"},
        {MERGE_UNKNOWN, LEAN_ERR_MODEL, "tokenizer.ggml.merges[1] = 'h zz': the right token 'zz' is not in the vocabulary"},
        {MERGE_NO_SPACE, LEAN_ERR_MODEL, "tokenizer.ggml.merges[1] = 'he' is not two tokens"},
        {MERGE_NO_RESULT, LEAN_ERR_MODEL, "the merged token 'eh' is not in the vocabulary"},
        {BOS_RANGE, LEAN_ERR_MODEL, "tokenizer.ggml.bos_token_id is 5000, but the vocabulary has 262 tokens"},
        {ADD_BOS_NO_BOS, LEAN_ERR_MODEL, "add_bos_token is true but there is no bos token id"},
        {ADD_BOS_U32, LEAN_ERR_MODEL, "'tokenizer.ggml.add_bos_token' has type u32; expected bool"},
        {MERGES_U8, LEAN_ERR_MODEL, "'tokenizer.ggml.merges' has type array of u8"},
        {LONG_TOKEN, LEAN_ERR_MODEL, "tokenizer.ggml.tokens[261] is 65537 bytes long"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lean_tokenizer *t;
        lean_error err = {0};
        lean_status st = load_small(cases[i].b, &t, &err);
        CHECK(st == cases[i].st && t == NULL, "case %zu: status %d, expected %d (%s)", i, st, cases[i].st, err.msg);
        CHECK(strstr(err.msg, cases[i].msg) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].msg);
    }
    /* huge counts are refused before anything is allocated for them */
    gguf_value items[1] = {{.type = GGUF_STRING, .v.str = {1, (char *)"a"}}};
    gguf_kv kv[3] = {
        {{20, (char *)"tokenizer.ggml.model"}, {.type = GGUF_STRING, .v.str = {5, (char *)"llama"}}},
        {{21, (char *)"tokenizer.ggml.tokens"}, {.type = GGUF_ARRAY, .v.arr = {GGUF_STRING, 1ull << 40, items}}},
        {{21, (char *)"tokenizer.ggml.scores"}, {.type = GGUF_ARRAY, .v.arr = {GGUF_I32, 1, items}}},
    };
    gguf_file f = {.n_kv = 2, .kv = kv};
    lean_tokenizer *t = NULL;
    lean_error err = {0};
    CHECK(lean_tokenizer_build(&f, &t, &err) == LEAN_ERR_MODEL && strstr(err.msg, "1099511627776 tokens"),
          "huge token count: %s", err.msg);
    kv[1].value.v.arr.count = 1;
    f.n_kv = 3;
    CHECK(lean_tokenizer_build(&f, &t, &err) == LEAN_ERR_MODEL &&
              strstr(err.msg, "'tokenizer.ggml.scores' has type array of i32; expected array of f32"),
          "scores of the wrong element type: %s", err.msg);
}

static void test_small_vocab(void) {
    lean_tokenizer *t;
    lean_error err = {0};
    CHECK(load_small(OK_VOCAB, &t, &err) == LEAN_OK, "%s", err.msg);
    if (!t) return;
    int32_t ids[16], n = 0;
    CHECK(lean_tokenize(t, " the<|end|><tool>", 17, LEAN_TOKENIZE_ADD_SPECIAL | LEAN_TOKENIZE_PARSE_SPECIAL, ids, 16,
                        &n, &err) == LEAN_OK,
          "%s", err.msg);
    CHECK(n == 4 && ids[0] == 260 && ids[1] == 258 && ids[2] == 259 && ids[3] == 261, "small: %d ids", n);
    /* a buffer too small: the count needed, and only max_ids written */
    ids[1] = -7;
    CHECK(lean_tokenize(t, " the", 4, LEAN_TOKENIZE_ADD_SPECIAL, ids, 1, &n, &err) == LEAN_OK && n == 2 &&
              ids[0] == 260 && ids[1] == -7,
          "short buffer: n %d", n);
    char text[8];
    size_t len = 0;
    const int32_t two[2] = {258, 259};
    CHECK(lean_detokenize(t, two, 2, 0, text, 3, &len, &err) == LEAN_OK && len == 11 && memcmp(text, " th", 3) == 0,
          "short text buffer: %zu", len);
    CHECK(lean_detokenize(t, two, 2, LEAN_DETOKENIZE_SKIP_SPECIAL, text, sizeof text, &len, &err) == LEAN_OK &&
              len == 4 && strcmp(text, " the") == 0,
          "skip special: %zu", len);
    const int32_t bad[2] = {1, 262};
    CHECK(lean_detokenize(t, bad, 2, 0, text, sizeof text, &len, &err) == LEAN_ERR_ARG &&
              strstr(err.msg, "ids[1] = 262 is outside the vocabulary [0, 262)"),
          "%s", err.msg);
    CHECK(lean_tokenize(t, NULL, 3, 0, ids, 16, &n, &err) == LEAN_ERR_ARG, "NULL text");
    CHECK(lean_tokenize(t, "a", 1, 0x80, ids, 16, &n, &err) == LEAN_ERR_ARG && strstr(err.msg, "flags"), "flags");
    CHECK(lean_tokenize(t, "", 0, 0, NULL, 0, &n, &err) == LEAN_OK && n == 0, "empty text");
    CHECK(lean_tokenize(t, "a", ((size_t)1 << 29) + 1, 0, NULL, 0, &n, &err) == LEAN_ERR_ARG &&
              strstr(err.msg, "536870913 bytes of text"),
          "too long a text is refused before it is read: %s", err.msg);
    CHECK(lean_tokenizer_n_tokens(t) == N_SMALL && lean_token_text(t, N_SMALL, NULL) == NULL &&
              lean_token_get_type(t, -1) == 0 && lean_token_bos(t) == 260 && lean_token_eot(t) == 259,
          "accessors");
    CHECK(lean_tokenizer_check(NULL, &err) == LEAN_ERR_ARG, "NULL tokenizer");
    lean_tokenizer_free(t);

    /* the OOM loop: load, tokenize, detokenize, stream; every failure clean, nothing leaks */
    uint64_t total = 0;
    for (uint64_t k = 1;; k++) {
        lean_mapped_file m;
        if (small_vocab(OK_VOCAB, &m, &err) != LEAN_OK) break;
        lean_alloc_fail_at(k, false);
        lean_status st = lean_tokenizer_load_stream(lean_read_mapped, &m, m.size, &t, &err);
        int32_t v[32];
        char out[64];
        lean_text_stream *s = NULL;
        const char *txt;
        if (st == LEAN_OK) st = lean_tokenize(t, "the\xff the<|end|>", 15, 3, v, 32, &n, &err);
        if (st == LEAN_OK) st = lean_detokenize(t, v, n, 0, out, sizeof out, &len, &err);
        if (st == LEAN_OK) st = lean_text_stream_create(t, 0, &s, &err);
        for (int32_t i = 0; st == LEAN_OK && i < n; i++) st = lean_text_stream_push(s, v[i], &txt, &len, &err);
        if (st == LEAN_OK) st = lean_text_stream_flush(s, &txt, &len, &err);
        const uint64_t used = lean_alloc_fail_at(0, false);
        lean_text_stream_free(s);
        lean_tokenizer_free(t);
        lean_free(m.data);
        if (st == LEAN_OK) {
            total = k;
            CHECK(used < k, "no failure injected at %llu", (unsigned long long)k);
            break;
        }
        CHECK(st == LEAN_ERR_NOMEM, "allocation %llu: status %d (%s)", (unsigned long long)k, st, err.msg);
        if (k > 100000) break;
    }
    CHECK(total > 10, "the OOM loop ran %llu steps", (unsigned long long)total);
}

static void test_model_tokenizer(void) {
    char path[256], vpath[256];
    test_tmp_path(path, sizeof path, "model.gguf");
    test_tmp_path(vpath, sizeof vpath, "vocab.gguf");
    lean_error err = {0};
    /* a model made with a real vocabulary: its tokenizer is the vocabulary's */
    lean_gen_params p = {.preset = "tiny-llama", .recipe = "q8_0", .vocab_path = VOCAB "llama2.gguf", .seed = 1};
    CHECK(lean_generate_model(&p, path, &err) == LEAN_OK, "%s", err.msg);
    lean_model *m = NULL;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    if (m) {
        const lean_tokenizer *t = lean_model_tokenizer(m);
        int32_t n = 0;
        int32_t *ids = t ? tokenize(t, "Hello world", 11, LEAN_TOKENIZE_ADD_SPECIAL, &n, &err) : NULL;
        CHECK(ids && n == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186, "model tokenizer: %d ids", n);
        free(ids);
        lean_model_free(m);
    }
    /* a vocabulary whose pre-tokenizer lean does not know: the model loads, its tokenizer says why */
    lean_tokenizer *vt;
    lean_mapped_file vm;
    if (small_vocab(BAD_PRE, &vm, &err) == LEAN_OK) {
        FILE *f = fopen(vpath, "wb");
        CHECK(f && fwrite(vm.data, 1, vm.size, f) == vm.size, "writing %s", vpath);
        if (f) fclose(f);
        lean_free(vm.data);
        CHECK(lean_tokenizer_load_file(vpath, &vt, &err) == LEAN_ERR_UNSUPPORTED, "bad pre loads alone");
        p.vocab_path = vpath;
        CHECK(lean_generate_model(&p, path, &err) == LEAN_OK, "%s", err.msg);
        m = NULL;
        CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "a broken tokenizer failed the model: %s", err.msg);
        if (m) {
            const lean_tokenizer *t = lean_model_tokenizer(m);
            int32_t ids[4], n;
            CHECK(t && lean_tokenizer_check(t, &err) == LEAN_ERR_UNSUPPORTED && strstr(err.msg, "klingon"),
                  "check: %s", err.msg);
            CHECK(lean_tokenize(t, "a", 1, 0, ids, 4, &n, &err) == LEAN_ERR_UNSUPPORTED &&
                      strstr(err.msg, "the model's tokenizer could not be built: pre-tokenizer 'klingon'"),
                  "tokenize: %s", err.msg);
            CHECK(lean_tokenizer_n_tokens(t) == 0 && lean_token_bos(t) == -1, "broken accessors");
            lean_model_free(m);
        }
    }
    /* the generator's stand-in vocabulary tokenizes too */
    p.vocab_path = NULL;
    CHECK(lean_generate_model(&p, path, &err) == LEAN_OK, "%s", err.msg);
    m = NULL;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    if (m) {
        const lean_tokenizer *t = lean_model_tokenizer(m);
        int32_t n = 0;
        int32_t *ids = t ? tokenize(t, "hello there", 11, 0, &n, &err) : NULL;
        size_t len;
        char *back = ids ? detokenize(t, ids, n, 0, &len, &err) : NULL;
        CHECK(back && len == 11 && memcmp(back, "hello there", 11) == 0, "stand-in round trip: %s", err.msg);
        free(ids);
        free(back);
        lean_model_free(m);
    }
    unlink(path);
    unlink(vpath);
    CHECK(lean_model_tokenizer(NULL) == NULL, "NULL model");
}

/* A small SentencePiece-style vocabulary: the prefix space, merges by score, byte fallback,
 * and <unk> for a byte that has no <0xNN> token. */
static void test_small_spm(void) {
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab",
                          "\xE2\x96\x81" "ab", "<0xC3>", "<0xA9>"};
    const float scores[] = {0, 0, 0, -5, -6, -7, -2, -1, -3, 0, 0};
    const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6};
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 11);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, 11);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, 11);
    void *data;
    uint64_t size;
    lean_error err = {0};
    lean_status st = gguf_writer_write_mem(w, &data, &size, &err);
    gguf_writer_free(w);
    CHECK(st == LEAN_OK, "%s", err.msg);
    if (st != LEAN_OK) return;
    lean_mapped_file m = {data, size};
    lean_tokenizer *t = NULL;
    CHECK(lean_tokenizer_load_stream(lean_read_mapped, &m, size, &t, &err) == LEAN_OK, "%s", err.msg);
    lean_free(data);
    if (!t) return;
    /* "ab" merges first (score -1), then "\u2581ab" (-3); "é" has byte tokens; "€"'s bytes do not */
    int32_t ids[16], n = 0;
    CHECK(lean_tokenize(t, "ab ab\xC3\xA9\xE2\x82\xAC", 10, LEAN_TOKENIZE_ADD_SPECIAL, ids, 16, &n, &err) == LEAN_OK,
          "%s", err.msg);
    const int32_t want[] = {1, 8, 8, 9, 10, 0, 0, 0};
    CHECK(n == 8 && memcmp(ids, want, sizeof want) == 0, "small spm: %d ids", n);
    char text[32];
    size_t len;
    CHECK(lean_detokenize(t, ids + 1, 2, 0, text, sizeof text, &len, &err) == LEAN_OK && len == 5 &&
              strcmp(text, "ab ab") == 0,
          "decode drops the prefix space: \"%s\"", text);
    CHECK(lean_detokenize(t, ids, 5, 0, text, sizeof text, &len, &err) == LEAN_OK &&
              strcmp(text, "<s> ab ab\xC3\xA9") == 0,
          "with <s> first the space stays (HF): \"%s\"", text);
    const int32_t half[] = {9};
    CHECK(lean_detokenize(t, half, 1, 0, text, sizeof text, &len, &err) == LEAN_OK && len == 3 &&
              memcmp(text, "\xEF\xBF\xBD", 3) == 0,
          "half a character decodes to U+FFFD");
    lean_tokenizer_free(t);
}

/* Random strings (invalid UTF-8 included): no crash, ids in range, and decoding gives the
 * text back (invalid bytes as U+FFFD) with vocabularies that do not normalize. */
static void test_random_roundtrip(void) {
    static const char *const pool[] = {
        " ", "  ", "\n", "\t", "\r\n", "a", "The", "xyz", "'s", "'LL", "0", "42", "1234", ".", "!?", "(",
        "\"", "\\", "\xC3\xA9", "e\xCC\x81", "\xE4\xB8\xAD", "\xE6\x96\x87\xE5\xAD\x97",
        "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xC2\xA0", "\xE3\x80\x80",
        "<s>", "</s>", /* no U+2581: SentencePiece decodes it as a space, as HF does */ "<|endoftext|>", "<|eot_id|>", "<|", "\xFF", "\xC3", "\xE2\x82",
        "\xED\xA0\x80", "\x80", "\x00", "\x1B[0m", "\xEF\xBB\xBF", "\xD9\xA3", "\xC2\xB2",
    };
    const char *names[] = {"gpt2", "llama2", "llama3"};
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int v = 0; v < 3; v++) {
        vocab *vc = get_vocab(names[v]);
        if (!vc) continue;
        int bad = 0;
        for (int r = 0; r < 300; r++) {
            char s[512];
            size_t n = 0;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            for (int k = (int)(seed >> 58); k >= 0; k--) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                const char *piece = pool[(seed >> 33) % (sizeof pool / sizeof pool[0])];
                const size_t pl = piece[0] ? strlen(piece) : 1; /* "\x00": one NUL byte */
                memcpy(s + n, piece, pl);
                n += pl;
            }
            lean_error err = {0};
            for (uint32_t flags = 0; flags < 4; flags++) {
                int32_t nid = 0;
                int32_t *ids = tokenize(vc->tok, s, n, flags, &nid, &err);
                size_t len = 0;
                char *back = ids ? detokenize(vc->tok, ids, nid, LEAN_DETOKENIZE_SKIP_SPECIAL, &len, &err) : NULL;
                char *clean = NULL;
                size_t cn = 0;
                if (back) { /* the text as the tokenizer saw it: invalid subparts as U+FFFD */
                    clean = malloc(3 * n + 1);
                    for (size_t i = 0; i < n;) {
                        uint32_t cp;
                        bool ok;
                        const size_t l = lean_utf8_next((const uint8_t *)s + i, n - i, &cp, &ok);
                        memcpy(clean + cn, ok ? s + i : "\xEF\xBF\xBD", ok ? l : 3);
                        cn += ok ? l : 3;
                        i += l;
                    }
                }
                /* with PARSE_SPECIAL, control tokens are dropped by SKIP_SPECIAL: compare only without */
                const bool ok = back && ((flags & LEAN_TOKENIZE_PARSE_SPECIAL) || (len == cn && memcmp(back, clean, cn) == 0));
                if (!ok && bad++ < 3) {
                    CHECK(0, "%s flags %u: random string %d does not round-trip (%s)", names[v], flags, r, err.msg);
                    fprintf(stderr, "  in:   \"%.*s\"\n  back: \"%.*s\"\n", (int)cn, clean ? clean : "", (int)len,
                            back ? back : "");
                }
                free(ids);
                free(back);
                free(clean);
            }
        }
        CHECK(bad == 0, "%s: %d random strings failed", names[v], bad);
    }
}

/* ---------------------------------------------------------------- 7. unicode */

static void test_unicode(void) {
    /* maximal subparts (Unicode 15.0 §3.9, Table 3-8's example) */
    const uint8_t s[] = {0x61, 0xF1, 0x80, 0x80, 0xE1, 0x80, 0xC2, 0x62, 0x80, 0x63, 0x80, 0xBF, 0x64};
    const size_t want[] = {1, 3, 2, 1, 1, 1, 1, 1, 1, 1}; /* a, F1 80 80, E1 80, C2, b, 80, c, 80, BF, d */
    size_t i = 0, k = 0;
    while (i < sizeof s && k < 10) {
        uint32_t cp;
        bool ok;
        size_t len = lean_utf8_next(s + i, sizeof s - i, &cp, &ok);
        CHECK(len == want[k], "subpart %zu: %zu bytes, want %zu", k, len, want[k]);
        i += len, k++;
    }
    CHECK(i == sizeof s && k == 10, "subparts: %zu", k);
    struct { const char *s; size_t n, prefix; } cp[] = {
        {"ab\xE2\x82", 4, 2}, {"ab\xE2\x82\xAC", 5, 5}, {"\xF0\x9F\x98", 3, 0}, {"a\xC3", 2, 1},
        {"a\xFF", 2, 2}, {"\xE0\x80", 2, 2}, {"\xED\xA0", 2, 2}, {"a\x80\x80\x80", 4, 4},
    };
    for (size_t j = 0; j < sizeof cp / sizeof cp[0]; j++)
        CHECK(lean_utf8_complete_prefix((const uint8_t *)cp[j].s, cp[j].n) == cp[j].prefix, "complete prefix %zu", j);
    CHECK(lean_is_letter('a') && lean_is_letter(0x4E2D) && !lean_is_letter('1') && lean_is_number(0x0663) &&
              lean_is_number(0x00BD) && lean_is_number(0x216B) && lean_is_space(0x3000) && lean_is_space(0x85) &&
              !lean_is_space(0x200B) && !lean_is_space(0x1C) && lean_ucat_of(0x10FFFF) == LEAN_UCAT_CN &&
              lean_ucat_of(0xE000) == LEAN_UCAT_CO && lean_ccc_of(0x301) == 230,
          "properties");
    struct { const char *in, *out; } nfc[] = {
        {"e\xCC\x81", "\xC3\xA9"},                        /* e + acute -> é */
        {"\xE2\x84\xAB", "\xC3\x85"},                     /* Angstrom sign -> Å */
        {"\xE1\xB8\x8B\xCC\xA3", "\xE1\xB8\x8D\xCC\x87"}, /* ḋ + dot below -> ḍ + dot above */
        {"\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", "\xED\x95\x9C"}, /* Hangul jamo -> 한 */
        {"\xCC\x81" "a", "\xCC\x81" "a"},                 /* a leading mark stays */
        {"\xCD\x84", "\xCC\x88\xCC\x81"},                 /* U+0344: excluded from composition */
    };
    for (size_t j = 0; j < sizeof nfc / sizeof nfc[0]; j++) {
        char *o = NULL;
        size_t on = 0;
        lean_error err = {0};
        CHECK(lean_nfc(nfc[j].in, strlen(nfc[j].in), &o, &on, &err) == LEAN_OK && on == strlen(nfc[j].out) &&
                  memcmp(o, nfc[j].out, on) == 0,
              "NFC case %zu", j);
        lean_free(o);
    }
    /* the byte-level alphabet is a bijection */
    int seen[324] = {0};
    bool ok = true;
    for (int b = 0; b < 256; b++) {
        uint32_t c = tok_byte_to_cp((uint8_t)b);
        ok = ok && c < 324 && !seen[c]++ && tok_cp_to_byte(c) == b;
    }
    CHECK(ok && tok_cp_to_byte(0x20) == -1 && tok_cp_to_byte(0x144) == -1, "bytes_to_unicode");
}

int main(void) {
    test_unicode();
    test_refs();
    test_stream_split();
    test_flags();
    test_malformed();
    test_small_vocab();
    test_small_spm();
    test_random_roundtrip();
    test_model_tokenizer();
    for (int i = 0; i < N_VOCABS; i++) lean_tokenizer_free(vocabs[i].tok);
    return test_finish("test_tokenizer");
}
