/* common.c — error reporting and the allocation table (see common.h). */
#include "core/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lean_status lean_fail(lean_error *err, lean_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = status;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *lean_version(void) { return LEAN_VERSION; }

const char *lean_status_str(lean_status s) {
    switch (s) {
    case LEAN_OK: return "ok";
    case LEAN_ERR_IO: return "i/o error";
    case LEAN_ERR_FORMAT: return "malformed file";
    case LEAN_ERR_UNSUPPORTED: return "unsupported";
    case LEAN_ERR_MODEL: return "invalid model";
    case LEAN_ERR_NOMEM: return "out of memory";
    case LEAN_ERR_ARG: return "invalid argument";
    case LEAN_ERR_CONTEXT_FULL: return "context full";
    case LEAN_ERR_DEVICE: return "device lost or failed";
    case LEAN_PENDING: return "pending (call again once the GPU has answered)";
    }
    return "unknown status";
}

/* ---- allocation with fault injection ---- */
static uint64_t alloc_count, alloc_fail_n, alloc_bytes;
static bool alloc_sticky;

static bool alloc_should_fail(size_t bytes) {
    alloc_count++;
    alloc_bytes += bytes;
    if (alloc_fail_n == 0) return false;
    return alloc_sticky ? alloc_count >= alloc_fail_n : alloc_count == alloc_fail_n;
}

uint64_t lean_alloc_fail_at(uint64_t n, bool sticky) {
    uint64_t counted = alloc_count;
    alloc_count = alloc_bytes = 0;
    alloc_fail_n = n;
    alloc_sticky = sticky;
    return counted;
}

uint64_t lean_alloc_bytes(void) { return alloc_bytes; }

void *lean_malloc(size_t bytes) {
    if (alloc_should_fail(bytes)) return NULL;
    return malloc(bytes ? bytes : 1);
}

void *lean_calloc(size_t n, size_t elem_bytes) {
    size_t total;
    if (__builtin_mul_overflow(n, elem_bytes, &total)) return NULL;
    if (alloc_should_fail(total)) return NULL;
    return calloc(total ? total : 1, 1);
}

void *lean_realloc(void *p, size_t bytes) {
    if (alloc_should_fail(bytes)) return NULL;
    return realloc(p, bytes ? bytes : 1);
}

void lean_free(void *p) { free(p); }

char *lean_strndup(const char *s, size_t n) {
    char *d = lean_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}
