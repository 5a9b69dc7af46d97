/* cmd_tokenize.c — `lean tokenize`: text -> token ids with a GGUF file's vocabulary (a model,
 * or a vocabulary-only file: only the tokenizer.* keys are read). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_tokenize =
    "usage: lean tokenize -m FILE (-p TEXT | -f TEXTFILE) [--no-bos] [--parse-special] [--pieces]\n"
    "Prints the token ids of TEXT on one line, space-separated, with the vocabulary of FILE (a\n"
    "model or a vocabulary-only GGUF; only its tokenizer.* keys are read). BOS (and EOS) are\n"
    "added when the file says so (tokenizer.ggml.add_bos_token / add_eos_token).\n"
    "llama.cpp's spellings work too: --model, --prompt, --file.\n"
    "  -m FILE          the GGUF file\n"
    "  -p TEXT          the text\n"
    "  -f TEXTFILE      read the text from a file, bytes as they are ('-': standard input)\n"
    "  --no-bos         add no BOS or EOS\n"
    "  --parse-special  control tokens written in the text (\"<|im_start|>\", \"<s>\") become\n"
    "                   their ids; without it they are tokenized as text\n"
    "  --pieces         one line per token instead: the id and what it stands for, quoted\n"
    "                   (\\n, \\t, \\\\, \\' and \\xNN for other control bytes and broken UTF-8)\n";

/* A token's bytes quoted: printable ASCII and valid UTF-8 as they are, the rest escaped. */
static void print_piece(const char *p, size_t n) {
    putchar('\'');
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)p[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        for (size_t k = 1; k < len; k++)
            if (i + k >= n || ((unsigned char)p[i + k] & 0xC0) != 0x80) len = 0;
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\\' || c == '\'') printf("\\%c", c);
        else if (len == 1 && c >= 0x20 && c != 0x7F) putchar(c);
        else if (len > 1) fwrite(p + i, 1, len, stdout);
        else printf("\\x%02X", c);
        i += len > 1 ? len : 1;
    }
    putchar('\'');
}

static const flag_alias tokenize_aliases[] = {{"--model", "-m"}, {"--prompt", "-p"}, {"--file", "-f"}, {NULL, NULL}};

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    uint32_t flags = LEAN_TOKENIZE_ADD_SPECIAL;
    int pieces = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = flag_name(argv[i], tokenize_aliases);
        if (is_help(a)) return printf("%s", usage_tokenize), 0;
        if (strcmp(a, "--no-bos") == 0) flags &= ~(uint32_t)LEAN_TOKENIZE_ADD_SPECIAL;
        else if (strcmp(a, "--parse-special") == 0) flags |= LEAN_TOKENIZE_PARSE_SPECIAL;
        else if (strcmp(a, "--pieces") == 0) pieces = 1;
        else if (strcmp(a, "-m") == 0 || strcmp(a, "-p") == 0 || strcmp(a, "-f") == 0) {
            if (i + 1 >= argc) return usage_error(usage_tokenize, "%s needs a value", a);
            const char **dst = a[1] == 'm' ? &model : a[1] == 'p' ? &text : &file;
            *dst = argv[++i];
        } else
            return usage_error(usage_tokenize, "unknown argument '%s'", a);
    }
    if (!model) return usage_error(usage_tokenize, "-m FILE is required");
    if (!text == !file) return usage_error(usage_tokenize, "give the text with one of -p TEXT or -f TEXTFILE");

    char *owned = NULL;
    size_t n_text = text ? strlen(text) : 0;
    if (file) {
        if (!(owned = read_path(file, &n_text))) return input_error("the text", file);
        text = owned;
    }
    lean_error err;
    lean_tokenizer *tok = NULL;
    int32_t *ids = NULL, n = 0;
    int rc = 0;
    if (lean_tokenizer_load_file(model, &tok, &err) != LEAN_OK ||
        lean_tokenize(tok, text, n_text, flags, NULL, 0, &n, &err) != LEAN_OK) {
        rc = lib_error(&err);
        goto done;
    }
    ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (!ids) {
        fprintf(stderr, "lean: out of memory for %d ids\n", n);
        rc = 1;
        goto done;
    }
    if (lean_tokenize(tok, text, n_text, flags, ids, n, &n, &err) != LEAN_OK) {
        rc = lib_error(&err);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!pieces) {
            printf(i ? " %d" : "%d", ids[i]);
            continue;
        }
        size_t len;
        const char *p = lean_token_piece(tok, ids[i], &len);
        printf("%6d -> ", ids[i]);
        print_piece(p, len);
        putchar('\n');
    }
    if (!pieces) putchar('\n');
done:
    free(ids);
    free(owned);
    lean_tokenizer_free(tok);
    return rc;
}
