// tiled_common.wgsl — what matmul_tiled.wgsl (F32 and f16 arithmetic) and matmul_tiled_i8.wgsl
// (8-bit dot products) share: bindings 1..3, the tile an invocation computes, its rows and its
// outputs. Constants: GR GT TR TT KSTEP NX NW OUTS ROWS COLS TILES_O KSPLIT SPS Y_STRIDE Y_COL
// (matmul_tiled.wgsl says what each is).

struct Step { n_tok: u32, pos: u32, a: u32, b: u32 }

@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>; // (n_tok, cols) f32, a whole number of vec4s
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> step: Step;

const WG: u32 = GR * GT;
const OPT: u32 = TR / NW;
const TILE_O: u32 = GR * OPT;
const TILE_T: u32 = GT * TT;

// Workgroup wid's tile: its first output o0 and token t0, split ks and that split's 128-column
// steps [s0, s1); live: it has work (those without return at once). All of it is uniform over
// the workgroup, as its barriers need; invocation l = gt * GR + gr then takes outputs from
// o0 + gr (tile_row) and tokens t0 + gt + GT * j.
// Workgroup index: flat = wid.y * NX + wid.x (split like matmul_vec): outputs tile
// flat % TILES_O, split flat / TILES_O; tokens tile wid.z.
struct Tile { live: bool, o0: u32, t0: u32, ks: u32, s0: u32, s1: u32 }
fn tile_at(wid: vec3<u32>) -> Tile {
    let flat = wid.y * NX + wid.x;
    let ks = flat / TILES_O;
    let t0 = wid.z * TILE_T;
    let s1 = min(ks * SPS + SPS, (COLS + KSTEP - 1u) / KSTEP);
    return Tile(ks < KSPLIT && t0 < step.n_tok, (flat % TILES_O) * TILE_O, t0, ks, ks * SPS, s1);
}

// the weight row of slot i of the invocation whose first output is o0: output o0 + GR * k
// (k = i % OPT; clamped to the last), or its up row in SWIGLU mode (i >= OPT)
fn tile_row(o0: u32, i: u32) -> u32 { return min(o0 + GR * (i % OPT), OUTS - 1u) + (i / OPT) * OUTS; }

// The invocation's sums acc[i * TT + j] (row slot i, token t0 + GT * j) to Y: each output
// through matmul_out.wgsl's y_out, or split ks's partial sums to the part buffer.
// b: the up row's sum in SWIGLU mode (slot k + OPT); unused otherwise (slot k again)
fn tile_store(acc: ptr<function, array<f32, TR * TT>>, o0: u32, t0: u32, ks: u32) {
    for (var k = 0u; k < OPT; k++) {
        let o = o0 + GR * k;
        for (var j = 0u; j < TT; j++) {
            let t = t0 + GT * j;
            if (o >= OUTS || t >= step.n_tok) { continue; }
            let a = (*acc)[k * TT + j];
            let b = (*acc)[((k + OPT) % TR) * TT + j];
            if (KSPLIT > 1u) { tile_part(t, o, a, b, ks); } else { y_out(t * Y_STRIDE + Y_COL + o, o, a, b); }
        }
    }
}

// split ks's partial sums of rows o (and o + OUTS, SWIGLU's up row) into the part buffer
fn tile_part(t: u32, o: u32, a: f32, b: f32, ks: u32) {
    let i = (ks * step.n_tok + t) * ROWS + o;
    Y[i] = a;
    if (NW == 2u) { Y[i + OUTS] = b; }
}
