// formats.wgsl — one dequantizer per weight format over the GPU layouts of src/gpu/weight_upload.c
// (its layout table says which words hold what). Every kernel that reads weights (matmul_vec,
// matmul_tiled, get_rows) is compiled with this file, a words file that declares W (below)
// and the file naming the weight's format, format_<fmt>.wgsl, which gives formats.wgsl's
// functions of that format the names the kernels call (a mixed stack's, picking the part by
// row, is written by weight_kernel.c):
//   fn dequant_chunk(row: u32, c: u32)        dq_<fmt>
//   fn chunk_col(c: u32, i: u32) -> u32       col_<fmt>
//   matmul_tiled's groups and matmul_vec's chunk dots: below
//
// A row is cut into CHUNKS chunks of CH weights (4 for F32/F16/BF16, 8 for the 32-weight
// blocks, 16 for the 256-weight K-quant super-blocks); a chunk is what one word or a few words
// of quants hold, so one invocation decodes it with a handful of loads. dq_<fmt>(row, c)
// writes chunk c's weights to wv[0 .. CH-1] and col_<fmt>(c, i) is the column of wv[i].
// The chunks of one 128-column step (KSTEP in matmul_tiled) are c in [s*128/CH, (s+1)*128/CH)
// for every format: the tiled kernel relies on it.
//
// Each weight is computed with the reference dequantizer's operations in its order
// (core/formats.c): every product there is exact in f32, so a weight here is the
// reference's float bit for bit (get_rows is tested to be exact).
//
// Constants written before this file (lean_gpu_const): ROWS, COLS, CHUNKS (per row),
// BPR (blocks per row; quantized formats), SCALE_BASE (word index of the separated f16 scales;
// Q8_0, Q4_0, Q5_0, Q6_K), CH.

// The kernel's W (binding 0) is declared by words_u32.wgsl or words_vec4.wgsl (matmul.c
// and get_rows.c pick): wd(i) is word i, wq4(i) words 4i .. 4i + 3.

var<private> wv: array<f32, 16>;

// run q of the chunk dequant_chunk decoded last: wv[4q .. 4q + 3]
fn wv4(q: u32) -> vec4<f32> { return vec4<f32>(wv[4u * q], wv[4u * q + 1u], wv[4u * q + 2u], wv[4u * q + 3u]); }

// byte k (0..3) of a word, unsigned and signed
fn byte_u(w: u32, k: u32) -> u32 { return (w >> (8u * k)) & 0xffu; }
fn byte_i(w: u32, k: u32) -> i32 { return extractBits(i32(w), 8u * k, 8u); }

// the separated f16 scale of block b (block index over the whole matrix)
fn split_scale(b: u32) -> f32 { return unpack2x16float(wd(SCALE_BASE + (b >> 1u)))[b & 1u]; }

// ---- F32, F16, BF16: element e = row * COLS + col, 4 per chunk; past COLS: 0 ----
fn col_float(c: u32, i: u32) -> u32 { return 4u * c + i; }
fn col_f32(c: u32, i: u32) -> u32 { return col_float(c, i); }
fn col_f16(c: u32, i: u32) -> u32 { return col_float(c, i); }
fn col_bf16(c: u32, i: u32) -> u32 { return col_float(c, i); }

fn dq_f32(row: u32, c: u32) {
    for (var i = 0u; i < 4u; i++) {
        let col = 4u * c + i;
        wv[i] = select(0.0, bitcast<f32>(wd(min(row * COLS + col, row * COLS + COLS - 1u))), col < COLS);
    }
}
fn dq_f16(row: u32, c: u32) {
    for (var i = 0u; i < 4u; i++) {
        let col = 4u * c + i;
        let e = row * COLS + min(col, COLS - 1u);
        wv[i] = select(0.0, unpack2x16float(wd(e >> 1u))[e & 1u], col < COLS);
    }
}
fn dq_bf16(row: u32, c: u32) {
    for (var i = 0u; i < 4u; i++) {
        let col = 4u * c + i;
        let e = row * COLS + min(col, COLS - 1u);
        let w = wd(e >> 1u);
        let bits = select(w << 16u, w & 0xffff0000u, (e & 1u) == 1u);
        wv[i] = select(0.0, bitcast<f32>(bits), col < COLS);
    }
}

