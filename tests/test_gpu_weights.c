/* test_gpu_weights.c — the GPU weight kernels (src/gpu/weight_upload.c, matmul.c, get_rows.c
 * over shaders/formats.wgsl, matmul_vec.wgsl, matmul_tiled.wgsl, get_rows.wgsl) against the
 * reference dequantizers of src/core/formats.c, for every format on ragged shapes, on whatever adapter lean_gpu_open
 * finds (in CI: Dawn over Mesa llvmpipe).
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU)
 *
 * Weights: random blocks made by the format's own quantizer, plus three rows of weird blocks
 * (all zero bytes; random quants with the largest finite f16 scales; random quants with
 * subnormal f16 scales — for F32/F16/BF16: huge and subnormal elements).
 *
 * Checks, per format and shape:
 *   get_rows    every gathered float equals the reference dequantizer's, bit for bit (each
 *               weight is one exact product chain in f32); an id out of range gives zeros.
 *   matmul      y[t][r] for n_tok in {1, 2, 7, 64, 65} against sum_c w[r][c] x[t][c] in double,
 *               w the reference's floats. The GPU's only error is f32 rounding of each product
 *               and of each addition; a term passes through at most cols of them, so
 *               |y - y_ref| <= gamma(cols) * sum_c |w x| with gamma(n) = n u / (1 - n u), u = 2^-24,
 *               plus 2 cols 2^-126 for products and sums flushed to zero (denormals): the tolerance.
 *               On the f16 path (tiled_f16.wgsl: adapters with shader-f16, f16 on) the tiled
 *               kernel's bound is f16's: each term rounded through at most 8 f16 operations
 *               (x and w to f16, up to 4 fmas in a lane, 2 adds of the lanes) then the f32
 *               additions, |y - y_ref| <= (gamma16(8) + gamma(cols)) sum_c |w x| + 2^-25
 *               sum_c (|w| + |x| + 2) (f16's subnormal steps), u16 = 2^-11; its weights stay in
 *               f16's range (no huge-scale row), as the path requires.
 *   order       the tiled kernel's sum does not depend on n_tok: the first 7 tokens of a
 *               65-token call equal a 7-token call bit for bit.
 *   bounds      x and y bound at an aligned offset; y outside the call's tokens is not written.
 *   modes       gpu_weight_upload_stacked's [gate; up] equal to the two matrices' outputs bit
 *               for bit, every format; the output modes (ADD, BIAS exact; SWIGLU; a strided
 *               column) over those outputs on three formats (test_modes says how); the
 *               normed input (decode's fused RMSNorm) equal to rmsnorm then matmul, bit for bit.
 * All of it on the F32 path (f16 off): as the matrices' sizes choose the tiled kernel's
 * shape, with every one taking the wide shape (lean_gpu_options' tile_wide), split over the columns,
 * prefetching in every format that can, and without subgroups where the adapter has them; then
 * Q8_0 and Q4_0 and their modes on the 8-bit prefill (matmul_tiled_i8.wgsl) where WGSL has
 * packed dot products, its tolerance widened by x's quantization (quant_error); then the
 * formats and modes on the f16 path where the adapter grants shader-f16 (as the sizes choose,
 * wide, and split over the columns).
 * Plus: an upload repacked in several pieces, a dispatch of more than 65535 workgroups (rows
 * split over x and y), and the errors of
 * gpu_weight_upload / gpu_matmul_create (unknown type, oversized tensor, ragged columns,
 * buffers too small). */
#include "gpu_test.h"

#include "core/formats.h"
#include "dev/quantize.h"
#include "gpu/ops.h"
#include "gpu/weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lean_gpu *G;
static bool F16; /* the f16 path's run: its tolerance, no weights beyond f16's range */
static bool I8;  /* the 8-bit prefill's run (Q8_0, Q4_0): x's quantization in the tolerance */

/* ---- data ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { /* splitmix64, high half */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static float rnd_unit(void) { return (float)rnd() / 2147483648.0f - 1.0f; } /* [-1, 1) */

/* Byte offsets of the f16 scale fields in a block (-1 ends the list). */
static const int *scale_fields(uint32_t type) {
    static const int d[] = {0, -1}, dm[] = {0, 2, -1}, q6[] = {208, -1}, q2[] = {80, 82, -1}, q3[] = {108, -1},
                     none[] = {-1};
    switch (type) {
    case LEAN_TYPE_Q8_0: case LEAN_TYPE_Q4_0: case LEAN_TYPE_Q5_0: return d;
    case LEAN_TYPE_Q4_1: case LEAN_TYPE_Q5_1: case LEAN_TYPE_Q4_K: case LEAN_TYPE_Q5_K: return dm;
    case LEAN_TYPE_Q6_K: return q6;
    case LEAN_TYPE_Q2_K: return q2;
    case LEAN_TYPE_Q3_K: return q3;
    default: return none;
    }
}

/* Row bytes of weird values: kind 1 huge, kind 2 subnormal (see the file comment). */
static void weird_row(uint32_t type, uint8_t *row, uint64_t row_bytes, uint32_t block_bytes, int kind) {
    for (uint64_t i = 0; i < row_bytes; i++) row[i] = (uint8_t)rnd();
    if (type == LEAN_TYPE_F32) {
        for (uint64_t i = 0; i < row_bytes; i += 4) {
            uint32_t v = rnd() & 0x807fffffu;
            if (kind == 1) v |= 0xf0u << 23; /* ~2^113 */
            memcpy(row + i, &v, 4);
        }
    } else if (type == LEAN_TYPE_F16 || type == LEAN_TYPE_BF16) {
        for (uint64_t i = 0; i < row_bytes; i += 2) {
            uint16_t v = type == LEAN_TYPE_F16 ? (uint16_t)(rnd() & 0x83ffu) : (uint16_t)(rnd() & 0x807fu);
            if (kind == 1) v |= type == LEAN_TYPE_F16 ? 0x7800 : 0xf0 << 7;
            memcpy(row + i, &v, 2);
        }
    } else {
        for (uint64_t b = 0; b < row_bytes; b += block_bytes) {
            for (const int *f = scale_fields(type); *f >= 0; f++) {
                uint16_t v = kind == 1 ? 0x7bff : (uint16_t)(rnd() & 0x03ffu);
                memcpy(row + b + *f, &v, 2);
            }
        }
    }
}

typedef struct matrix {
    lean_tensor t;
    uint8_t *blocks;
    float *w; /* (rows, cols): the reference dequantizer's floats */
} matrix;

