/* test_cli_input.c — the `lean` command's input bounds (cli/cli.c read_all / read_path /
 * input_error, cli/cmd_chat.c read_message): prompt files, stdin, messages and templates are
 * read up to CLI_MAX_INPUT_BYTES (64 MiB) and no further.
 *
 * The files are compiled into this program (as test_bench does), so the static functions are
 * reachable. What is checked:
 *   - a file of exactly the limit is read whole; one byte more is refused with EFBIG, from a
 *     path and from stdin, and input_error's message names the file and the limit
 *   - a missing file says why (strerror), not the limit
 *   - chat's messages: a line of the limit + 1 bytes is dropped (-2) and the next message is
 *     read as usual; continued lines ('\' at the end) and CRLF are joined as before
 * lean-test: native-only (64 MiB inputs read whole; Node's wasm runtime has been seen to crash
 * growing memory much past 100 MB, see test_tokenizer.c)
 */
#include "test.h"

#include "../cli/cli.c"
#include "../cli/cmd_chat.c"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A file of n bytes: 'a's (sparse where the filesystem allows: a seek, then the tail). */
static int make_file(const char *path, size_t n, const char *tail) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const size_t t = strlen(tail);
    int bad = n > t && fseek(f, (long)(n - t), SEEK_SET) != 0;
    bad |= fwrite(tail, 1, t, f) != t;
    bad |= fclose(f) != 0;
    return bad ? -1 : 0;
}

/* input_error's line for what/path (errno as the failure left it). */
static void error_line(const char *what, const char *path, char *out, size_t cap) {
    input_error_text(out, cap, what, path);
}

static void test_read_limit(void) {
    char path[512], line[512];
    test_tmp_path(path, sizeof path, "prompt.txt");
    size_t len = 0;
    CHECK(make_file(path, CLI_MAX_INPUT_BYTES, "end\n") == 0, "cannot write %s", path);
    char *text = read_path(path, &len);
    CHECK(text && len == CLI_MAX_INPUT_BYTES && memcmp(text + len - 4, "end\n", 4) == 0,
          "a file of exactly %u bytes: %s, %zu bytes", CLI_MAX_INPUT_BYTES, text ? "read" : strerror(errno), len);
    free(text);

    CHECK(make_file(path, CLI_MAX_INPUT_BYTES + 1, "x") == 0, "cannot write %s", path);
    errno = 0;
    text = read_path(path, &len);
    CHECK(!text && errno == EFBIG, "a file of the limit + 1 bytes: %s", text ? "read" : strerror(errno));
    free(text);
    error_line("the prompt", path, line, sizeof line);
    CHECK(strstr(line, "the prompt in ") && strstr(line, path) && strstr(line, "larger than 64 MiB") &&
              strstr(line, "CLI_MAX_INPUT_BYTES"),
          "the message: %s", line);

    /* stdin: the same file as standard input */
    CHECK(freopen(path, "rb", stdin) != NULL, "freopen %s", path);
    errno = 0;
    text = read_path("-", &len);
    CHECK(!text && errno == EFBIG, "stdin of the limit + 1 bytes: %s", text ? "read" : strerror(errno));
    free(text);
    error_line("the messages", "-", line, sizeof line);
    CHECK(strstr(line, "the messages in stdin is larger than 64 MiB"), "the message: %s", line);
    remove(path);

    errno = 0;
    text = read_path(path, &len); /* now missing */
    CHECK(!text && errno == ENOENT, "a missing file: %s", strerror(errno));
    error_line("the template", path, line, sizeof line);
    CHECK(strstr(line, "cannot read the template from") && strstr(line, strerror(ENOENT)), "the message: %s", line);
}

static void test_chat_messages(void) {
    char path[512];
    test_tmp_path(path, sizeof path, "messages.txt");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs("one\r\n", f);
    fputs("two \\\nlines\\\r\nthree\n", f);
    for (size_t i = 0; i <= CLI_MAX_INPUT_BYTES; i++) putc('z', f); /* the limit + 1 */
    fputs("\nafter\n\nlast\\", f);
    CHECK(fclose(f) == 0, "writing %s", path);
    CHECK(freopen(path, "rb", stdin) != NULL, "freopen %s", path);
    static const char *const want[] = {"one", "two \nlines\nthree", NULL, "after", "", "last\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *msg = NULL;
        int got = read_message(&msg, 0);
        if (!want[i])
            CHECK(got == -2 && !msg, "message %zu: the limit + 1 bytes gave %d", i, got);
        else
            CHECK(got == 1 && msg && strcmp(msg, want[i]) == 0, "message %zu: %d [%s], want [%s]", i, got,
                  msg ? msg : "", want[i]);
        free(msg);
    }
    char *msg = NULL;
    CHECK(read_message(&msg, 0) == 0 && !msg, "the end of the input");
    remove(path);
}

int main(void) {
    test_read_limit();
    test_chat_messages();
    return test_finish("test_cli_input");
}
