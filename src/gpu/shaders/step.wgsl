// step.wgsl — the per-call parameters the forward kernels read, written by forward.c before
// each submit: the call runs n_tok tokens at positions pos .. pos + n_tok - 1. 16 bytes (the
// uniform weights.h describes); a and b are unused for now.
struct Step { n_tok: u32, pos: u32, a: u32, b: u32 }
