"""quants.py - an independent numpy implementation of the ggml/GGUF tensor formats
F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.

It exists to check lean's C (src/core/formats.c, src/dev/quantize.c) from the outside: it is
written from the block layouts and ggml's reference algorithms (dequantize_row_*,
quantize_row_*_ref: no importance matrix), shares no code with the C, and works on
whole arrays of blocks at once. Both must agree bit for bit.

    import quants
    data = quants.quantize("q4_k", x)            # x: float32, len a multiple of 256
    y = quants.dequantize("q4_k", data, len(x))  # float32
    quants.TYPES["q4_k"]                         # (type id 12, 256 elements, 144 bytes)

Exactness rules, kept everywhere below:
  * float32 only. Every constant is wrapped in np.float32 (F) and every int is cast to
    float32 before it meets a float, so numpy 1.x value-based casting and numpy 2
    promotion both stay in float32. Operation order is ggml's, left to right.
  * Sums are accumulated one element at a time (_seqsum), never with np.sum, which
    adds pairwise.
  * nearest_int is ggml's: add 1.5 * 2^23 in float32 and read the low mantissa bits
    (round half to even). roundf (Q8_0) rounds half away from zero. The legacy
    quantizers truncate toward zero, as C's float -> int conversion does.
  * f32 -> f16 is IEEE round-to-nearest-even (numpy's own cast); a NaN becomes
    sign | 0x7e00. f16 -> f32 is exact; a NaN keeps its payload with the quiet bit set.
    bf16 follows ggml: round to nearest even, NaN -> top half | 0x40; decode appends
    16 zero bits.
  * Quantizers expect finite input (ggml's behaviour on NaN/inf is undefined).

Runs on Python 3.8+ with numpy 1.2x or 2.x.
"""

import numpy as np

F = np.float32

# name: (ggml type id, elements per block, bytes per block)
TYPES = {
    "f32": (0, 1, 4),
    "f16": (1, 1, 2),
    "q4_0": (2, 32, 18),
    "q4_1": (3, 32, 20),
    "q5_0": (6, 32, 22),
    "q5_1": (7, 32, 24),
    "q8_0": (8, 32, 34),
    "q2_k": (10, 256, 84),
    "q3_k": (11, 256, 110),
    "q4_k": (12, 256, 144),
    "q5_k": (13, 256, 176),
    "q6_k": (14, 256, 210),
    "bf16": (30, 1, 2),
}

QK_K = 256
GROUP_MAX_EPS = F(1e-15)


# ---------------------------------------------------------------- scalars

def f32_to_f16_bits(x):
    """float32 array -> uint16 IEEE half bits (round to nearest even; NaN -> sign|0x7e00)."""
    x = np.asarray(x, dtype=F)
    u = x.view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    with np.errstate(over="ignore", invalid="ignore"):
        h = np.where(nan, F(0), x).astype(np.float16).view(np.uint16)
    sign = ((u >> 16) & 0x8000).astype(np.uint16)
    return np.where(nan, sign | np.uint16(0x7E00), h).astype(np.uint16)


def f16_bits_to_f32(h):
    """uint16 half bits -> float32 (exact; NaN payload kept, quiet bit set)."""
    h = np.asarray(h, dtype=np.uint16)
    nan = ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0)
    v = np.where(nan, np.uint16(0), h).view(np.float16).astype(F)
    hu = h.astype(np.uint32)
    nan_bits = ((hu & 0x8000) << 16) | np.uint32(0x7FC00000) | ((hu & 0x03FF) << 13)
    return np.where(nan, nan_bits, v.view(np.uint32)).astype(np.uint32).view(F)


def f32_to_bf16_bits(x):
    u = np.asarray(x, dtype=F).view(np.uint32).astype(np.uint64)  # room for the carry
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    quiet = (u >> 16) | 0x40
    return (np.where(nan, quiet, rounded) & 0xFFFF).astype(np.uint16)


def bf16_bits_to_f32(h):
    return (np.asarray(h, dtype=np.uint16).astype(np.uint32) << 16).view(F)


