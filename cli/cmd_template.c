/* cmd_template.c — `lean template`: render a conversation through a chat template, so that
 * anyone can check a template by hand (against transformers' apply_chat_template, say).
 *
 *   echo '[{"role": "user", "content": "Hi"}]' | lean template -m model.gguf --add-generation-prompt
 *
 * The conversation is JSON on stdin; the text goes to stdout exactly (no newline added). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_template =
    "usage: lean template [-m FILE] [--template JINJAFILE | --chatml] [--add-generation-prompt]\n"
    "                     [--bos TEXT] [--eos TEXT] [--now UNIX_SECONDS] < messages.json\n"
    "Renders the conversation on stdin, a JSON list [{\"role\": \"user\", \"content\": \"...\"}, ...],\n"
    "through a chat template the way transformers' apply_chat_template(tokenize=False) does,\n"
    "and writes the text to stdout as it is.\n"
    "\n"
    "  -m FILE                  a GGUF model: its tokenizer.chat_template, and its bos/eos tokens\n"
    "  --template JINJAFILE     this template instead of the model's\n"
    "  --chatml                 lean's ChatML fallback (for a model without a usable template)\n"
    "  --add-generation-prompt  end with the opening of the assistant's turn\n"
    "  --bos TEXT, --eos TEXT   the bos_token / eos_token the template sees (default: the model's)\n"
    "  --now UNIX_SECONDS       the clock of strftime_now (default: now), for reproducible dates\n"
    "\n"
    "A model without a template is rendered as ChatML (said on stderr). A template lean cannot\n"
    "render is an error naming the construct and its line and column; --chatml renders anyway.\n";

int cmd_template(int argc, char **argv) {
    const char *model_path = NULL, *template_path = NULL, *bos = NULL, *eos = NULL;
    int chatml = 0, agp = 0, have_now = 0;
    long long now = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (is_help(a)) return printf("%s", usage_template), 0;
        if (strcmp(a, "--chatml") == 0) chatml = 1;
        else if (strcmp(a, "--add-generation-prompt") == 0) agp = 1;
        else if (strcmp(a, "-m") == 0 && has_value) model_path = argv[++i];
        else if (strcmp(a, "--template") == 0 && has_value) template_path = argv[++i];
        else if (strcmp(a, "--bos") == 0 && has_value) bos = argv[++i];
        else if (strcmp(a, "--eos") == 0 && has_value) eos = argv[++i];
        else if (strcmp(a, "--now") == 0 && has_value) {
            if (parse_long(argv[++i], -62135596800ll, 253402300799ll, &now) != 0)
                return usage_error(usage_template, "--now takes seconds since 1970 (years 1..9999)");
            have_now = 1;
        } else {
            return usage_error(usage_template, "unknown or incomplete argument '%s'", a);
        }
    }
    if (chatml && template_path) return usage_error(usage_template, "--chatml and --template exclude each other");
    if (!model_path && !template_path && !chatml)
        return usage_error(usage_template, "give -m FILE, --template JINJAFILE or --chatml");

    int status = 1;
    lean_error err;
    lean_model *model = NULL;
    char *template_text = NULL, *input = NULL, *out = NULL;
    lean_chat_message *msgs = NULL;
    size_t n_msgs = 0, len = 0;
    lean_chat_params p = lean_chat_default_params();
    const char *source = NULL; /* NULL = ChatML */

    if (model_path) {
        if (lean_model_load_file(model_path, &model, &err) != LEAN_OK) {
            status = lib_error(&err);
            goto done;
        }
        lean_chat_params_from_model(model, &p);
        if (!template_path && !chatml) {
            source = lean_model_chat_template(model);
            if (!source) fprintf(stderr, "lean: %s has no chat template; rendering ChatML\n", model_path);
        }
    }
    if (template_path) {
        size_t tlen;
        if (!(template_text = read_path(template_path, &tlen))) {
            input_error("the template", template_path);
            goto done;
        }
        if (strlen(template_text) != tlen) {
            fprintf(stderr, "lean: %s holds a NUL byte\n", template_path);
            goto done;
        }
        source = template_text;
    }
    if (bos) p.bos_token = bos;
    if (eos) p.eos_token = eos;
    if (have_now) p.now_s = (int64_t)now;
    p.add_generation_prompt = agp;

    if (!(input = read_all(stdin, &len))) {
        input_error("the messages", "-");
        goto done;
    }
    if (lean_chat_parse_messages(input, len, &msgs, &n_msgs, &err) != LEAN_OK) {
        status = lib_error(&err);
        goto done;
    }
    if (lean_chat_render_ex(source, msgs, n_msgs, &p, &out, &len, &err) != LEAN_OK) {
        status = lib_error(&err);
        if (source && !template_path)
            fprintf(stderr, "lean: the model's template could not be rendered; --chatml renders ChatML instead\n");
        goto done;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) {
        fprintf(stderr, "lean: cannot write the text to stdout\n");
        goto done;
    }
    status = 0;
done:
    lean_chat_free(out);
    lean_chat_messages_free(msgs, n_msgs);
    free(input);
    free(template_text);
    lean_model_free(model);
    return status;
}
