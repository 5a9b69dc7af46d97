// sample_wide_digit.wgsl — the end of a level of the wide draw's threshold search, one
// workgroup: invocation d < 16 adds up candidate t_d's block counts and sums (block order, as
// sampler.c's wide_measure adds block sums), then invocation 0 keeps the largest d whose set
// is enough (count >= k, or with top-p in phase 2, mass >= limit) in the prefix, and moves on.
// Candidate 0 always is: it is the previous level's choice (level 0: t = 0, every allowed id).
// State (words from WSTATE_OFF; sample_wide_prep.wgsl zeroes it):
//   [0] level (0..15; 16 when done) [1] phase (1: top-k's k-th entry, for top-p's mass M;
//   2: the kept set) [2] [3] the prefix (key hi, lo) [4] k [5] limit bits (top_p * M)
//   [6] M bits (0 without top-p) [7] the last level's d [8] the kept count [9] the kept mass
//   bits [10] allowed ids
// Phase 1 ends with M = the mass of the k best and the prefix reset; phase 2 with the kept
// set's key (the prefix), count and mass, and [7] naming the block sums sample_pick walks.
// Constants: WG, N_BLOCKS, WSTATE_OFF, WCOUNT_OFF.
var<workgroup> tot: array<f32, 16>;
var<workgroup> num: array<u32, 16>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid < 16u) {
        var t = 0.0;
        var c = 0u;
        for (var b = 0u; b < N_BLOCKS; b++) {
            c += scratch[WCOUNT_OFF + 32u * b + 2u * lid];
            t = t + bitcast<f32>(scratch[WCOUNT_OFF + 32u * b + 2u * lid + 1u]);
        }
        tot[lid] = t;
        num[lid] = c;
    }
    workgroupBarrier();
    if (lid != 0u) { return; }
    let level = scratch[WSTATE_OFF];
    let phase = scratch[WSTATE_OFF + 1u];
    let top_p = (P.flags & F_TOP_P) != 0u;
    if (level == 0u) {
        let n_allowed = num[0];
        scratch[WSTATE_OFF + 10u] = n_allowed;
        scratch[WSTATE_OFF + 4u] = select(n_allowed, P.k, P.k > 0u && P.k < n_allowed);
        if (phase == 2u && top_p && P.k == 0u) { // top-k off: M is every allowed id's mass
            scratch[WSTATE_OFF + 6u] = bitcast<u32>(tot[0]);
            scratch[WSTATE_OFF + 5u] = bitcast<u32>(fmul(P.top_p, tot[0]));
        }
    }
    let k = scratch[WSTATE_OFF + 4u];
    let limit = bitcast<f32>(scratch[WSTATE_OFF + 5u]);
    let use_limit = phase == 2u && top_p;
    var d = 15u;
    while (d > 0u && !(num[d] >= k || (use_limit && tot[d] >= limit))) { d--; }
    let s = 28u - 4u * (level & 7u);
    let w = select(2u, 3u, level >= 8u);
    scratch[WSTATE_OFF + w] |= d << s;
    if (level < 15u) {
        scratch[WSTATE_OFF] = level + 1u;
    } else if (phase == 1u) {
        scratch[WSTATE_OFF + 6u] = bitcast<u32>(tot[d]);
        scratch[WSTATE_OFF + 5u] = bitcast<u32>(fmul(P.top_p, tot[d]));
        scratch[WSTATE_OFF] = 0u;
        scratch[WSTATE_OFF + 1u] = 2u;
        scratch[WSTATE_OFF + 2u] = 0u;
        scratch[WSTATE_OFF + 3u] = 0u;
    } else {
        scratch[WSTATE_OFF] = 16u;
        scratch[WSTATE_OFF + 7u] = d;
        scratch[WSTATE_OFF + 8u] = num[d];
        scratch[WSTATE_OFF + 9u] = bitcast<u32>(tot[d]);
    }
}
