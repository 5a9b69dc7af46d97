/* main.c — the `lean` command: dispatch to cli/cmd_<name>.c.
 *
 *   lean info FILE | --gpu [FILE]                what a model file holds; the WebGPU adapter
 *   lean run -m FILE (-p TEXT | -f FILE | --ids 1,2,3) -n 32 [--ctx N] [--batch N]
 *                                                completion (streamed text, or ids), greedy by default
 *   lean chat -m FILE [--system TEXT] [--stop S]... [-n N]
 *                                                a conversation through the chat template, on stdin
 *   lean gen --preset P --type T [--vocab FILE] [--seed S] [--layers N] -o OUT
 *                                                a random-weight model at a preset's shapes
 *   lean quantize IN OUT TYPE                    re-encode a model's matrices
 *   lean tokenize -m FILE (-p TEXT | -f TEXTFILE) [--no-bos] [--parse-special] [--pieces]
 *                                                token ids of a text, by the file's vocabulary
 *   lean template [-m FILE] [--template JINJAFILE | --chatml] [--add-generation-prompt] < messages.json
 *                                                a conversation rendered through a chat template
 *   lean version | --version                     the library's version (lean.h's LEAN_VERSION)
 *   lean bench -m FILE [-p 128] [-n 64] [--suffix 128+32] [-r 3] [-t LIST] [--backend LIST] [--json]
 *                                                load / prefill / decode speeds, greedy-id hash
 *   lean serve -m FILE [--host H] [--port N] [--parallel N] [--ctx N]
 *                                                the OpenAI API over HTTP (serve/; native only)
 *
 * Only lean.h is used: the CLI is a front end like any other. Results go to stdout,
 * errors and timings to stderr; the exit status is 0 on success, 1 when the library
 * reports an error, 2 for a usage error.
 *
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_main =
    "usage: lean COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  info FILE | --gpu    print a model's architecture, shapes and tensor types; the GPU\n"
    "  run -m FILE ...      complete a prompt (text or ids), greedily unless --temp\n"
    "  chat -m FILE ...     talk with the model through its chat template (stdin)\n"
    "  gen --preset P ...   write a random-weight model at a preset's shapes\n"
    "  quantize IN OUT TYPE re-encode every weight matrix of IN as TYPE\n"
    "  tokenize -m FILE ... print the token ids of a text (-p TEXT or -f FILE)\n"
    "  template -m FILE ... render JSON messages (stdin) through the chat template\n"
    "  bench -m FILE ...    time load, prefill and decode; hash the greedy ids\n"
#if !defined(__wasi__)
    "  serve -m FILE ...    an OpenAI-compatible HTTP server (docs/serve.md)\n"
#endif
    "\n"
    "  version              print lean's version (also: lean --version)\n"
    "\n"
    "'lean COMMAND --help' describes one command.\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"info", cmd_info},
    {"run", cmd_run},
    {"chat", cmd_chat},
    {"gen", cmd_gen},
    {"quantize", cmd_quantize},
    {"tokenize", cmd_tokenize},
    {"template", cmd_template},
    {"bench", cmd_bench},
#if !defined(__wasi__) /* serve/ links libmicrohttpd: the native command only */
    {"serve", cmd_serve},
#endif
};

int main(int argc, char **argv) {
    /* Mesa's EGL needs a platform when there is no display; Dawn's OpenGL ES backend (llvmpipe
     * on a machine without a GPU driver) goes through it. The library sets no variable (lean.h). */
    setenv("EGL_PLATFORM", "surfaceless", 0);
    if (argc < 2) return fprintf(stderr, "%s", usage_main), 2;
    const char *cmd = argv[1];
    if (is_help(cmd) || strcmp(cmd, "help") == 0) return printf("%s", usage_main), 0;
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) return printf("lean %s\n", lean_version()), 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    return usage_error(usage_main, "unknown command '%s'", cmd);
}
