// sample_wide_count.wgsl — one level of the wide draw's threshold search (sampler.c W2-W3):
// the search builds the largest 64-bit key t whose set (the ids with key >= t) is enough, 4 bits
// a level from the top (16 levels). At level L, with the bits chosen so far in the state's prefix,
// the 16 candidates t_d = prefix | d << (the level's shift) are measured at once: invocation b
// walks block b (SAMPLER_SUM_BLOCK ids, in order) and keeps, for every d, the count of ids with
// key >= t_d and their weights' sequential sum (sampler.c's wide_measure, one block), written at
// WCOUNT_OFF + 32 b + 2 d (count, sum bits). An id with key >= t_d for d <= its own digit (its
// higher bits equal to the prefix's), every d (higher), no d (lower).
// Constants: WG, N_VOCAB, SUM_BLOCK, N_BLOCKS, WIDE_OFF, WSTATE_OFF, WCOUNT_OFF.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x;
    if (b >= N_BLOCKS) { return; }
    let level = scratch[WSTATE_OFF];
    let ph = scratch[WSTATE_OFF + 2u];
    let pl = scratch[WSTATE_OFF + 3u];
    let s = 28u - 4u * (level & 7u); // the digit's shift in its word
    var cnt: array<u32, 16>;
    var sum: array<f32, 16>;
    for (var d = 0u; d < 16u; d++) {
        cnt[d] = 0u;
        sum[d] = 0.0;
    }
    let end = min(N_VOCAB, (b + 1u) * SUM_BLOCK);
    for (var i = b * SUM_BLOCK; i < end; i++) {
        let kh = scratch[WIDE_OFF + 3u * i];
        if (kh == 0u) { continue; }
        let kl = scratch[WIDE_OFF + 3u * i + 1u];
        var n = 0u; // how many t_d the key reaches
        var word = kh;
        var pw = ph;
        var decided = false;
        if (level >= 8u) { // the digit is in the low word: the high words decide, or tie
            if (kh != ph) {
                n = select(0u, 16u, kh > ph);
                decided = true;
            }
            word = kl;
            pw = pl;
        }
        if (!decided) {
            var hk = 0u; // the bits above the digit (none at the top of a word)
            var hp = 0u;
            if (s < 28u) {
                hk = word >> (s + 4u);
                hp = pw >> (s + 4u);
            }
            if (hk != hp) {
                n = select(0u, 16u, hk > hp);
            } else {
                n = ((word >> s) & 15u) + 1u;
            }
        }
        let w = bitcast<f32>(scratch[WIDE_OFF + 3u * i + 2u]);
        for (var d = 0u; d < n; d++) {
            cnt[d] += 1u;
            sum[d] = sum[d] + w;
        }
    }
    for (var d = 0u; d < 16u; d++) {
        scratch[WCOUNT_OFF + 32u * b + 2u * d] = cnt[d];
        scratch[WCOUNT_OFF + 32u * b + 2u * d + 1u] = bitcast<u32>(sum[d]);
    }
}
