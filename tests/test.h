/* test.h — the smallest harness that serves: CHECK counts, FAIL lines name file:line,
 * and each test program ends with "<name>: N passed, N failed" (tests/run.sh sums them).
 * Tests read data relative to the repository root, which is their working directory. */
#ifndef LEAN_TEST_H
#define LEAN_TEST_H

#include <stdio.h>

extern int t_passed, t_failed;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) {                                                                   \
            t_passed++;                                                               \
        } else {                                                                      \
            t_failed++;                                                               \
            fprintf(stderr, "%s:%d: FAIL (%s): ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* Ends main(): prints the tally and returns the exit status. */
int test_finish(const char *name);

#endif
