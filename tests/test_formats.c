/* test_formats.c — tests for the tensor formats (src/core/formats.c) and their quantizers
 * (src/dev/quantize.c).
 *
 *   1. the type table, names, lean_type_bytes (ragged rows, overflow)
 *   2. f16 / bf16 scalars: all 65536 halves, every f16 tie, strided sweeps of all f32
 *      bit patterns against independent references, and a table of edge cases
 *   3. the vectors in tests/data/formats/<type>.bin (scripts/make_format_vectors.py,
 *      made by the independent numpy code in scripts/quants.py; q2_k and q3_k by ggml's
 *      own C, scripts/ggml_kquant_vectors.sh): C quantize == the vector's bytes and
 *      C dequantize == its floats, bit for bit, for all 13 types
 *   4. quantize -> dequantize error within a per-format bound (a sanity check)
 *
 * Usage: build/tests/test_formats [VECTOR_DIR]  (default tests/data/formats), so a
 * large generated set can be checked too:
 *   python3 scripts/make_format_vectors.py --out /tmp/v --scale 50 && build/tests/test_formats /tmp/v
 */
#include "core/formats.h"
#include "dev/quantize.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the types lean.h names, with their ggml block sizes */
static const struct {
    int id;
    const char *name;
    uint32_t block_elems, block_bytes;
} k_types[] = {
    {LEAN_TYPE_F32, "f32", 1, 4},       {LEAN_TYPE_F16, "f16", 1, 2},
    {LEAN_TYPE_BF16, "bf16", 1, 2},     {LEAN_TYPE_Q8_0, "q8_0", 32, 34},
    {LEAN_TYPE_Q4_0, "q4_0", 32, 18},   {LEAN_TYPE_Q4_1, "q4_1", 32, 20},
    {LEAN_TYPE_Q5_0, "q5_0", 32, 22},   {LEAN_TYPE_Q5_1, "q5_1", 32, 24},
    {LEAN_TYPE_Q4_K, "q4_k", 256, 144}, {LEAN_TYPE_Q5_K, "q5_k", 256, 176},
    {LEAN_TYPE_Q6_K, "q6_k", 256, 210}, {LEAN_TYPE_Q2_K, "q2_k", 256, 84},
    {LEAN_TYPE_Q3_K, "q3_k", 256, 110},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

/* ================================================================ 1. table, names, sizes */

static void test_table(void) {
    for (size_t i = 0; i < N_TYPES; i++) {
        const lean_type_traits *t = lean_type_traits_get((uint32_t)k_types[i].id);
        CHECK(t != NULL, "type %d has no traits", k_types[i].id);
        if (!t) continue;
        CHECK(strcmp(t->name, k_types[i].name) == 0, "type %d is named %s", k_types[i].id, t->name);
        CHECK(t->block_elems == k_types[i].block_elems && t->block_bytes == k_types[i].block_bytes,
              "%s: block %u elems / %u bytes", t->name, t->block_elems, t->block_bytes);
        CHECK(t->dequant && lean_quantizer_of((uint32_t)k_types[i].id), "%s lacks a kernel", t->name);
        CHECK(strcmp(lean_type_name(k_types[i].id), k_types[i].name) == 0, "lean_type_name(%d)", k_types[i].id);
        CHECK(lean_type_from_name(k_types[i].name) == k_types[i].id, "from_name(%s)", k_types[i].name);
    }
    /* ids ggml has but lean does not support, and ids past the end */
    const uint32_t absent[] = {4, 5, 9, 15, 16, 20, 29, 31, 39, 1000, 0xffffffffu};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        CHECK(lean_type_traits_get(absent[i]) == NULL, "type %u should be unknown", absent[i]);
        CHECK(lean_quantizer_of(absent[i]) == NULL, "type %u has a quantizer", absent[i]);
    }
    CHECK(lean_type_name(-1) == NULL && lean_type_name(5) == NULL && lean_type_name(31) == NULL, "bad ids named");
    /* ggml's names for messages: every id it defined, the ones lean runs spelled as lean_type_name
     * in upper case, nothing past ggml's last id (42, Q2_0) */
    CHECK(lean_ggml_type_name(11) && strcmp(lean_ggml_type_name(11), "Q3_K") == 0, "id 11 is Q3_K");
    CHECK(lean_ggml_type_name(4) && strcmp(lean_ggml_type_name(4), "Q4_2") == 0, "id 4 is Q4_2");
    CHECK(lean_ggml_type_name(29) && strcmp(lean_ggml_type_name(29), "IQ1_M") == 0, "id 29 is IQ1_M");
    CHECK(lean_ggml_type_name(35) && strcmp(lean_ggml_type_name(35), "TQ2_0") == 0, "id 35 is TQ2_0");
    CHECK(lean_ggml_type_name(42) && strcmp(lean_ggml_type_name(42), "Q2_0") == 0, "id 42 is Q2_0");
    CHECK(lean_ggml_type_name(43) == NULL && lean_ggml_type_name(0xffffffffu) == NULL, "ids past ggml's named");
    for (size_t i = 0; i < N_TYPES; i++) {
        const char *g = lean_ggml_type_name((uint32_t)k_types[i].id);
        CHECK(g && lean_type_from_name(g) == k_types[i].id, "ggml's name of %s", k_types[i].name);
    }

    CHECK(lean_type_from_name("Q4_K") == LEAN_TYPE_Q4_K, "upper case");
    CHECK(lean_type_from_name("BF16") == LEAN_TYPE_BF16, "upper case");
    CHECK(lean_type_from_name("q5_1") == LEAN_TYPE_Q5_1, "q5_1");
    CHECK(lean_type_from_name("q4_2") == -1, "unknown name");
    CHECK(lean_type_from_name("q4_k ") == -1 && lean_type_from_name("q4") == -1, "prefixes and suffixes");
    CHECK(lean_type_from_name("") == -1 && lean_type_from_name(NULL) == -1, "empty and NULL");

    uint64_t b = 12345;
    CHECK(lean_type_bytes(LEAN_TYPE_Q4_0, 64, &b) && b == 36, "q4_0 x 64 = %llu", (unsigned long long)b);
    CHECK(lean_type_bytes(LEAN_TYPE_Q6_K, 512, &b) && b == 420, "q6_k x 512 = %llu", (unsigned long long)b);
    CHECK(lean_type_bytes(LEAN_TYPE_F32, 3, &b) && b == 12, "f32 x 3");
    CHECK(lean_type_bytes(LEAN_TYPE_Q8_0, 0, &b) && b == 0, "zero elements");
    CHECK(!lean_type_bytes(LEAN_TYPE_Q4_0, 33, &b), "ragged q4_0 row accepted");
    CHECK(!lean_type_bytes(LEAN_TYPE_Q4_K, 255, &b), "ragged q4_k row accepted");
    CHECK(!lean_type_bytes(LEAN_TYPE_Q5_K, 256 + 32, &b), "ragged q5_k row accepted");
    CHECK(!lean_type_bytes(5, 32, &b) && !lean_type_bytes(200, 32, &b), "unknown type accepted");
    CHECK(!lean_type_bytes(LEAN_TYPE_F32, UINT64_MAX / 4 + 1, &b), "f32 overflow accepted");
    /* q8_0 is the one block format over a byte per element, so the one that can overflow */
    CHECK(!lean_type_bytes(LEAN_TYPE_Q8_0, UINT64_MAX - UINT64_MAX % 32, &b), "q8_0 overflow accepted");
    CHECK(!lean_type_bytes(LEAN_TYPE_Q8_0, (UINT64_MAX / 34 + 1) * 32, &b), "q8_0 overflow accepted");
    CHECK(lean_type_bytes(LEAN_TYPE_Q8_0, UINT64_MAX / 34 * 32, &b) && b == UINT64_MAX / 34 * 34, "largest q8_0 row");
    CHECK(lean_type_bytes(LEAN_TYPE_Q4_0, UINT64_MAX - UINT64_MAX % 32, &b) && b == (UINT64_MAX / 32) * 18,
          "largest q4_0 row");
    CHECK(lean_type_bytes(LEAN_TYPE_F16, UINT64_MAX / 2, &b) && b == UINT64_MAX - 1, "largest f16 row");
    CHECK(lean_type_bytes(LEAN_TYPE_F32, UINT64_MAX / 4, &b) && b == UINT64_MAX - 3, "largest f32 row");
}