def _f16_scale(x):
    """round float32 values through f16, as a block scale field does: (bits, value)."""
    bits = f32_to_f16_bits(x)
    return bits, f16_bits_to_f32(bits)


# ---------------------------------------------------------------- helpers

def _nearest_int(v):
    """ggml's nearest_int: (bits(v + 12582912.0f) & 0x7fffff) - 0x400000, in float32."""
    s = (np.asarray(v, dtype=F) + F(12582912.0)).astype(F)
    return (s.view(np.int32) & 0x007FFFFF) - 0x00400000


def _seqsum(init, t):
    """init + t[..., 0] + t[..., 1] + ... in float32, in that order."""
    s = np.full(t.shape[:-1], init, dtype=F)
    for i in range(t.shape[-1]):
        s = s + t[..., i]
    return s


def _roundf(v):
    """C roundf: to nearest, halves away from zero."""
    t = np.trunc(v)
    return t + np.where(np.abs(v - t) >= F(0.5), np.sign(v), F(0)).astype(F)


def _le16(a):
    """uint16 array (..., k) -> little-endian bytes (..., 2k)."""
    a = np.asarray(a, dtype=np.uint16)
    return np.stack([a & 0xFF, a >> 8], axis=-1).reshape(a.shape[:-1] + (-1,)).astype(np.uint8)


def _rd16(b, off):
    """the little-endian u16 at byte off of every block row of b."""
    return b[:, off].astype(np.uint16) | (b[:, off + 1].astype(np.uint16) << 8)


def _rd32(b, off):
    v = np.zeros(b.shape[0], dtype=np.uint32)
    for k in range(4):
        v |= b[:, off + k].astype(np.uint32) << (8 * k)
    return v


def _first_absmax(xb):
    """per row: the first element of largest |x|, signed (+0 for an all-zero row)."""
    rows = np.arange(xb.shape[0])
    i = np.argmax(np.abs(xb), axis=1)
    v = xb[rows, i]
    return np.where(np.abs(v) > 0, v, F(0)).astype(F)


def _first_min_max(xb):
    """per row: (min, max), each the first element holding that value."""
    rows = np.arange(xb.shape[0])
    return xb[rows, np.argmin(xb, axis=1)], xb[rows, np.argmax(xb, axis=1)]


def _pack_nibbles(lo, hi):
    return (lo.astype(np.uint8) & 0x0F) | ((hi.astype(np.uint8) & 0x0F) << 4)


# ---------------------------------------------------------------- legacy formats
# Within a 32-weight block, weight j < 16 is the low nibble of qs[j], weight j >= 16 the
# high nibble of qs[j - 16]; Q5 keeps the fifth bit of weight j in bit j of the u32 qh.

def _q_legacy(x, kind):
    xb = x.reshape(-1, 32)
    nb = xb.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind in ("q4_0", "q5_0", "q8_0"):
            if kind == "q8_0":
                amax = np.max(np.abs(xb), axis=1)
                d = amax / F(127)
            else:
                d = _first_absmax(xb) / (F(-8) if kind == "q4_0" else F(-16))
            m = None
        else:
            mn, mx = _first_min_max(xb)
            d = (mx - mn) / (F(15) if kind == "q4_1" else F(31))
            m = mn
        d = d.astype(F)
        idv = np.where(d != 0, F(1) / d, F(0)).astype(F)[:, None]

    dbits, _ = _f16_scale(d)
    parts = [_le16(dbits[:, None])]
    if m is not None:
        parts.append(_le16(f32_to_f16_bits(m)[:, None]))

    if kind == "q8_0":
        q = _roundf(xb * idv).astype(np.int32)
        parts.append((q & 0xFF).astype(np.uint8))
        return np.concatenate(parts, axis=1).tobytes()

    if kind == "q4_0":
        q = np.minimum(15, np.trunc(xb * idv + F(8.5)).astype(np.int32))
    elif kind == "q4_1":
        q = np.minimum(15, np.trunc((xb - m[:, None]) * idv + F(0.5)).astype(np.int32))
    elif kind == "q5_0":
        q = np.minimum(31, np.trunc(xb * idv + F(16.5)).astype(np.int32))
    else:  # q5_1: ggml applies no cap; q <= 31 for finite input anyway
        q = np.trunc((xb - m[:, None]) * idv + F(0.5)).astype(np.int32)

    if kind in ("q5_0", "q5_1"):
        qh = np.zeros(nb, dtype=np.uint32)
        for j in range(32):
            qh |= ((q[:, j] >> 4) & 1).astype(np.uint32) << j
        parts.append(np.stack([(qh >> (8 * k)) & 0xFF for k in range(4)], axis=1).astype(np.uint8))
    parts.append(_pack_nibbles(q[:, :16], q[:, 16:]))
    return np.concatenate(parts, axis=1).tobytes()


