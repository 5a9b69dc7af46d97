// sample_wide_prep.wgsl — the wide draw's first pass (sampler.c W1; top_k 0 or > 64): for every
// id its key (order_key of the penalized logit above ~id: the candidates' order as a 64-bit
// integer, as sampler.c's entry_key) and weight sampler_exp((x - max) * inv_temp), max being the
// best candidate (entry 0 of the list at FINAL_OFF); key 0 (hi word 0, which no finite value
// has) marks an id that takes no part. Invocation 0 also sets up the descent's state.
// Layout (words from WIDE_OFF): per id (key hi, key lo, weight bits); WSTATE_OFF: the state
// (sample_wide_digit.wgsl).
// Constants: WG, N_VOCAB, LOGITS_OFF, FINAL_OFF, WIDE_OFF, WSTATE_OFF, PHASE0 (1: find top-k's
// k-th entry first, for top-p's mass; 2: the kept set straight away).

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i == 0u) {
        for (var j = 0u; j < 12u; j++) { scratch[WSTATE_OFF + j] = 0u; }
        scratch[WSTATE_OFF + 1u] = PHASE0;
    }
    if (i >= N_VOCAB) { return; }
    let e = load_entry(i, N_VOCAB);
    var hi = 0u;
    var w = 0.0;
    if (e.id != NO_ID) {
        hi = order_key(e.v);
        w = sampler_exp(fmul(bitcast<f32>(e.v) - bitcast<f32>(scratch[FINAL_OFF]), P.inv_temp));
    }
    scratch[WIDE_OFF + 3u * i] = hi;
    scratch[WIDE_OFF + 3u * i + 1u] = ~i;
    scratch[WIDE_OFF + 3u * i + 2u] = bitcast<u32>(w);
}