/* ================================================================ 2. f16 / bf16 scalars */

/* The f16 value of h, computed with ldexp in double (an independent formula);
 * NaNs as ggml gives them: payload kept, quiet bit set. */
static uint32_t ref_f16_to_f32_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    int e = (h >> 10) & 31, m = h & 0x3ff;
    if (e == 31) return sign | 0x7f800000u | (m ? 0x00400000u | ((uint32_t)m << 13) : 0);
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return sign | bits_of((float)v);
}

/* Round-to-nearest-even f32 -> f16 via frexp/nearbyint in double; NaN -> sign | 0x7e00. */
static uint16_t ref_f32_to_f16(float f) {
    uint16_t sign = (uint16_t)((bits_of(f) >> 16) & 0x8000);
    if (isnan(f)) return sign | 0x7e00;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00; /* 65504 + half an ulp rounds to inf */
    if (a < 0x1p-14) return sign | (uint16_t)nearbyint(a * 0x1p24); /* subnormal; 0x400 is fine */
    int ex;
    frexp(a, &ex); /* a in [2^(ex-1), 2^ex) */
    double q = nearbyint(ldexp(a, 11 - ex)); /* 1024 .. 2048 */
    int E = ex - 1 + 15;
    if (q == 2048.0) {
        q = 1024.0;
        E++;
    }
    return sign | (uint16_t)((E << 10) | ((int)q - 1024));
}

