// attention_tiled.wgsl — attention.wgsl's causal grouped-query attention for prefill (n_tok > 1):
// one workgroup per (query head h, tile of TQ tokens t0 .. t0 + TQ - 1). Each token's query and
// output accumulators live in the registers of its LPT lanes (a lane holds vec4s
// part * D4 .. part * D4 + D4 - 1 of the head), so a key or value read from workgroup memory
// feeds D4 * 4 multiply-adds, and every lane runs the streaming softmax of its own token
// (attention.wgsl's recurrence) with no workgroup reduction. The workgroup is KS such groups of
// TQ * LPT lanes, key splits: the keys 0 .. pos + t0 + TQ - 1 of KV head h / GROUP come KS tiles
// of BK cache rows at a time, each read from the cache once per workgroup into ks and vs, and
// split s takes tile s of each, so a token's keys are walked by KS lanes side by side. Per tile,
// a lane:
//   1. dots its part of the query with each key: with LPT > 1 the parts meet in sp and every
//      lane of the token adds them in part order, so all of them hold the same scores;
//   2. takes the tile's keys j <= pos + t (the causal mask by absolute position) into its
//      running maximum m and sum l, rescaling its accumulators by e^(m - m_new);
//   3. adds e^(score - m) times each value to its accumulators.
// At the end the splits' (m, l, acc) meet in workgroup memory and split 0 merges them in split
// order (attn_combine.wgsl's merge) into out = acc / l, the att rows laid out as
// attention.wgsl's; tokens past n_tok in the last tile compute nothing that is written. Every
// barrier is in main, in uniform control flow (loop bounds depend on the workgroup only).
// Constants: GROUP, HEAD_DIM (a multiple of 4), KV_DIM, Q_DIM, Q_STRIDE (floats between tokens'
// queries; a multiple of 4), SCALE, LPT (lanes per token; divides HEAD_DIM / 4), TQ (tokens),
// KS (key splits), BK (keys per tile), WG (= KS * TQ * LPT).
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;  // (n_batch, Q_STRIDE), heads first, after RoPE
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>; // (n_ctx, KV_DIM)
@group(0) @binding(3) var<storage, read> vc: array<vec4<f32>>; // (n_ctx, KV_DIM)
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // att (n_batch, Q_DIM) first

const HD4: u32 = HEAD_DIM / 4u;
const D4: u32 = HD4 / LPT; // vec4s of the head a lane holds
const SL: u32 = TQ * LPT;  // lanes a split
const KV4: u32 = KV_DIM / 4u;
const QS4: u32 = Q_STRIDE / 4u;
const SP: u32 = select(1u, WG * BK, LPT > 1u);
const_assert WG == KS * SL;
// the merge: splits 1.. hand split 0 their accumulators through vs, MCH vec4s a lane a round
const MCH: u32 = min(D4, KS * BK * HD4 / (max(KS, 2u) - 1u) / SL);
const ROUNDS: u32 = (D4 + MCH - 1u) / MCH;
const_assert MCH >= 1u;

