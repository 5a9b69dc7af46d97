/* test_grammar_replies.c — sampled replies under JSON schemas parse and validate.
 *
 * A tiny generated model (tiny-llama, one layer, SmolLM2's vocabulary: tokens of many bytes)
 * draws 100 seeded replies under each schema of tests/data/grammar/reply_schemas.jsonl
 * (temperature 1, the whole vocabulary: a random model, so the grammar does all the work),
 * step by step as docs/grammar.md shows: mask, draw, accept, decode. Every reply must end
 * because the grammar is complete (an end-of-generation token or nothing may follow), never
 * at the length limit; then Debian's python3-jsonschema (scripts/validate_json_replies.py)
 * parses and validates all of them. Also: the same seed gives the same reply; and on every
 * call path the same: lean_gen_* with the grammar on the sampler (lean_sampler_set_grammar)
 * gives the loop's reply, on the CPU and on the GPU (the exact path, where seeded draws agree
 * across backends; LEAN_TEST_GPU=0 skips the GPU, saying so), the GPU's drawn by its resident
 * sampler under the grammar's mask (test_gpu_gen holds chat sessions under a grammar on the GPU
 * to the host's draw); and a chat session's replies (lean_chat_session_set_grammar), validated
 * with the rest. And the command line (build/lean):
 * `lean run --json-schema` replies validate too, and on the GPU (exact, seeded; drawn resident
 * through lean_gen_*) give cpu-ref's ids; a dead-end grammar stops with status 1 and a
 * message saying so, a malformed grammar or schema names its place.
 * lean-test: native-only (runs python3 through popen; WASI has no popen)
 */
#include "test.h"

#include "core/test_hooks.h"
#include "dev/lean_dev.h"
#include "lean.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_REPLIES 100
#define MAX_IDS 400

/* temperature 1 over the whole vocabulary: the grammar does all the work */
static lean_sampler_params reply_sampling(uint64_t seed) {
    lean_sampler_params sp = lean_sampler_default_params();
    sp.seed = seed;
    sp.temperature = 1.0;
    sp.top_k = 0;
    sp.top_p = 1.0;
    return sp;
}

/* One reply under g with seed; its text into out (NUL-terminated). 0 on success. */
static int reply(lean_model *m, lean_ctx *c, lean_grammar *g, uint64_t seed, char *out, size_t cap, int *ended) {
    const lean_tokenizer *tok = lean_model_tokenizer(m);
    const int32_t n_vocab = lean_model_n_vocab(m);
    lean_error err;
    const lean_sampler_params sp = reply_sampling(seed);
    lean_sampler *s = NULL;
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    uint32_t *bits = malloc(LEAN_MASK_WORDS(n_vocab) * sizeof *bits);
    int32_t ids[MAX_IDS], n_ids = 0, prompt[1] = {lean_token_bos(tok) >= 0 ? lean_token_bos(tok) : 0};
    int rc = -1;
    *ended = 0;
    lean_ctx_truncate(c, 0, &err);
    if (!logits || !bits || lean_grammar_reset(g, &err) != LEAN_OK || lean_sampler_create(&sp, n_vocab, &s, &err) != LEAN_OK ||
        lean_prefill(c, prompt, 1, logits, &err) != LEAN_OK)
        goto done;
    const lean_mask mask = {bits, n_vocab};
    while (n_ids < MAX_IDS) {
        if (lean_grammar_done(g)) {
            *ended = 1;
            break;
        }
        int32_t id;
        if (lean_grammar_mask(g, bits, n_vocab, NULL, &err) != LEAN_OK ||
            lean_sampler_sample(s, logits, lean_ctx_pos(c), &mask, &id, &err) != LEAN_OK)
            goto done;
        if (lean_token_is_eog(tok, id)) {
            *ended = 1;
            break;
        }
        if (lean_grammar_accept_token(g, id, &err) != LEAN_OK || lean_sampler_accept(s, &id, 1, &err) != LEAN_OK ||
            lean_decode(c, id, logits, &err) != LEAN_OK)
            goto done;
        ids[n_ids++] = id;
    }
    size_t n;
    rc = lean_detokenize(tok, ids, n_ids, 0, out, cap, &n, &err) == LEAN_OK && n < cap ? 0 : -1;
done:
    if (rc) CHECK(0, "seed %llu: %s", (unsigned long long)seed, err.msg);
    lean_sampler_free(s);
    free(logits);
    free(bits);
    return rc;
}