/* f32 -> bf16 rounding the low 16 bits to nearest even by comparison; NaN quieted. */
static uint16_t ref_f32_to_bf16(uint32_t u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    uint32_t q = u >> 16, rem = u & 0xffff;
    if (rem > 0x8000 || (rem == 0x8000 && (q & 1))) q++;
    return (uint16_t)q;
}

static void test_scalars(void) {
    /* all 65536 halves: value, and round trip */
    int bad_val = 0, bad_trip = 0, bad_bf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lean_f16_to_f32((uint16_t)h);
        if (bits_of(f) != ref_f16_to_f32_bits((uint16_t)h)) {
            if (bad_val++ < 5) fprintf(stderr, "f16 %04x -> %08x\n", h, bits_of(f));
        }
        bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        uint16_t back = lean_f32_to_f16(f);
        uint16_t want = nan ? (uint16_t)((h & 0x8000) | 0x7e00) : (uint16_t)h;
        if (back != want) {
            if (bad_trip++ < 5) fprintf(stderr, "f16 %04x -> f32 -> %04x\n", h, back);
        }
        /* bf16: decode appends zeros, encode of that gives h back (a NaN gets quieted) */
        float g = lean_bf16_to_f32((uint16_t)h);
        bool bnan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (bits_of(g) != h << 16 || lean_f32_to_bf16(g) != (bnan ? (h | 0x40) : h)) bad_bf++;
    }
    CHECK(bad_val == 0, "%d halves decode wrong", bad_val);
    CHECK(bad_trip == 0, "%d halves do not round-trip", bad_trip);
    CHECK(bad_bf == 0, "%d bf16 values do not round-trip", bad_bf);

    /* every tie between adjacent finite halves rounds to the even one; one f32 ulp off
     * the midpoint rounds to the nearer one */
    int bad_tie = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        for (int s = 0; s < 2; s++) {
            uint16_t sb = s ? 0x8000 : 0;
            double a = lean_f16_to_f32((uint16_t)h), b = lean_f16_to_f32((uint16_t)(h + 1));
            float mid = (float)((a + b) / 2); /* exact */
            if (s) mid = -mid;
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            float lo = nextafterf(mid, s ? INFINITY : -INFINITY); /* toward h */
            float hi = nextafterf(mid, s ? -INFINITY : INFINITY); /* toward h + 1 */
            if (lean_f32_to_f16(mid) != (sb | even) || lean_f32_to_f16(lo) != (sb | h) ||
                lean_f32_to_f16(hi) != (sb | (h + 1))) {
                if (bad_tie++ < 5) fprintf(stderr, "f16 tie between %04x and %04x\n", h, h + 1);
            }
        }
    }
    CHECK(bad_tie == 0, "%d f16 ties round wrong", bad_tie);

    /* sweep all f32 bit patterns with an odd stride (hits every low-bit pattern, so
     * ties too) against the independent references */
    int bad_sweep16 = 0, bad_sweep_bf = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251) {
        float f = float_of((uint32_t)u);
        if (lean_f32_to_f16(f) != ref_f32_to_f16(f)) {
            if (bad_sweep16++ < 5) fprintf(stderr, "f32 %08x -> f16 %04x, want %04x\n", (uint32_t)u,
                                          lean_f32_to_f16(f), ref_f32_to_f16(f));
        }
        if (lean_f32_to_bf16(f) != ref_f32_to_bf16((uint32_t)u)) bad_sweep_bf++;
    }
    CHECK(bad_sweep16 == 0, "%d f32 -> f16 conversions differ from the reference", bad_sweep16);
    CHECK(bad_sweep_bf == 0, "%d f32 -> bf16 conversions differ from the reference", bad_sweep_bf);

    static const struct {
        uint32_t f32;
        uint16_t f16, bf16;
    } edge[] = {
        {0x00000000, 0x0000, 0x0000}, /* +0 */
        {0x80000000, 0x8000, 0x8000}, /* -0 */
        {0x3f800000, 0x3c00, 0x3f80}, /* 1 */
        {0x477fe000, 0x7bff, 0x4780}, /* 65504: the largest half */
        {0x477fefff, 0x7bff, 0x4780}, /* just below 65520 */
        {0x477ff000, 0x7c00, 0x4780}, /* 65520: tie -> even -> inf */
        {0x7f800000, 0x7c00, 0x7f80}, /* inf */
        {0xff800000, 0xfc00, 0xff80}, /* -inf */
        {0x7f7fffff, 0x7c00, 0x7f80}, /* FLT_MAX: bf16 rounds up to inf */
        {0x7f7f7fff, 0x7c00, 0x7f7f},
        {0x7fc00000, 0x7e00, 0x7fc0}, /* quiet NaN */
        {0xffc00001, 0xfe00, 0xffc0}, /* negative NaN with payload */
        {0x7f800001, 0x7e00, 0x7fc0}, /* signaling NaN: made quiet */
        {0x7fbfffff, 0x7e00, 0x7fff},
        {0x33800000, 0x0001, 0x3380}, /* 2^-24: smallest subnormal half */
        {0x33000000, 0x0000, 0x3300}, /* 2^-25: tie -> even 0 */
        {0x33000001, 0x0001, 0x3300}, /* just above 2^-25 */
        {0xb3000000, 0x8000, 0xb300}, /* -2^-25 -> -0 */
        {0x33c00000, 0x0002, 0x33c0}, /* 3 * 2^-25: tie -> even 2 */
        {0x387fe000, 0x0400, 0x3880}, /* 2^-14 - 2^-25: tie -> even, the smallest normal */
        {0x387fc000, 0x03ff, 0x3880}, /* 2^-14 - 2^-24: the largest subnormal */
        {0x38800000, 0x0400, 0x3880}, /* 2^-14 */
        {0x3f801000, 0x3c00, 0x3f80}, /* 1 + 2^-11: tie -> even */
        {0x3f803000, 0x3c02, 0x3f80}, /* 1 + 3 * 2^-11: tie -> even */
        {0x45001000, 0x6800, 0x4500}, /* 2049 -> 2048 */
        {0x45003000, 0x6802, 0x4500}, /* 2051 -> 2052 */
        {0x3f808000, 0x3c04, 0x3f80}, /* bf16 tie, even below */
        {0x3f818000, 0x3c0c, 0x3f82}, /* bf16 tie, odd below -> up */
        {0x3f808001, 0x3c04, 0x3f81},
        {0x00000001, 0x0000, 0x0000}, /* f32 subnormals: bf16 keeps them (rounded) */
        {0x00008000, 0x0000, 0x0000}, /* bf16 tie -> even 0 */
        {0x00018000, 0x0000, 0x0002}, /* bf16 tie -> even 2 */
        {0x007fffff, 0x0000, 0x0080}, /* rounds up into the normals */
        {0x80000001, 0x8000, 0x8000},
    };
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        float f = float_of(edge[i].f32);
        CHECK(lean_f32_to_f16(f) == edge[i].f16, "f16(%08x) = %04x, want %04x", edge[i].f32, lean_f32_to_f16(f),
              edge[i].f16);
        CHECK(lean_f32_to_bf16(f) == edge[i].bf16, "bf16(%08x) = %04x, want %04x", edge[i].f32,
              lean_f32_to_bf16(f), edge[i].bf16);
    }
    static const struct {
        uint16_t f16;
        uint32_t f32;
    } dec[] = {
        {0x0001, 0x33800000}, {0x03ff, 0x387fc000}, {0x0400, 0x38800000}, {0x7bff, 0x477fe000},
        {0x7c00, 0x7f800000}, {0xfc00, 0xff800000}, {0x7c01, 0x7fc02000}, {0xfe00, 0xffc00000},
        {0x7e00, 0x7fc00000}, {0x8000, 0x80000000}, {0x3555, 0x3eaaa000}, {0xc000, 0xc0000000},
    };
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
        uint32_t got = bits_of(lean_f16_to_f32(dec[i].f16));
        CHECK(got == dec[i].f32, "f16 %04x -> %08x, want %08x", dec[i].f16, got, dec[i].f32);
    }
    CHECK(bits_of(lean_bf16_to_f32(0x7f81)) == 0x7f810000u, "bf16 decode keeps a signaling NaN as is");
}

