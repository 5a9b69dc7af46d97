/* test_cli.c — the `lean` command as a user runs it: the program next to this one's folder
 * (build/lean for build/tests/test_cli), through popen, stdout and stderr read back.
 * lean-test: native-only (runs a program: WASI has no popen)
 *
 *   1. version: `lean --version` and `lean version` print lean.h's LEAN_VERSION
 *   2. llama.cpp's spellings: each alias gives the same output as lean's flag, and takes
 *      effect (--n-predict 2 prints 2 ids; -c 4 is too small a context); a flag's value is
 *      never read as a flag; a command without the option refuses its alias too
 *   3. stderr: one "lean: backend ..." line naming the backend; none with -q/--quiet; the
 *      auto backend's search for a GPU prints nothing else (the WebGPU library's warnings are
 *      shown only with --backend gpu or -v); stderr works again after the search (errors);
 *      gen and quantize print nothing when stderr is no terminal (no progress bar)
 *
 * The model files: the tokenizer-free fixture build/fixtures/llama-q8_0.gguf (ids), and
 * tiny-llama with the Llama 2 vocabulary generated into $TMPDIR (text prompts).
 */
#include "dev/lean_dev.h"
#include "test.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char lean_bin[1024];

typedef struct result {
    int rc;         /* exit status, or -1 when it did not exit */
    char *out, *err; /* all of stdout and stderr, NUL-terminated */
} result;

static char *slurp(FILE *f) {
    size_t n;
    return (char *)test_read_stream(f, &n);
}

static const char *lean_stdin = "/dev/null";