var<workgroup> ks: array<vec4<f32>, KS * BK * HD4>; // KS tiles' keys, row-major; at the end the splits' (m, l)
var<workgroup> vs: array<vec4<f32>, KS * BK * HD4>; // and values; at the end accumulators, a round's
var<workgroup> sp: array<f32, SP>;                  // lane l's partial score of key jj at l * BK + jj

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t0 = wid.y * TQ;
    let n_in_tile = min(TQ, step.n_tok - t0); // tokens of this tile that exist
    let k_end = step.pos + t0 + n_in_tile;    // keys of the tile's last token: 0 .. k_end - 1
    let kvo = (h / GROUP) * HD4;              // this head's slice of a cache row, in vec4s
    let split = lid / SL;                     // this lane's key split
    let sl = lid % SL;                        // its lane in the split
    let tl = sl / LPT;                        // its token in the tile
    let d0 = (sl % LPT) * D4;                 // and its first vec4 of the head
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
    for (var b0 = 0u; b0 < k_end; b0 += KS * BK) {
        for (var e = lid; e < KS * BK * HD4; e += WG) {
            let j = b0 + e / HD4;
            if (j < k_end) {
                ks[e] = kc[j * KV4 + kvo + e % HD4];
                vs[e] = vc[j * KV4 + kvo + e % HD4];
            }
        }
        workgroupBarrier(); // the tiles in
        // this token's keys in its split's tile: j0 .. j0 + n - 1, rows r0 .. of ks and vs
        let j0 = b0 + split * BK;
        let r0 = split * BK * HD4;
        var n = 0u;
        if (live && last >= j0) { n = min(BK, last + 1u - j0); }
        var sc: array<f32, BK>;
        for (var jj = 0u; jj < BK; jj++) {
            var d = vec4<f32>(0.0); // four partial sums, so the reads go out together
            for (var i = 0u; i < D4; i++) { d += qv[i] * ks[r0 + jj * HD4 + d0 + i]; }
            sc[jj] = d.x + d.y + d.z + d.w;
        }
        if (LPT > 1u) {
            for (var jj = 0u; jj < BK; jj++) { sp[lid * BK + jj] = sc[jj]; }
            workgroupBarrier();
            for (var jj = 0u; jj < BK; jj++) {
                var s = 0.0;
                for (var p = 0u; p < LPT; p++) { s += sp[(split * SL + min(tl, TQ - 1u) * LPT + p) * BK + jj]; }
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
                for (var i = 0u; i < D4; i++) { acc[i] += p * vs[r0 + jj * HD4 + d0 + i]; }
            }
        }
        l = l * corr + s;
        m = m_new;
        workgroupBarrier(); // ks, vs and sp are rewritten by the next tiles
    }
    // the splits' states meet in split 0: (m, l) through ks, then the accumulators through vs
    // in ROUNDS rounds; split s's weight is e^(m_s - max m), as attn_combine.wgsl merges
    var lt = l;
    if (KS > 1u) {
        if (split > 0u) { ks[(split - 1u) * SL + sl] = vec4<f32>(m, l, 0.0, 0.0); }
        workgroupBarrier();
        var mx = m; // split 0's lanes only: the others hand their state over unscaled
        if (split == 0u) {
            for (var s = 1u; s < KS; s++) { mx = max(mx, ks[(s - 1u) * SL + sl].x); }
            let c0 = exp(m - mx);
            lt = l * c0;
            for (var i = 0u; i < D4; i++) { acc[i] *= c0; }
            for (var s = 1u; s < KS; s++) {
                let ml = ks[(s - 1u) * SL + sl];
                lt += ml.y * exp(ml.x - mx);
            }
        }
        for (var r = 0u; r < ROUNDS; r++) {
            if (split > 0u) {
                for (var i = 0u; i < MCH; i++) {
                    if (r * MCH + i < D4) { vs[((split - 1u) * SL + sl) * MCH + i] = acc[r * MCH + i]; }
                }
            }
            workgroupBarrier();
            if (split == 0u) {
                for (var s = 1u; s < KS; s++) {
                    let cs = exp(ks[(s - 1u) * SL + sl].x - mx);
                    for (var i = 0u; i < MCH; i++) {
                        if (r * MCH + i < D4) { acc[r * MCH + i] += vs[((s - 1u) * SL + sl) * MCH + i] * cs; }
                    }
                }
            }
            workgroupBarrier(); // vs is rewritten by the next round
        }
    }
    if (split > 0u || !live) { return; }
    let at = (t0 + tl) * Q_DIM + h * HEAD_DIM + 4u * d0;
    for (var i = 0u; i < D4; i++) {
        let o = acc[i] / lt;
        for (var c = 0u; c < 4u; c++) { out[at + 4u * i + c] = o[c]; }
    }
}