/* reply as a JSON string literal */
static void write_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* The same reply through lean_gen_* with the grammar on the sampler, on backend (exact path). */
static int reply_gen(lean_model *m, const char *backend, lean_grammar *g, uint64_t seed, char *out, size_t cap) {
    const lean_tokenizer *tok = lean_model_tokenizer(m);
    const int32_t n_vocab = lean_model_n_vocab(m);
    lean_error err;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = backend;
    cp.exact = 1;
    cp.n_ctx = MAX_IDS + 8;
    const lean_sampler_params sp = reply_sampling(seed);
    lean_ctx *c = NULL;
    lean_sampler *s = NULL;
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    int32_t ids[MAX_IDS], n_ids = 0, prompt[1] = {lean_token_bos(tok) >= 0 ? lean_token_bos(tok) : 0}, id;
    int rc = -1;
    if (!logits || lean_ctx_create(m, &cp, &c, &err) != LEAN_OK || lean_grammar_reset(g, &err) != LEAN_OK ||
        lean_sampler_create(&sp, n_vocab, &s, &err) != LEAN_OK || lean_sampler_set_grammar(s, g, &err) != LEAN_OK ||
        lean_prefill(c, prompt, 1, logits, &err) != LEAN_OK || lean_gen_begin(c, s, MAX_IDS, &err) != LEAN_OK)
        goto done;
    /* the GPU draws under the grammar's mask itself: no logits come back */
    CHECK(lean_ctx_gen_resident(c) == !strcmp(backend, "gpu"), "%s: resident %d", backend, lean_ctx_gen_resident(c));
    while (n_ids < MAX_IDS) {
        if (lean_gen_next(c, &id, &err) != LEAN_OK) goto done;
        if (lean_token_is_eog(tok, id)) break;
        ids[n_ids++] = id;
    }
    size_t n;
    rc = lean_detokenize(tok, ids, n_ids, 0, out, cap, &n, &err) == LEAN_OK && n < cap && lean_grammar_done(g) ? 0 : -1;
done:
    if (rc) CHECK(0, "%s, seed %llu: %s", backend, (unsigned long long)seed, err.msg);
    lean_gen_end(c);
    lean_sampler_free(s);
    lean_ctx_free(c);
    free(logits);
    return rc;
}

static char chat_buf[1 << 16];
static size_t chat_len;
static int chat_text(void *user, const char *text, size_t n) {
    (void)user;
    if (chat_len + n >= sizeof chat_buf) return 1;
    memcpy(chat_buf + chat_len, text, n);
    chat_len += n;
    return 0;
}

/* Runs `build/lean ARGS`, stderr with stdout when merge (else dropped): the output into out,
 * its exit status returned (-1: did not run). */
static int run_lean(const char *args, int merge, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "build/lean %s </dev/null %s", args, merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(const char *model, FILE *replies, int *n_written) {
    static char out[1 << 16], args[1024];
    /* replies of `lean run --json-schema-file`, validated with the rest (schema 1) */
    for (int seed = 1; seed <= 3; seed++) {
        snprintf(args, sizeof args, "run -m %s -p x -n 300 --temp 1 --top-k 0 --seed %d -q --json-schema-file "
                 "tests/data/grammar/reply_schema1.json", model, seed);
        int rc = run_lean(args, 0, out, sizeof out);
        CHECK(rc == 0, "lean run --json-schema-file: status %d: %s", rc, out);
        if (rc) continue;
        fprintf(replies, "{\"schema\": 1, \"reply\": ");
        write_json_string(replies, out);
        fprintf(replies, "}\n");
        ++*n_written;
    }
    /* the GPU: `lean run` under a schema draws through lean_gen_* with the grammar on the sampler,
     * resident (one id read back a step): seeded, exact, the ids of cpu-ref */
    if (test_gpu_skipped("test_grammar_replies (lean run on the gpu)")) goto skip_gpu;
    for (int seed = 2; seed <= 2; seed++) { /* one reply of 21 ids: ~3 s of CPU on llvmpipe */
        static char ref[1 << 14];
        const char *fmt = "run -m %s --ids 1,2,3 -n 300 --temp 1 --top-k 0 --seed %d -q --exact --backend %s "
                          "--json-schema-file tests/data/grammar/reply_schema1.json";
        snprintf(args, sizeof args, fmt, model, seed, "cpu-ref");
        int rc_ref = run_lean(args, 0, ref, sizeof ref);
        snprintf(args, sizeof args, fmt, model, seed, "gpu");
        int rc = run_lean(args, 0, out, sizeof out);
        CHECK(rc_ref == 0 && rc == 0 && strcmp(out, ref) == 0 && strchr(ref, ' '),
              "lean run --json-schema-file, seed %d: gpu (status %d) '%s', cpu-ref (status %d) '%s'", seed, rc, out,
              rc_ref, ref);
    }
skip_gpu:
    snprintf(args, sizeof args, "run -m %s -p x -n 20 -q --grammar 'root ::= \"a\" [^\\x00-\\U0010FFFF]'", model);
    int rc = run_lean(args, 1, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "no token of the vocabulary continues the output here (after 1 bytes)"),
          "a dead end: status %d, '%s'", rc, out);
    snprintf(args, sizeof args, "run -m %s -p x -q --grammar 'root ::= (\"a\" | b'", model);
    rc = run_lean(args, 1, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "grammar line 1 column 18: expecting ')' at the end"), "a malformed grammar: status %d, '%s'", rc, out);
    snprintf(args, sizeof args, "chat -m %s -q --json-schema '{\"type\": \"object\", \"pattern\": \"x\"}'", model);
    rc = run_lean(args, 1, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "JSON schema at #: unsupported keyword 'pattern'"), "an unsupported schema: status %d, '%s'",
          rc, out);
    snprintf(args, sizeof args, "run -m %s -p x --grammar a --json-schema '{}'", model);
    rc = run_lean(args, 1, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "give one of --grammar"), "two grammars: status %d", rc);
}