/* Random blocks of type (rows, cols) made by its quantizer; rows 0..2 weird (when they exist). */
static void matrix_make(matrix *m, uint32_t type, int64_t rows, int64_t cols) {
    const lean_type_traits *tr = lean_type_traits_get(type);
    const uint64_t n = (uint64_t)(rows * cols), row_bytes = (uint64_t)cols / tr->block_elems * tr->block_bytes;
    float *src = malloc(n * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        const float scale = ldexpf(1.0f, (int)(r % 7) - 3);
        for (int64_t c = 0; c < cols; c++) src[r * cols + c] = rnd_unit() * scale;
    }
    m->blocks = malloc(row_bytes * (uint64_t)rows);
    lean_quantizer_of(type)(src, m->blocks, (int64_t)n);
    if (rows > 0) memset(m->blocks, 0, row_bytes);
    for (int k = F16 ? 2 : 1; k <= 2 && k < rows; k++) weird_row(type, m->blocks + row_bytes * k, row_bytes, tr->block_bytes, k);
    m->w = malloc(n * sizeof(float));
    tr->dequant(m->blocks, m->w, (int64_t)n);
    m->t = (lean_tensor){.name = "test.weight", .type = type, .ne = {cols, rows, 1, 1},
                         .n_bytes = row_bytes * (uint64_t)rows, .data = m->blocks};
    free(src);
}

static void matrix_free(matrix *m) {
    free(m->blocks);
    free(m->w);
}

/* ---- GPU helpers ---- */

static lean_gpu_buf *buf_new(uint64_t bytes, unsigned usage) {
    lean_gpu_buf *b = NULL;
    lean_error err;
    if (lean_gpu_buf_create(G, bytes, usage, "test", &b, &err)) fprintf(stderr, "buf_create: %s\n", err.msg);
    return b;
}

/* Writes n_tok to the step uniform, records fn(arg, n_tok), submits and waits. */
static bool run_step(lean_gpu_buf *step, void (*record)(lean_gpu_cmd *, const void *, int32_t), const void *arg,
                     int32_t n_tok) {
    const uint32_t s[4] = {(uint32_t)n_tok, 0, 0, 0};
    lean_error err;
    lean_gpu_cmd *c = NULL;
    if (lean_gpu_buf_write(G, step, 0, s, sizeof s, &err) || lean_gpu_begin(G, &c, &err)) goto fail;
    record(c, arg, n_tok);
    if (lean_gpu_submit(c, &err) || lean_gpu_finish(G, &err)) goto fail;
    return true;
fail:
    fprintf(stderr, "run_step: %s\n", err.msg);
    return false;
}
static void record_matmul(lean_gpu_cmd *c, const void *m, int32_t n) { gpu_matmul_record(c, m, n); }
static void record_get_rows(lean_gpu_cmd *c, const void *gr, int32_t n) { gpu_get_rows_record(c, gr, n); }
static void record_op(lean_gpu_cmd *c, const void *op, int32_t n) { gpu_op_record(c, op, n); }

/* ---- checks ---- */

static void check_get_rows(const matrix *m, const gpu_weight *gw, lean_gpu_buf *step) {
    enum { N = 7 };
    const int64_t rows = m->t.ne[1], cols = m->t.ne[0];
    uint32_t ids[N] = {0, (uint32_t)(rows - 1), (uint32_t)(1 % rows), (uint32_t)(2 % rows), (uint32_t)rows,
                       rnd() % (uint32_t)rows, rnd() % (uint32_t)rows}; /* ids[4] is out of range */
    lean_gpu_buf *idb = buf_new(sizeof ids, LEAN_GPU_STORAGE), *out = buf_new(N * cols * 4, LEAN_GPU_STORAGE);
    float *got = malloc(N * cols * sizeof(float));
    gpu_get_rows *gr = NULL;
    lean_error err;
    lean_status st = lean_gpu_buf_write(G, idb, 0, ids, sizeof ids, &err);
    if (!st) st = gpu_get_rows_create(G, gw, N, step, idb, out, &gr, &err);
    CHECK(st == LEAN_OK, "get_rows %s: %s", lean_type_traits_get(m->t.type)->name, err.msg);
    if (st == LEAN_OK && run_step(step, record_get_rows, gr, N) && !lean_gpu_buf_read(G, out, 0, got, N * cols * 4, &err)) {
        int64_t bad = 0, first = -1;
        for (int t = 0; t < N; t++) {
            for (int64_t c = 0; c < cols; c++) {
                const float want = ids[t] < rows ? m->w[ids[t] * cols + c] : 0.0f;
                if (bits_of(got[t * cols + c]) != bits_of(want) && bad++ == 0) first = t * cols + c;
            }
        }
        CHECK(bad == 0, "get_rows %s (%lld x %lld): %lld floats differ, first [%lld] %.9g (0x%08x) want 0x%08x",
              lean_type_traits_get(m->t.type)->name, (long long)rows, (long long)cols, (long long)bad,
              (long long)first, bad ? got[first] : 0.0, bad ? bits_of(got[first]) : 0,
              bad ? bits_of(ids[first / cols] < rows ? m->w[ids[first / cols] * cols + first % cols] : 0.0f) : 0);
    } else {
        CHECK(false, "get_rows %s did not run", lean_type_traits_get(m->t.type)->name);
    }
    gpu_get_rows_free(gr);
    lean_gpu_buf_free(idb);
    lean_gpu_buf_free(out);
    free(got);
}

/* The 8-bit prefill's bound on |sum_c w[c] x[c] - sum_c w[c] x~[c]| for one row and token,
 * x~ the quantized x (matmul_tiled_i8.wgsl): each x~[c] is within d / 2 of x[c], d = max |x|
 * over c's 32-column block / 127 (plus 1e-4 d for the shader's divisions, which WGSL allows
 * 2.5 ulp); the float steps after the exact integer sums round like the F32 path's sums. */
static double quant_error(const float *w, const float *x, int64_t cols) {
    double bound = 0;
    for (int64_t b = 0; b < cols; b += 32) {
        double amax = 0, wsum = 0;
        for (int64_t c = b; c < b + 32 && c < cols; c++) amax = fmax(amax, fabs(x[c])), wsum += fabs(w[c]);
        bound += wsum * amax / 127 * 0.5001;
    }
    return bound;
}

/* Largest |y - y_ref| / tolerance over the n_tok tokens (> 1 fails); the f16 path's bound
 * where it ran (F16 and more than one token: the tiled kernel), and the 8-bit
 * prefill's where it ran (I8, more than one token). */
static double matmul_error(const matrix *m, const float *x, const float *y, int32_t n_tok) {
    const int64_t rows = m->t.ne[1], cols = m->t.ne[0];
    const double u = ldexp(1.0, -24), gamma = cols * u / (1 - cols * u), u16 = ldexp(1.0, -11);
    const double gamma16 = F16 && n_tok > 1 ? 8 * u16 / (1 - 8 * u16) : 0;
    double worst = 0;
    for (int32_t t = 0; t < n_tok; t++) {
        for (int64_t r = 0; r < rows; r++) {
            double sum = 0, abs_sum = 0, sub16 = 0;
            for (int64_t c = 0; c < cols; c++) {
                const double p = (double)m->w[r * cols + c] * x[t * cols + c];
                sum += p;
                abs_sum += fabs(p);
                sub16 += fabs(m->w[r * cols + c]) + fabs(x[t * cols + c]) + 2;
            }
            double tol = (gamma + gamma16) * abs_sum + 2 * cols * ldexp(1.0, -126) +
                         (gamma16 ? ldexp(sub16, -25) : 0);
            if (I8 && n_tok > 1) tol += quant_error(m->w + r * cols, x + t * cols, cols);
            const double e = fabs((double)y[t * rows + r] - sum) / tol;
            if (!(e <= worst)) worst = e; /* NaN sticks */
        }
    }
    return worst;
}

