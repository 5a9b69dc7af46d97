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

int main(void) {
    test_sha256();
    test_hash_check_fails();
    fixture_parity_header();
    fixture_each_all(fixture_parity, "cpu-ref");
    return test_finish("test_parity");
}
