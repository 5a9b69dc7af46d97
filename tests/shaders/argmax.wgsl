// argmax.wgsl — out[0] = the index of the largest of x[0..N), the lowest index among equals
// (as the CPU's greedy pick). One workgroup: lane k scans k, k + WG, ... keeping the first
// maximum, then a tree over the lanes keeps the larger value, or the lower index on a tie.
// Constants: N, WG.
// Only the tests run it (tests/gpu_test.h): the runtime draws on the GPU with sample_*.wgsl.
@group(0) @binding(0) var<storage, read> x: array<f32>;        // (N)
@group(0) @binding(1) var<storage, read_write> out: array<u32>; // (1)

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var v = -3.4e38;
    var bi = 0xffffffffu;
    for (var i = lid; i < N; i += WG) {
        if (bi == 0xffffffffu || x[i] > v) {
            v = x[i];
            bi = i;
        }
    }
    best_v[lid] = v;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            let ov = best_v[lid + s];
            let oi = best_i[lid + s];
            if ((oi < best_i[lid] && (ov >= best_v[lid] || best_i[lid] == 0xffffffffu)) || ov > best_v[lid]) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { out[0] = best_i[0]; }
}
