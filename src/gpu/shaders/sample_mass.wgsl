// sample_mass.wgsl — top-p's mass when top-k did not choose the candidates (sampler.c's
// full_mass): block b's sum is sampler_exp((x_i - max) * inv_temp) over the allowed ids of
// ids [b * SUM_BLOCK, ...), added one after another, lowest id first; it goes to MASS_OFF + b,
// and sample_pick adds the block sums in block order. max is the best candidate's value
// (entry 0 of the list at MAX_OFF).
// A workgroup does MB blocks: all invocations compute the weights (coalesced reads, the exps
// in parallel) into workgroup memory, then invocation j < MB adds block j's in order. An id
// that is not allowed (or past the vocabulary) adds +0, which leaves a sum of weights >= 0
// unchanged, exactly as skipping it does.
// Constants: WG, N_VOCAB, LOGITS_OFF, SUM_BLOCK, N_BLOCKS, MASS_OFF, MAX_OFF, MB (MB * SUM_BLOCK
// * 4 bytes of workgroup storage: 8 KiB).
var<workgroup> w: array<f32, MB * SUM_BLOCK>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let first = wid.x * MB * SUM_BLOCK;
    let max_v = bitcast<f32>(scratch[MAX_OFF]);
    for (var h = lid; h < MB * SUM_BLOCK; h += WG) {
        let i = first + h;
        let x = load_entry(i, N_VOCAB);
        var v = 0.0;
        if (x.id != NO_ID) { v = sampler_exp(fmul(bitcast<f32>(x.v) - max_v, P.inv_temp)); }
        w[h] = v;
    }
    workgroupBarrier();
    let b = wid.x * MB + lid;
    if (lid < MB && b < N_BLOCKS) {
        var s = 0.0;
        for (var j = 0u; j < SUM_BLOCK; j++) { s = s + w[lid * SUM_BLOCK + j]; }
        scratch[MASS_OFF + b] = bitcast<u32>(s);
    }
}