/* y outside [y_off, y_off + n_tok * rows * 4) still holds the 0xff bytes it was filled with */
static bool y_untouched(lean_gpu_buf *yb, uint64_t y_off, uint64_t n_floats, uint64_t written) {
    const uint64_t n = y_off / 4 + n_floats;
    uint32_t *all = malloc(n * 4);
    lean_error err;
    bool ok = !lean_gpu_buf_read(G, yb, 0, all, n * 4, &err);
    for (uint64_t i = 0; ok && i < n; i++) ok = (i >= y_off / 4 && i < y_off / 4 + written) || all[i] == 0xffffffffu;
    free(all);
    return ok;
}

/* A part buffer for a matmul of w in mode (gpu_mm_out), NULL where it takes none; filled with
 * NaNs, so a partial sum the combine reads but the tiled kernel did not write shows. */
static lean_gpu_buf *part_new(const gpu_weight *w, gpu_mm_mode mode, int32_t max_tok) {
    const uint64_t n = gpu_matmul_part_floats(G, w->rows, w->cols, mode, max_tok);
    if (!n) return NULL;
    lean_gpu_buf *b = buf_new(n * 4, LEAN_GPU_STORAGE);
    uint8_t *nan = malloc(n * 4);
    memset(nan, 0xff, n * 4);
    lean_error err;
    CHECK(b && nan && lean_gpu_buf_write(G, b, 0, nan, n * 4, &err) == LEAN_OK, "part buffer of %llu floats",
          (unsigned long long)n);
    free(nan);
    return b;
}

/* Every n_toks[i] in turn (ascending) on one gpu_matmul whose x and y sit at an aligned offset
 * in their buffers. */
static void check_matmul(const matrix *m, const gpu_weight *gw, lean_gpu_buf *step, const int32_t *n_toks, int n_n) {
    const int32_t max_tok = 65;
    const int64_t rows = m->t.ne[1], cols = m->t.ne[0];
    const uint64_t off = lean_gpu_get_info(G)->min_storage_offset_align, nx = max_tok * cols, ny = max_tok * rows;
    const char *name = lean_type_traits_get(m->t.type)->name;
    float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float)), *y7 = malloc(7 * rows * sizeof(float));
    for (uint64_t i = 0; i < nx; i++) x[i] = rnd_unit();
    uint8_t *fill = malloc(off + ny * 4);
    memset(fill, 0xff, off + ny * 4);
    lean_gpu_buf *xb = buf_new(off + nx * 4, LEAN_GPU_STORAGE), *yb = buf_new(off + ny * 4, LEAN_GPU_STORAGE);
    gpu_matmul *mm = NULL;
    lean_error err;
    lean_status st = lean_gpu_buf_write(G, xb, off, x, nx * 4, &err);
    if (!st) st = lean_gpu_buf_write(G, yb, 0, fill, off + ny * 4, &err);
    lean_gpu_buf *part = part_new(gw, GPU_MM_SET, max_tok);
    if (!st)
        st = gpu_matmul_create(G, gw, max_tok, step, &(gpu_mm_in){.x = xb, .offset = off},
                               &(gpu_mm_out){.y = yb, .offset = off, .part = part}, &mm, &err);
    CHECK(st == LEAN_OK, "matmul_create %s: %s", name, err.msg);
    const bool forced = lean_gpu_options_of(G)->tile_ksplit != 0;
    CHECK(!forced || (part != NULL) == (cols > 128), "matmul %s (%lld columns): split %d", name, (long long)cols,
          part != NULL);
    for (int i = 0; st == LEAN_OK && i < n_n; i++) {
        const int32_t n = n_toks[i];
        const uint64_t before = lean_gpu_dispatch_count(G);
        const bool ran = run_step(step, record_matmul, mm, n) && !lean_gpu_buf_read(G, yb, off, y, n * rows * 4, &err);
        CHECK(lean_gpu_dispatch_count(G) - before == (n > 1 && part ? 2u : 1u), "matmul %s n_tok %d: %llu dispatches",
              name, n, (unsigned long long)(lean_gpu_dispatch_count(G) - before));
        const double e = ran ? matmul_error(m, x, y, n) : INFINITY;
        CHECK(e <= 1.0, "matmul %s (%lld x %lld) n_tok %d: error %.3g x the tolerance", name, (long long)rows,
              (long long)cols, n, e);
        if (n == 7 && ran) memcpy(y7, y, 7 * rows * sizeof(float));
        if (n == 65 && ran) CHECK(memcmp(y, y7, 7 * rows * sizeof(float)) == 0,
                                  "matmul %s (%lld x %lld): tokens 0..6 of 65 differ from a 7-token call", name,
                                  (long long)rows, (long long)cols);
        if (n <= 7) CHECK(y_untouched(yb, off, ny, (uint64_t)n * rows), "matmul %s n_tok %d wrote outside its tokens", name, n);
    }
    gpu_matmul_free(mm);
    lean_gpu_buf_free(xb);
    lean_gpu_buf_free(yb);
    lean_gpu_buf_free(part);
    free(x);
    free(y);
    free(y7);
    free(fill);
}

static void test_format(uint32_t type, lean_gpu_buf *step) {
    const lean_type_traits *tr = lean_type_traits_get(type);
    const int64_t B = tr->block_elems;
    /* one block per row, 5 rows (ragged for 4 rows per workgroup); then 67 rows (a 64-row tile
     * and 3) of several blocks, not a whole number of 128-column steps; then 7 rows long enough
     * for matmul_vec's lanes to take 2 or 3 chunks of each (its 2-output workgroups) */
    const int64_t shapes[][2] = {{5, B}, {67, B == 1 ? 131 : B == 32 ? 160 : 768},
                                 {7, B == 1 ? 1030 : B == 32 ? 1056 : 2304}};
    static const int32_t n_small[] = {1, 2, 7, 65}, n_big[] = {1, 2, 7, 64, 65};
    for (int s = 0; s < 3; s++) {
        matrix m;
        matrix_make(&m, type, shapes[s][0], shapes[s][1]);
        gpu_weight gw = {0};
        lean_error err;
        const lean_status st = gpu_weight_upload(G, &m.t, &gw, &err);
        CHECK(st == LEAN_OK, "upload %s: %s", tr->name, err.msg);
        if (st == LEAN_OK) {
            check_get_rows(&m, &gw, step);
            if (s == 0) check_matmul(&m, &gw, step, n_small, 4);
            else check_matmul(&m, &gw, step, n_big, 5);
        }
        gpu_weight_free(&gw);
        matrix_free(&m);
    }
}

/* 32769 one-block rows of Q8_0: the upload repacks 32768 blocks at a time, so the last row's
 * block and scale come from a second, odd-sized piece. */
