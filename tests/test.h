/* test.h — the smallest harness that serves: CHECK counts, FAIL lines name file:line,
 * and each test program ends with "<name>: N passed, N failed" (tests/run.sh sums them).
 * Tests read data relative to the repository root, which is their working directory. */
#ifndef LEAN_TEST_H
#define LEAN_TEST_H

#include <stddef.h>
#include <stdint.h>
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

/* The whole file at path in a malloc'd buffer (the caller frees it), its length in
 * *out_len, a NUL after it (so text can be read as a string); NULL when the file cannot be
 * opened. test_read_stream: the same for what is left of an open stream. */
uint8_t *test_read_file(const char *path, size_t *out_len);
uint8_t *test_read_stream(FILE *f, size_t *out_len);

/* A fresh temporary file name in $TMPDIR (else /tmp), unique in this process and across
 * processes, ending in tag ("model.gguf"); the caller unlinks the file. */
const char *test_tmp_path(char *buf, size_t cap, const char *tag);

/* A float's bit pattern and back (memcpy, so no aliasing or rounding surprises). */
uint32_t bits_of(float f);
float float_of(uint32_t u);

/* A lean_progress_fn that records what it is told (pass a test_progress as user): the calls,
 * the last done and total, and whether the contract broke (done decreasing or past total,
 * total changing). */
typedef struct test_progress {
    uint64_t calls, done, total;
    int broken;
} test_progress;
void test_progress_fn(void *user, uint64_t done, uint64_t total);

/* For the GPU tests: nonzero, after a line saying so, when LEAN_TEST_GPU=0 asks to skip them
 * (machines without a WebGPU library); otherwise a missing GPU is a failure. */
int test_gpu_skipped(const char *name);

#endif
