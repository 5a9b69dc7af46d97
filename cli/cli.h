/* cli.h — what the `lean` command's files share: argument helpers and error printing.
 * Each command lives in cli/cmd_<name>.c and is listed once in cli/main.c. */
#ifndef LEAN_CLI_H
#define LEAN_CLI_H

#include "lean.h"

#include <stdint.h>
#include <stdio.h>

/* Prints "lean: <message>" and the command's usage on stderr; returns exit status 2. */
int usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library's error on stderr; returns exit status 1. */
int lib_error(const lean_error *err);
int is_help(const char *arg);
/* Parses a whole decimal integer in [lo, hi]; 0 on success. */
int parse_long(const char *s, long long lo, long long hi, long long *out);
double now_ms(void);
/* The most bytes read from a prompt file, stdin, messages or a template: far above any
 * prompt a context holds (a 1M-token context is ~4 MiB of text; chat templates are KiB),
 * far below lean_tokenize's 512 MiB, and small enough that a stray `lean run < /dev/zero`
 * or a wrong file stops at once instead of eating memory (64 MiB of text: ~16M ids). */
#define CLI_MAX_INPUT_BYTES (64u << 20)
/* All of f, NUL-terminated, *len bytes (len nullable), at most CLI_MAX_INPUT_BYTES; NULL on
 * failure with errno set: EFBIG past the limit, ENOMEM, or the read's. Does not close f. */
char *read_all(FILE *f, size_t *len);
/* read_all of the file at path ("-" = stdin); NULL on failure (errno says why). */
char *read_path(const char *path, size_t *len);
/* Prints why reading what (e.g. "the prompt") from path ("-" = stdin) failed, naming the
 * limit when it was that; returns exit status 1. Call it right after the failure (errno).
 * input_error_text writes that line (without the newline) into out instead. */
int input_error(const char *what, const char *path);
void input_error_text(char *out, size_t cap, const char *what, const char *path);

/* ---- llama.cpp's spellings: the flags users type from llama-cli and llama-bench ----
 * Each command has its table of the aliases of the flags it has (an alias of a flag it lacks
 * stays unknown, under the name typed). */
typedef struct flag_alias {
    const char *alias, *flag; /* "--ctx-size" -> "--ctx" */
} flag_alias;
/* The flag o in lean's spelling: the flag o stands for in table (ended by {NULL, NULL}), else o.
 * Only for argv's flags, never their values. */
const char *flag_name(const char *o, const flag_alias *table);

/* ---- what stderr shows (run, chat, bench): -q/--quiet, -v/--verbose ---- */
#define VERBOSITY_USAGE                                                                      \
    "  -q, --quiet          no 'lean: backend ...' line on stderr\n"                          \
    "  -v, --verbose        show what the WebGPU library says while it looks for a GPU (shown\n" \
    "                       anyway with --backend gpu)\n"
/* If o is -q/--quiet or -v/--verbose, sets *verbosity (-1 quiet, 1 verbose) and returns 1. */
int parse_verbosity_flag(const char *o, int *verbosity);
/* lean_ctx_create, with stderr (fd 2) sent to /dev/null around it unless the GPU was asked
 * for (backend "gpu") or verbosity > 0: looking for a GPU, the WebGPU library (Dawn) and the
 * drivers under it (Mesa: XDG_RUNTIME_DIR) print warnings straight to fd 2, which on a
 * machine without a GPU say nothing about the CPU run that follows. The library cannot
 * silence them (a library must not touch the process's stderr); the front end can. A bar
 * "uploading" (on the real stderr, muted or not) shows the weights going to the GPU. */
lean_status ctx_create_quietly(const lean_model *m, const lean_ctx_params *p, int verbosity, lean_ctx **out,
                               lean_error *err);
/* The same for a chat session (it creates its context). */
lean_status chat_session_create_quietly(const lean_model *m, const lean_chat_session_params *p, int verbosity,
                                        lean_chat_session **out, lean_error *err);
/* "lean: backend cpu (avx2, 2 threads)" on stderr, unless verbosity < 0. */
void print_backend(const lean_ctx *c, int verbosity);

/* ---- a progress bar on stderr, when it is a terminal ---- */
typedef struct progress_bar {
    const char *label; /* "loading", "writing", "uploading" */
    double t0_ms;
    int fd;            /* where it draws: fd 2, or the real stderr's copy while fd 2 is muted */
    int tty;           /* stderr is a terminal: draw at all */
    int percent;       /* the last drawn, -1 before the first */
} progress_bar;
/* Starts a bar; pass progress_draw and the bar as a lean_progress_fn and its user. Work done
 * within 0.25 s draws nothing; the bar's line is cleared when done reaches total. */
void progress_begin(progress_bar *b, const char *label);
void progress_draw(void *user, uint64_t done, uint64_t total);

/* lean_model_load_file with a progress bar "loading". */
lean_status load_model(const char *path, lean_model **out, lean_error *err);