/* `lean ARGS` (a shell word list, printf-style), stdin from lean_stdin. */
static result lean(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static result lean(const char *fmt, ...) {
    char args[2048], cmd[4096], err_path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    test_tmp_path(err_path, sizeof err_path, "stderr.txt");
    snprintf(cmd, sizeof cmd, "'%s' %s <'%s' 2>'%s'", lean_bin, args, lean_stdin, err_path);
    result r = {.rc = -1};
    FILE *p = popen(cmd, "r");
    if (p) {
        r.out = slurp(p);
        int st = pclose(p);
        if (st != -1 && WIFEXITED(st)) r.rc = WEXITSTATUS(st);
    }
    FILE *e = fopen(err_path, "rb");
    if (e) r.err = slurp(e), fclose(e);
    unlink(err_path);
    if (!r.out) r.out = calloc(1, 1);
    if (!r.err) r.err = calloc(1, 1);
    return r;
}

static void result_free(result *r) {
    free(r->out);
    free(r->err);
}

/* How many times needle occurs in s. */
static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Every line of s starts with one of the prefixes (a NULL-terminated list). */
static bool lines_start_with(const char *s, const char *const *prefixes) {
    for (const char *line = s; *line;) {
        const char *nl = strchr(line, '\n');
        bool ok = false;
        for (const char *const *p = prefixes; *p && !ok; p++) ok = strncmp(line, *p, strlen(*p)) == 0;
        if (!ok) return false;
        line = nl ? nl + 1 : line + strlen(line);
    }
    return true;
}

/* ================================================================ 1. version */

static void test_version(void) {
    CHECK(strcmp(lean_version(), LEAN_VERSION) == 0, "lean_version() = %s", lean_version());
    const char *spellings[] = {"--version", "version"};
    for (int i = 0; i < 2; i++) {
        result r = lean("%s", spellings[i]);
        CHECK(r.rc == 0 && strcmp(r.out, "lean " LEAN_VERSION "\n") == 0 && !r.err[0], "lean %s: rc %d, '%s' '%s'",
              spellings[i], r.rc, r.out, r.err);
        result_free(&r);
    }
    result r = lean("--help");
    CHECK(r.rc == 0 && strstr(r.out, "version"), "the usage names the version command");
    result_free(&r);
}

/* ================================================================ 2. aliases */

static const char *const ids_model = "build/fixtures/llama-q8_0.gguf";

/* The same stdout and exit status 0 for lean's spelling and llama.cpp's. */
static void same_output(const char *what, const char *lean_args, const char *llama_args) {
    result a = lean("%s", lean_args), b = lean("%s", llama_args);
    CHECK(a.rc == 0 && b.rc == 0 && a.out[0] && strcmp(a.out, b.out) == 0, "%s: rc %d / %d, '%s' vs '%s' (%s)", what,
          a.rc, b.rc, a.out, b.out, b.err);
    result_free(&a);
    result_free(&b);
}

static void test_aliases(const char *text_model, const char *vocab) {
    char l[2048], c[2048];
    /* run, with ids */
    snprintf(l, sizeof l, "run -q -m %s --ids 1,2,3 -n 4 --ctx 64 --batch 2 -t 1", ids_model);
    snprintf(c, sizeof c, "run -q --model %s --ids 1,2,3 --n-predict 4 -c 64 -b 2 --threads 1", ids_model);
    same_output("run, short", l, c);
    snprintf(c, sizeof c, "run -q --model %s --ids 1,2,3 --n-predict 4 --ctx-size 64 --batch-size 2 --threads 1",
             ids_model);
    same_output("run, long", l, c);
    result r = lean("run -q --model %s --ids 1,2,3 --n-predict 2", ids_model);
    int n_ids = 0;
    for (char *p = r.out; *p; p++) n_ids += *p >= '0' && *p <= '9' && (p == r.out || p[-1] == ' ');
    CHECK(r.rc == 0 && n_ids == 2, "--n-predict 2: rc %d, '%s'", r.rc, r.out);
    result_free(&r);
    /* -c takes effect: 3 prompt ids and 4 more do not fit in 4 positions */
    r = lean("run -q -m %s --ids 1,2,3 -n 4 -c 4", ids_model);
    CHECK(r.rc == 1 && strstr(r.err, "context"), "-c 4: rc %d, %s", r.rc, r.err);
    result_free(&r);
    r = lean("run -q -m %s --ids 1,2,3 -n 4 --ctx-size x", ids_model);
    CHECK(r.rc == 2 && strstr(r.err, "expected a count"), "--ctx-size x: rc %d, %s", r.rc, r.err);
    result_free(&r);

    /* run, with text: -p / --prompt / --file */
    if (text_model) {
        char text_path[512];
        test_tmp_path(text_path, sizeof text_path, "prompt.txt");
        FILE *f = fopen(text_path, "wb");
        CHECK(f && fputs("Once upon a time", f) >= 0 && fclose(f) == 0, "writing %s", text_path);
        snprintf(l, sizeof l, "run -q -m %s -p 'Once upon a time' -n 3 -t 1", text_model);
        snprintf(c, sizeof c, "run -q --model %s --prompt 'Once upon a time' --n-predict 3 --threads 1", text_model);
        same_output("run --prompt", l, c);
        snprintf(c, sizeof c, "run -q --model %s --file '%s' --n-predict 3 --threads 1", text_model, text_path);
        same_output("run --file", l, c);
        unlink(text_path);
    }

    /* tokenize; a value that looks like an alias stays a value */
    if (vocab) {
        snprintf(l, sizeof l, "tokenize -m %s -p 'hello world'", vocab);
        snprintf(c, sizeof c, "tokenize --model %s --prompt 'hello world'", vocab);
        same_output("tokenize", l, c);
        r = lean("tokenize --model %s --prompt --model", vocab);
        lean_tokenizer *tok = NULL;
        lean_error err;
        int32_t ids[16], n = 0;
        char want[128] = "";
        if (lean_tokenizer_load_file(vocab, &tok, &err) == LEAN_OK &&
            lean_tokenize(tok, "--model", 7, LEAN_TOKENIZE_ADD_SPECIAL, ids, 16, &n, &err) == LEAN_OK && n <= 16)
            for (int32_t i = 0; i < n; i++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? " " : "", ids[i]);
        lean_tokenizer_free(tok);
        CHECK(r.rc == 0 && want[0] && strncmp(r.out, want, strlen(want)) == 0 && r.out[strlen(want)] == '\n',
              "the text '--model': '%s', want '%s' (%s)", r.out, want, r.err);
        result_free(&r);
    }

    /* chat has no thread count: its alias is refused like the flag; its own aliases parse */
    r = lean("chat --model %s --threads 1", ids_model);
    CHECK(r.rc == 2 && strstr(r.err, "unknown option '--threads'"), "chat --threads: %d %s",
          r.rc, r.err);
    result_free(&r);
    r = lean("chat --model %s --ctx-size x", ids_model);
    CHECK(r.rc == 2 && strstr(r.err, "--ctx expects a count"), "chat --ctx-size x: %d %s", r.rc, r.err);
    result_free(&r);
}

/* ================================================================ 3. stderr */

static void test_stderr(void) {
    result r = lean("run -m %s --ids 1,2 -n 1 --backend cpu -t 1", ids_model);
    CHECK(r.rc == 0 && count_of(r.err, "lean: backend ") == 1 && strstr(r.err, "lean: backend cpu (") &&
              strstr(r.err, ", 1 thread)\n"),
          "cpu: %d %s", r.rc, r.err);
    result_free(&r);
    r = lean("run -m %s --ids 1,2 -n 1 --backend cpu-ref", ids_model);
    CHECK(r.rc == 0 && strstr(r.err, "lean: backend cpu_ref\n"), "cpu-ref: %d %s", r.rc, r.err);
    result_free(&r);
    const char *quiet[] = {"-q", "--quiet"};
    for (int i = 0; i < 2; i++) {
        r = lean("run %s -m %s --ids 1,2 -n 1 --backend cpu", quiet[i], ids_model);
        CHECK(r.rc == 0 && !strstr(r.err, "backend") && strstr(r.err, "prefill:"), "%s: %d %s", quiet[i], r.rc, r.err);
        result_free(&r);
    }
    /* the auto backend: the search for a GPU says nothing (the WebGPU library, when it is
     * there, would print its adapter warnings); lean's own lines only */
    const char *const ours[] = {"lean: backend ", "sampling: ", "prefill: ", NULL};
    r = lean("run -m %s --ids 1,2 -n 1", ids_model);
    CHECK(r.rc == 0 && count_of(r.err, "lean: backend ") == 1 && lines_start_with(r.err, ours), "auto: %d %s", r.rc,
          r.err);
    result_free(&r);
    /* -v lets the library's warnings through (whatever they are here) and still names the backend */
    r = lean("run -v -m %s --ids 1,2 -n 1", ids_model);
    CHECK(r.rc == 0 && count_of(r.err, "lean: backend ") == 1, "-v: %d %s", r.rc, r.err);
    /* and says why the GPU was passed over exactly when auto landed on the CPU */
    const bool on_cpu = strstr(r.err, "lean: backend cpu") != NULL;
    CHECK(count_of(r.err, "lean: gpu passed over: gpu") == (on_cpu ? 1 : 0), "-v, auto on %s: %s",
          on_cpu ? "cpu" : "gpu", r.err);
    result_free(&r);
    r = lean("run -v -m %s --ids 1,2 -n 1 --backend cpu", ids_model);
    CHECK(r.rc == 0 && !strstr(r.err, "passed over"), "-v, cpu asked for: %d %s", r.rc, r.err);
    result_free(&r);
    /* gen and quantize draw their progress bar only on a terminal: through a pipe, stderr stays empty */
    char gen_path[512], q_path[512];
    test_tmp_path(gen_path, sizeof gen_path, "gen.gguf");
    test_tmp_path(q_path, sizeof q_path, "quantized.gguf");
    r = lean("gen --preset tiny-llama --type q8_0 -o '%s'", gen_path);
    CHECK(r.rc == 0 && !r.err[0] && !r.out[0], "gen: %d '%s'", r.rc, r.err);
    result_free(&r);
    r = lean("quantize '%s' '%s' q4_0", gen_path, q_path);
    CHECK(r.rc == 0 && !r.err[0] && !r.out[0], "quantize: %d '%s'", r.rc, r.err);
    result_free(&r);
    unlink(gen_path);
    unlink(q_path);
    /* errors after the search still reach stderr */
    r = lean("run -m %s --ids 1,2 -n 1 --backend nonsense", ids_model);
    CHECK(r.rc == 1 && strstr(r.err, "unknown backend 'nonsense'"), "bad backend: %d %s", r.rc, r.err);
    result_free(&r);
}

/* --logit-bias ID+B / ID-B (llama.cpp's): +60 on an id makes the greedy ids that id; -60 on the
 * first greedy id moves the reply off it; the same seeded reply on cpu-ref and the CPU kernels;
 * bad values are usage errors naming the flag. */
static void test_logit_bias(void) {
    const char *run = "run -q -m build/fixtures/llama-q8_0.gguf --ids 1,2,3 -n 4 --temp 0";
    result plain = lean("%s --backend cpu", run), up = lean("%s --backend cpu --logit-bias 77+60", run);
    CHECK(plain.rc == 0 && up.rc == 0 && !strcmp(up.out, "77 77 77 77\n") && strcmp(plain.out, up.out),
          "--logit-bias 77+60, greedy: '%s' (unbiased '%s')", up.out, plain.out);
    int first = -1;
    sscanf(plain.out, "%d", &first);
    result down = lean("%s --backend cpu --logit-bias %d-60", run, first);
    int got = -2;
    sscanf(down.out, "%d", &got);
    CHECK(down.rc == 0 && got >= 0 && got != first, "--logit-bias %d-60: '%s'", first, down.out);
    result_free(&plain), result_free(&up), result_free(&down);
    const char *seeded = "run -q -m build/fixtures/llama-q8_0.gguf --ids 1,2,3 -n 8 --temp 1.5 --seed 7 "
                         "--logit-bias 77+2.5 --logit-bias 3941-1.25 --logit-bias 12+0.5";
    result a = lean("%s --backend cpu-ref", seeded), b = lean("%s --backend cpu --exact", seeded);
    CHECK(a.rc == 0 && b.rc == 0 && a.out[0] && !strcmp(a.out, b.out), "seeded with a bias: cpu-ref '%s', cpu '%s'",
          a.out, b.out);
    result_free(&a), result_free(&b);
    const struct {
        const char *arg, *says;
    } bad[] = {{"12", "TOKEN_ID+BIAS"}, {"12+", "TOKEN_ID+BIAS"}, {"x+1", "TOKEN_ID+BIAS"}, {"-3+1", "TOKEN_ID+BIAS"},
               {"12+101", "[-100, 100]"}, {"12-inf", "[-100, 100]"}, {"99999999+1", "outside the vocabulary"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        result r = lean("%s --backend cpu --logit-bias %s", run, bad[i].arg);
        CHECK(r.rc != 0 && strstr(r.err, bad[i].says), "--logit-bias %s: %d '%s'", bad[i].arg, r.rc, r.err);
        result_free(&r);
    }
    result r = lean("%s --backend cpu --logit-bias 5+1 --logit-bias 5-2", run);
    CHECK(r.rc == 2 && strstr(r.err, "token id 5 is given twice"), "--logit-bias twice: %d '%s'", r.rc, r.err);
    result_free(&r);
}

/* --lora / --lora-scaled (docs/lora.md; the adapters of `make test-data`): an adapter changes
 * the greedy ids, scale 0 gives the model's, several add up the same on cpu-ref, the CPU's
 * exact kernels and the GPU's, a misfit is named, a bad SCALE is a usage error, FILE:SCALE is llama.cpp's
 * spelling of FILE SCALE. */
static void test_lora_flags(void) {
    const char *run = "run -q -m build/fixtures/llama-f32.gguf --ids 1,2,3,4,5,6,7,8 -n 12";
    result base = lean("%s --backend cpu-ref", run);
    result with = lean("%s --backend cpu-ref --lora build/lora/llama-a.gguf", run);
    result zero = lean("%s --backend cpu-ref --lora-scaled build/lora/llama-a.gguf 0", run);
    result two = lean("%s --backend cpu-ref --lora build/lora/llama-a.gguf --lora-scaled build/lora/llama-b.gguf -0.5",
                      run);
    result two_cpu = lean("%s --backend cpu --exact --lora build/lora/llama-a.gguf --lora-scaled build/lora/llama-b.gguf "
                          "-0.5", run);
    CHECK(base.rc == 0 && with.rc == 0 && zero.rc == 0 && two.rc == 0 && two_cpu.rc == 0, "--lora runs: %s%s%s%s%s",
          base.err, with.err, zero.err, two.err, two_cpu.err);
    CHECK(strcmp(base.out, with.out) != 0, "an adapter leaves the greedy ids as they were: %s", with.out);
    CHECK(strcmp(base.out, zero.out) == 0, "scale 0: '%s', without: '%s'", zero.out, base.out);
    CHECK(strcmp(two.out, two_cpu.out) == 0 && strcmp(two.out, with.out) != 0, "two adapters: cpu-ref '%s', cpu '%s'",
          two.out, two_cpu.out);
    result tied = lean("run -q -m build/fixtures/llama-tied-f32.gguf --ids 1,2 -n 2 --lora build/lora/llama-a.gguf");
    CHECK(tied.rc == 1 && strstr(tied.err, "'output.weight.lora_") && strstr(tied.err, "llama-a.gguf"),
          "a misfit: rc %d, '%s'", tied.rc, tied.err);
    result scale = lean("%s --lora-scaled build/lora/llama-a.gguf half", run);
    CHECK(scale.rc == 2 && strstr(scale.err, "half'"), "bad SCALE: rc %d, '%s'", scale.rc, scale.err);
    result colon = lean("%s --backend cpu-ref --lora-scaled build/lora/llama-a.gguf:0", run); /* llama.cpp's today */
    CHECK(colon.rc == 0 && strcmp(colon.out, base.out) == 0, "FILE:0: rc %d, '%s'", colon.rc, colon.out);
    /* the GPU applies them too (LEAN_TEST_GPU=0: no WebGPU library here) */
    const char *no_gpu = getenv("LEAN_TEST_GPU");
    result two_gpu = {0};
    if (no_gpu && strcmp(no_gpu, "0") == 0) {
        printf("test_cli: --lora on the gpu SKIPPED: LEAN_TEST_GPU=0\n");
    } else {
        two_gpu = lean("%s --backend gpu --exact --lora build/lora/llama-a.gguf --lora-scaled build/lora/llama-b.gguf "
                       "-0.5", run);
        CHECK(two_gpu.rc == 0 && strcmp(two.out, two_gpu.out) == 0, "two adapters: cpu-ref '%s', gpu '%s' (rc %d: %s)",
              two.out, two_gpu.out, two_gpu.rc, two_gpu.err);
    }
    result r[] = {base, with, zero, two, two_cpu, tied, scale, colon, two_gpu};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) result_free(&r[i]);
}

/* --lora in `lean bench`: the tg row runs with the adapter (another hash; scale 0 the
 * model's; the row says so), its streams too (stream 0 held to the row alone by bench itself);
 * a misfit is named. */
static void test_bench_lora(void) {
    const char *bench = "bench -q --json -m build/fixtures/llama-f32.gguf -p 0 --suffix none -n 6 -r 1 --backend cpu-ref";
    result base = lean("%s", bench);
    result with = lean("%s --lora build/lora/llama-a.gguf --streams 2", bench);
    result zero = lean("%s --lora-scaled build/lora/llama-a.gguf 0", bench);
    result misfit = lean("%s --lora build/lora/qwen2-a.gguf", bench);
    CHECK(base.rc == 0 && with.rc == 0 && zero.rc == 0, "bench --lora runs: %s%s%s", base.err, with.err, zero.err);
    const char *h0 = strstr(base.out, "\"hash\""), *h1 = strstr(with.out, "\"hash\""), *h2 = strstr(zero.out, "\"hash\"");
    CHECK(h0 && h1 && h2 && strncmp(h0, h1, 28) != 0 && strncmp(h0, h2, 28) == 0,
          "bench --lora: the tg row's hash changes (scale 0: it does not): %.28s / %.28s / %.28s", h0 ? h0 : "-",
          h1 ? h1 : "-", h2 ? h2 : "-");
    CHECK(strstr(with.out, "cpu-ref +1 lora") && strstr(with.out, "tg6 x2"), "bench --lora rows: %s", with.out);
    CHECK(misfit.rc == 1 && strstr(misfit.err, "qwen2-a.gguf") && strstr(misfit.err, "qwen2"),
          "bench: a misfit adapter: rc %d, '%s'", misfit.rc, misfit.err);
    result r[] = {base, with, zero, misfit};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) result_free(&r[i]);
}