// ---- the 32-weight blocks: 4 chunks of 8 per block ----
// Chunk k of a block: weights 8k .. 8k+7 (Q8_0), or the 4 low nibbles 4k .. 4k+3 then the
// 4 high nibbles 16+4k .. 16+4k+3 of quant word k (Q4_x, Q5_x).
fn col_q8_0(c: u32, i: u32) -> u32 { return 8u * c + i; }
fn col_nib(c: u32, i: u32) -> u32 { return 32u * (c >> 2u) + 4u * (c & 3u) + i + select(0u, 12u, i >= 4u); }
fn col_q4_0(c: u32, i: u32) -> u32 { return col_nib(c, i); }
fn col_q4_1(c: u32, i: u32) -> u32 { return col_nib(c, i); }
fn col_q5_0(c: u32, i: u32) -> u32 { return col_nib(c, i); }
fn col_q5_1(c: u32, i: u32) -> u32 { return col_nib(c, i); }

// quant i (0..7) of chunk k as a float: i < 4 the low nibble of byte i of qs, else the high
// nibble of byte i - 4; its fifth bit from qh when bits = 5
fn nib(qs: u32, qh: u32, k: u32, bits: u32, i: u32) -> f32 {
    let j = i & 3u;
    let hi = i >> 2u;
    let h5 = select(0u, 1u, bits == 5u);
    return f32(((qs >> (8u * j + 4u * hi)) & 0xfu) | (((qh >> (16u * hi + 4u * k + j)) & h5) << 4u));
}

fn dq_q8_0(row: u32, c: u32) {
    let b = row * BPR + (c >> 2u);
    dq_q8(split_scale(b), wd(8u * b + 2u * (c & 3u)), wd(8u * b + 2u * (c & 3u) + 1u));
}
// the 8 quants of words q0, q1 times d
fn dq_q8(d: f32, q0: u32, q1: u32) {
    for (var j = 0u; j < 4u; j++) {
        wv[j] = f32(byte_i(q0, j)) * d;
        wv[4u + j] = f32(byte_i(q1, j)) * d;
    }
}

// Each weight below is written once, in one expression of the reference's operations (no
// second pass over wv: decode, then scale).
// Q4_0 / Q5_0: (q - 2^(bits-1)) * d; the integer subtraction first, as the reference
fn dq_sym(d: f32, qs: u32, qh: u32, k: u32, bits: u32) {
    let zero = f32(1u << (bits - 1u));
    for (var i = 0u; i < 8u; i++) { wv[i] = (nib(qs, qh, k, bits, i) - zero) * d; } // q - zero is exact in f32
}
fn dq_q4_0(row: u32, c: u32) { let r = vl_q4_0(row, c); dq_sym(bitcast<f32>(r.z), r.x, r.y, r.w, 4u); }
fn dq_q5_0(row: u32, c: u32) { let r = vl_q5_0(row, c); dq_sym(bitcast<f32>(r.z), r.x, r.y, r.w, 5u); }
// Q4_1 / Q5_1: q * d + m, d and m the two halves of the block's first word
fn dq_min(dm: u32, qs: u32, qh: u32, k: u32, bits: u32) {
    let s = unpack2x16float(dm);
    for (var i = 0u; i < 8u; i++) { wv[i] = nib(qs, qh, k, bits, i) * s.x + s.y; }
}
fn dq_q4_1(row: u32, c: u32) { let r = vl_q4_1(row, c); dq_min(r.z, r.x, r.y, r.w, 4u); }
fn dq_q5_1(row: u32, c: u32) { let r = vl_q5_1(row, c); dq_min(r.z, r.x, r.y, r.w, 5u); }
// The loads of chunk c of a row in these four formats: (quant word, high-bit word or 0, d as f32
// bits or the d | m word, k = c & 3); matmul_vec's chunk_vload too (below)
fn vl_q4_0(row: u32, c: u32) -> vec4<u32> {
    let b = row * BPR + (c >> 2u);
    return vec4<u32>(wd(4u * b + (c & 3u)), 0u, bitcast<u32>(split_scale(b)), c & 3u);
}
fn vl_q5_0(row: u32, c: u32) -> vec4<u32> {
    let b = row * BPR + (c >> 2u);
    return vec4<u32>(wd(5u * b + 1u + (c & 3u)), wd(5u * b), bitcast<u32>(split_scale(b)), c & 3u);
}
fn vl_q4_1(row: u32, c: u32) -> vec4<u32> {
    let b = row * BPR + (c >> 2u);
    return vec4<u32>(wd(5u * b + 1u + (c & 3u)), 0u, wd(5u * b), c & 3u);
}
fn vl_q5_1(row: u32, c: u32) -> vec4<u32> {
    let b = row * BPR + (c >> 2u);
    return vec4<u32>(wd(6u * b + 2u + (c & 3u)), wd(6u * b + 1u), wd(6u * b), c & 3u);
}