static void test_repack_pieces(lean_gpu_buf *step) {
    static const int32_t n_tok[] = {1, 2};
    matrix m;
    matrix_make(&m, LEAN_TYPE_Q8_0, 32769, 32);
    gpu_weight gw = {0};
    lean_error err;
    const lean_status st = gpu_weight_upload(G, &m.t, &gw, &err);
    CHECK(st == LEAN_OK, "upload in pieces: %s", err.msg);
    if (st == LEAN_OK) {
        check_get_rows(&m, &gw, step);
        check_matmul(&m, &gw, step, n_tok, 2);
    }
    gpu_weight_free(&gw);
    matrix_free(&m);
}

/* 524281 rows: 65536 workgroups of matmul_vec's 8 rows (VEC_RPW_VOCAB, matmul.c: this
 * many outputs are a vocabulary's), split over x and y. */
static void test_many_groups(lean_gpu_buf *step) {
    matrix m;
    matrix_make(&m, LEAN_TYPE_F32, 8 * 65535 + 1, 1);
    const int64_t rows = m.t.ne[1];
    gpu_weight gw = {0};
    lean_gpu_buf *xb = buf_new(4, LEAN_GPU_STORAGE), *yb = buf_new(rows * 4, LEAN_GPU_STORAGE);
    const float x = 0.75f;
    float *y = malloc(rows * sizeof(float));
    gpu_matmul *mm = NULL;
    lean_error err;
    lean_status st = gpu_weight_upload(G, &m.t, &gw, &err);
    if (!st) st = lean_gpu_buf_write(G, xb, 0, &x, 4, &err);
    if (!st) st = gpu_matmul_create(G, &gw, 1, NULL, &(gpu_mm_in){.x = xb}, &(gpu_mm_out){.y = yb}, &mm, &err);
    CHECK(st == LEAN_OK, "many groups: %s", err.msg);
    const bool ran = st == LEAN_OK && run_step(step, record_matmul, mm, 1) && !lean_gpu_buf_read(G, yb, 0, y, rows * 4, &err);
    const double e = ran ? matmul_error(&m, &x, y, 1) : INFINITY;
    CHECK(e <= 1.0, "many groups (%lld rows): error %.3g x the tolerance", (long long)rows, e);
    gpu_matmul_free(mm);
    gpu_weight_free(&gw);
    lean_gpu_buf_free(xb);
    lean_gpu_buf_free(yb);
    free(y);
    matrix_free(&m);
}

/* ---- output modes and stacking ---- */

/* Runs w x on the n_tok tokens of in through a matmul writing as out says (max_tok 65); reads
 * y's first n floats into got. */
static bool run_out(const gpu_weight *w, lean_gpu_buf *step, const gpu_mm_in *in, const gpu_mm_out *out, int32_t n_tok,
                    float *got, uint64_t n) {
    gpu_matmul *mm = NULL;
    lean_error err;
    gpu_mm_out o = *out;
    o.part = part_new(w, out->mode, 65);
    lean_status st = gpu_matmul_create(G, w, 65, step, in, &o, &mm, &err);
    CHECK(st == LEAN_OK, "matmul mode %d: %s", (int)out->mode, err.msg);
    const bool ok = st == LEAN_OK && run_step(step, record_matmul, mm, n_tok) &&
                    !lean_gpu_buf_read(G, out->y, 0, got, n * 4, &err);
    gpu_matmul_free(mm);
    lean_gpu_buf_free(o.part);
    return ok;
}

static bool same_or_near(float got, float want, float rel) {
    return bits_of(got) == bits_of(want) || fabsf(got - want) <= 1e-6f + rel * fabsf(want);
}

/* [gate; up] of `type` (67 rows each, ragged for every tile) stacked into one weight: plain
 * outputs equal the two matrices' own bit for bit; then each mode against its expression over
 * those outputs — ADD (y0 + a) and BIAS (a + b) exact, SWIGLU within SwiGLU's 1e-5 (exp is the
 * device's) — and a strided output at a column leaving the rest of y untouched. */