def _dq_legacy(b, kind):
    if kind == "q8_0":
        d = f16_bits_to_f32(_rd16(b, 0))
        qs = b[:, 2:34].view(np.int8).astype(F)
        return qs * d[:, None]
    d = f16_bits_to_f32(_rd16(b, 0))
    has_m = kind in ("q4_1", "q5_1")
    m = f16_bits_to_f32(_rd16(b, 2)) if has_m else None
    off = 4 if has_m else 2
    qh = None
    if kind in ("q5_0", "q5_1"):
        qh = _rd32(b, off)
        off += 4
    qs = b[:, off:off + 16].astype(np.int32)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
    if qh is not None:
        bit = np.stack([(qh >> j) & 1 for j in range(32)], axis=1).astype(np.int32)
        q = q | (bit << 4)
    if kind == "q4_0":
        return (q - 8).astype(F) * d[:, None]
    if kind == "q5_0":
        return (q - 16).astype(F) * d[:, None]
    return q.astype(F) * d[:, None] + m[:, None]


# ---------------------------------------------------------------- K-quant scale searches

def _make_qkx2(X, W, nmax, rmin, rdelta, nstep, use_mad=False):
    """ggml make_qkx2_quants on every row of X (G, n) with weights W (use_mad: weighted
    |err| instead of err^2, Q2_K's). Returns (scale (G,), the_min (G,), L (G, n) ints in
    [0, nmax])."""
    err = np.abs if use_mad else (lambda d: d * d)
    n = X.shape[1]
    mn, mx = _first_min_max(X)
    sum_w = W[:, 0].astype(F)
    sum_x = sum_w * X[:, 0]
    for i in range(1, n):
        sum_w = sum_w + W[:, i]
        sum_x = sum_x + W[:, i] * X[:, i]
    mn = np.where(mn > 0, F(0), mn).astype(F)
    flat = mx == mn
    fn = F(nmax)

    iscale = fn / (mx - mn)
    scale = F(1) / iscale
    L = np.clip(_nearest_int(iscale[:, None] * (X - mn[:, None])), 0, nmax)
    diff = scale[:, None] * L.astype(F) + mn[:, None] - X
    best = _seqsum(F(0), W * err(diff))

    for step in range(nstep + 1):
        iscale = (F(rmin) + F(rdelta) * F(step) + fn) / (mx - mn)
        La = np.clip(_nearest_int(iscale[:, None] * (X - mn[:, None])), 0, nmax)
        lf = La.astype(F)
        sum_l = _seqsum(F(0), W * lf)
        sum_l2 = _seqsum(F(0), W * lf * lf)
        sum_xl = _seqsum(F(0), W * lf * X)
        D = sum_w * sum_l2 - sum_l * sum_l
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
        pos = this_min > 0
        this_min = np.where(pos, F(0), this_min).astype(F)
        this_scale = np.where(pos, sum_xl / sum_l2, this_scale).astype(F)
        diff = this_scale[:, None] * lf + this_min[:, None] - X
        cur = _seqsum(F(0), W * err(diff))
        better = (D > 0) & (cur < best) & ~flat
        L = np.where(better[:, None], La, L)
        best = np.where(better, cur, best).astype(F)
        scale = np.where(better, this_scale, scale).astype(F)
        mn = np.where(better, this_min, mn).astype(F)

    L = np.where(flat[:, None], 0, L)
    scale = np.where(flat, F(0), scale).astype(F)
    return scale, (-mn).astype(F), L


