// tiled_f32.wgsl — matmul_tiled.wgsl's arithmetic in f32 (every adapter; the f16 path's
// twin is tiled_f16.wgsl, the same five names): x staged and weights decoded as vec4<f32>,
// and one fused multiply-add a weight onto the token's f32 accumulator, in chunk order.
alias XV = vec4<f32>;
alias PART = f32; // a row's sum for one token while one chunk is added: the accumulator itself

fn to_xv(v: vec4<f32>) -> XV { return v; }
fn part_begin(acc: f32) -> PART { return acc; }
fn part_fma(p: PART, w: XV, x: XV) -> PART { return fma(w.w, x.w, fma(w.z, x.z, fma(w.y, x.y, fma(w.x, x.x, p)))); }
fn part_end(acc: f32, p: PART) -> f32 { return p; }