static void test_modes(uint32_t type, lean_gpu_buf *step, bool every_mode) {
    enum { R = 67, T = 65, STRIDE = R + 5, COL = 3, NY = T * 2 * R }; /* NY: y's floats, >= T * STRIDE */
    const lean_type_traits *tr = lean_type_traits_get(type);
    const int64_t cols = tr->block_elems == 256 ? 512 : 96;
    matrix gate, up;
    matrix_make(&gate, type, R, cols);
    matrix_make(&up, type, R, cols);
    const lean_tensor *ts[2] = {&gate.t, &up.t};
    gpu_weight wg = {0}, wu = {0}, ws = {0};
    lean_error err;
    lean_status st = gpu_weight_upload(G, &gate.t, &wg, &err);
    if (!st) st = gpu_weight_upload(G, &up.t, &wu, &err);
    if (!st) st = gpu_weight_upload_stacked(G, ts, 2, "gate+up", &ws, &err);
    CHECK(st == LEAN_OK && ws.rows == 2 * R, "stacked %s: %s", tr->name, err.msg);
    float *x = malloc(sizeof(float) * T * cols), *y0 = malloc(sizeof(float) * NY), *b = malloc(sizeof(float) * 2 * R);
    float *a = malloc(sizeof(float) * T * 2 * R), *ag = malloc(sizeof(float) * T * R), *au = malloc(sizeof(float) * T * R),
          *got = malloc(sizeof(float) * NY);
    for (int64_t i = 0; i < T * cols; i++) x[i] = rnd_unit();
    for (int64_t i = 0; i < NY; i++) y0[i] = rnd_unit();
    for (int64_t i = 0; i < 2 * R; i++) b[i] = rnd_unit();
    lean_gpu_buf *xb = buf_new(T * cols * 4, LEAN_GPU_STORAGE), *yb = buf_new(NY * 4, LEAN_GPU_STORAGE),
                 *bb = buf_new(2 * R * 4, LEAN_GPU_STORAGE);
    if (!st) st = lean_gpu_buf_write(G, xb, 0, x, T * cols * 4, &err);
    if (!st) st = lean_gpu_buf_write(G, bb, 0, b, 2 * R * 4, &err);
    static const int32_t n_toks[] = {1, 7, 65};
    const gpu_mm_in in = {.x = xb};
    for (int k = 0; st == LEAN_OK && k < 3; k++) {
        const int32_t n = n_toks[k];
        const int64_t na = (int64_t)n * 2 * R;
        if (!run_out(&ws, step, &in, &(gpu_mm_out){.y = yb}, n, a, na) ||
            !run_out(&wg, step, &in, &(gpu_mm_out){.y = yb}, n, ag, (uint64_t)n * R) ||
            !run_out(&wu, step, &in, &(gpu_mm_out){.y = yb}, n, au, (uint64_t)n * R))
            break;
        int64_t bad = 0;
        for (int64_t i = 0; i < na; i++) {
            const int64_t t = i / (2 * R), r = i % (2 * R);
            bad += bits_of(a[i]) != bits_of(r < R ? ag[t * R + r] : au[t * R + r - R]);
        }
        CHECK(bad == 0, "stacked %s n_tok %d: %lld outputs differ from the matrices' own", tr->name, n, (long long)bad);
        if (!every_mode) continue;
        bad = 0;
        if (lean_gpu_buf_write(G, yb, 0, y0, (uint64_t)na * 4, &err) ||
            !run_out(&ws, step, &in, &(gpu_mm_out){.y = yb, .mode = GPU_MM_ADD}, n, got, na))
            break;
        for (int64_t i = 0; i < na; i++) bad += bits_of(got[i]) != bits_of(y0[i] + a[i]);
        CHECK(bad == 0, "%s n_tok %d ADD: %lld outputs are not y + W x", tr->name, n, (long long)bad);
        if (!run_out(&ws, step, &in, &(gpu_mm_out){.y = yb, .mode = GPU_MM_BIAS, .bias = bb}, n, got, na)) break;
        for (int64_t i = 0; i < na; i++) bad += bits_of(got[i]) != bits_of(a[i] + b[i % (2 * R)]);
        CHECK(bad == 0, "%s n_tok %d BIAS: %lld outputs are not W x + b", tr->name, n, (long long)bad);
        if (!run_out(&ws, step, &in, &(gpu_mm_out){.y = yb, .mode = GPU_MM_SWIGLU}, n, got, (uint64_t)n * R)) break;
        for (int64_t i = 0; i < (int64_t)n * R; i++) {
            const float g = ag[i], u = au[i];
            bad += !same_or_near(got[i], g / (1.0f + expf(-g)) * u, 1e-5f);
        }
        CHECK(bad == 0, "%s n_tok %d SWIGLU: %lld outputs are not silu(gate) * up", tr->name, n, (long long)bad);
        memset(y0, 0xff, sizeof(float) * T * STRIDE);
        if (lean_gpu_buf_write(G, yb, 0, y0, T * STRIDE * 4, &err) ||
            !run_out(&wg, step, &in, &(gpu_mm_out){.y = yb, .col = COL, .stride = STRIDE}, n, got, T * STRIDE))
            break;
        for (int64_t i = 0; i < T * STRIDE; i++) {
            const int64_t t = i / STRIDE, o = i % STRIDE - COL;
            const bool mine = t < n && o >= 0 && o < R;
            bad += bits_of(got[i]) != (mine ? bits_of(ag[t * R + o]) : 0xffffffffu);
        }
        CHECK(bad == 0, "%s n_tok %d: %lld floats wrong with stride %d, column %d", tr->name, n, (long long)bad, STRIDE, COL);
        for (int64_t i = 0; i < NY; i++) y0[i] = rnd_unit();
    }
    /* types that differ do not stack */
    matrix other;
    matrix_make(&other, type == LEAN_TYPE_F32 ? LEAN_TYPE_F16 : LEAN_TYPE_F32, R, cols);
    const lean_tensor *mixed[2] = {&gate.t, &other.t};
    gpu_weight none = {0};
    CHECK(gpu_weight_upload_stacked(G, mixed, 2, "mixed", &none, &err) == LEAN_ERR_UNSUPPORTED && !none.buf,
          "stacking two formats: %s", err.msg);
    matrix_free(&other);
    gpu_weight_free(&wg), gpu_weight_free(&wu), gpu_weight_free(&ws);
    lean_gpu_buf_free(xb), lean_gpu_buf_free(yb), lean_gpu_buf_free(bb);
    free(x), free(y0), free(b), free(a), free(ag), free(au), free(got);
    matrix_free(&gate), matrix_free(&up);
}

/* Whether a mixed stack's part of type sums as its own matrix bit for bit at n_tok: a Q8_0
 * part's chunks are in the nibble order (so its sums are the reference's to rounding), except
 * on the 8-bit prefill, which puts its quants back in column order and pins every block's
 * multiply-adds with fma (formats.wgsl's forms), so there every part is. */
static bool part_own_bits(uint32_t type, int32_t n_tok) {
    return (I8 && n_tok > 1) || type != LEAN_TYPE_Q8_0;
}

/* A stack of 32-weight block formats (a q4_k_m file's Q5_0 Wq, Wk and Q8_0 Wv): the matmul
 * against the reference floats of all rows (check_matmul: decode, prefill, its order) and
 * every row of a part that part_own_bits names equal bit for bit to that matrix's own matmul. */
static void test_mixed_stack(const uint32_t *types, const int64_t *rows, int n, lean_gpu_buf *step) {
    enum { COLS = 160 }; /* 5 blocks: 2 steps of 128, the last one short */
    matrix m[4], all;
    const lean_tensor *ts[4];
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        matrix_make(&m[i], types[i], rows[i], COLS);
        ts[i] = &m[i].t;
        total += rows[i];
    }
    all.w = malloc(sizeof(float) * (size_t)(total * COLS));
    all.t = (lean_tensor){.name = "mixed", .type = types[0], .ne = {COLS, total, 1, 1}};
    for (int i = 0, at = 0; i < n; at += (int)(rows[i] * COLS), i++) memcpy(all.w + at, m[i].w, sizeof(float) * (size_t)(rows[i] * COLS));
    gpu_weight ws = {0};
    lean_error err;
    CHECK(gpu_weight_stackable(ts, n), "stackable %s ..", lean_type_traits_get(types[0])->name);
    const lean_status st = gpu_weight_upload_stacked(G, ts, n, "mixed", &ws, &err);
    CHECK(st == LEAN_OK && ws.rows == total && ws.n_parts >= 2, "mixed stack: %s", err.msg);
    if (st == LEAN_OK) {
        static const int32_t n_toks[] = {1, 2, 7, 64, 65};
        check_matmul(&all, &ws, step, n_toks, 5);
        gpu_get_rows *gr = NULL;
        lean_gpu_buf *ids = buf_new(16, LEAN_GPU_STORAGE), *out = buf_new(4 * COLS * 4, LEAN_GPU_STORAGE);
        CHECK(gpu_get_rows_create(G, &ws, 4, step, ids, out, &gr, &err) == LEAN_ERR_UNSUPPORTED && !gr,
              "get_rows of a mixed stack: %s", err.msg);
        lean_gpu_buf_free(ids), lean_gpu_buf_free(out);
        /* the rows of each part part_own_bits names against its own matrix, n_tok 1 and 65 */
        float *x = malloc(sizeof(float) * 65 * COLS), *ya = malloc(sizeof(float) * 65 * (size_t)total),
              *yp = malloc(sizeof(float) * 65 * (size_t)total);
        for (int i = 0; i < 65 * COLS; i++) x[i] = rnd_unit();
        lean_gpu_buf *xb = buf_new(65 * COLS * 4, LEAN_GPU_STORAGE), *yb = buf_new(65 * (uint64_t)total * 4, LEAN_GPU_STORAGE);
        bool ok = lean_gpu_buf_write(G, xb, 0, x, 65 * COLS * 4, &err) == LEAN_OK;
        for (int nt = 1; ok && nt <= 65; nt += 64) {
            ok = run_out(&ws, step, &(gpu_mm_in){.x = xb}, &(gpu_mm_out){.y = yb}, nt, ya, (uint64_t)nt * total);
            for (int i = 0, r0 = 0; ok && i < n; r0 += (int)rows[i], i++) {
                gpu_weight wi = {0};
                if (!part_own_bits(types[i], nt) || gpu_weight_upload(G, ts[i], &wi, &err) != LEAN_OK) continue;
                ok = run_out(&wi, step, &(gpu_mm_in){.x = xb}, &(gpu_mm_out){.y = yb}, nt, yp, (uint64_t)nt * rows[i]);
                int64_t bad = 0;
                for (int t = 0; ok && t < nt; t++)
                    for (int64_t r = 0; r < rows[i]; r++) bad += bits_of(ya[t * total + r0 + r]) != bits_of(yp[t * rows[i] + r]);
                CHECK(bad == 0, "mixed stack part %d (%s) n_tok %d: %lld outputs differ from its own matmul", i,
                      lean_type_traits_get(types[i])->name, nt, (long long)bad);
                gpu_weight_free(&wi);
            }
        }
        CHECK(ok, "mixed stack: the part matmuls ran");
        lean_gpu_buf_free(xb), lean_gpu_buf_free(yb);
        free(x), free(ya), free(yp);
    }
    gpu_weight_free(&ws);
    free(all.w);
    for (int i = 0; i < n; i++) matrix_free(&m[i]);
}