def _make_qx(X, nmax):
    """ggml make_qx_quants with rmse_type 1 and no importance weights (w = x^2) on every
    row of X (G, n). Returns (scale (G,), L (G, n) ints in [0, 2 nmax - 1])."""
    amax = np.max(np.abs(X), axis=1)
    mx = _first_absmax(X)
    zero = amax < GROUP_MAX_EPS
    fn = F(nmax)
    w = X * X

    def fit(iscale):
        l = np.clip(_nearest_int(iscale[:, None] * X), -nmax, nmax - 1)
        lf = l.astype(F)
        return l, _seqsum(F(0), w * X * lf), _seqsum(F(0), w * lf * lf)

    l, sumlx, suml2 = fit(F(-nmax) / mx)
    L = l + nmax
    scale = np.where(suml2 != 0, sumlx / suml2, F(0)).astype(F)
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        l, sumlx, suml2 = fit(-(fn + F(0.1) * F(step)) / mx)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        new_scale = sumlx / suml2
        L = np.where(better[:, None], l + nmax, L)
        scale = np.where(better, new_scale, scale).astype(F)
        best = np.where(better, new_scale * sumlx, best).astype(F)
    L = np.where(zero[:, None], 0, L)
    scale = np.where(zero, F(0), scale).astype(F)
    return scale, L


def _make_q3(X, nmax):
    """ggml make_q3_quants with do_rmse (w = x^2) on every row of X (G, n): the grid mapping
    the first largest |x| to -nmax, then 5 sweeps moving one quant at a time to its least
    squares value when that raises sumlx^2 / suml2 (a sweep that changes nothing leaves the
    next ones nothing to do, so ggml's early exit is not needed). Returns (scale (G,),
    L (G, n) ints in [0, 2 nmax - 1])."""
    amax = np.max(np.abs(X), axis=1)
    zero = amax < GROUP_MAX_EPS
    w = X * X
    l = np.clip(_nearest_int((F(-nmax) / _first_absmax(X))[:, None] * X), -nmax, nmax - 1)
    lf = l.astype(F)
    sumlx = _seqsum(F(0), w * X * lf)
    suml2 = _seqsum(F(0), w * lf * lf)
    for _ in range(5):
        for i in range(X.shape[1]):
            wi, xi, li = w[:, i], X[:, i], l[:, i].astype(F)
            slx = sumlx - wi * xi * li
            sl2 = suml2 - wi * li * li
            new = np.clip(_nearest_int(xi * sl2 / slx), -nmax, nmax - 1)
            nf = new.astype(F)
            slx_n = slx + wi * xi * nf
            sl2_n = sl2 + wi * nf * nf
            take = ((slx > 0) & (new != l[:, i]) & (sl2_n > 0) &
                    (slx_n * slx_n * suml2 > sumlx * sumlx * sl2_n))
            l[:, i] = np.where(take, new, l[:, i])
            sumlx = np.where(take, slx_n, sumlx).astype(F)
            suml2 = np.where(take, sl2_n, suml2).astype(F)
    scale = np.where(suml2 > 0, sumlx / suml2, F(0)).astype(F)
    return np.where(zero, F(0), scale).astype(F), np.where(zero[:, None], 0, l + nmax)


# ---------------------------------------------------------------- Q2_K, Q3_K
# 256 weights, 16 sub-blocks of 16; weight e = 128h + 32k + l has its 2 low bits at bits 2k
# of qs[32h + l]. Q2_K (84 bytes): scales[16] @0 (low nibble scale, high nibble min),
# qs[64] @16, d (f16) @80, dmin (f16) @82; weight = d sc q - dmin m. Q3_K (110 bytes):
# hmask[32] @0 (bit e//32 of hmask[e%32]: the third bit), qs[64] @32, 16 six-bit scales
# in 12 bytes @96 (low nibble of byte j%8 at bit 4(j//8), top 2 bits at bit 2(j//4) of
# byte 8 + j%4, stored + 32), d (f16) @108; weight = d (s - 32) (q2 + 4 hbit - 4).

