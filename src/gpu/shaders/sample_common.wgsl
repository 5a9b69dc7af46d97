// sample_common.wgsl — what every sampling kernel shares (src/gpu/sample.c): the parameters,
// the scratch buffer, the order of candidates, and src/core/sampler.c's float32 arithmetic
// (the polynomial exp, Philox4x32-10) written so that it rounds exactly as the CPU does.
//
// Bit-identity with sample_reference. Only single, correctly rounded f32 additions,
// subtractions, multiplications and comparisons are used, and u32/i32 integer operations.
// A compiler may fuse a product with a following addition into an FMA (SPIR-V and GLSL allow
// it unless an operation is marked, and WGSL does not forbid it), which rounds once instead of
// twice. So every product goes through fmul(): the rounded product's bits are OR-ed with
// P.zero, a uniform that is 0 at run time but unknown to the compiler, before they are used;
// no compiler can fuse across that integer operation. No subnormal ever arises (sampler_exp
// cuts off before them), so flushing them to zero changes nothing.
//
// Candidates are Entry(v, id): v the f32 bits of a penalized logit. Order (sampler.c section
// 4): larger value first, then lower id, with -0 == +0 as a float comparison says. It is
// compared through order_key, an integer that orders as the floats do (subnormals included,
// whatever the GPU's flushing mode), never through float comparisons.
// Constants every kernel gets: WG (invocations per workgroup).

struct Params {
    seed_lo: u32,     // the seed's low and high words (Philox's key)
    seed_hi: u32,
    zero: u32,        // 0: see fmul
    k: u32,           // top_k (0 = off; the capped draw: 1..64); 1 when greedy
    flags: u32,       // F_* below
    ring_len: u32,    // the penalty's window in ids; 0 = the whole history
    penalty: f32,     // x < 0: x * penalty, else x * inv_penalty (sampler_cfg)
    inv_penalty: f32,
    inv_temp: f32,    // fl(1 / temperature)
    top_p: f32,       // (float)top_p
    pad0: u32,
    pad1: u32,
}
const F_PENALTY = 1u;  // penalize ids whose count in the window is > 0
const F_TOP_P = 2u;    // top-p applies
const F_WIDE = 4u;     // the wide draw (top_k 0 or > 64): sample_wide_*.wgsl
const F_GREEDY = 8u;   // argmax: the final list has one entry
const F_MASK = 16u;    // a mask in the history buffer holds the draw (sample_vocab.wgsl)
const F_BIAS = 32u;    // a logit bias in the history buffer (sample_vocab.wgsl)

// Lists of candidates, the trace and the wide draw's keys, weights and sums; layout in sample.c. Binding 0, so
// the later tree levels, which use nothing else, need no other binding. P (binding 1), and the
// row a workgroup draws for (RB, HB, ROW), come from sample_one.wgsl (one draw) or sample_rows.wgsl
// (a draw per row), compiled with this file.
@group(0) @binding(0) var<storage, read_write> scratch: array<u32>;

struct Entry {
    v: u32,
    id: u32,
}
const NO_ID = 0xffffffffu;
// -inf with the largest id: worse than every allowed entry (those are finite).
const SENTINEL = Entry(0xff800000u, NO_ID);

