// attention.wgsl — causal grouped-query attention of the call's queries over one layer's KV
// cache (keys after RoPE), as forward_ref.c's attend_token computes it but with a streaming
// softmax (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018; the
// FlashAttention recurrence): for token t at position p = pos + t and query head h, over the
// keys j <= p of KV head h / GROUP,
//   out = sum_j softmax_j(q . k_j * SCALE) v_j.
// One workgroup per (head h, token t, split s). Keys are taken WG at a time, one per lane (each
// lane dots the query, held in workgroup memory, with its key); the tile's maximum rescales the
// running sum l and accumulator, and lane d accumulates dimensions d, d + WG, ... of the values.
// Unsplit (one workgroup along z): all keys 0..p, out = acc / l into the att rows. Split (z > 1,
// decode: one token): workgroup s takes keys [s * CHUNK, (s + 1) * CHUNK) and writes its
// partial (acc, m, l) after the att rows; attn_combine.wgsl merges them. CHUNK is the step's
// (step.chunk, gpu_attention_chunk in ops.c).
// Constants: N_HEAD, GROUP (n_head / n_head_kv), HEAD_DIM, KV_DIM, Q_DIM, Q_STRIDE (floats
// between tokens' queries), SCALE, DPT (ceil(HEAD_DIM / WG)), PART_OFF (element where the
// partials start in out), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;         // (n_batch, Q_STRIDE), heads first, after RoPE
@group(0) @binding(2) var<storage, read> kc: array<f32>;        // (n_ctx, KV_DIM)
@group(0) @binding(3) var<storage, read> vc: array<f32>;        // (n_ctx, KV_DIM)
// [0, PART_OFF): att (n_batch, Q_DIM); then partials (n_split, N_HEAD, HEAD_DIM + 2): acc, m, l
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> qs: array<f32, HEAD_DIM>; // this head's query
var<workgroup> pr: array<f32, WG>;       // the tile's e^(score - m)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t = wid.y;
    let kvo = (h / GROUP) * HEAD_DIM; // this head's slice of a cache row
    let n_keys = step.pos + t + 1u;
    var k0 = 0u;
    var k1 = n_keys;
    if (nwg.z > 1u) {
        k0 = wid.z * step.chunk;
        k1 = min(k0 + step.chunk, n_keys);
    }
    for (var d = lid; d < HEAD_DIM; d += WG) { qs[d] = q[t * Q_STRIDE + h * HEAD_DIM + d]; }
    workgroupBarrier();

    var m = -3.0e38; // running maximum of the scores (finite: WGSL has no infinity literal)
    var l = 0.0;     // running sum of e^(score - m)
    var acc: array<f32, DPT>;
    for (var j0 = k0; j0 < k1; j0 += WG) {
        let j = j0 + lid;
        var sc = -3.0e38;
        if (j < k1) {
            var dot = 0.0;
            for (var d = 0u; d < HEAD_DIM; d++) { dot += qs[d] * kc[j * KV_DIM + kvo + d]; }
            sc = dot * SCALE;
        }
        let m_new = max(m, wg_max(sc, lid));
        var e = 0.0;
        if (j < k1) { e = exp(sc - m_new); }
        pr[lid] = e;
        // A barrier of its own before wg_sum's: without it Mesa's llvmpipe (Dawn over GLES)
        // read stale pr entries of lanes 8 and up (seen with 9+ keys in test_gpu_ops).
        workgroupBarrier();
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(e, lid);
        let n_in = min(WG, k1 - j0);
        for (var i = 0u; i < DPT; i++) {
            let d = lid + i * WG;
            if (d < HEAD_DIM) {
                var a = acc[i] * corr;
                for (var jj = 0u; jj < WG; jj++) { // a constant count: the loads can go out together
                    if (jj < n_in) { a += pr[jj] * vc[(j0 + jj) * KV_DIM + kvo + d]; }
                }
                acc[i] = a;
            }
        }
        m = m_new;
        workgroupBarrier(); // pr is rewritten by the next tile
    }

    if (nwg.z == 1u) {
        for (var i = 0u; i < DPT; i++) {
            let d = lid + i * WG;
            if (d < HEAD_DIM) { out[t * Q_DIM + h * HEAD_DIM + d] = acc[i] / l; }
        }
        return;
    }
    let base = PART_OFF + (wid.z * N_HEAD + h) * (HEAD_DIM + 2u);
    for (var i = 0u; i < DPT; i++) {
        let d = lid + i * WG;
        if (d < HEAD_DIM) { out[base + d] = acc[i]; }
    }
    if (lid == 0u) {
        out[base + HEAD_DIM] = m;
        out[base + HEAD_DIM + 1u] = l;
    }
}