/* What does not stack: a format outside the 32-weight blocks beside another, more runs of one
 * format than GPU_WEIGHT_MAX_PARTS, columns that differ. */
static void test_not_stackable(void) {
    matrix a, b, c;
    matrix_make(&a, LEAN_TYPE_Q4_K, 2, 256);
    matrix_make(&b, LEAN_TYPE_Q8_0, 2, 256);
    matrix_make(&c, LEAN_TYPE_Q8_0, 2, 128);
    const lean_tensor *kq[] = {&b.t, &a.t}, *runs[] = {&b.t, &b.t, &b.t, &b.t, &b.t}, *cols[] = {&b.t, &c.t};
    CHECK(!gpu_weight_stackable(kq, 2), "Q8_0 on Q4_K stacks");
    CHECK(gpu_weight_stackable(runs, 5), "five Q8_0 do not stack");
    CHECK(!gpu_weight_stackable(cols, 2), "256 and 128 columns stack");
    matrix q4, q5;
    matrix_make(&q4, LEAN_TYPE_Q4_0, 2, 256);
    matrix_make(&q5, LEAN_TYPE_Q5_0, 2, 256);
    const lean_tensor *five[] = {&b.t, &q4.t, &q5.t, &q4.t, &q5.t};
    CHECK(gpu_weight_stackable(five, 4) && !gpu_weight_stackable(five, 5), "4 runs stack, 5 do not");
    gpu_weight w = {0};
    lean_error err;
    CHECK(gpu_weight_upload_stacked(G, kq, 2, "kq", &w, &err) == LEAN_ERR_UNSUPPORTED && !w.buf && strstr(err.msg, "kq"),
          "Q8_0 on Q4_K: %s", err.msg);
    matrix_free(&a), matrix_free(&b), matrix_free(&c), matrix_free(&q4), matrix_free(&q5);
}

/* The normed input (gpu_mm_in.norm: decode's matmuls RMS-norm their input themselves) equals
 * the unfused path bit for bit — rmsnorm.wgsl's op, then the plain matmul — alone and with a
 * bias bound before the norm weight; cols not a multiple of 4 pad the norm weight. */
static void test_normed_input(uint32_t type, int64_t cols, lean_gpu_buf *step) {
    enum { R = 67 };
    matrix m;
    matrix_make(&m, type, R, cols);
    const uint64_t norm_bytes = ((uint64_t)cols * 4 + 15) & ~(uint64_t)15;
    float *x = malloc(sizeof(float) * cols), *w = calloc(norm_bytes / 4, sizeof(float)), *b = malloc(sizeof(float) * R);
    float *plain = malloc(sizeof(float) * R), *got = malloc(sizeof(float) * R);
    for (int64_t i = 0; i < cols; i++) x[i] = 3.0f * rnd_unit(), w[i] = rnd_unit();
    for (int64_t i = 0; i < R; i++) b[i] = rnd_unit();
    gpu_weight gw = {0};
    lean_gpu_buf *xb = buf_new(cols * 4, LEAN_GPU_STORAGE), *xn = buf_new(65 * cols * 4, LEAN_GPU_STORAGE), /* max_tok 65 */
                 *wb = buf_new(norm_bytes, LEAN_GPU_STORAGE), *bb = buf_new(R * 4, LEAN_GPU_STORAGE),
                 *yb = buf_new(65 * R * 4, LEAN_GPU_STORAGE); /* max_tok 65 */
    gpu_op norm = {0};
    lean_error err;
    lean_status st = gpu_weight_upload(G, &m.t, &gw, &err);
    if (!st) st = lean_gpu_buf_write(G, xb, 0, x, cols * 4, &err);
    if (!st) st = lean_gpu_buf_write(G, wb, 0, w, norm_bytes, &err);
    if (!st) st = lean_gpu_buf_write(G, bb, 0, b, R * 4, &err);
    if (!st) st = gpu_rmsnorm_create(G, step, xb, wb, xn, (int32_t)cols, 1e-5f, false, &norm, &err);
    CHECK(st == LEAN_OK, "normed input %s: %s", lean_type_traits_get(type)->name, err.msg);
    const gpu_mm_in in = {.x = xn, .raw = xb, .norm = wb, .eps = 1e-5f};
    if (st == LEAN_OK && run_step(step, record_op, &norm, 1) &&
        run_out(&gw, step, &(gpu_mm_in){.x = xn}, &(gpu_mm_out){.y = yb}, 1, plain, R) &&
        run_out(&gw, step, &in, &(gpu_mm_out){.y = yb}, 1, got, R)) {
        CHECK(memcmp(plain, got, R * 4) == 0, "normed input %s x %lld: differs from rmsnorm then matmul",
              lean_type_traits_get(type)->name, (long long)cols);
        if (run_out(&gw, step, &in, &(gpu_mm_out){.y = yb, .mode = GPU_MM_BIAS, .bias = bb}, 1, got, R)) {
            int bad = 0;
            for (int i = 0; i < R; i++) bad += bits_of(got[i]) != bits_of(plain[i] + b[i]);
            CHECK(bad == 0, "normed input %s with a bias: %d outputs differ", lean_type_traits_get(type)->name, bad);
        }
    }
    gpu_op_free(&norm);
    gpu_weight_free(&gw);
    lean_gpu_buf_free(xb), lean_gpu_buf_free(xn), lean_gpu_buf_free(wb), lean_gpu_buf_free(bb), lean_gpu_buf_free(yb);
    free(x), free(w), free(b), free(plain), free(got);
    matrix_free(&m);
}

