/* file.c — getting at a file's bytes: a read-only mmap of the whole file, and two
 * lean_read_fn implementations (over memory, over a stdio stream) for gguf_read and
 * the streamed loader.
 *
 * Sections: 1. mmap (POSIX; WASI builds have none and say so), 2. read callbacks.
 * Not here: parsing (gguf.c). Declarations are in gguf.h.
 */
#include "core/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef __wasi__
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

/* ====================================================================== 1. mmap */

#ifndef __wasi__

lean_status lean_map_file(const char *path, lean_mapped_file *out, lean_error *err) {
    if (!path || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_map_file: NULL path or output");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return LEAN_FAIL(err, LEAN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    lean_status st = LEAN_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = LEAN_FAIL(err, LEAN_ERR_IO, "'%s' is not a regular file", path);
        goto done;
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size > SIZE_MAX) {
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "'%s' has %llu bytes, more than this build can map",
                       path, (unsigned long long)size);
        goto done;
    }
    void *p = NULL;
    if (size > 0) { /* mmap refuses length 0; an empty file maps to NULL */
        p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot map '%s' (%llu bytes): %s", path,
                           (unsigned long long)size, strerror(errno));
            goto done;
        }
    }
    out->data = p;
    out->size = size;
done:
    close(fd); /* the mapping outlives the descriptor */
    return st;
}

void lean_unmap_file(lean_mapped_file *f) {
    if (!f) return;
    if (f->data) munmap(f->data, (size_t)f->size);
    f->data = NULL;
    f->size = 0;
}

#else /* __wasi__: no mmap in WASI */

lean_status lean_map_file(const char *path, lean_mapped_file *out, lean_error *err) {
    (void)out;
    return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                     "cannot map '%s': this build (WASI) has no mmap; use the streamed loader "
                     "(lean_model_load_stream with lean_read_stdio)",
                     path ? path : "(null)");
}

void lean_unmap_file(lean_mapped_file *f) {
    if (!f) return;
    f->data = NULL;
    f->size = 0;
}

#endif

/* ====================================================================== 2. read callbacks */

size_t lean_read_mapped(void *user, uint64_t off, void *dst, size_t n) {
    const lean_mapped_file *m = user;
    if (!m || off >= m->size) return 0;
    uint64_t left = m->size - off;
    size_t take = left < n ? (size_t)left : n;
    memcpy(dst, (const uint8_t *)m->data + off, take);
    return take;
}

size_t lean_read_stdio(void *user, uint64_t off, void *dst, size_t n) {
    FILE *fp = user;
    off_t o = (off_t)off;
    /* off_t is signed (64-bit on Linux and WASI): refuse offsets it cannot hold */
    if (!fp || o < 0 || (uint64_t)o != off) return 0;
    if (fseeko(fp, o, SEEK_SET) != 0) return 0;
    return fread(dst, 1, n, fp);
}