int main(void) {
    char model_path[256], replies_path[256];
    test_tmp_path(model_path, sizeof model_path, "grammar.gguf");
    test_tmp_path(replies_path, sizeof replies_path, "replies.jsonl");
    lean_error err;
    lean_gen_params gp = {.preset = "tiny-llama", .recipe = "q8_0", .vocab_path = "build/vocab/smollm2.gguf", .seed = 7, .n_layer = 1};
    lean_status st = lean_generate_model(&gp, model_path, &err);
    CHECK(st == LEAN_OK, "generating the model: %s (make test-data makes build/vocab/)", err.msg);
    if (st != LEAN_OK) return test_finish("test_grammar_replies");
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = "cpu";
    cp.n_ctx = MAX_IDS + 8;
    CHECK(lean_model_load_file(model_path, &m, &err) == LEAN_OK && lean_ctx_create(m, &cp, &c, &err) == LEAN_OK, "%s", err.msg);
    size_t len;
    uint8_t *text = test_read_file("tests/data/grammar/reply_schemas.jsonl", &len);
    char *lines[8];
    size_t n_schemas = 0;
    CHECK(text != NULL, "cannot read tests/data/grammar/reply_schemas.jsonl");
    for (char *l = (char *)text; text && *l && n_schemas < 8;) { /* one schema a line */
        char *nl = strchr(l, '\n');
        if (nl) *nl = 0;
        lines[n_schemas++] = l;
        l = nl ? nl + 1 : l + strlen(l);
    }
    FILE *out = fopen(replies_path, "w");
    CHECK(out != NULL, "cannot write %s", replies_path);
    static char buf[1 << 16], again[1 << 16];
    int n_written = 0, n_chat = 0;
    for (size_t i = 0; c && out && i < n_schemas; i++) {
        char *gbnf = NULL, *one = lines[i];
        CHECK(one != NULL, "schema %zu not found", i);
        if (!one) continue;
        st = lean_json_schema_to_gbnf(one, strlen(one), &gbnf, &err);
        CHECK(st == LEAN_OK, "schema %zu: %s", i, err.msg);
        lean_grammar *g = NULL;
        if (st == LEAN_OK) st = lean_grammar_create(gbnf, strlen(gbnf), NULL, lean_model_tokenizer(m), &g, &err);
        CHECK(st == LEAN_OK, "schema %zu grammar: %s", i, err.msg);
        int n_ended = 0, n_ok = 0;
        for (int k = 0; st == LEAN_OK && k < N_REPLIES; k++) {
            int ended;
            if (reply(m, c, g, 1000 * (i + 1) + (uint64_t)k, buf, sizeof buf, &ended) != 0) break;
            n_ok++;
            n_ended += ended;
            fprintf(out, "{\"schema\": %zu, \"reply\": ", i);
            write_json_string(out, buf);
            fprintf(out, "}\n");
            n_written++;
            if (k == 0) {
                printf("schema %zu, seed %d: %s\n", i, 1000 * ((int)i + 1), buf);
                CHECK(reply(m, c, g, 1000 * (i + 1), again, sizeof again, &ended) == 0 && strcmp(buf, again) == 0,
                      "the same seed gave another reply");
            }
        }
        CHECK(n_ok == N_REPLIES && n_ended == N_REPLIES, "schema %zu: %d replies, %d ended by the grammar", i, n_ok, n_ended);
        /* every call path: the loop on the exact CPU path, then lean_gen_* on the CPU and the GPU */
        if (st == LEAN_OK && i == 0) {
            static char gen_cpu[1 << 16], gen_gpu[1 << 16];
            lean_ctx *ce = NULL;
            lean_ctx_params ep = cp;
            ep.exact = 1;
            CHECK(lean_ctx_create(m, &ep, &ce, &err) == LEAN_OK, "%s", err.msg);
            for (uint64_t seed = 7; ce && seed < 9; seed++) { /* two seeds; the GPU (llvmpipe: slow) one */
                int ended;
                if (reply(m, ce, g, seed, buf, sizeof buf, &ended) != 0 || reply_gen(m, "cpu", g, seed, gen_cpu, sizeof gen_cpu) != 0)
                    break;
                CHECK(strcmp(buf, gen_cpu) == 0, "seed %llu: lean_gen_* gave '%s', the loop '%s'", (unsigned long long)seed,
                      gen_cpu, buf);
                if (seed > 7 || test_gpu_skipped("test_grammar_replies")) continue;
                if (reply_gen(m, "gpu", g, seed, gen_gpu, sizeof gen_gpu) != 0) break;
                CHECK(strcmp(buf, gen_gpu) == 0, "seed %llu: the GPU gave '%s', the CPU '%s'", (unsigned long long)seed, gen_gpu,
                      buf);
                if (seed == 7) printf("GPU, seed 7, lean_gen_*: %s\n", gen_gpu);
            }
            lean_ctx_free(ce);
            /* a chat session: five turns, each reply held to the schema from its start */
            lean_chat_session_params chp = lean_chat_session_default_params();
            chp.backend = "cpu";
            chp.n_ctx = 2048;
            chp.n_predict = MAX_IDS;
            chp.sampling.seed = 5;
            chp.sampling.temperature = 1.0;
            lean_chat_session *chat = NULL;
            CHECK(lean_chat_session_create(m, &chp, &chat, &err) == LEAN_OK &&
                      lean_chat_session_set_grammar(chat, g, &err) == LEAN_OK, "chat: %s", err.msg);
            for (int turn = 0; chat && turn < 5; turn++) {
                if (turn % 2 == 0) lean_chat_session_reset(chat); /* keep the context short */
                lean_chat_turn_stats cs;
                chat_len = 0;
                st = lean_chat_turn(chat, "Some JSON, please.", chat_text, NULL, &cs, &err);
                CHECK(st == LEAN_OK && cs.stop == LEAN_CHAT_STOP_EOG, "chat turn %d: %s (stop %d)", turn, err.msg, cs.stop);
                if (st != LEAN_OK) break;
                chat_buf[chat_len] = 0;
                fprintf(out, "{\"schema\": 0, \"reply\": ");
                write_json_string(out, chat_buf);
                fprintf(out, "}\n");
                n_written++;
                n_chat++;
            }
            lean_chat_session_free(chat);
            st = LEAN_OK;
        }
        lean_grammar_free(g);
        lean_grammar_text_free(gbnf);
    }
    if (out) test_cli(model_path, out, &n_written);
    if (out) fclose(out);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "python3 scripts/validate_json_replies.py tests/data/grammar/reply_schemas.jsonl %s 2>&1", replies_path);
    FILE *p = popen(cmd, "r");
    char line[1024], last[1024] = "";
    while (p && fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        snprintf(last, sizeof last, "%s", line);
    }
    int status = p ? pclose(p) : -1;
    char want[64];
    snprintf(want, sizeof want, "valid %d of %d", n_written, n_written);
    CHECK(status == 0 && strncmp(last, want, strlen(want)) == 0 && n_written == N_REPLIES * 3 + 5 + 3 && n_chat == 5,
          "the validator says '%s' (status %d), expected '%s' for %d", last, status, want, N_REPLIES * 3 + 8);
    free(text);
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(model_path);
    unlink(replies_path);
    return test_finish("test_grammar_replies");
}
