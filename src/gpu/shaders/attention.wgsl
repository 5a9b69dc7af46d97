// attention.wgsl — decode's attention: the one query token's causal grouped-query attention
// over one layer's KV cache (keys after RoPE), as forward_ref.c's attend_token computes it but
// with a streaming softmax (Milakov & Gimelshein, "Online normalizer calculation for softmax",
// 2018; the FlashAttention recurrence): at position p = pos and query head h, over the keys
// j <= p of KV head h / GROUP,
//   out = sum_j softmax_j(q . k_j * SCALE) v_j.
// One workgroup per (head h, split s). Keys are taken WG at a time, a tile: lane j dots the
// query (in workgroup memory) with key j, HD4 vec4s; the tile's maximum rescales the running
// sum l and the accumulators; then the lanes split the tile's values by key as well as by
// dimension — lane (g, v), g < KG = WG / HD4 key groups, adds keys g, g + KG, ... of vec4 v of
// the values — so a tile costs WG / KG steps, not WG. The key groups' sums are added in group
// order at the end. Decode is latency, not bytes: a step's attention is one workgroup a head
// up to ATT_CHUNK keys (ops.h), with no merge to dispatch; and a tile's three reads go out
// together — every lane reads the query itself (the same 16 B at once: one broadcast), and
// each lane's values are loaded before the scores are, so one memory round trip a tile
// waits, not three (the sums are the same as with the reads in turn).
// Unsplit (one workgroup along z): keys 0..p, out = acc / l into the att row. Split (z > 1):
// workgroup s takes keys [s * CHUNK, (s + 1) * CHUNK) and writes its partial (acc, m, l)
// after the att rows; attn_combine.wgsl merges them. CHUNK is the step's (step.chunk,
// gpu_attention_chunk in ops.c).
// The walk over the keys is attend() (attention_walk.wgsl), shared with the batched pass's kernel
// (attention_rows.wgsl), so a row's bits are decode's.
// Constants: N_HEAD, GROUP (n_head / n_head_kv), HEAD_DIM (a multiple of 4), KV_DIM, SCALE,
// PART_OFF (element where the partials start in out), WG, HD4 (HEAD_DIM / 4, at most WG),
// KG (WG / HD4).
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;  // the token's row of q | k | v: q first, after RoPE
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>; // (n_ctx, KV_DIM)
@group(0) @binding(3) var<storage, read> vc: array<vec4<f32>>; // (n_ctx, KV_DIM)
// [0, PART_OFF): att (n_batch, Q_DIM); then partials (n_split, N_HEAD, HEAD_DIM + 2): acc, m, l
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let n_keys = step.pos + 1u;
    var k0 = 0u;
    var k1 = n_keys;
    if (nwg.z > 1u) {
        k0 = wid.z * step.chunk;
        k1 = min(k0 + step.chunk, n_keys);
    }
    let r = attend(h, k0, k1, h * HD4, 0u, lid); // this head's query, in vec4s
    if (lid >= HD4) { return; }
    let o = r.o;
    let m = r.m;
    let l = r.l;
    if (nwg.z == 1u) {
        let at = h * HEAD_DIM + 4u * lid;
        for (var c = 0u; c < 4u; c++) { out[at + c] = o[c] / l; }
        return;
    }
    let base = PART_OFF + (wid.z * N_HEAD + h) * (HEAD_DIM + 2u);
    for (var c = 0u; c < 4u; c++) { out[base + 4u * lid + c] = o[c]; }
    if (lid == 0u) {
        out[base + HEAD_DIM] = m;
        out[base + HEAD_DIM + 1u] = l;
    }
}