static void test_errors(lean_gpu_buf *step) {
    static uint8_t dummy[64];
    gpu_weight gw = {0};
    lean_error err;
    lean_tensor t = {.name = "blk.0.attn_q.weight", .type = 16 /* IQ2_XXS */, .ne = {256, 2, 1, 1}, .n_bytes = 132,
                     .data = dummy};
    CHECK(gpu_weight_upload(G, &t, &gw, &err) == LEAN_ERR_UNSUPPORTED && strstr(err.msg, t.name) &&
              strstr(err.msg, "16"),
          "unknown type: %s", err.msg);
    /* rows of Q8_0 past the binding limit: refused before the data is read, naming the limit
     * in force (the device's, capped by maxBufferSize and the kernels' 2^32 - 4) */
    const uint64_t limit = gpu_binding_max_bytes(G);
    t = (lean_tensor){.name = "token_embd.weight", .type = LEAN_TYPE_Q8_0, .data = dummy,
                      .ne = {4096, (int64_t)(limit / 4096) + 1, 1, 1}}; /* 4096 bytes of quants a row */
    t.n_bytes = (uint64_t)t.ne[1] * (4096 / 32 * 34);
    char lim[32];
    snprintf(lim, sizeof lim, "%llu", (unsigned long long)limit);
    CHECK(gpu_weight_upload(G, &t, &gw, &err) == LEAN_ERR_UNSUPPORTED && strstr(err.msg, t.name) && strstr(err.msg, lim),
          "oversized: %s", err.msg);
    t = (lean_tensor){.name = "x", .type = LEAN_TYPE_Q4_0, .ne = {48, 1, 1, 1}, .n_bytes = 27, .data = dummy};
    CHECK(gpu_weight_upload(G, &t, &gw, &err) == LEAN_ERR_ARG, "ragged columns: %s", err.msg);
    /* a y buffer too small for max_tok tokens */
    matrix m;
    matrix_make(&m, LEAN_TYPE_Q4_0, 4, 32);
    lean_gpu_buf *xb = buf_new(4 * 32 * 4, LEAN_GPU_STORAGE), *yb = buf_new(4 * 4 * 4 - 16, LEAN_GPU_STORAGE);
    gpu_matmul *mm = NULL;
    if (gpu_weight_upload(G, &m.t, &gw, &err) == LEAN_OK) {
        CHECK(gpu_matmul_create(G, &gw, 4, step, &(gpu_mm_in){.x = xb}, &(gpu_mm_out){.y = yb}, &mm, &err) == LEAN_ERR_ARG && mm == NULL,
              "small y: %s", err.msg);
        if (lean_gpu_get_info(G)->min_storage_offset_align > 4)
            CHECK(gpu_matmul_create(G, &gw, 1, step, &(gpu_mm_in){.x = xb, .offset = 4}, &(gpu_mm_out){.y = yb}, &mm, &err) == LEAN_ERR_ARG && mm == NULL,
                  "misaligned x: %s", err.msg);
    } else {
        CHECK(false, "upload: %s", err.msg);
    }
    gpu_weight_free(&gw);
    lean_gpu_buf_free(xb);
    lean_gpu_buf_free(yb);
    matrix_free(&m);
    /* a part buffer too small for the column split (64 x 512 over 4 tokens: 4 parts of 1 step,
     * fewer tokens than a prefill chunk; over a chunk of 512, 2 parts of 2 steps) */
    matrix_make(&m, LEAN_TYPE_Q4_0, 64, 512);
    const uint64_t part = gpu_matmul_part_floats(G, 64, 512, GPU_MM_SET, 4);
    CHECK(lean_gpu_options_of(G)->tile_ksplit || part == 4 * 4 * 64, "part floats of a 64 x 512 matrix: %llu",
          (unsigned long long)part);
    CHECK(lean_gpu_options_of(G)->tile_ksplit || gpu_matmul_part_floats(G, 64, 512, GPU_MM_SET, 512) == 2 * 512 * 64,
          "part floats of a 64 x 512 matrix over 512 tokens: %llu",
          (unsigned long long)gpu_matmul_part_floats(G, 64, 512, GPU_MM_SET, 512));
    xb = buf_new(4 * 512 * 4, LEAN_GPU_STORAGE), yb = buf_new(4 * 64 * 4, LEAN_GPU_STORAGE);
    lean_gpu_buf *pb = buf_new(part * 4 - 16, LEAN_GPU_STORAGE);
    if (gpu_weight_upload(G, &m.t, &gw, &err) == LEAN_OK) {
        CHECK(gpu_matmul_create(G, &gw, 4, step, &(gpu_mm_in){.x = xb}, &(gpu_mm_out){.y = yb, .part = pb}, &mm, &err) ==
                      LEAN_ERR_ARG && mm == NULL && strstr(err.msg, "part"),
              "small part: %s", err.msg);
    } else {
        CHECK(false, "upload: %s", err.msg);
    }
    gpu_weight_free(&gw);
    lean_gpu_buf_free(xb);
    lean_gpu_buf_free(yb);
    lean_gpu_buf_free(pb);
    matrix_free(&m);
}

static const uint32_t TYPES[] = {LEAN_TYPE_F32,  LEAN_TYPE_F16,  LEAN_TYPE_BF16, LEAN_TYPE_Q8_0,
                                 LEAN_TYPE_Q4_0, LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1,
                                 LEAN_TYPE_Q4_K, LEAN_TYPE_Q5_K, LEAN_TYPE_Q6_K, LEAN_TYPE_Q2_K,
                                 LEAN_TYPE_Q3_K};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])
/* the formats test_modes runs every output mode on (the others: set and SwiGLU) */
static bool all_modes(uint32_t type) { return type == LEAN_TYPE_F32 || type == LEAN_TYPE_Q4_0 || type == LEAN_TYPE_Q6_K; }

static void test_all(lean_gpu_buf *step) {
    printf("test_gpu_weights: reductions over %s\n", lean_gpu_subgroup_size(G) ? "subgroups" : "workgroup trees");
    for (size_t i = 0; i < N_TYPES; i++) test_format(TYPES[i], step);
    for (size_t i = 0; i < N_TYPES; i++) test_modes(TYPES[i], step, all_modes(TYPES[i]));
    test_normed_input(LEAN_TYPE_F32, 131, step);
    test_normed_input(LEAN_TYPE_Q4_K, 512, step);
    test_normed_input(LEAN_TYPE_Q6_K, 256, step);
    test_normed_input(LEAN_TYPE_Q4_0, 1056, step); /* 5 vec4s a norm lane, the last one short */
    test_normed_input(LEAN_TYPE_Q8_0, 2048, step); /* the widest row decode fuses (NORM_FUSE_MAX_COLS) */
    /* a q4_k_m file's [Wq; Wk; Wv] at smollm2-135m's 576 columns, cut to 3 heads; then words a
     * block falling (8, 4: unused rows between the parts), rising, and four parts */
    test_mixed_stack((const uint32_t[]){LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_0, LEAN_TYPE_Q8_0}, (const int64_t[]){67, 22, 22},
                     3, step);
    test_mixed_stack((const uint32_t[]){LEAN_TYPE_Q8_0, LEAN_TYPE_Q4_0, LEAN_TYPE_Q5_1}, (const int64_t[]){5, 70, 3}, 3,
                     step);
    test_mixed_stack((const uint32_t[]){LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q8_0, LEAN_TYPE_Q4_0},
                     (const int64_t[]){9, 8, 7, 6}, 4, step);
    test_not_stackable();
    test_repack_pieces(step);
    test_many_groups(step);
    test_errors(step);
}