// ---- groups: GCH chunks of a row from one set of loads (matmul_tiled) ----
// The format file also names, for matmul_tiled:
//   const GCH: u32 = n;  fn chunk_group(row: u32, g: u32) -> GRAW  fn group_chunk(r: GRAW, k: u32)
// chunk_group loads group g of the row (chunks g * GCH .. + GCH - 1) into registers, with one
// vec4 load of its quants where the format's blocks are whole vec4s; group_chunk(r, k) decodes
// chunk g * GCH + k of it into wv, as dequant_chunk would (the same expressions, so the same
// floats). Q4_0: a block, 4 chunks (4 quant words, then d as f32 bits); Q8_0: half a block,
// 2 chunks. Every other format (and a mixed stack): GCH = 1, r holding (row, c).
alias GRAW = array<u32, 5>;
fn gl_any(row: u32, c: u32) -> GRAW { return GRAW(row, c, 0u, 0u, 0u); }
fn gd_any(r: GRAW, k: u32) { dequant_chunk(r[0], r[1]); }
fn gl_q4_0(row: u32, g: u32) -> GRAW {
    let b = row * BPR + g;
    let q = wq4(b);
    return GRAW(q.x, q.y, q.z, q.w, bitcast<u32>(split_scale(b)));
}
fn gd_q4_0(r: GRAW, k: u32) { dq_sym(bitcast<f32>(r[4]), r[k], 0u, k, 4u); }
fn gl_q8_0(row: u32, g: u32) -> GRAW {
    let b = row * BPR + (g >> 1u);
    let q = wq4(2u * b + (g & 1u));
    return GRAW(q.x, q.y, q.z, q.w, bitcast<u32>(split_scale(b)));
}
fn gd_q8_0(r: GRAW, k: u32) { dq_q8(bitcast<f32>(r[4]), r[2u * k], r[2u * k + 1u]); }