/* ================================================================ 3. the vectors */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* index of the first differing block, or -1 */
static int64_t first_diff(const uint8_t *a, const uint8_t *b, size_t nbytes, size_t unit) {
    for (size_t i = 0; i < nbytes; i++)
        if (a[i] != b[i]) return (int64_t)(i / unit);
    return -1;
}

static void dump_block(const char *what, const uint8_t *p, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%02x", i % 32 ? "" : "\n    ", p[i]);
    fputc('\n', stderr);
}

static int test_vector_file(const char *dir, int type_id, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    size_t len = 0;
    uint8_t *buf = test_read_file(path, &len);
    CHECK(buf != NULL, "cannot read %s", path);
    if (!buf) return 0;
    const lean_type_traits *t = lean_type_traits_get((uint32_t)type_id);
    int n_cases = 0;
    if (len < 24 || memcmp(buf, "LQFV", 4) != 0 || rd32(buf + 4) != 1 || rd32(buf + 8) != (uint32_t)type_id ||
        rd32(buf + 12) != t->block_elems || rd32(buf + 16) != t->block_bytes) {
        CHECK(0, "%s: bad header", path);
        free(buf);
        return 0;
    }
    uint32_t count = rd32(buf + 20);
    CHECK(count >= 10, "%s: only %u cases", path, count);
    size_t off = 24;
    for (uint32_t c = 0; c < count; c++) {
        if (off + 24 > len) break;
        char label[17] = {0};
        memcpy(label, buf + off, 16);
        uint32_t kind = rd32(buf + off + 16), n = rd32(buf + off + 20);
        off += 24;
        uint64_t qbytes = 0;
        if (kind > 1 || !lean_type_bytes((uint32_t)type_id, n, &qbytes) ||
            off + (kind == 0 ? 4ull * n : 0) + qbytes + 4ull * n > len) {
            CHECK(0, "%s: case %u (%s) is malformed", path, c, label);
            break;
        }
        /* copies, so the kernels see aligned buffers (and the inputs are float-aligned);
         * the raw blocks are also run from an odd address: blocks need no alignment */
        float *x = malloc(sizeof(float) * (n + 1));
        float *y = malloc(sizeof(float) * (n + 1));
        uint8_t *q = malloc(qbytes + 2);
        uint8_t *blocks = malloc(qbytes + 2);
        if (!x || !y || !q || !blocks) {
            CHECK(0, "out of memory");
            free(x), free(y), free(q), free(blocks);
            break;
        }
        if (kind == 0) {
            memcpy(x, buf + off, 4ull * n);
            off += 4ull * n;
        }
        const uint8_t *want_q = buf + off;
        const uint8_t *want_y = buf + off + qbytes;
        off += qbytes + 4ull * n;

        if (kind == 0) {
            memset(q, 0xa5, qbytes);
            lean_quantizer_of((uint32_t)type_id)(x, q, n);
            int64_t bad = first_diff(q, want_q, qbytes, t->block_bytes);
            CHECK(bad < 0, "%s/%s: C quantize differs from the vector, first in block %lld", name, label, (long long)bad);
            if (bad >= 0) {
                dump_block("C", q + bad * t->block_bytes, t->block_bytes);
                dump_block("vector", want_q + bad * t->block_bytes, t->block_bytes);
            }
        }
        uint8_t *src = kind == 0 ? blocks : blocks + 1;
        memcpy(src, want_q, qbytes);
        t->dequant(src, y, n);
        int64_t bad = first_diff((const uint8_t *)y, want_y, 4ull * n, 4);
        CHECK(bad < 0, "%s/%s: C dequantize differs from the vector, first at element %lld", name, label, (long long)bad);
        if (bad >= 0) {
            uint32_t w = rd32(want_y + 4 * bad);
            fprintf(stderr, "  C %08x (%g), vector %08x (%g)\n", bits_of(y[bad]), y[bad], w, float_of(w));
        }
        free(x), free(y), free(q), free(blocks);
        n_cases++;
    }
    CHECK(off == len && n_cases == (int)count, "%s: %d of %u cases read, %zu of %zu bytes", path, n_cases, count,
          off, len);
    free(buf);
    return n_cases;
}

