// attention_walk.wgsl — attention.wgsl's walk over keys [k0, k1) of one query head h, shared
// by decode's kernel (attention.wgsl) and the batched pass's (attention_rows.wgsl): the query at
// vec4 qo of q, the keys and values of the sequence at vec4 cb of kc, vc. Returns, in lanes
// below HD4, the lane's vec4 of the unnormalized output, and the running maximum m and sum l
// (attention.wgsl says how). Every invocation of the workgroup calls it (barriers inside).
// Reads the including kernel's q, kc, vc; constants as attention.wgsl's.
const KV4: u32 = KV_DIM / 4u;
const STEPS: u32 = (WG + KG - 1u) / KG; // keys of a tile one lane's value sum takes

var<workgroup> pr: array<f32, WG>;             // the tile's e^(score - m)
var<workgroup> part: array<vec4<f32>, KG * HD4>; // the key groups' value sums

struct Attended { o: vec4<f32>, m: f32, l: f32 }

fn attend(h: u32, k0: u32, k1: u32, qo: u32, cb: u32, lid: u32) -> Attended {
    let kvo = cb + (h / GROUP) * HD4; // this head's slice of a cache row, in vec4s
    let g = lid / HD4; // the lane's key group and vec4 of the values
    let v = lid % HD4;
    var m = -3.0e38; // running maximum of the scores (finite: WGSL has no infinity literal)
    var l = 0.0;     // running sum of e^(score - m)
    var acc = vec4<f32>(0.0);
    for (var j0 = k0; j0 < k1; j0 += WG) {
        let n_in = min(WG, k1 - j0);
        var vt: array<vec4<f32>, STEPS>; // the tile's values this lane adds: keys g + u * KG
        if (g < KG) {
            for (var u = 0u; u < STEPS; u++) { // a constant count: the loads go out together
                let jj = g + u * KG;
                if (jj < n_in) { vt[u] = vc[(j0 + jj) * KV4 + kvo + v]; }
            }
        }
        let j = j0 + lid;
        var sc = -3.0e38;
        if (j < k1) {
            var dot4 = vec4<f32>(0.0); // four partial sums, so the HD4 loads go out together
            for (var i = 0u; i < HD4; i++) { dot4 += q[qo + i] * kc[j * KV4 + kvo + i]; }
            sc = (dot4.x + dot4.y + dot4.z + dot4.w) * SCALE;
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
        if (g < KG) {
            var a = acc * corr;
            for (var u = 0u; u < STEPS; u++) {
                let jj = g + u * KG;
                if (jj < n_in) { a += pr[jj] * vt[u]; }
            }
            acc = a;
        }
        m = m_new;
        workgroupBarrier(); // pr is rewritten by the next tile
    }
    if (g < KG) { part[g * HD4 + v] = acc; }
    workgroupBarrier();
    var o = vec4<f32>(0.0);
    if (lid < HD4) {
        o = part[lid];
        for (var k = 1u; k < KG; k++) { o += part[k * HD4 + lid]; }
    }
    return Attended(o, m, l);
}
