/* test_parity.c — lean's CPU reference against transformers, for every architecture x
 * format fixture in tests/data/fixtures (made by scripts/make_fixtures.py on a machine
 * with torch + transformers; transformers saw exactly the weights each file holds).
 *
 * The GGUF files themselves are rebuilt bit-identically into build/fixtures by
 * `scripts/make_fixtures.py models build/fixtures` (numpy only), which checks each one's
 * SHA-256 against the one recorded with the reference; tests/run.sh runs it first.
 *
 * For each file: prefill the prompt, compare the logits of the reference's top-20 ids
 * (|delta| <= 1e-3) and require the same top-20 id set; then decode the 32-token
 * continuation, requiring lean's argmax to equal transformers' id at every step, and
 * compare the top-20 after the last one the same way (this checks the KV-cache path
 * over 48 positions). Prints one parity-table row per file.
 *
 * Why 1e-3 for every format: the reference backend dequantizes each weight row exactly
 * (bit-exact with the numpy dequantizer that fed transformers) and does all arithmetic
 * in float32, so a quantized file differs from transformers only by float32 summation
 * order, the same as F32 (measured deltas are ~1e-5; see docs/parity.md). */
#include "fixture.h"
#include "test.h"

int main(void) {
    fixture_parity_header();
    fixture_each("llama", fixture_parity, "cpu-ref");
    fixture_each("qwen2", fixture_parity, "cpu-ref");
    fixture_each("qwen3", fixture_parity, "cpu-ref");
    return test_finish("test_parity");
}
