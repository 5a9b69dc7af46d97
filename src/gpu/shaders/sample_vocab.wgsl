// sample_vocab.wgsl — the sampling kernels' view of the vocabulary: load_entry(i, end) is id i with
// its biased, penalized logit (sampler.c step 1: x + its bias (F_BIAS), then x < 0 ? x * penalty
// : x * inv_penalty for ids in the penalty window), or SENTINEL when that value is not finite (masked out: -inf, NaN), when the
// mask (F_MASK) clears id i's bit, or when i >= end.
// Goes before a kernel that reads the logits (sample_topk, sample_argmax level 0).
// Constants: N_VOCAB, LOGITS_OFF (elements from the bound start of the logits buffer), MASK_OFF,
// BIAS_OFF.
@group(0) @binding(2) var<storage, read> logits: array<u32>; // f32 bits, (N_VOCAB) from LOGITS_OFF
// sample.c's history buffer: [0..4) state, [4..4 + N_VOCAB) per-id counts in the window, ring;
// from MASK_OFF the mask: bit (i % 32) of word i / 32 set when id i may be drawn (lean_mask);
// from BIAS_OFF the bias: id i's f32 bits, 0 where it has none (added only where nonzero, as
// sample_reference skips a zero, so a -0 logit stays -0).
@group(0) @binding(3) var<storage, read> hist: array<u32>;

fn load_entry(i: u32, end: u32) -> Entry {
    if (i >= end) { return SENTINEL; }
    if ((P.flags & F_MASK) != 0u && ((hist[MASK_OFF + (i >> 5u)] >> (i & 31u)) & 1u) == 0u) { return SENTINEL; }
    var v = bitcast<f32>(logits[LOGITS_OFF + ROW * N_VOCAB + i]);
    if ((P.flags & F_BIAS) != 0u && hist[BIAS_OFF + i] != 0u) { v = v + bitcast<f32>(hist[BIAS_OFF + i]); }
    if ((P.flags & F_PENALTY) != 0u && hist[4u + i] != 0u) {
        v = select(fmul(v, P.inv_penalty), fmul(v, P.penalty), v < 0.0);
    }
    let b = bitcast<u32>(v);
    if (!is_finite_bits(b)) { return SENTINEL; }
    return Entry(b, i);
}
