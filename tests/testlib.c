/* testlib.c — the tally behind test.h, and the helpers tests share. */
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int t_passed, t_failed;

/* Mesa's EGL without a display (llvmpipe here) needs a platform, and the library sets no
 * variable (lean.h): every test program, as a front end, sets it before its first GPU call,
 * GPU tests and "auto" contexts alike (Mesa's failed eglInitialize without it leaks 1608 bytes
 * that LeakSanitizer reports in test_bench and test_cpu_backend). */
__attribute__((constructor)) static void test_egl_platform(void) { setenv("EGL_PLATFORM", "surfaceless", 0); }

int test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, t_passed, t_failed);
    return t_failed ? 1 : 0;
}

uint8_t *test_read_stream(FILE *f, size_t *out_len) {
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 1 >= cap) { /* room for the data and the NUL after it */
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    if (buf) buf[len] = 0;
    *out_len = len;
    return buf;
}

uint8_t *test_read_file(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = test_read_stream(f, out_len);
    fclose(f);
    return buf;
}

uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

const char *test_tmp_path(char *buf, size_t cap, const char *tag) {
    static int counter;
    const char *dir = getenv("TMPDIR");
#ifdef __wasi__
    const int pid = 0; /* no process ids in WASI; tests/wasm_run.mjs gives every run its own /tmp */
#else
    const int pid = (int)getpid();
#endif
    snprintf(buf, cap, "%s/lean_test_%d_%d_%s", dir && *dir ? dir : "/tmp", pid, counter++, tag);
    return buf;
}

void test_progress_fn(void *user, uint64_t done, uint64_t total) {
    test_progress *p = user;
    if (done > total || (p->calls && (done < p->done || total != p->total))) p->broken = 1;
    p->calls++;
    p->done = done;
    p->total = total;
}

int test_gpu_skipped(const char *name) {
    const char *env = getenv("LEAN_TEST_GPU");
    if (!env || strcmp(env, "0") != 0) return 0;
    printf("%s: SKIPPED: LEAN_TEST_GPU=0 (no GPU test ran)\n", name);
    return 1;
}
