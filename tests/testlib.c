/* testlib.c — the tally behind test.h. */
#include "test.h"

int t_passed, t_failed;

int test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, t_passed, t_failed);
    return t_failed ? 1 : 0;
}
