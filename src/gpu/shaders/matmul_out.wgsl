// matmul_out.wgsl — what matmul_vec and matmul_tiled do with an output, one function per
// mode of gpu_mm_mode (weights.h). The kernel calls y_out(i, o, a, b) with i the element of Y
// (t * Y_STRIDE + Y_COL + o), o the output, a = (W x)[o] and, in SWIGLU mode only, b = (W x)[o + OUTS]
// (Wup's row); the glue the C side writes picks the mode:
//   fn y_out(i: u32, o: u32, a: f32, b: f32) { y_<mode>(i, o, a, b); }
// Each one is the reference op's expression (ops_ref.c: the residual x += proj, ref_add_bias,
// ref_swiglu; swiglu.wgsl is the unfused twin), one rounding after the sum as there.
// BIAS is bound only where y_bias is used, at binding BIAS_AT (after the kernel's own bindings);
// it is laid out as a row of Y: output o's bias at Y_COL + o (one bias serves Q, K and V
// written as columns of one row, stacked or not).

@group(0) @binding(BIAS_AT) var<storage, read> BIAS: array<f32>; // (Y_COL + OUTS)

fn y_set(i: u32, o: u32, a: f32, b: f32) { Y[i] = a; }
fn y_add(i: u32, o: u32, a: f32, b: f32) { Y[i] = Y[i] + a; }            // the residual add
fn y_bias(i: u32, o: u32, a: f32, b: f32) { Y[i] = a + BIAS[Y_COL + o]; }        // qwen2's q, k, v biases
fn y_swiglu(i: u32, o: u32, a: f32, b: f32) { Y[i] = a / (1.0 + exp(-a)) * b; } // silu(gate) * up
