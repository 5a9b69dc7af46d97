// sample_pick.wgsl — the end of a sampling step (sample_reference steps 4-6), one workgroup:
// from the final candidate list (FINAL_OFF), the weights w_j = sampler_exp((v_j - v_0) *
// inv_temp) (one per invocation), then in invocation 0, in order: their running sums, top-p's
// cut, the Philox draw for the position held in hist[HB], the pick. Everything invocation 0
// reads in sequence is first brought into workgroup memory by all invocations (a chain of
// dependent reads of device memory would cost a round trip each).
// Writes the id to out[OUT_INDEX + ROW] (NO_ID when no id is allowed), advances the position, adds
// the id to the penalty window (per-id counts, and a ring of the last ring_len ids so the
// oldest can leave), and writes the trace at TRACE_OFF:
//   [0] n_cand [1] n_kept [2] pick [3] u [4] target (u * the kept mass) [5] position [6] id
//   [7] top-p's mass (0 when off) [8 .. 72) weights [72 .. 136) running sums   (f32 as bits)
//   [136] the kept mass [137] [138] the kept set's key (hi, lo) [139] 1 for the wide draw
// Greedy (F_GREEDY): the list has one entry, the argmax; it is the pick.
// The wide draw (F_WIDE, sampler.c W4): the kept set is every id whose key (sample_wide_prep)
// reaches the one sample_wide_digit found; t = u * its mass; the block sums of the search's
// last level are walked in order to the block where before + sum first exceeds t, then that
// block's kept weights one by one. [0] is then k, [1] the kept count, [2] -1, and the weights
// are those of the first candidates, up to 64 of the kept ones.
// Constants: WG (64), N_VOCAB, FINAL_OFF, TRACE_OFF, OUT_INDEX, SUM_BLOCK, N_BLOCKS, WIDE_OFF,
// WSTATE_OFF, WCOUNT_OFF.
// hist: [0] position of the next draw [1] ring head (next slot) [2] ring fill [3] unused
//       [4 .. 4 + N_VOCAB) counts   [4 + N_VOCAB .. + ring_len) the ring
@group(0) @binding(2) var<storage, read_write> hist: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

const RING = 4u + N_VOCAB;
var<workgroup> cand: array<Entry, 64>;
var<workgroup> wts: array<f32, 64>;
var<workgroup> n_cand: atomic<u32>; // zero at the start of the dispatch, as all workgroup memory

fn remember(id: u32) {
    hist[4u + id] += 1u;
    if (P.ring_len == 0u) { return; } // the whole history counts
    let head = hist[1];
    if (hist[2] == P.ring_len) {
        hist[4u + hist[RING + head]] -= 1u; // the oldest leaves the window
    } else {
        hist[2] += 1u;
    }
    hist[RING + head] = id;
    hist[1] = (head + 1u) % P.ring_len;
}

// Steps 4-6 over the first k candidates, weights in wts, in invocation 0; returns (n_kept, pick).
fn draw(k: u32, pos: u32) -> vec2<u32> {
    var cum: array<f32, 64>;
    var s = 0.0;
    for (var j = 0u; j < k; j++) {
        s = select(s + wts[j], wts[j], j == 0u);
        cum[j] = s;
        scratch[RB + TRACE_OFF + 8u + j] = bitcast<u32>(wts[j]);
        scratch[RB + TRACE_OFF + 72u + j] = bitcast<u32>(s);
    }
    var m = k;
    scratch[RB + TRACE_OFF + 7u] = 0u;
    if ((P.flags & F_TOP_P) != 0u) {
        let total = cum[k - 1u];
        scratch[RB + TRACE_OFF + 7u] = bitcast<u32>(total);
        let limit = fmul(P.top_p, total);
        m = 1u;
        while (m < k && cum[m - 1u] < limit) { m++; }
    }
    let u = sampler_uniform(pos);
    let t = fmul(u, cum[m - 1u]);
    var pick = m - 1u;
    for (var j = 0u; j < m; j++) {
        if (t < cum[j]) {
            pick = j;
            break;
        }
    }
    scratch[RB + TRACE_OFF + 3u] = bitcast<u32>(u);
    scratch[RB + TRACE_OFF + 4u] = bitcast<u32>(t);
    return vec2<u32>(m, pick);
}