def _pack_2bit(L):
    Lq = L.reshape(-1, 2, 4, 32).astype(np.uint8) & 3          # (half, k, l)
    return (Lq[:, :, 0] | (Lq[:, :, 1] << 2) | (Lq[:, :, 2] << 4) | (Lq[:, :, 3] << 6)).reshape(-1, 64)


def _unpack_2bit(qs):
    q = qs.reshape(-1, 2, 1, 32).astype(np.int32)
    return np.concatenate([(q >> (2 * k)) & 3 for k in range(4)], axis=2).reshape(-1, 256)


def _q_q2_k(x):
    xs = x.reshape(-1, 16, 16)
    nb = xs.shape[0]
    X = xs.reshape(-1, 16)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scales, mins, L = _make_qkx2(X, np.abs(X), 3, -0.5, 0.1, 15, use_mad=True)
    scales, mins, L = scales.reshape(nb, 16), mins.reshape(nb, 16), L.reshape(nb, 16, 16)
    max_scale = np.zeros(nb, dtype=F)
    max_min = np.zeros(nb, dtype=F)
    for j in range(16):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale).astype(F)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min).astype(F)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ls = np.where((max_scale > 0)[:, None], _nearest_int((F(15) / max_scale)[:, None] * scales), 0)
        lm = np.where((max_min > 0)[:, None], _nearest_int((F(15) / max_min)[:, None] * mins) << 4, 0)
    sc = ((ls | lm) & 0xFF).astype(np.uint8)                    # int -> uint8_t, as ggml stores
    dbits, d = _f16_scale(np.where(max_scale > 0, max_scale / F(15), F(0)).astype(F))
    mbits, dmin = _f16_scale(np.where(max_min > 0, max_min / F(15), F(0)).astype(F))
    dd = d[:, None] * (sc & 0x0F).astype(F)
    dm = dmin[:, None] * (sc >> 4).astype(F)
    with np.errstate(divide="ignore", invalid="ignore"):
        Lr = np.clip(_nearest_int((xs + dm[:, :, None]) / dd[:, :, None]), 0, 3)
    L = np.where((dd == 0)[:, :, None], L, Lr)
    return np.concatenate([sc, _pack_2bit(L), _le16(dbits[:, None]), _le16(mbits[:, None])], axis=1).tobytes()


def _dq_q2_k(b):
    nb = b.shape[0]
    d = f16_bits_to_f32(_rd16(b, 80))
    dmin = f16_bits_to_f32(_rd16(b, 82))
    sc = b[:, 0:16].astype(np.int32)
    dl = np.repeat(d[:, None] * (sc & 0x0F).astype(F), 16, axis=1)
    ml = np.repeat(dmin[:, None] * (sc >> 4).astype(F), 16, axis=1)
    return dl * _unpack_2bit(b[:, 16:80]).astype(F) - ml


