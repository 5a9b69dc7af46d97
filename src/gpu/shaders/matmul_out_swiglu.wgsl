// matmul_out_swiglu.wgsl — GPU_MM_SWIGLU's y_out (matmul_out.wgsl): silu(gate) * up of a stacked
// [Wgate; Wup], a = Wgate's sum, b = Wup's (ref_swiglu; swiglu.wgsl is the unfused twin).
fn y_out(i: u32, o: u32, a: f32, b: f32) { Y[i] = a / (1.0 + exp(-a)) * b; }
