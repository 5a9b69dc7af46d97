enable f16;
// tiled_f16.wgsl — matmul_tiled.wgsl's arithmetic in f16 (adapters with shader-f16, but
// not --exact; tiled_f32.wgsl is the F32 path): x staged in workgroup memory and each chunk's
// weights decoded as vec4<f16> (half the bytes and registers), a chunk's products summed in
// f16 four lanes wide (lane k holds the chunk's columns 4q + k, one fma a run q), then the
// lanes added and the chunk's sum added to the token's f32 accumulator, in chunk order: the
// sum still depends on the format alone, not on n_tok.
// Range: weights, inputs, products and a chunk's partial sums must stay within f16's
// +-65504 (model weights and the activations a matmul reads do by far); inputs beyond it are
// clamped to it rather than made infinite. Precision: each weight and input rounded to f16
// (2^-11 relative), then CH / 4 + 2 f16 roundings of the chunk's sum (tests/test_gpu_weights.c
// holds it to that bound).
alias XV = vec4<f16>;
alias PART = vec4<f16>;

fn to_xv(v: vec4<f32>) -> XV { return XV(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0))); }
fn part_begin(acc: f32) -> PART { return PART(0.0h); }
fn part_fma(p: PART, w: XV, x: XV) -> PART { return fma(w, x, p); }
fn part_end(acc: f32, p: PART) -> f32 { return acc + f32((p.x + p.y) + (p.z + p.w)); }