// sampler.c W4 in invocation 0: the drawn id (NO_ID if none is allowed); writes its trace.
fn wide_draw(pos: u32, n_cand: u32) -> u32 {
    let kept = bitcast<f32>(scratch[RB + WSTATE_OFF + 9u]);
    let count = scratch[RB + WSTATE_OFF + 8u];
    let dk = scratch[RB + WSTATE_OFF + 7u];
    let th = scratch[RB + WSTATE_OFF + 2u];
    let tl = scratch[RB + WSTATE_OFF + 3u];
    let u = sampler_uniform(pos);
    let t = fmul(u, kept);
    var id = NO_ID;
    if (n_cand > 0u) {
        var before = 0.0;
        var blk = N_BLOCKS;
        for (var b = 0u; b < N_BLOCKS; b++) {
            let m = bitcast<f32>(scratch[RB + WCOUNT_OFF + 32u * b + 2u * dk + 1u]);
            if (t < before + m) {
                blk = b;
                break;
            }
            before = before + m;
        }
        var sum = 0.0;
        for (var i = blk * SUM_BLOCK; blk < N_BLOCKS && i < min(N_VOCAB, (blk + 1u) * SUM_BLOCK); i++) {
            let kh = scratch[RB + WIDE_OFF + 3u * i];
            let kl = scratch[RB + WIDE_OFF + 3u * i + 1u];
            if (kh != 0u && (kh > th || (kh == th && kl >= tl))) {
                sum = sum + bitcast<f32>(scratch[RB + WIDE_OFF + 3u * i + 2u]);
                if (t < before + sum) {
                    id = i;
                    break;
                }
            }
        }
    }
    for (var j = 0u; j < 64u; j++) {
        var w = 0u;
        if (j < min(count, n_cand)) { w = scratch[RB + WIDE_OFF + 3u * cand[j].id + 2u]; }
        scratch[RB + TRACE_OFF + 8u + j] = w;
        scratch[RB + TRACE_OFF + 72u + j] = 0u;
    }
    scratch[RB + TRACE_OFF] = scratch[RB + WSTATE_OFF + 4u];
    scratch[RB + TRACE_OFF + 1u] = count;
    scratch[RB + TRACE_OFF + 2u] = NO_ID;
    scratch[RB + TRACE_OFF + 3u] = bitcast<u32>(u);
    scratch[RB + TRACE_OFF + 4u] = bitcast<u32>(t);
    scratch[RB + TRACE_OFF + 7u] = scratch[RB + WSTATE_OFF + 6u];
    scratch[RB + TRACE_OFF + 136u] = bitcast<u32>(kept);
    scratch[RB + TRACE_OFF + 137u] = th;
    scratch[RB + TRACE_OFF + 138u] = tl;
    scratch[RB + TRACE_OFF + 139u] = 1u;
    return id;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    row_begin(wid.y);
    let greedy = (P.flags & F_GREEDY) != 0u;
    var e = SENTINEL;
    if (lid < select(64u, 1u, greedy)) { e = load_list_entry(FINAL_OFF, lid); }
    cand[lid] = e;
    if (e.id != NO_ID) { atomicAdd(&n_cand, 1u); }
    workgroupBarrier();
    let k = min(P.k, atomicLoad(&n_cand)); // the list is sorted: its first n_cand are real
    if (lid < k) { wts[lid] = sampler_exp(fmul(bitcast<f32>(e.v) - bitcast<f32>(cand[0].v), P.inv_temp)); }
    workgroupBarrier();
    if (lid != 0u) { return; }
    let pos = hist[HB];
    if ((P.flags & F_WIDE) != 0u) {
        let id = wide_draw(pos, atomicLoad(&n_cand));
        out[OUT_INDEX + ROW] = id;
        hist[HB] = pos + 1u;
        if (id != NO_ID && (P.flags & F_PENALTY) != 0u) { remember(id); }
        scratch[RB + TRACE_OFF + 5u] = pos;
        scratch[RB + TRACE_OFF + 6u] = id;
        return;
    }
    for (var j = 136u; j < 140u; j++) { scratch[RB + TRACE_OFF + j] = 0u; }
    var r = vec2<u32>(0u, 0u);
    var id = NO_ID;
    if (k > 0u) {
        if (greedy) {
            r = vec2<u32>(1u, 0u);
            scratch[RB + TRACE_OFF + 8u] = bitcast<u32>(1.0);
            scratch[RB + TRACE_OFF + 72u] = bitcast<u32>(1.0);
            scratch[RB + TRACE_OFF + 3u] = 0u;
            scratch[RB + TRACE_OFF + 4u] = 0u;
            scratch[RB + TRACE_OFF + 7u] = 0u;
        } else {
            r = draw(k, pos);
        }
        id = cand[r.y].id;
    }
    out[OUT_INDEX + ROW] = id;
    hist[HB] = pos + 1u;
    if (id != NO_ID && (P.flags & F_PENALTY) != 0u) { remember(id); }
    scratch[RB + TRACE_OFF] = k;
    scratch[RB + TRACE_OFF + 1u] = r.x;
    scratch[RB + TRACE_OFF + 2u] = r.y;
    scratch[RB + TRACE_OFF + 5u] = pos;
    scratch[RB + TRACE_OFF + 6u] = id;
}