/* The f16 path's tiled kernel (tiled_f16.wgsl) on every format and mode, where the adapter
 * grants shader-f16 (in CI: the webgpu stage's, Deno's wgpu; Dawn on llvmpipe does not). */
static void test_f16(lean_gpu_buf *step) {
    lean_gpu_options *opt = lean_gpu_options_of(G);
    opt->f16 = LEAN_GPU_ON;
    CHECK(lean_gpu_f16(G), "f16 on, on an adapter with shader-f16: the f16 path");
    printf("test_gpu_weights: the f16 path\n");
    F16 = true;
    for (size_t i = 0; i < N_TYPES; i++) test_format(TYPES[i], step);
    for (size_t i = 0; i < N_TYPES; i++) test_modes(TYPES[i], step, all_modes(TYPES[i]));
    F16 = false;
    opt->f16 = LEAN_GPU_OFF;
}

/* The formats the 8-bit prefill runs in the wide shape and split too: a format's blocks
 * (formats.wgsl's block_i8, block_step) do not depend on the shape, so beside Q8_0 and Q4_0
 * one of each other form runs there (Q6_K; Q2_K's two_min; Q4_1 in the four-part mixed stack),
 * which keeps the webgpu stage's Deno run short. */
static bool int8_every_shape(uint32_t type) {
    return type == LEAN_TYPE_Q8_0 || type == LEAN_TYPE_Q4_0 || type == LEAN_TYPE_Q6_K || type == LEAN_TYPE_Q2_K;
}

/* The 8-bit prefill (matmul_tiled_i8.wgsl) on every quantized format (set and SwiGLU; every
 * mode on Q8_0, Q4_0 and Q6_K) and two mixed stacks, in the shapes the sizes choose; then in
 * the wide shape and split over the columns (int8_every_shape's formats, one mixed stack),
 * where WGSL has packed dot products (Dawn has them everywhere, polyfilled on llvmpipe). Its
 * sums are held to the reference within x's quantization (quant_error); the modes, the order
 * (n_tok-independent bits), the bounds and a mixed stack's parts against their own matrices
 * as the F32 path's. */
static void test_int8(lean_gpu_buf *step) {
    lean_gpu_options *opt = lean_gpu_options_of(G);
    opt->int8 = LEAN_GPU_ON;
    CHECK(lean_gpu_int8(G), "int8 on where WGSL has packed dot products: the 8-bit prefill");
    I8 = true;
    static const char *const how[] = {"", ", every matrix wide", ", split over the columns in 4"};
    for (int h = 0; h < 3; h++) {
        printf("test_gpu_weights: the 8-bit prefill%s\n", how[h]);
        opt->tile_wide = h == 1 ? LEAN_GPU_ON : LEAN_GPU_AUTO;
        opt->tile_ksplit = h == 2 ? 4 : 0;
        for (size_t i = 0; i < N_TYPES; i++) {
            const uint32_t t = TYPES[i];
            if (t == LEAN_TYPE_F32 || t == LEAN_TYPE_F16 || t == LEAN_TYPE_BF16) continue;
            if (h && !int8_every_shape(t)) continue;
            test_format(t, step);
            test_modes(t, step, all_modes(t) || t == LEAN_TYPE_Q8_0);
        }
        if (!h)
            test_mixed_stack((const uint32_t[]){LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_0, LEAN_TYPE_Q8_0},
                             (const int64_t[]){67, 22, 22}, 3, step);
        test_mixed_stack((const uint32_t[]){LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q8_0, LEAN_TYPE_Q4_0},
                         (const int64_t[]){9, 8, 7, 6}, 4, step);
    }
    opt->tile_wide = LEAN_GPU_AUTO, opt->tile_ksplit = 0;
    I8 = false;
    opt->int8 = LEAN_GPU_OFF;
}

/* --subgroups (tests/run.sh's browser stage, in Chromium, whose SwiftShader is the one CI
 * adapter with subgroups, and slow: 800 s for two passes on a loaded 2-core machine): only the
 * first pass, whose decode matmuls reduce over subgroups; the other passes change the tiled
 * kernels, which do not reduce, or a normed matmul's loads, and run in the other stages. */
int main(int argc, char **argv) {
    const bool subgroups_only = argc > 1 && strcmp(argv[1], "--subgroups") == 0;
    if (!(G = test_gpu_open("test_gpu_weights"))) return test_finish("test_gpu_weights");
    lean_gpu_buf *step = buf_new(16, LEAN_GPU_UNIFORM);
    CHECK(!lean_gpu_f16(G), "f16 off (test_gpu_open): the F32 path");
    test_gpu_variant(G, "subgroups");
    lean_gpu_options *opt = lean_gpu_options_of(G);
    test_all(step);
    if (subgroups_only) {
        lean_gpu_buf_free(step);
        lean_gpu_close(G);
        return test_finish("test_gpu_weights");
    }
    /* the wide tiled shape, which only matrices of 2048 outputs and columns or more take, on
     * every format and mode: every matrix takes it */
    opt->tile_wide = LEAN_GPU_ON;
    printf("test_gpu_weights: the wide tiled shape\n");
    test_all(step);
    opt->tile_wide = LEAN_GPU_AUTO;
    /* every prefill matmul split over its columns, in 4 parts where it has the steps (the
     * shapes of test_format have 1 to 18 steps of 128 columns: 18 split 5 + 5 + 5 + 3) */
    opt->tile_ksplit = 4;
    printf("test_gpu_weights: prefill matmuls split over their columns\n");
    test_all(step);
    opt->tile_ksplit = 0;
    /* the normed decode's first chunk decoded before the norm in every format that can (by
     * default Q5_0 alone), and the prefill's loads a group ahead in every format (by default
     * Q8_0 alone, matmul.c) */
    opt->vec_prefetch = opt->tile_prefetch = LEAN_GPU_ON;
    printf("test_gpu_weights: the normed decode and the prefill prefetching in every format that can\n");
    test_all(step);
    opt->vec_prefetch = opt->tile_prefetch = LEAN_GPU_AUTO;
    if (lean_gpu_subgroup_size(G)) { /* and the kernels every adapter without subgroups runs */
        opt->no_subgroups = true;
        test_all(step);
        opt->no_subgroups = false;
    }
    if (test_gpu_variant(G, "int8")) test_int8(step);
    if (test_gpu_variant(G, "f16")) {
        test_f16(step);
        opt->tile_wide = LEAN_GPU_ON; /* the f16 path in the wide shape too */
        test_f16(step);
        opt->tile_wide = LEAN_GPU_AUTO;
        opt->tile_ksplit = 4; /* and split over the columns */
        test_f16(step);
        opt->tile_ksplit = 0;
    }
    lean_gpu_buf_free(step);
    lean_gpu_close(G);
    return test_finish("test_gpu_weights");
}