def _q_q3_k(x):
    xs = x.reshape(-1, 16, 16)
    nb = xs.shape[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scales, L = _make_q3(xs.reshape(-1, 16), 4)
    scales, L = scales.reshape(nb, 16), L.reshape(nb, 16, 16)
    max_scale = _first_absmax(scales)
    nz = max_scale != 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = np.where(nz, F(-32) / max_scale, F(0)).astype(F)
        l8 = ((_nearest_int(iscale[:, None] * scales) + 128) & 0xFF) - 128  # int -> int8_t
        u = np.where(nz[:, None], np.clip(l8, -32, 31) + 32, 0)
        dbits, d = _f16_scale(np.where(nz, F(1) / iscale, F(0)).astype(F))
        dd = d[:, None] * (u - 32).astype(F)
        Lr = np.clip(_nearest_int(xs / dd[:, :, None]), -4, 3) + 4
    L = np.where((dd == 0)[:, :, None], L, Lr).reshape(nb, 256)
    hmask = np.zeros((nb, 32), dtype=np.uint8)
    for m in range(8):
        hmask |= ((L[:, 32 * m:32 * m + 32] >> 2) & 1).astype(np.uint8) << m
    s = np.zeros((nb, 12), dtype=np.int32)
    for j in range(16):
        s[:, j % 8] |= (u[:, j] & 0x0F) << (4 * (j // 8))
        s[:, 8 + j % 4] |= (u[:, j] >> 4) << (2 * (j // 4))
    return np.concatenate([hmask, _pack_2bit(L), s.astype(np.uint8), _le16(dbits[:, None])], axis=1).tobytes()


def _dq_q3_k(b):
    nb = b.shape[0]
    d = f16_bits_to_f32(_rd16(b, 108))
    s = b[:, 96:108].astype(np.int32)
    u = np.stack([((s[:, j % 8] >> (4 * (j // 8))) & 0x0F) | (((s[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4)
                  for j in range(16)], axis=1)
    hm = b[:, 0:32].astype(np.int32)
    hbit = np.concatenate([(hm >> m) & 1 for m in range(8)], axis=1)   # weight e: bit e//32 of hmask[e%32]
    q = _unpack_2bit(b[:, 32:96]) + 4 * hbit - 4
    dl = np.repeat(d[:, None] * (u - 32).astype(F), 16, axis=1)
    return dl * q.astype(F)


# ---------------------------------------------------------------- Q4_K, Q5_K
# Super-block of 256 = 8 sub-blocks of 32. Header: d (f16), dmin (f16), 12 bytes with 8
# six-bit scales and 8 six-bit mins: for j < 4 scale j is bits 0-5 of byte j and min j
# bits 0-5 of byte j+4; for j >= 4 the low 4 bits sit in byte j+4 (scale low nibble,
# min high nibble) and the top 2 bits in bits 6-7 of byte j-4 (scale) and byte j (min).
# Sub-block j's quants are nibbles of qs[32*(j//2) + l]: low for even j, high for odd.
# Q5_K adds qh[32]: bit j of qh[l] is the fifth bit of weight 32j + l.

def _pack_k_scales(ls, lm):
    s = np.zeros((ls.shape[0], 12), dtype=np.uint8)
    for j in range(8):
        if j < 4:
            s[:, j] = ls[:, j]
            s[:, j + 4] = lm[:, j]
    for j in range(4, 8):
        s[:, j + 4] = (ls[:, j] & 0x0F) | ((lm[:, j] & 0x0F) << 4)
        s[:, j - 4] |= (ls[:, j] >> 4) << 6
        s[:, j] |= (lm[:, j] >> 4) << 6
    return s


def _unpack_k_scales(s):
    s = s.astype(np.int32)
    sc = np.zeros((s.shape[0], 8), dtype=np.int32)
    mn = np.zeros_like(sc)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 0x0F) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def _q_k45(x, nmax, rmin, rdelta, nstep):
    """Shared by Q4_K and Q5_K: returns (header bytes (nb, 16), L (nb, 256))."""
    xs = x.reshape(-1, 8, 32)
    nb = xs.shape[0]
    X = xs.reshape(-1, 32)
    sum_x2 = _seqsum(F(0), X * X)
    av_x = np.sqrt(sum_x2 / F(32)).astype(F)
    W = (av_x[:, None] + np.abs(X)).astype(F)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scales, mins, L = _make_qkx2(X, W, nmax, rmin, rdelta, nstep)
    scales = scales.reshape(nb, 8)
    mins = mins.reshape(nb, 8)
    L = L.reshape(nb, 256)

    max_scale = np.zeros(nb, dtype=F)
    max_min = np.zeros(nb, dtype=F)
    for j in range(8):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale).astype(F)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min).astype(F)
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F(63) / max_scale, F(0)).astype(F)
        inv_min = np.where(max_min > 0, F(63) / max_min, F(0)).astype(F)
    with np.errstate(invalid="ignore"):
        ls = np.minimum(63, _nearest_int(inv_scale[:, None] * scales) & 0xFF)  # int -> uint8_t
        lm = np.minimum(63, _nearest_int(inv_min[:, None] * mins) & 0xFF)
    dbits, d = _f16_scale(max_scale / F(63))
    mbits, dmin = _f16_scale(max_min / F(63))

    dd = d[:, None] * ls.astype(F)      # (nb, 8)
    dm = dmin[:, None] * lm.astype(F)
    with np.errstate(divide="ignore", invalid="ignore"):
        Lr = np.clip(_nearest_int((xs + dm[:, :, None]) / dd[:, :, None]), 0, nmax)
    keep = (dd == 0)[:, :, None]
    L = np.where(keep, L.reshape(nb, 8, 32), Lr).reshape(nb, 256)

    head = np.concatenate([_le16(dbits[:, None]), _le16(mbits[:, None]),
                           _pack_k_scales(ls.astype(np.uint8), lm.astype(np.uint8))], axis=1)
    return head, L


def _q_q4_k(x):
    head, L = _q_k45(x, 15, -1.0, 0.1, 20)
    Lc = L.reshape(-1, 4, 2, 32)            # chunk of 64: (sub-block 2c, 2c+1)
    qs = _pack_nibbles(Lc[:, :, 0, :], Lc[:, :, 1, :]).reshape(-1, 128)
    return np.concatenate([head, qs], axis=1).tobytes()


def _q_q5_k(x):
    head, L = _q_k45(x, 31, -0.5, 0.1, 15)
    Ls = L.reshape(-1, 8, 32)
    qh = np.zeros((Ls.shape[0], 32), dtype=np.uint8)
    for j in range(8):
        qh |= ((Ls[:, j, :] >> 4) & 1).astype(np.uint8) << j
    Lc = L.reshape(-1, 4, 2, 32)
    qs = _pack_nibbles(Lc[:, :, 0, :], Lc[:, :, 1, :]).reshape(-1, 128)
    return np.concatenate([head, qh, qs], axis=1).tobytes()


def _dq_k45(b, five):
    nb = b.shape[0]
    d = f16_bits_to_f32(_rd16(b, 0))
    dmin = f16_bits_to_f32(_rd16(b, 2))
    sc, mn = _unpack_k_scales(b[:, 4:16])
    qs = b[:, 48:176] if five else b[:, 16:144]
    qs = qs.reshape(nb, 4, 32).astype(np.int32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(nb, 8, 32)  # sub-block 2c, 2c+1
    if five:
        qh = b[:, 16:48].astype(np.int32)
        q = q + np.stack([((qh >> j) & 1) * 16 for j in range(8)], axis=1)
    d1 = d[:, None] * sc.astype(F)
    m1 = dmin[:, None] * mn.astype(F)
    y = d1[:, :, None] * q.astype(F) - m1[:, :, None]
    return y.reshape(nb, 256)


# ---------------------------------------------------------------- Q6_K
# 256 weights, 16 sub-blocks of 16. ql[128] @0, qh[64] @128, int8 scales[16] @192,
# d (f16) @208. Weight e: h = e//128, k = (e%128)//32, l = e%32;
#   low  = (ql[64h + 32(k&1) + l] >> 4(k>>1)) & 15,  high = (qh[32h + l] >> 2k) & 3,
#   weight = d * scales[e//16] * ((low | high << 4) - 32).

def _q_q6_k(x):
    xs = x.reshape(-1, 16, 16)
    nb = xs.shape[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scales, L = _make_qx(xs.reshape(-1, 16), 32)
    scales = scales.reshape(nb, 16)
    L = L.reshape(nb, 16, 16)

    max_scale = _first_absmax(scales)
    zero = np.abs(max_scale) < GROUP_MAX_EPS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = (F(-128) / max_scale).astype(F)
        dbits, d = _f16_scale(F(1) / iscale)
        sc = (np.minimum(127, _nearest_int(iscale[:, None] * scales)) & 0xFF).astype(np.uint8)
        dd = d[:, None] * sc.view(np.int8).astype(F)
        Lr = np.clip(_nearest_int(xs / dd[:, :, None]), -32, 31) + 32
    L = np.where((dd == 0)[:, :, None], L, Lr).reshape(nb, 2, 4, 32)  # (half, quarter, l)

    ql = np.concatenate([_pack_nibbles(L[:, :, 0], L[:, :, 2]),
                         _pack_nibbles(L[:, :, 1], L[:, :, 3])], axis=2).reshape(nb, 128)
    hi = (L >> 4).astype(np.uint8)
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(nb, 64)
    out = np.concatenate([ql, qh, sc, _le16(dbits[:, None])], axis=1)
    out[zero] = 0
    return out.tobytes()


def _dq_q6_k(b):
    nb = b.shape[0]
    d = f16_bits_to_f32(_rd16(b, 208))
    ql = b[:, 0:128].reshape(nb, 2, 2, 32).astype(np.int32)   # (half, 32-byte group, l)
    qh = b[:, 128:192].reshape(nb, 2, 32).astype(np.int32)
    sc = b[:, 192:208].view(np.int8).astype(F).reshape(nb, 16)
    y = np.zeros((nb, 2, 4, 32), dtype=F)
    for k in range(4):
        low = (ql[:, :, k & 1, :] >> (4 * (k >> 1))) & 0x0F
        high = (qh >> (2 * k)) & 3
        q = ((low | (high << 4)) - 32).astype(F)
        for h in range(2):
            s = sc[:, 8 * h + 2 * k: 8 * h + 2 * k + 2]            # two sub-blocks of 16
            ds = np.repeat(d[:, None] * s, 16, axis=1)              # (nb, 32)
            y[:, h, k, :] = ds * q[:, h, :]
    return y.reshape(nb, 256)


# ---------------------------------------------------------------- API

def _type(name):
    key = name.lower()
    if key not in TYPES:
        raise ValueError("unknown type %r" % name)
    return key, TYPES[key]


def quantize(type_name, x):
    """float32 values -> the bytes of type_name's blocks (len(x) a multiple of the block)."""
    key, (_, be, _) = _type(type_name)
    x = np.ascontiguousarray(np.asarray(x, dtype=F).ravel())
    if x.size % be:
        raise ValueError("%d elements is not a whole number of %s blocks" % (x.size, key))
    if key == "f32":
        return x.astype("<f4").tobytes()
    if key == "f16":
        return f32_to_f16_bits(x).astype("<u2").tobytes()
    if key == "bf16":
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    if x.size == 0:
        return b""
    if key in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        return _q_legacy(x, key)
    return {"q2_k": _q_q2_k, "q3_k": _q_q3_k, "q4_k": _q_q4_k, "q5_k": _q_q5_k, "q6_k": _q_q6_k}[key](x)


def dequantize(type_name, data, n):
    """The bytes of n elements of type_name -> float32 array of n."""
    key, (_, be, bb) = _type(type_name)
    if n % be or len(data) < n // be * bb:
        raise ValueError("%d elements of %s need %d bytes" % (n, key, n // be * bb))
    raw = np.frombuffer(data, dtype=np.uint8, count=n // be * bb)
    if key == "f32":
        return raw.view("<f4").astype(F)
    if key == "f16":
        return f16_bits_to_f32(raw.view("<u2").astype(np.uint16))
    if key == "bf16":
        return bf16_bits_to_f32(raw.view("<u2").astype(np.uint16))
    if n == 0:
        return np.zeros(0, dtype=F)
    b = raw.reshape(-1, bb)
    if key in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        y = _dq_legacy(b, key)
    elif key == "q6_k":
        y = _dq_q6_k(b)
    elif key in ("q2_k", "q3_k"):
        y = (_dq_q2_k if key == "q2_k" else _dq_q3_k)(b)
    else:
        y = _dq_k45(b, key == "q5_k")
    return np.ascontiguousarray(y, dtype=F).reshape(n)