/* ---- sampling flags, shared by `lean run` and `lean chat` (llama.cpp's names) ---- */
/* Their help lines, for a command's usage text. */
#define SAMPLING_USAGE                                                                       \
    "sampling (transformers' order: logit bias, penalty, temperature, top-k, top-p; defaults\n" \
    "llama.cpp's):\n"                                                                          \
    "  --temp T             temperature (default 0.8; 0 = greedy)\n"                         \
    "  --top-k K            keep the K most likely ids (default 40; 0 = off)\n"             \
    "  --top-p P            keep the fewest most likely ids whose probability reaches P\n"   \
    "                       (default 0.95; 1 = off)\n"                                      \
    "  --repeat-penalty R   ids in the window: positive logits / R, negative * R, once per id\n" \
    "                       (default 1.0 = off)\n"                                          \
    "  --repeat-last-n N    the window: the last N ids, prompt included (default 64;\n"     \
    "                       -1 = the whole history, 0 = off)\n"                             \
    "  -s, --seed S         seed of the draws (default -1: pick one, printed on stderr);\n"  \
    "                       the same seed gives the same reply on every backend\n"          \
    "  --greedy             always the most likely id (the lowest id on ties)\n"              \
    "  --logit-bias ID+B    add B (in [-100, 100]) to id ID's logit before everything else;\n" \
    "                       ID-B subtracts (llama.cpp's spelling: 15043+1, 15043-1.5);\n"   \
    "                       repeatable, each id once; -100 all but bans (not a mask)\n"
/* If argv[*i] is a sampling flag, stores it (and its value, advancing *i) in *p and returns
 * (--logit-bias: an entry of a list in static storage, at most CLI_MAX_LOGIT_BIAS, p pointing at it)
 * 0; returns -1 when argv[*i] is not a sampling flag; on a bad or out-of-range value prints a
 * usage error (with usage) and returns its exit status, 2. */
#define CLI_MAX_LOGIT_BIAS 1024
int parse_sampling_flag(const char *usage, int argc, char **argv, int *i, lean_sampler_params *p);
/* One stderr line saying how ids are chosen (the seed included, so a run can be replayed). */
void print_sampling(const lean_sampler_params *p, uint64_t seed);

/* ---- grammar flags, shared by `lean run` and `lean chat` (llama.cpp's names; docs/grammar.md) ---- */
#define GRAMMAR_USAGE                                                                        \
    "output held to a grammar (docs/grammar.md; one of):\n"                                 \
    "  --grammar G          GBNF grammar G (llama.cpp's; start rule root): only tokens that\n" \
    "                       keep the output inside it are drawn; it ends when complete\n"   \
    "  --grammar-file FILE  the same, read from FILE\n"                                     \
    "  --json-schema S      JSON valid under schema S (the subset docs/grammar.md lists)\n" \
    "  --json-schema-file FILE  the same, read from FILE\n"
typedef struct grammar_flags {
    const char *grammar, *grammar_file, *schema, *schema_file;
} grammar_flags;
/* If argv[*i] is a grammar flag, stores its value (advancing *i) and returns 0; -1 when it is
 * not one; a missing value or a second grammar flag prints a usage error and returns 2. */
int parse_grammar_flag(const char *usage, int argc, char **argv, int *i, grammar_flags *f);
/* The grammar the flags ask for over tok (*g NULL when none). 0 on success; 1 after printing
 * why not (a file that cannot be read, a malformed grammar or schema naming the place). */
int grammar_from_flags(const grammar_flags *f, const lean_tokenizer *tok, lean_grammar **g);

/* ---- LoRA flags, shared by `lean run`, `lean chat` and `lean bench` (llama.cpp's names;
 * docs/lora.md) ---- */
#define LORA_USAGE                                                                             \
    "  --lora FILE  apply the LoRA adapter FILE (llama.cpp's GGUF adapter) with scale 1; the\n" \
    "               flags may be repeated, every adapter is added (docs/lora.md); every\n"       \
    "               backend applies them\n"                                                     \
    "  --lora-scaled FILE SCALE  the same with that scale (llama.cpp's FILE:SCALE works too)\n"
#define MAX_LORAS 16
typedef struct lora_flags {
    const char *file[MAX_LORAS];
    float scale[MAX_LORAS];
    int n;
} lora_flags;
/* If argv[*i] is --lora or --lora-scaled, stores it (advancing *i) and returns 0; -1 when it is
 * not one; a missing or malformed value: 2 with the reason in msg (not printed). */
int parse_lora_flag(int argc, char **argv, int *i, lora_flags *f, char *msg, size_t cap);
/* Loads the flags' adapters for m into loras[0..f->n) (NULLs first; lean_lora_free each after
 * the contexts using them). 0, or 1 after printing why not (naming the adapter). */
int loras_load(const lora_flags *f, const lean_model *m, lean_lora **loras);

int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* serve/cmd_serve.c, native only */

#endif
