/* test_parity.c — lean's CPU reference against transformers, for every model x format
 * fixture in tests/data/fixtures (made by scripts/make_fixtures.py on a machine with torch +
 * transformers; transformers saw exactly the weights each file holds): 6 random-weight models
 * (llama, qwen2, qwen3; output tied and untied) in 13 formats (FIXTURE_N_FORMATS), and the
 * trained demo model in Q8_0.
 *
 * The GGUF files themselves are rebuilt bit-identically into build/fixtures by
 * `scripts/make_fixtures.py models build/fixtures` (numpy only), which checks each one's
 * SHA-256 against the one recorded with the reference; tests/fixture.h checks it again before
 * any test loads one. This test proves that check can fail: a copy of a fixture with one
 * byte changed does not match its recorded hash (and SHA-256 itself meets FIPS 180-4's
 * examples).
 *
 * For each file (fixture_parity): the logits at every prompt position (prefill of the
 * first p ids) and after decoding 1, 2, 3, 4, 8, 16, 24 and 32 ids of transformers' greedy
 * continuation within 1e-3 of transformers' on its top-21 ids, the same top-20 set (fewer
 * where transformers' 20th and 21st are a near-tie), and lean's argmax equal to
 * transformers' id at all 32 steps. Prints one parity-table row per file.
 *
 * Why 1e-3 for every format: the reference backend dequantizes each weight row exactly
 * (bit-exact with the numpy dequantizer that fed transformers) and does all arithmetic
 * in float32, so a quantized file differs from transformers only by float32 summation
 * order, the same as F32 (measured deltas are ~1e-5; see docs/parity.md). */
#include "fixture.h"
#include "test.h"

#include <unistd.h>

static void test_sha256(void) {
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        fixture_sha256_ctx c;
        char hex[65];
        fixture_sha256_init(&c);
        /* one byte at a time for the long one: the block boundary inside the buffer */
        const size_t n = strlen(v[i].msg);
        for (size_t j = 0; j < n; j += (i == 2 ? 1 : n)) fixture_sha256_update(&c, (const uint8_t *)v[i].msg + j, i == 2 ? 1 : n);
        fixture_sha256_final(&c, hex);
        CHECK(!strcmp(hex, v[i].hex), "sha256(\"%s\") = %s", v[i].msg, hex);
    }
}

/* The recorded hash of a real fixture, on a copy and on the copy with one byte changed. */
static void test_hash_check_fails(void) {
    const char *model = "build/fixtures/qwen2-q4_0.gguf";
    char want[65];
    CHECK(fixture_recorded_sha("qwen2", "q4_0", want), "no sha256 for qwen2 q4_0 in tests/data/fixtures/qwen2.txt");
    size_t len;
    uint8_t *bytes = test_read_file(model, &len);
    CHECK(bytes && len > 4096, "cannot read %s: run `make test-data`", model);
    if (!bytes || len <= 4096 || strlen(want) != 64) {
        free(bytes);
        return;
    }
    char same[256], changed[256];
    test_tmp_path(same, sizeof same, "same.gguf");
    test_tmp_path(changed, sizeof changed, "changed.gguf");
    FILE *a = fopen(same, "wb");
    const bool wrote_a = a && fwrite(bytes, 1, len, a) == len;
    if (a) fclose(a);
    bytes[len / 2] ^= 0x01; /* one bit of a weight in the middle of the file */
    FILE *b = fopen(changed, "wb");
    const bool wrote_b = b && fwrite(bytes, 1, len, b) == len;
    if (b) fclose(b);
    CHECK(wrote_a && wrote_b, "cannot write the copies");
    CHECK(fixture_file_matches(same, want), "%s: an exact copy of %s does not match its recorded hash", same, model);
    CHECK(!fixture_file_matches(changed, want), "%s: one changed bit still matches the recorded hash", changed);
    CHECK(!fixture_file_matches("build/fixtures/no-such-file.gguf", want), "a missing file matches");
    unlink(same);
    unlink(changed);
    free(bytes);
}

