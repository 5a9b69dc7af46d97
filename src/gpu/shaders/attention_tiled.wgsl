// attention_tiled.wgsl — attention.wgsl's causal grouped-query attention for prefill (n_tok > 1):
// one workgroup per (query head h, tile of TQ tokens t0 .. t0 + TQ - 1). Each token's query and
// output accumulators live in the registers of its LPT lanes (lane lid serves token lid / LPT
// and vec4s part * D4 .. part * D4 + D4 - 1 of the head, part = lid % LPT), so a key or value
// read from workgroup memory feeds D4 * 4 multiply-adds, and every lane runs the streaming
// softmax of its own token (attention.wgsl's recurrence) with no workgroup reduction. The keys
// 0 .. pos + t0 + TQ - 1 of KV head h / GROUP come in tiles of BK cache rows, each read from the
// cache once per workgroup (not once per token) into ks and vs. Per tile, a lane:
//   1. dots its part of the query with each key: with LPT > 1 the parts meet in sp and every
//      lane of the token adds them in part order, so all of them hold the same scores;
//   2. takes the tile's keys j <= pos + t (the causal mask by absolute position) into its
//      running maximum m and sum l, rescaling its accumulators by e^(m - m_new);
//   3. adds e^(score - m) times each value to its accumulators.
// Finally out = acc / l into the att rows, laid out as attention.wgsl's; tokens past n_tok in
// the last tile compute nothing that is written. Every barrier is in main, in uniform control
// flow (loop bounds depend on the workgroup only).
// Constants: GROUP, HEAD_DIM (a multiple of 4), KV_DIM, Q_DIM, Q_STRIDE (floats between tokens'
// queries; a multiple of 4), SCALE, LPT (lanes per token; divides HEAD_DIM / 4), BK (keys per
// tile), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;  // (n_batch, Q_STRIDE), heads first, after RoPE
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>; // (n_ctx, KV_DIM)
@group(0) @binding(3) var<storage, read> vc: array<vec4<f32>>; // (n_ctx, KV_DIM)
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // att (n_batch, Q_DIM) first

const HD4: u32 = HEAD_DIM / 4u;
const D4: u32 = HD4 / LPT; // vec4s of the head a lane holds
const TQ: u32 = WG / LPT;  // tokens a workgroup (lanes past TQ * LPT idle)
const KV4: u32 = KV_DIM / 4u;
const QS4: u32 = Q_STRIDE / 4u;
const SP: u32 = select(1u, WG * BK, LPT > 1u);

var<workgroup> ks: array<vec4<f32>, BK * HD4>; // this tile's keys, row-major
var<workgroup> vs: array<vec4<f32>, BK * HD4>; // and values
var<workgroup> sp: array<f32, SP>;             // lane l's partial score of key jj at l * BK + jj

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t0 = wid.y * TQ;
    let n_in_tile = min(TQ, step.n_tok - t0); // tokens of this tile that exist
    let k_end = step.pos + t0 + n_in_tile;    // keys of the tile's last token: 0 .. k_end - 1
    let kvo = (h / GROUP) * HD4;              // this head's slice of a cache row, in vec4s
    let tl = lid / LPT;                       // this lane's token in the tile
    let d0 = (lid % LPT) * D4;                // and its first vec4 of the head
    let live = tl < n_in_tile;
    let last = step.pos + t0 + tl;            // the token's last key
    var qv: array<vec4<f32>, D4>;
    var acc: array<vec4<f32>, D4>;
    for (var i = 0u; i < D4; i++) {
        if (live) { qv[i] = q[(t0 + tl) * QS4 + h * HD4 + d0 + i]; }
        acc[i] = vec4<f32>(0.0);
    }
    var m = -3.0e38; // running maximum of the scores (finite: WGSL has no infinity literal)
    var l = 0.0;     // running sum of e^(score - m)
    for (var j0 = 0u; j0 < k_end; j0 += BK) {
        for (var e = lid; e < BK * HD4; e += WG) {
            let j = j0 + e / HD4;
            if (j < k_end) {
                ks[e] = kc[j * KV4 + kvo + e % HD4];
                vs[e] = vc[j * KV4 + kvo + e % HD4];
            }
        }
        workgroupBarrier(); // the tile in
        // this token's keys in the tile: j0 .. j0 + n - 1
        var n = 0u;
        if (live && last >= j0) { n = min(BK, last + 1u - j0); }
        var sc: array<f32, BK>;
        for (var jj = 0u; jj < BK; jj++) {
            var d = vec4<f32>(0.0); // four partial sums, so the reads go out together
            for (var i = 0u; i < D4; i++) { d += qv[i] * ks[jj * HD4 + d0 + i]; }
            sc[jj] = d.x + d.y + d.z + d.w;
        }
        if (LPT > 1u) {
            for (var jj = 0u; jj < BK; jj++) { sp[lid * BK + jj] = sc[jj]; }
            workgroupBarrier();
            for (var jj = 0u; jj < BK; jj++) {
                var s = 0.0;
                for (var p = 0u; p < LPT; p++) { s += sp[(min(tl, TQ - 1u) * LPT + p) * BK + jj]; }
                sc[jj] = s;
            }
        }
        var m_new = m;
        for (var jj = 0u; jj < BK; jj++) {
            sc[jj] *= SCALE;
            if (jj < n) { m_new = max(m_new, sc[jj]); }
        }
        let corr = exp(m - m_new);
        for (var i = 0u; i < D4; i++) { acc[i] *= corr; }
        var s = 0.0;
        for (var jj = 0u; jj < BK; jj++) {
            if (jj < n) {
                let p = exp(sc[jj] - m_new);
                s += p;
                for (var i = 0u; i < D4; i++) { acc[i] += p * vs[jj * HD4 + d0 + i]; }
            }
        }
        l = l * corr + s;
        m = m_new;
        workgroupBarrier(); // ks, vs and sp are rewritten by the next tile
    }
    if (!live) { return; }
    let at = (t0 + tl) * Q_DIM + h * HEAD_DIM + 4u * d0;
    for (var i = 0u; i < D4; i++) {
        let o = acc[i] / l;
        for (var c = 0u; c < 4u; c++) { out[at + 4u * i + c] = o[c]; }
    }
}
