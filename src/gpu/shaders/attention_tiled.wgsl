// attention_tiled.wgsl — attention.wgsl's causal grouped-query attention for prefill (n_tok > 1),
// tiled: one workgroup per (query head h, tile of TQ tokens t0 .. t0 + TQ - 1). The tile's
// queries stay in workgroup memory; the keys 0 .. pos + t0 + TQ - 1 of KV head h / GROUP come
// in tiles of BK cache rows, each read from the cache once per workgroup (not once per token)
// into kv, first as keys, then as values. Per tile of keys:
//   1. kv <- keys; ps[t][j] = q_t . k_j * SCALE (every lane a share of the TQ x BK scores);
//   2. kv <- values while lane t < TQ takes row t of the streaming softmax (attention.wgsl's
//      recurrence, per row): m_new = max(m, scores), ps[t][j] = e^(score - m_new) for the keys
//      j <= pos + t0 + t (0 for the rest: the causal mask by absolute position),
//      l = l * e^(m - m_new) + sum ps[t], and the factor e^(m - m_new) into corr[t];
//   3. lane (t, r) rescales its accumulators by corr[t] and adds ps[t] . v for dimensions
//      r, r + LPR, ... of token t.
// Finally out = acc / l into the att rows, laid out as attention.wgsl's; tokens past n_tok in
// the last tile are computed (over valid keys) but not written. Every barrier is in main, in
// uniform control flow (the loop bounds depend on the workgroup only), and every write to
// workgroup memory reaches its readers through one of them: attention.wgsl's writes that
// reached their readers only through reduce.wgsl's barriers read stale on Mesa's llvmpipe.
// Constants: GROUP, HEAD_DIM, KV_DIM, Q_DIM, Q_STRIDE (floats between tokens' queries), SCALE,
// TQ (tokens per tile; divides WG), BK (keys per tile), LPR (WG / TQ: lanes per token),
// DPL (ceil(HEAD_DIM / LPR)), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;         // (n_batch, Q_STRIDE), heads first, after RoPE
@group(0) @binding(2) var<storage, read> kc: array<f32>;        // (n_ctx, KV_DIM)
@group(0) @binding(3) var<storage, read> vc: array<f32>;        // (n_ctx, KV_DIM)
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // att (n_batch, Q_DIM) first

// Rows of qs and kv are RS = HEAD_DIM + 1 floats apart: lanes reading one dimension of
// different rows (the scores) then hit different banks of workgroup memory.
const RS = HEAD_DIM + 1u;
var<workgroup> qs: array<f32, TQ * RS>; // the tile's queries, token-major
var<workgroup> kv: array<f32, BK * RS>; // this key tile's keys, then its values
var<workgroup> ps: array<f32, TQ * BK>;       // scores, then e^(score - m), token-major
var<workgroup> corr: array<f32, TQ>;          // per token: e^(m - m_new), at the end l

// Cache rows j0 .. j0 + BK - 1 (those below k_end) of this head's slice of src into kv.
fn load_tile(lid: u32, j0: u32, k_end: u32, kvo: u32, from_values: bool) {
    for (var i = lid; i < BK * HEAD_DIM; i += WG) {
        let j = j0 + i / HEAD_DIM;
        if (j < k_end) {
            let at = j * KV_DIM + kvo + i % HEAD_DIM;
            let to = (i / HEAD_DIM) * RS + i % HEAD_DIM;
            if (from_values) { kv[to] = vc[at]; } else { kv[to] = kc[at]; }
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t0 = wid.y * TQ;
    let n_in_tile = min(TQ, step.n_tok - t0); // tokens of this tile that exist
    let kvo = (h / GROUP) * HEAD_DIM;         // this head's slice of a cache row
    let k_end = step.pos + t0 + n_in_tile;    // keys of the tile's last token: 0 .. k_end - 1
    for (var i = lid; i < TQ * HEAD_DIM; i += WG) {
        let t = i / HEAD_DIM;
        if (t < n_in_tile) { qs[t * RS + i % HEAD_DIM] = q[(t0 + t) * Q_STRIDE + h * HEAD_DIM + i % HEAD_DIM]; }
    }

    let tr = lid / LPR; // the token whose outputs this lane accumulates
    let r = lid % LPR;  // its first dimension
    var m = -3.0e38;    // lane tr < TQ: token lid's running maximum (finite: no infinity in WGSL)
    var l = 0.0;        // and its running sum of e^(score - m)
    var acc: array<f32, DPL>;
    for (var j0 = 0u; j0 < k_end; j0 += BK) {
        load_tile(lid, j0, k_end, kvo, false);
        workgroupBarrier(); // keys (and, on the first tile, queries) in
        for (var i = lid; i < TQ * BK; i += WG) {
            let t = i / BK;
            let jj = i % BK;
            var dot = 0.0;
            if (j0 + jj < k_end) {
                for (var d = 0u; d < HEAD_DIM; d++) { dot += qs[t * RS + d] * kv[jj * RS + d]; }
            }
            ps[i] = dot * SCALE;
        }
        workgroupBarrier(); // scores in; kv free
        load_tile(lid, j0, k_end, kvo, true);
        if (lid < TQ) {
            let last = step.pos + t0 + lid; // this token's last key
            var m_new = m;
            for (var jj = 0u; jj < BK; jj++) {
                if (j0 + jj <= last && j0 + jj < k_end) { m_new = max(m_new, ps[lid * BK + jj]); }
            }
            var s = 0.0;
            for (var jj = 0u; jj < BK; jj++) {
                var e = 0.0;
                if (j0 + jj <= last && j0 + jj < k_end) { e = exp(ps[lid * BK + jj] - m_new); }
                ps[lid * BK + jj] = e;
                s += e;
            }
            let c = exp(m - m_new);
            l = l * c + s;
            m = m_new;
            corr[lid] = c;
        }
        workgroupBarrier(); // values, probabilities and corr in
        let n_keys = min(BK, k_end - j0);
        for (var i = 0u; i < DPL; i++) {
            let d = r + i * LPR;
            if (d < HEAD_DIM) {
                var a = acc[i] * corr[tr];
                for (var jj = 0u; jj < n_keys; jj++) { a += ps[tr * BK + jj] * kv[jj * RS + d]; }
                acc[i] = a;
            }
        }
        workgroupBarrier(); // kv, ps and corr are rewritten by the next tile
    }

    if (lid < TQ) { corr[lid] = l; }
    workgroupBarrier();
    if (tr < n_in_tile) {
        for (var i = 0u; i < DPL; i++) {
            let d = r + i * LPR;
            if (d < HEAD_DIM) { out[(t0 + tr) * Q_DIM + h * HEAD_DIM + d] = acc[i] / corr[tr]; }
        }
    }
}