/* Issue 25's rule for a fixture (scripts/make_fixtures.py's MIN_DISTINCT and MAX_RUN, which
 * only the torch machine runs): transformers' greedy continuation is not one repeated token,
 * else lean's equal greedy ids would say little. */
#define MIN_DISTINCT 8
#define MAX_RUN 4

/* The number of distinct ids in ids[0..n) and the longest run of one id. */
static void continuation_shape(const int *ids, int n, int *n_distinct, int *longest) {
    int run = 0;
    *n_distinct = *longest = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = ids[j] == ids[i];
        *n_distinct += !seen;
        run = i > 0 && ids[i] == ids[i - 1] ? run + 1 : 1;
        if (run > *longest) *longest = run;
    }
}

static bool continuation_varied(const int *ids, int n) {
    int n_distinct, longest;
    continuation_shape(ids, n, &n_distinct, &longest);
    return n_distinct >= MIN_DISTINCT && longest <= MAX_RUN;
}

/* Every committed continuation in tests/data/fixtures meets the rule, read straight from the
 * files (no GGUF needed, every case whatever LEAN_TEST_FIXTURES says); and the rule rejects a
 * stuck continuation, so it can fail. */
static void test_continuations_vary(void) {
    const int stuck[] = {5, 7, 7, 7, 7, 7, 9, 1, 2, 3, 4, 6, 8}, few[] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5, 6, 7};
    const int edge[] = {1, 2, 2, 2, 2, 3, 4, 5, 6, 7, 8};
    CHECK(!continuation_varied(stuck, 13), "a run of 5 of one id passes the rule");
    CHECK(!continuation_varied(few, 13), "7 distinct ids pass the rule");
    CHECK(continuation_varied(edge, 11), "8 distinct ids with a run of 4 fail the rule");
    int n_cases = 0, n_varied = 0, fewest = 1 << 30, longest_all = 0;
    for (int k = 0; k < FIXTURE_N_NAMES; k++) {
        char path[256], line[4096], fmt[16] = "";
        snprintf(path, sizeof path, "tests/data/fixtures/%s.txt", FIXTURE_NAMES[k]);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL, "cannot open %s", path);
        int n_here = 0;
        while (f && fgets(line, sizeof line, f)) {
            if (sscanf(line, "format %15s", fmt) == 1 || strncmp(line, "continuation ", 13)) continue;
            int ids[FIXTURE_MAX_IDS], n = 0, used = 0, want = -1;
            const char *at = line + 13;
            if (sscanf(at, "%d%n", &want, &used) == 1)
                for (at += used; n < FIXTURE_MAX_IDS && n < want && sscanf(at, "%d%n", &ids[n], &used) == 1; n++) at += used;
            CHECK(want > 0 && n == want, "%s %s: malformed continuation line", path, fmt);
            int n_distinct, longest;
            continuation_shape(ids, n, &n_distinct, &longest);
            const bool varied = continuation_varied(ids, n);
            CHECK(varied, "%s %s: the continuation has %d distinct ids and a run of %d of one id (issue 25: at least %d "
                  "distinct, no run over %d)", path, fmt, n_distinct, longest, MIN_DISTINCT, MAX_RUN);
            n_here++, n_cases++, n_varied += varied;
            if (n_distinct < fewest) fewest = n_distinct;
            if (longest > longest_all) longest_all = longest;
        }
        if (f) fclose(f);
        CHECK(n_here > 0, "%s: no continuation lines", path);
    }
    printf("summary: fixture continuations: %d of %d not one repeated token (at least %d distinct ids, no run over "
           "%d; fewest %d distinct, longest run %d)\n", n_varied, n_cases, MIN_DISTINCT, MAX_RUN, fewest, longest_all);
}

int main(void) {
    test_sha256();
    test_hash_check_fails();
    test_continuations_vary();
    fixture_parity_header();
    fixture_each_all(fixture_parity, "cpu-ref");
    fixture_parity_summary("cpu-ref");
    return test_finish("test_parity");
}