fn order_key(v: u32) -> u32 {
    let b = select(v, 0u, v == 0x80000000u); // -0 -> +0
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn better(a: Entry, b: Entry) -> bool {
    let ka = order_key(a.v);
    let kb = order_key(b.v);
    return ka > kb || (ka == kb && a.id < b.id);
}

// The lower slot of pair p in a network stage of stride j (j a power of two): the partner is
// that slot + j.
fn pair_lo(p: u32, j: u32) -> u32 { return ((p & ~(j - 1u)) << 1u) | (p & (j - 1u)); }

// The 64 best entries so far, best first, of sample_topk's and sample_merge's workgroup. Here,
// not passed to merge_into as a pointer: a workgroup pointer parameter needs WGSL's
// unrestricted_pointer_parameters, which Dawn has and wgpu (Firefox, Deno) does not. A kernel
// that never touches it (sample_argmax...) reserves no workgroup memory for it.
var<workgroup> best: array<Entry, 64>;

// Merges a list sorted best first into best, keeping the 64 best of both (one bitonic merge,
// Batcher 1968): invocation lid offers o, entry 63 - lid of the list; m[j] = the better of
// best[j] and o is a bitonic sequence holding the 64 best of both, and half-cleaners with
// strides 32 .. 1 sort it. Every invocation of the workgroup (64) calls it, after a barrier
// that made best and the list visible.
fn merge_into(o: Entry, lid: u32) {
    if (better(o, best[lid])) { best[lid] = o; }
    workgroupBarrier();
    for (var j = 32u; j > 0u; j >>= 1u) {
        if (lid < 32u) {
            let i = pair_lo(lid, j);
            let a = best[i];
            let b = best[i + j];
            if (better(b, a)) {
                best[i] = b;
                best[i + j] = a;
            }
        }
        workgroupBarrier();
    }
}

fn is_finite_bits(b: u32) -> bool { return (b & 0x7f800000u) != 0x7f800000u; }

fn load_list_entry(off: u32, i: u32) -> Entry { return Entry(scratch[RB + off + 2u * i], scratch[RB + off + 2u * i + 1u]); }

fn store_list_entry(off: u32, i: u32, e: Entry) {
    scratch[RB + off + 2u * i] = e.v;
    scratch[RB + off + 2u * i + 1u] = e.id;
}

// a * b, rounded once and never fused with what follows (see the top).
fn fmul(a: f32, b: f32) -> f32 { return bitcast<f32>(bitcast<u32>(a * b) | P.zero); }

// sampler.c's sampler_exp, operation for operation: exp(d) for d <= 0; 0 below -86 (and for
// -inf and NaN); Cody-Waite reduction by ln 2, a degree-6 Taylor polynomial by Horner, times 2^n.
fn sampler_exp(d: f32) -> f32 {
    if (!is_finite_bits(bitcast<u32>(d)) || d < -86.0) { return 0.0; }
    let t = fmul(d, 0x1.715476p+0f);
    let h = t + 0.5;
    var n = i32(h); // toward zero; h in [-123.6, 0.5]
    if (f32(n) > h) { n = n - 1; }
    let nf = f32(n);
    let r = (d - fmul(nf, 0x1.62e4p-1f)) - fmul(nf, 0x1.7f7d1cp-20f);
    var p = 0x1.6c16c2p-10f;
    p = fmul(p, r) + 0x1.111112p-7f;
    p = fmul(p, r) + 0x1.555556p-5f;
    p = fmul(p, r) + 0x1.555556p-3f;
    p = fmul(p, r) + 0x1p-1f;
    p = fmul(p, r) + 1.0;
    p = fmul(p, r) + 1.0;
    return fmul(p, bitcast<f32>(u32(n + 127) << 23u));
}

// The high 32 bits of a * b from 16-bit halves (sampler_mulhilo32).
fn mulhi32(a: u32, b: u32) -> u32 {
    let a_lo = a & 0xffffu;
    let a_hi = a >> 16u;
    let b_lo = b & 0xffffu;
    let b_hi = b >> 16u;
    let ll = a_lo * b_lo;
    let lh = a_lo * b_hi;
    let hl = a_hi * b_lo;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    return a_hi * b_hi + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
}

// The draw's uniform for position pos: word 0 of Philox4x32-10(ctr = (pos, 0, 0, 0),
// key = (seed_lo, seed_hi)), top 24 bits * 2^-24 (sampler_uniform).
fn sampler_uniform(pos: u32) -> f32 {
    var c0 = pos;
    var c1 = 0u;
    var c2 = 0u;
    var c3 = 0u;
    var k0 = P.seed_lo;
    var k1 = P.seed_hi;
    for (var r = 0u; r < 10u; r++) {
        if (r > 0u) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        let hi0 = mulhi32(0xD2511F53u, c0);
        let lo0 = 0xD2511F53u * c0;
        let hi1 = mulhi32(0xCD9E8D57u, c2);
        let lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    return fmul(f32(c0 >> 8u), 0x1p-24f);
}