/* --lora in `lean chat` (text_model: tiny-llama with the Llama 2 vocabulary; its adapter made
 * by scripts/make_lora.py): two turns with the adapter differ from the model's, scale 0 gives
 * the model's, cpu-ref and the CPU's exact kernels add it the same; a misfit is named. */
static void test_chat_lora(const char *text_model) {
    char adapter[512], input[512];
    test_tmp_path(adapter, sizeof adapter, "chat-lora.gguf");
    test_tmp_path(input, sizeof input, "chat-input.txt");
    char make[2048];
    /* Debian's python where there is one (numpy; a pyenv python may lack it), as the Makefile's */
    snprintf(make, sizeof make,
             "p=python3; [ ! -x /usr/bin/python3 ] || p=/usr/bin/python3; \"$p\" scripts/make_lora.py adapter '%s' '%s' "
             "--rank 4 >/dev/null",
             text_model, adapter);
    CHECK(system(make) == 0, "%s", make);
    FILE *f = fopen(input, "w");
    CHECK(f != NULL, "cannot write %s", input);
    if (!f) return;
    fputs("Hello there\nTell me more\n", f);
    fclose(f);
    lean_stdin = input;
    const char *chat = "chat -q -n 8 --greedy -m";
    result base = lean("%s '%s' --backend cpu-ref", chat, text_model);
    result with = lean("%s '%s' --backend cpu-ref --lora '%s'", chat, text_model, adapter);
    result zero = lean("%s '%s' --backend cpu-ref --lora-scaled '%s' 0", chat, text_model, adapter);
    result exact = lean("%s '%s' --exact --lora '%s'", chat, text_model, adapter);
    result misfit = lean("%s '%s' --lora build/lora/llama-a.gguf", chat, text_model);
    result usage = lean("%s '%s' --lora-scaled '%s' half", chat, text_model, adapter);
    lean_stdin = "/dev/null";
    CHECK(base.rc == 0 && with.rc == 0 && zero.rc == 0 && exact.rc == 0, "chat --lora runs: %s%s%s%s", base.err,
          with.err, zero.err, exact.err);
    CHECK(count_of(base.out, "\n") == 2 && strcmp(base.out, with.out) != 0, "chat --lora: the replies change: '%s' / '%s'",
          base.out, with.out);
    CHECK(strcmp(base.out, zero.out) == 0, "chat --lora-scaled 0: '%s', without: '%s'", zero.out, base.out);
    CHECK(strcmp(with.out, exact.out) == 0, "chat --lora: cpu-ref '%s', cpu --exact '%s'", with.out, exact.out);
    CHECK(misfit.rc == 1 && strstr(misfit.err, "llama-a.gguf") && strstr(misfit.err, "blk.2.attn_q.weight"),
          "chat: a misfit adapter: rc %d, '%s'", misfit.rc, misfit.err);
    CHECK(usage.rc == 2 && strstr(usage.err, "half'"), "chat: bad SCALE: rc %d, '%s'", usage.rc, usage.err);
    result r[] = {base, with, zero, exact, misfit, usage};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) result_free(&r[i]);
    unlink(adapter);
    unlink(input);
}

