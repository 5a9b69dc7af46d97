// sample_topk.wgsl — the first level of the top-k tree (sampler.c section 4): each workgroup
// keeps the 64 best of its CHUNK entries (load_entry(e) for e in [wid * CHUNK, ...), e < N_IN,
// from sample_vocab) and writes them, best first, as list wid at OUT_OFF (words);
// sample_merge's levels then merge the lists until one is left: the candidates, in
// sample_reference's order. The set and order of the 64 best is unique under the total order,
// so any correct selection gives sample_reference's (which scans ids in order instead).
//
//   1. a bound: each invocation finds the best of its entries (lid, lid + WG, ...); the worst
//      of those WG = 64 distinct entries is no better than the 64th best entry, so nothing
//      worse than it can be a candidate.
//   2. the survivors (entries no worse than the bound; typically a few hundred of 4096) are
//      gathered in workgroup memory, in any order; if more than CAP survive (many ties at the
//      top), every entry is taken instead.
//   3. per block of 128 of them, a bitonic network (Batcher 1968; each step a compare-exchange
//      of a pair of slots, one pair per invocation): sort the block best first (stages k = 2 ..
//      128, strides k/2 .. 1), then merge its first 64 into best (merge_into).
// Constants: WG (64), N_IN, CHUNK, OUT_OFF. 6 KiB of workgroup storage (best: sample_common.wgsl's).
const CAP = 512u;
const UNROLL = 4u;
var<workgroup> blk: array<Entry, 128>;
var<workgroup> red: array<Entry, 64>;
var<workgroup> surv: array<Entry, CAP>;
var<workgroup> n_surv: atomic<u32>;
var<workgroup> n_surv_copy: u32;

// Sorts blk (filled, followed by a barrier) and merges its best 64 into best.
fn absorb_block(lid: u32) {
    for (var k = 2u; k <= 128u; k <<= 1u) {
        for (var j = k >> 1u; j > 0u; j >>= 1u) {
            let i = pair_lo(lid, j);
            let a = blk[i];
            let b = blk[i + j];
            // runs with (i & k) == 0 are sorted best first, the others worst first
            if (select(better(a, b), better(b, a), (i & k) == 0u)) {
                blk[i] = b;
                blk[i + j] = a;
            }
            workgroupBarrier();
        }
    }
    merge_into(blk[63u - lid], lid);
}

// The worst of the invocations' best entries (step 1). Invocation lid reads entries lid,
// lid + WG, ... (coalesced), UNROLL at a time so that their reads overlap.
fn bound(base: u32, end: u32, lid: u32) -> Entry {
    var m = SENTINEL;
    for (var e = base + lid; e < end; e += UNROLL * WG) {
        var x: array<Entry, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) { x[u] = load_entry(e + u * WG, end); }
        for (var u = 0u; u < UNROLL; u++) {
            if (better(x[u], m)) { m = x[u]; }
        }
    }
    red[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s && better(red[lid], red[lid + s])) { red[lid] = red[lid + s]; }
        workgroupBarrier();
    }
    return red[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    row_begin(wid.y);
    let base = wid.x * CHUNK;
    let end = min(N_IN, base + CHUNK);
    best[lid] = SENTINEL;
    if (lid == 0u) { atomicStore(&n_surv, 0u); }
    let b = bound(base, end, lid);
    for (var e = base + lid; e < end; e += UNROLL * WG) {
        var x: array<Entry, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) { x[u] = load_entry(e + u * WG, end); }
        for (var u = 0u; u < UNROLL; u++) {
            if (x[u].id != NO_ID && !better(b, x[u])) {
                let i = atomicAdd(&n_surv, 1u);
                if (i < CAP) { surv[i] = x[u]; }
            }
        }
    }
    workgroupBarrier();
    if (lid == 0u) { n_surv_copy = atomicLoad(&n_surv); }
    let n = workgroupUniformLoad(&n_surv_copy);
    if (n <= CAP) {
        for (var s = 0u; s < n; s += 128u) {
            for (var h = 0u; h < 128u; h += 64u) {
                let i = s + h + lid;
                blk[h + lid] = SENTINEL;
                if (i < n) { blk[h + lid] = surv[i]; }
            }
            workgroupBarrier();
            absorb_block(lid);
        }
    } else {
        for (var s = base; s < end; s += 128u) {
            for (var h = 0u; h < 128u; h += 64u) {
                let e = s + h + lid;
                blk[h + lid] = load_entry(e, end);
            }
            workgroupBarrier();
            absorb_block(lid);
        }
    }
    store_list_entry(OUT_OFF, wid.x * 64u + lid, best[lid]);
}
