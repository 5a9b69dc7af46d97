/* ggml_kquant_vectors.c — writes tests/data/formats/q2_k.bin and q3_k.bin (test_formats' vector
 * files) with ggml's own quantize_row_q2_K_ref / q3_K_ref and dequantize_row_q2_K / q3_K, so
 * lean's quantizers and its reading of these two layouts (dev/quantize.c, core/formats.c) are
 * held to ggml's code, not to a second reading of it. Kind 0 cases (floats, ggml's blocks, their
 * floats): random normal data of several magnitudes, sub-blocks of zeros among them, constant
 * and one-signed blocks. Kind 1 cases (blocks, their floats): random bytes with finite f16
 * scales, all zero, and the largest finite scales.
 * Built and run by scripts/ggml_kquant_vectors.sh against ../shared/peers' llama.cpp source. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dequantize_row_q2_K(const void *x, float *y, int64_t k);
void dequantize_row_q3_K(const void *x, float *y, int64_t k);
void quantize_row_q2_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q3_K_ref(const float *x, void *y, int64_t k);

/* the symbols ggml-quants.c takes from ggml.c, none of which these functions call */
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt);
    exit(1);
}
size_t ggml_row_size(int type, int64_t ne) { (void)type, (void)ne; abort(); }
const char *ggml_type_name(int type) { (void)type; abort(); }
size_t ggml_type_size(int type) { (void)type; abort(); }

static uint64_t rs = 0x243f6a8885a308d3ull;
static uint32_t rnd(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rs >> 33);
}
static float normal(void) {
    double s = 0;
    for (int i = 0; i < 12; i++) s += rnd() / 2147483648.0;
    return (float)(s - 6.0);
}
static void put32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }

typedef struct fmt {
    const char *name;
    uint32_t id, bytes;
    int d_at[2]; /* the f16 fields (-1: none) */
    void (*dq)(const void *, float *, int64_t);
    void (*q)(const float *, void *, int64_t);
} fmt;

/* x: the floats ggml quantized into blocks (kind 0), or NULL (kind 1) */
static void write_case(FILE *f, const fmt *t, const char *label, const float *x, const uint8_t *blocks, uint32_t n) {
    char l[16] = {0};
    strncpy(l, label, 16);
    fwrite(l, 16, 1, f);
    put32(f, x ? 0 : 1), put32(f, n);
    if (x) fwrite(x, 4, n, f);
    fwrite(blocks, t->bytes, n / 256, f);
    float *y = malloc(sizeof(float) * n);
    t->dq(blocks, y, n);
    fwrite(y, 4, n, f);
    free(y);
}

static void write_file(const char *dir, const fmt *t) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, t->name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    enum { N = 1024, CASES = 16 };
    fwrite("LQFV", 4, 1, f);
    put32(f, 1), put32(f, t->id), put32(f, 256), put32(f, t->bytes), put32(f, CASES);
    uint8_t *b = malloc(t->bytes * (N / 256));
    float *x = malloc(sizeof(float) * N);
    char label[32];
    for (int c = 0; c < CASES; c++) {
        int quantized = 1;
        if (c < 5) { /* magnitudes 1e-3 .. 1e3 */
            const float mag = powf(10.0f, (float)(c - 2) * 1.5f);
            for (int i = 0; i < N; i++) x[i] = normal() * mag;
            snprintf(label, sizeof label, "ggml-q-%d", c);
        } else if (c == 5) { /* every third 16-weight sub-block zero, a tiny one, one huge weight */
            for (int i = 0; i < N; i++) x[i] = (i / 16) % 3 == 0 ? 0.0f : normal();
            for (int i = 16; i < 32; i++) x[i] = normal() * 1e-12f;
            x[700] = 5000.0f;
            snprintf(label, sizeof label, "ggml-q-zeros");
        } else if (c == 6) { /* one-signed: positive, then negative blocks; a constant block */
            for (int i = 0; i < N; i++) x[i] = fabsf(normal()) * (i < N / 2 ? 1.0f : -1.0f) + (i < N / 2 ? 0.5f : 0);
            for (int i = 768; i < N; i++) x[i] = 0.25f;
            snprintf(label, sizeof label, "ggml-q-signed");
        } else if (c == 7) { /* small integers: many exact ties for the roundings */
            for (int i = 0; i < N; i++) x[i] = (float)((int)(rnd() % 9) - 4) * 0.5f;
            snprintf(label, sizeof label, "ggml-q-ties");
        } else if (c < 12) { /* random bytes, finite f16 scales (exponent below 31) */
            quantized = 0;
            for (uint32_t i = 0; i < t->bytes * (N / 256); i++) b[i] = (uint8_t)rnd();
            for (int k = 0; k < N / 256; k++)
                for (int j = 0; j < 2; j++)
                    if (t->d_at[j] >= 0) {
                        uint16_t h = (uint16_t)(rnd() & 0xfbff); /* clears exponent bit 4: never inf/NaN */
                        memcpy(b + k * t->bytes + t->d_at[j], &h, 2);
                    }
            snprintf(label, sizeof label, "random-%d", c - 8);
        } else if (c < 14) {
            quantized = 0;
            memset(b, 0, t->bytes * (N / 256));
            snprintf(label, sizeof label, c == 12 ? "zero" : "zero-b");
            if (c == 13) b[1] = 0x11, b[t->bytes + 3] = 0x80; /* scale bytes, d still zero */
        } else if (c == 14) {
            quantized = 0;
            for (uint32_t i = 0; i < t->bytes * (N / 256); i++) b[i] = (uint8_t)rnd();
            for (int k = 0; k < N / 256; k++)
                for (int j = 0; j < 2; j++)
                    if (t->d_at[j] >= 0) memcpy(b + k * t->bytes + t->d_at[j], &(uint16_t){0x7bff}, 2);
            snprintf(label, sizeof label, "max-scale");
        } else { /* all zero floats */
            memset(x, 0, sizeof(float) * N);
            snprintf(label, sizeof label, "ggml-q-zero");
        }
        if (quantized) t->q(x, b, N);
        write_case(f, t, label, quantized ? x : NULL, b, N);
    }
    free(b), free(x);
    fclose(f);
    printf("wrote %s\n", path);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s tests/data/formats\n", argv[0]);
        return 2;
    }
    const fmt q2 = {"q2_k", 10, 84, {80, 82}, dequantize_row_q2_K, quantize_row_q2_K_ref};
    const fmt q3 = {"q3_k", 11, 110, {108, -1}, dequantize_row_q3_K, quantize_row_q3_K_ref};
    write_file(argv[1], &q2);
    write_file(argv[1], &q3);
    return 0;
}