int main(int argc, char **argv) {
    (void)argc;
    /* DIR/tests/test_cli -> DIR/lean */
    snprintf(lean_bin, sizeof lean_bin, "%s", argv[0]);
    char *slash = strrchr(lean_bin, '/');
    if (slash) *slash = 0;
    slash = strrchr(lean_bin, '/');
    if (slash) slash[1] = 0;
    else snprintf(lean_bin, sizeof lean_bin, "../");
    strncat(lean_bin, "lean", sizeof lean_bin - strlen(lean_bin) - 1);
    CHECK(access(lean_bin, X_OK) == 0, "%s is not there (make cli)", lean_bin);

    const char *vocab = "build/vocab/llama2.gguf";
    if (access(vocab, R_OK) != 0) {
        printf("(no %s: make test-data; the text-prompt and tokenize cases are left out)\n", vocab);
        vocab = NULL;
    }
    char model[512];
    const char *text_model = NULL;
    if (vocab) {
        test_tmp_path(model, sizeof model, "model.gguf");
        lean_gen_params gp = {.preset = "tiny-llama", .recipe = "q8_0", .vocab_path = vocab, .seed = 1};
        lean_error err;
        lean_status st = lean_generate_model(&gp, model, &err);
        CHECK(st == LEAN_OK, "generating %s: %s", model, err.msg);
        if (st == LEAN_OK) text_model = model;
    }
    test_version();
    test_aliases(text_model, vocab);
    test_stderr();
    test_logit_bias();
    test_lora_flags();
    test_bench_lora();
    if (text_model) test_chat_lora(text_model);
    if (text_model) unlink(text_model);
    return test_finish("test_cli");
}