/* ================================================================ 4. error bounds */

/* a small deterministic generator: xorshift64*, sums of uniforms for a rough normal */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rng_uniform(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}
static float rng_normal(void) {
    double s = 0;
    for (int i = 0; i < 12; i++) s += rng_uniform();
    return (float)(s - 6.0);
}

static void test_error_bounds(void) {
    /* relative RMS error of quantize -> dequantize on N(0,1)-like data; the bounds are
     * about 1.5x what ggml's quantizers reach (f16 0.00021, q8_0 0.0052,
     * q4_0 0.084, q4_1 0.077, q5_0 0.041, q5_1 0.037, q4_k 0.070, q5_k 0.036, q6_k 0.017;
     * q2_k 0.291, q3_k 0.149) */
    static const struct {
        int id;
        double rel_rms;
    } bound[] = {
        {LEAN_TYPE_F32, 0.0},     {LEAN_TYPE_F16, 3.5e-4},  {LEAN_TYPE_BF16, 2.5e-3},
        {LEAN_TYPE_Q8_0, 0.008},  {LEAN_TYPE_Q4_0, 0.125},  {LEAN_TYPE_Q4_1, 0.115},
        {LEAN_TYPE_Q5_0, 0.062},  {LEAN_TYPE_Q5_1, 0.056},  {LEAN_TYPE_Q4_K, 0.105},
        {LEAN_TYPE_Q5_K, 0.053},  {LEAN_TYPE_Q6_K, 0.026},  {LEAN_TYPE_Q2_K, 0.42},
        {LEAN_TYPE_Q3_K, 0.23},
    };
    enum { N = 8192 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *q = malloc(N * 4);
    if (!x || !y || !q) {
        CHECK(0, "out of memory");
        free(x), free(y), free(q);
        return;
    }
    for (int i = 0; i < N; i++) x[i] = rng_normal();
    for (size_t k = 0; k < sizeof bound / sizeof bound[0]; k++) {
        const lean_type_traits *t = lean_type_traits_get((uint32_t)bound[k].id);
        const lean_quantize_row_fn quantize = lean_quantizer_of((uint32_t)bound[k].id);
        quantize(x, q, N);
        t->dequant(q, y, N);
        double se = 0, sx = 0;
        for (int i = 0; i < N; i++) {
            se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            sx += (double)x[i] * x[i];
        }
        double rel = sqrt(se / sx);
        CHECK(rel <= bound[k].rel_rms, "%s: relative RMS error %.5f > %.5f", t->name, rel, bound[k].rel_rms);

        /* an all-zero row comes back all zero; quantizing 0 elements writes nothing */
        memset(x + N - 256, 0, 256 * sizeof(float));
        quantize(x + N - 256, q, 256);
        t->dequant(q, y, 256);
        int nz = 0;
        for (int i = 0; i < 256; i++) nz += y[i] != 0.0f;
        CHECK(nz == 0, "%s: zeros dequantize to %d nonzeros", t->name, nz);
        for (int i = N - 256; i < N; i++) x[i] = rng_normal();
        q[0] = 0x5a;
        quantize(x, q, 0);
        CHECK(q[0] == 0x5a, "%s: quantize of 0 elements wrote", t->name);
    }
    free(x), free(y), free(q);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/formats";
    test_table();
    test_scalars();
    int cases = 0;
    for (size_t i = 0; i < N_TYPES; i++) cases += test_vector_file(dir, k_types[i].id, k_types[i].name);
    printf("test_formats: %d vector cases from %s\n", cases, dir);
    test_error_bounds();
    return test_finish("test_formats");
}