// ---- 8-bit blocks for integer dot products (matmul_tiled_i8): every quantized format ----
// The format file also names, for its format:
//   fn block_i8(row: u32, b: u32) -> BI8       fn block_step(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32
// block_i8 loads the row's 32-column block b (columns 32b .. 32b + 31, whatever the format's own
// block: a K-quant's super-block holds 8 of them) as its 32 quants, 8-bit, four a word in column
// order (word m: columns 4m .. 4m + 3), and what its weights are made of; block_step is the
// block's term of the sum, given p = (sum q q_x over columns 0..15, over 16..31), exact in i32,
// and x: the 32 inputs' scale and quant sums (matmul_tiled_i8 quantizes them). The forms:
//   zero  weights (q - z) d                 Q8_0 (z 0), Q4_0 (8), Q5_0 (16)
//         (d d_x) (p0 + p1 - z s)
//   min   weights d q + m                    Q4_1, Q5_1 (d, m); Q4_K, Q5_K (d sc, -dmin mn)
//         (d d_x) (p0 + p1) + m (d_x s)
//   two   weights d sc_h (q - z), a scale a 16-column half: Q6_K (z 32)
//         (d d_x) (sc_0 (p0 - z h) + sc_1 (p1 - z (s - h)))
// d, m and d sc are the reference dequantizer's floats; each integer above is exact in i32 and
// in f32 (Q6_K's largest, 2 x 16 x 32 x 127 x 128, is under 2^24). k (0 zero, 1 min) lets a
// mixed stack's block_step pick its part's form (weight_kernel.c's glue).
struct BI8 { q: array<u32, 8>, d: f32, m: f32, sc: vec2<i32>, z: i32, k: u32 }
// a block's inputs: d_x, s the sum of its 32 quants, h the sum of the first 16
struct XB { d: f32, s: i32, h: i32 }
// where 8-bit block b of a row lies in its K super-block (Q6_K, Q3_K, Q2_K: b % 8 = 4h + n):
// bk the super-block, base its first word (words a super-block), h its 128-column half, n the
// 32-column quarter of that half
struct KAt { bk: u32, base: u32, h: u32, n: u32 }
fn k_at(row: u32, b: u32, words: u32) -> KAt {
    let bk = row * BPR + (b >> 3u);
    return KAt(bk, words * bk, (b >> 2u) & 1u, b & 3u);
}
// Each form returns acc plus its term, every multiply-add an explicit fma: a driver free to fuse
// would fuse a form differently where it is inlined behind bs_any's branch (a mixed stack) than
// alone, and a stack's part would not be its own matrix's bits (NVIDIA did so).
fn bs_zero(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 { return fma(w.d * x.d, f32(p.x + p.y - w.z * x.s), acc); }
fn bs_min(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 {
    return acc + fma(w.d * x.d, f32(p.x + p.y), w.m * (x.d * f32(x.s)));
}
fn bs_two(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 {
    return fma(w.d * x.d, f32(w.sc.x * (p.x - w.z * x.h) + w.sc.y * (p.y - w.z * (x.s - x.h))), acc);
}
fn bs_any(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 {
    if (w.k == 1u) { return bs_min(w, p, x, acc); }
    return bs_zero(w, p, x, acc);
}
fn bi_zero(q: array<u32, 8>, d: f32, z: i32) -> BI8 { return BI8(q, d, 0.0, vec2<i32>(1), z, 0u); }
fn bi_min(q: array<u32, 8>, d: f32, m: f32) -> BI8 { return BI8(q, d, m, vec2<i32>(1), 0, 1u); }

// The nibble formats' quant words q (word k: low nibbles columns 4k .. 4k + 3, high nibbles
// 16 + 4k .. 16 + 4k + 3; col_nib) as bytes in column order, each with its fifth bit from qh
// (bit c: column c) where bits = 5.
fn nib_bytes(q: vec4<u32>, qh: u32, bits: u32) -> array<u32, 8> {
    var lo = q & vec4<u32>(0x0f0f0f0fu);
    var hi = (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
    if (bits == 5u) {
        lo |= bit4_bytes((vec4<u32>(qh) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(0xfu));
        hi |= bit4_bytes((vec4<u32>(qh) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(0xfu));
    }
    return array<u32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
}
// bits 0..3 of h to bit 4 of bytes 0..3
fn bit4_bytes(h: vec4<u32>) -> vec4<u32> {
    return ((h & vec4<u32>(1u)) << vec4<u32>(4u)) | ((h & vec4<u32>(2u)) << vec4<u32>(11u)) |
           ((h & vec4<u32>(4u)) << vec4<u32>(18u)) | ((h & vec4<u32>(8u)) << vec4<u32>(25u));
}
fn bi_q8_0(row: u32, b: u32) -> BI8 {
    let i = row * BPR + b;
    let lo = wq4(2u * i);
    let hi = wq4(2u * i + 1u);
    return bi_zero(array<u32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w), split_scale(i), 0);
}
// a mixed stack's Q8_0 part: its chunk k (words 2k, 2k + 1) holds columns 4k .. 4k + 3 then
// 16 + 4k .. 16 + 4k + 3 (col_nib; weight_upload.c's mixed_block)
fn bi_q8_0_nib(row: u32, b: u32) -> BI8 {
    let i = row * BPR + b;
    let lo = wq4(2u * i);
    let hi = wq4(2u * i + 1u);
    return bi_zero(array<u32, 8>(lo.x, lo.z, hi.x, hi.z, lo.y, lo.w, hi.y, hi.w), split_scale(i), 0);
}
fn bi_q4_0(row: u32, b: u32) -> BI8 {
    let i = row * BPR + b;
    return bi_zero(nib_bytes(wq4(i), 0u, 4u), split_scale(i), 8);
}
fn bi_q5_0(row: u32, b: u32) -> BI8 {
    let i = row * BPR + b;
    let q = vec4<u32>(wd(5u * i + 1u), wd(5u * i + 2u), wd(5u * i + 3u), wd(5u * i + 4u));
    return bi_zero(nib_bytes(q, wd(5u * i), 5u), split_scale(i), 16);
}
fn bi_q4_1(row: u32, b: u32) -> BI8 {
    let i = row * BPR + b;
    let q = vec4<u32>(wd(5u * i + 1u), wd(5u * i + 2u), wd(5u * i + 3u), wd(5u * i + 4u));
    let s = unpack2x16float(wd(5u * i));
    return bi_min(nib_bytes(q, 0u, 4u), s.x, s.y);
}
fn bi_q5_1(row: u32, b: u32) -> BI8 {
    let i = row * BPR + b;
    let q = vec4<u32>(wd(6u * i + 2u), wd(6u * i + 3u), wd(6u * i + 4u), wd(6u * i + 5u));
    let s = unpack2x16float(wd(6u * i));
    return bi_min(nib_bytes(q, wd(6u * i + 1u), 5u), s.x, s.y);
}
// Q4_K / Q5_K: block b is sub-block j = b % 8 of its super-block: the low (j even) or high
// nibbles of qs[32 (j / 2) ..], the fifth bit bit j of qh[0 .. 31]; d sc and dmin mn as dq_k45
fn bi_k45(row: u32, b: u32, bits: u32) -> BI8 {
    let base = (row * BPR + (b >> 3u)) * select(36u, 44u, bits == 5u);
    let j = b & 7u;
    let qs = base + select(4u, 12u, bits == 5u) + 8u * (j >> 1u);
    var q: array<u32, 8>;
    for (var m = 0u; m < 8u; m++) {
        q[m] = (wd(qs + m) >> (4u * (j & 1u))) & 0x0f0f0f0fu;
        if (bits == 5u) { q[m] |= ((wd(base + 4u + m) >> j) & 0x01010101u) << 4u; }
    }
    let dm = unpack2x16float(wd(base));
    let s = scale_min_k4(base, j);
    return bi_min(q, dm.x * f32(s.x), -(dm.y * f32(s.y)));
}
fn bi_q4_k(row: u32, b: u32) -> BI8 { return bi_k45(row, b, 4u); }
fn bi_q5_k(row: u32, b: u32) -> BI8 { return bi_k45(row, b, 5u); }
// Q6_K: block b is columns 32n .. 32n + 31 of half h of its super-block (b % 8 = 4h + n): the low
// (n < 2) or high nibbles of ql[64h + 32 (n % 2) ..], bits 2n, 2n + 1 of qh[32h ..]; its two
// 16-column halves' scales sc[8h + 2n], sc[8h + 2n + 1] (dq_q6_k's)
fn bi_q6_k(row: u32, b: u32) -> BI8 {
    let at = k_at(row, b, 52u);
    var q: array<u32, 8>;
    for (var m = 0u; m < 8u; m++) {
        let ql = (wd(at.base + 16u * at.h + 8u * (at.n & 1u) + m) >> (4u * (at.n >> 1u))) & 0x0f0f0f0fu;
        q[m] = ql | (((wd(at.base + 32u + 8u * at.h + m) >> (2u * at.n)) & 0x03030303u) << 4u);
    }
    let si = 8u * at.h + 2u * at.n;
    let sw = wd(at.base + 48u + (si >> 2u));
    return BI8(q, split_scale(at.bk), 0.0, vec2<i32>(byte_i(sw, si & 3u), byte_i(sw, (si & 3u) + 1u)), 32, 0u);
}

// ---- chunk dots: acc + (chunk c of a row) . x, matmul_vec's arithmetic ----
// The format file also names, for matmul_vec:
//   alias VRAW;  fn chunk_vload(row: u32, c: u32) -> VRAW  fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32
// chunk_vload issues the chunk's loads (matmul_vec's PRE issues a lane's first ones before the
// norm); chunk_vdot returns acc plus the chunk's weights dotted with x, run q by x[q]. The
// nibble formats dot the chunk's quants with x first and apply the block's scale (and min) once:
// an operation a weight fewer than decoding it, which is what decode waits on there (the format
// files say which of them take it). Every other format decodes the chunk (dequant_chunk)
// and adds its runs' dot products to acc in run order. A mixed stack's VRAW is (row, c) and its
// chunk_vdot calls its part's pair, so a part sums as its own matrix does.
const RUNS: u32 = CH / 4u;
alias XRUNS = array<vec4<f32>, 4>; // a chunk's x: runs 0 .. RUNS - 1 used
alias VR_dq = array<f32, 16>;      // the chunk decoded (wv)
fn vl_dq(row: u32, c: u32) -> VR_dq { dequant_chunk(row, c); return wv; }
fn vd_dq(r: VR_dq, acc: f32, x: XRUNS) -> f32 {
    var d = acc;
    for (var q = 0u; q < RUNS; q++) { d += dot(vec4<f32>(r[4u * q], r[4u * q + 1u], r[4u * q + 2u], r[4u * q + 3u]), x[q]); }
    return d;
}
// the nibble formats' (vl_ above): run h of the chunk's quants, with their fifth bits for bits 5
fn vd_nib(r: vec4<u32>, bits: u32, h: u32) -> vec4<f32> {
    return vec4<f32>(nib(r.x, r.y, r.w, bits, 4u * h), nib(r.x, r.y, r.w, bits, 4u * h + 1u),
                     nib(r.x, r.y, r.w, bits, 4u * h + 2u), nib(r.x, r.y, r.w, bits, 4u * h + 3u));
}
// Q4_1 / Q5_1: d (q . x) + m (sum of x)
fn vd_min(r: vec4<u32>, bits: u32, acc: f32, x: XRUNS) -> f32 {
    let s = unpack2x16float(r.z);
    let qx = dot(vd_nib(r, bits, 0u), x[0]) + dot(vd_nib(r, bits, 1u), x[1]);
    let sx = dot(x[0], vec4<f32>(1.0)) + dot(x[1], vec4<f32>(1.0));
    return fma(s.x, qx, fma(s.y, sx, acc));
}
alias VR_q4_0 = vec4<u32>;
alias VR_q4_1 = vec4<u32>;
alias VR_q5_1 = vec4<u32>;
// Q4_0: d ((q - 8) . x) (q - 8 exact)
fn vd_q4_0(r: VR_q4_0, acc: f32, x: XRUNS) -> f32 {
    return fma(dot(vd_nib(r, 4u, 0u) - 8.0, x[0]) + dot(vd_nib(r, 4u, 1u) - 8.0, x[1]), bitcast<f32>(r.z), acc);
}
fn vd_q4_1(r: VR_q4_1, acc: f32, x: XRUNS) -> f32 { return vd_min(r, 4u, acc, x); }
fn vd_q5_1(r: VR_q5_1, acc: f32, x: XRUNS) -> f32 { return vd_min(r, 5u, acc, x); }

// ---- Q4_K, Q5_K: 16 chunks of 16 per super-block ----
// Chunk k: group g = k / 4 (sub-blocks 2g, 2g+1), part p = k % 4 (l = 8p .. 8p+7):
// wv[0..7] = sub-block 2g's weights l (low nibbles of qs[32g + l]), wv[8..15] = sub-block
// 2g+1's (high nibbles). Words of a block (weight_upload.c): 0 = d | dmin << 16, 1..3 = scales,
// Q4_K: 4.. qs;  Q5_K: 4..11 qh, 12.. qs.
fn col_k4(c: u32, i: u32) -> u32 {
    let k = c & 15u;
    return 256u * (c >> 4u) + 64u * (k >> 2u) + 8u * (k & 3u) + select(i, i + 24u, i >= 8u);
}
fn col_q4_k(c: u32, i: u32) -> u32 { return col_k4(c, i); }
fn col_q5_k(c: u32, i: u32) -> u32 { return col_k4(c, i); }

// six-bit scale and min of sub-block j from the 12 scale bytes (words w1..w3), ggml's
// get_scale_min_k4: returns (sc, m)
fn scale_min_k4(base: u32, j: u32) -> vec2<u32> {
    var sb = array<u32, 3>(wd(base + 1u), wd(base + 2u), wd(base + 3u));
    if (j < 4u) {
        return vec2<u32>(byte_u(sb[j >> 2u], j & 3u) & 63u, byte_u(sb[(j + 4u) >> 2u], (j + 4u) & 3u) & 63u);
    }
    let a = byte_u(sb[(j + 4u) >> 2u], (j + 4u) & 3u);
    let lo = byte_u(sb[(j - 4u) >> 2u], (j - 4u) & 3u);
    let hi = byte_u(sb[j >> 2u], j & 3u);
    return vec2<u32>((a & 0xfu) | ((lo >> 6u) << 4u), (a >> 4u) | ((hi >> 6u) << 4u));
}

// (d * sc) * q - dmin * m, q with its fifth bit when bits = 5
fn dq_k45(row: u32, c: u32, bits: u32) {
    let words = select(36u, 44u, bits == 5u);
    let base = (row * BPR + (c >> 4u)) * words;
    let k = c & 15u;
    let g = k >> 2u;
    let p = k & 3u;
    let dm = unpack2x16float(wd(base));
    let s1 = scale_min_k4(base, 2u * g);
    let s2 = scale_min_k4(base, 2u * g + 1u);
    let d1 = dm.x * f32(s1.x);
    let m1 = dm.y * f32(s1.y);
    let d2 = dm.x * f32(s2.x);
    let m2 = dm.y * f32(s2.y);
    let qs0 = select(4u, 12u, bits == 5u) + 8u * g + 2u * p;
    for (var h = 0u; h < 2u; h++) {
        let qs = wd(base + qs0 + h);
        let qh = select(0u, wd(base + 4u + 2u * p + h), bits == 5u);
        for (var j = 0u; j < 4u; j++) {
            let lo = ((qs >> (8u * j)) & 0xfu) | (((qh >> (8u * j + 2u * g)) & 1u) << 4u);
            let hi = ((qs >> (8u * j + 4u)) & 0xfu) | (((qh >> (8u * j + 2u * g + 1u)) & 1u) << 4u);
            wv[4u * h + j] = d1 * f32(lo) - m1;
            wv[8u + 4u * h + j] = d2 * f32(hi) - m2;
        }
    }
}
fn dq_q4_k(row: u32, c: u32) { dq_k45(row, c, 4u); }
fn dq_q5_k(row: u32, c: u32) { dq_k45(row, c, 5u); }

// ---- Q6_K: 16 chunks of 16 per super-block ----
// Chunk k: half h = k / 8, p = k % 8 (l = 4p .. 4p+3); wv[4n + j] is weight
// 128h + 32n + 4p + j (n = 0..3). Words of a block (weight_upload.c): 0..31 ql, 32..47 qh,
// 48..51 scales (int8); d separated.
fn col_q6_k(c: u32, i: u32) -> u32 {
    let k = c & 15u;
    return 256u * (c >> 4u) + 128u * (k >> 3u) + 32u * (i >> 2u) + 4u * (k & 7u) + (i & 3u);
}
fn dq_q6_k(row: u32, c: u32) {
    let b = row * BPR + (c >> 4u);
    let base = 52u * b;
    let k = c & 15u;
    let h = k >> 3u;
    let p = k & 7u;
    let d = split_scale(b);
    let qa = wd(base + 16u * h + p);       // ql[64h + 4p ..]
    let qb = wd(base + 16u * h + 8u + p);  // ql[64h + 32 + 4p ..]
    let qh = wd(base + 32u + 8u * h + p);  // qh[32h + 4p ..]
    let is = p >> 2u;                     // (4p) / 16
    for (var n = 0u; n < 4u; n++) {
        let si = 8u * h + is + 2u * n;
        let sc = f32(byte_i(wd(base + 48u + (si >> 2u)), si & 3u));
        let q = select(qa, qb, (n & 1u) == 1u);
        for (var j = 0u; j < 4u; j++) {
            let low = (q >> (8u * j + 4u * (n >> 1u))) & 0xfu;
            let high = (qh >> (8u * j + 2u * n)) & 3u;
            wv[4u * n + j] = d * sc * f32(i32(low | (high << 4u)) - 32);
        }
    }
}

// ---- Q2_K, Q3_K: 16 chunks of 16 per super-block ----
// Chunk k is sub-block k (weights 16k .. 16k + 15, in order): half h = k / 8, pair j = (k % 8) / 2,
// l = 16 (k % 2) + i; its 2-bit quants at bits 2j of qs[32h + l] (formats.c's table).
// Words of a block (weight_upload.c): Q2_K 0..3 scales (byte k: sc | m << 4), 4..19 qs,
// 20 d | dmin << 16;  Q3_K 0..7 hmask, 8..23 qs, 24..26 scales; d separated.
fn col_k2(c: u32, i: u32) -> u32 { return 256u * (c >> 4u) + 16u * (c & 15u) + i; }
fn col_q2_k(c: u32, i: u32) -> u32 { return col_k2(c, i); }
fn col_q3_k(c: u32, i: u32) -> u32 { return col_k2(c, i); }

// Q3_K's signed six-bit scale of sub-block k (formats_layout.h's get_scale_q3_k)
fn scale_q3_k(base: u32, k: u32) -> i32 {
    let lo = (byte_u(wd(base + 24u + ((k & 7u) >> 2u)), k & 3u) >> (4u * (k >> 3u))) & 0xfu;
    let hi = (byte_u(wd(base + 26u), k & 3u) >> (2u * (k >> 2u))) & 3u;
    return i32(lo | (hi << 4u)) - 32;
}

// (d * sc) * q - dmin * m
fn dq_q2_k(row: u32, c: u32) {
    let base = (row * BPR + (c >> 4u)) * 21u;
    let k = c & 15u;
    let dm = unpack2x16float(wd(base + 20u));
    let s = byte_u(wd(base + (k >> 2u)), k & 3u);
    let dl = dm.x * f32(s & 0xfu);
    let ml = dm.y * f32(s >> 4u);
    let q0 = base + 4u + 8u * (k >> 3u) + 4u * (k & 1u);
    let sh = 2u * ((k & 7u) >> 1u);
    for (var m = 0u; m < 4u; m++) {
        let q = wd(q0 + m);
        for (var j = 0u; j < 4u; j++) { wv[4u * m + j] = dl * f32((q >> (8u * j + sh)) & 3u) - ml; }
    }
}
// (d * s) * (q - 4 + 4 * third bit)
fn dq_q3_k(row: u32, c: u32) {
    let b = row * BPR + (c >> 4u);
    let base = 27u * b;
    let k = c & 15u;
    let dl = split_scale(b) * f32(scale_q3_k(base, k));
    let q0 = base + 8u + 8u * (k >> 3u) + 4u * (k & 1u);
    let m0 = base + 4u * (k & 1u);
    let sh = 2u * ((k & 7u) >> 1u);
    let hb = 4u * (k >> 3u) + ((k & 7u) >> 1u);
    for (var m = 0u; m < 4u; m++) {
        let q = wd(q0 + m);
        let hm = wd(m0 + m);
        for (var j = 0u; j < 4u; j++) {
            let v = i32((q >> (8u * j + sh)) & 3u) - select(4, 0, ((hm >> (8u * j + hb)) & 1u) == 1u);
            wv[4u * m + j] = dl * f32(v);
        }
    }
}

// 8-bit blocks (matmul_tiled_i8): block b is columns 32n .. 32n + 31 of half h of its super-block
// (b % 8 = 4h + n), sub-blocks 2 (b % 8) and 2 (b % 8) + 1: bits 2n of qs[32h ..] (Q3_K: with
// bit 4h + n of hmask[0 .. 31] as the third bit, q + 4 in [0, 7], z = 4: the two form)
fn bi_q3_k(row: u32, b: u32) -> BI8 {
    let at = k_at(row, b, 27u);
    var q: array<u32, 8>;
    for (var m = 0u; m < 8u; m++) {
        q[m] = ((wd(at.base + 8u + 8u * at.h + m) >> (2u * at.n)) & 0x03030303u) |
               (((wd(at.base + m) >> (4u * at.h + at.n)) & 0x01010101u) << 2u);
    }
    let k = 2u * (b & 7u);
    return BI8(q, split_scale(at.bk), 0.0, vec2<i32>(scale_q3_k(at.base, k), scale_q3_k(at.base, k + 1u)), 4, 0u);
}
// Q2_K: two scales and two mins a block, the weights d sc_h q - dmin m_h (a 16-column half h):
// sc holds (sc_0, sc_1), m dmin, z the mins m_0 | m_1 << 8
//   (d d_x) (sc_0 p0 + sc_1 p1) - (dmin d_x) (m_0 h + m_1 (s - h))
fn bs_two_min(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 {
    let mins = (w.z & 0xff) * x.h + (w.z >> 8u) * (x.s - x.h);
    return acc + fma(w.d * x.d, f32(w.sc.x * p.x + w.sc.y * p.y), -((w.m * x.d) * f32(mins)));
}
fn bi_q2_k(row: u32, b: u32) -> BI8 {
    let at = k_at(row, b, 21u);
    var q: array<u32, 8>;
    for (var m = 0u; m < 8u; m++) { q[m] = (wd(at.base + 4u + 8u * at.h + m) >> (2u * at.n)) & 0x03030303u; }
    let k = 2u * (b & 7u);
    let s = wd(at.base + (k >> 2u)) >> (8u * (k & 3u)); // bytes k, k + 1 (k even: one word)
    let dm = unpack2x16float(wd(at.base + 20u));
    return BI8(q, dm.x, dm.y, vec2<i32>(i32(s & 0xfu), i32((s >> 8u) & 0xfu)),
               i32(((s >> 4u) & 0xfu) | (((s >> 12u) & 0xfu) << 8u)), 0u);
}
