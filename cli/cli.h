/* cli.h — what the `lean` command's files share: argument helpers and error printing.
 * Each command lives in cli/cmd_<name>.c and is listed once in cli/main.c. */
#ifndef LEAN_CLI_H
#define LEAN_CLI_H

#include "lean.h"

#include <stdint.h>

/* Prints "lean: <message>" and the command's usage on stderr; returns exit status 2. */
int usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library's error on stderr; returns exit status 1. */
int lib_error(const lean_error *err);
int is_help(const char *arg);
/* Parses a whole decimal integer in [lo, hi]; 0 on success. */
int parse_long(const char *s, long long lo, long long hi, long long *out);
double now_ms(void);

int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_quantize(int argc, char **argv);

#endif
