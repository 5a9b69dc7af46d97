#!/usr/bin/env python3
"""make_format_vectors.py - writes the tensor-format test vectors in tests/data/formats/.

For 11 of the 13 types (scripts/quants.py's TYPES but q2_k and q3_k, whose files are made
by ggml's own C: scripts/ggml_kquant_vectors.sh) one file <type>.bin holds cases made
by the independent numpy implementation in scripts/quants.py; tests/test_formats.c checks
lean's C against them bit for bit:
  * quantize cases: seeded inputs of several shape classes, their numpy-quantized bytes
    and the numpy dequantization of those bytes;
  * dequantize cases: random raw blocks (random bytes, f16 scale fields made finite) and
    their numpy dequantization.

    /usr/bin/python3 scripts/make_format_vectors.py            # rewrite tests/data/formats
    python3 scripts/make_format_vectors.py --out /tmp/v --scale 50 --seed 7
    build/tests/test_formats /tmp/v                              # a big local stress run
    /usr/bin/python3 scripts/make_format_vectors.py --check      # quants.py against every file
                                                                 # (ggml's q2_k / q3_k included)

The inputs come only from PCG64's raw 64-bit stream and exact float arithmetic (no
transcendental functions, no numpy sampling methods), so the same seed writes the same
bytes with any numpy version on any platform.

File layout, all little-endian:
  OFFSET  SIZE  DESCRIPTION
       0     4  magic "LQFV"
       4     4  u32 version (1)
       8     4  u32 ggml type id
      12     4  u32 elements per block
      16     4  u32 bytes per block
      20     4  u32 number of cases
      24     .  the cases, one after another

Case:
  OFFSET  SIZE              DESCRIPTION
       0    16              name, ASCII, NUL-padded
      16     4              u32 kind: 0 = quantize case, 1 = dequantize-only case
      20     4              u32 n, elements (a multiple of the block)
      24   4n               f32 inputs (kind 0 only)
       .   n/elems*bytes    the blocks (kind 0: numpy's quantization of the inputs)
       .   4n               f32 numpy dequantization of the blocks
"""

import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quants  # noqa: E402

F = np.float32
MAGIC = b"LQFV"
VERSION = 1


class Rng:
    """Reproducible draws from PCG64's raw stream using exact arithmetic only."""

    def __init__(self, seed):
        self.bg = np.random.PCG64(seed)

    def raw(self, n):
        return np.asarray(self.bg.random_raw(n), dtype=np.uint64).reshape(-1)[:n]

    def uniform(self, n, lo=0.0, hi=1.0):
        u = (self.raw(n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53  # exact
        return lo + (hi - lo) * u

    def normal(self, n):
        """Irwin-Hall: the sum of 12 uniforms minus 6, close enough to N(0, 1). The
        uniforms have 40 bits, so the sum is exact in any order."""
        u = (self.raw(12 * n) >> np.uint64(24)).astype(np.float64) * 2.0 ** -40
        return u.reshape(n, 12).sum(axis=1) - 6.0

    def ints(self, n, lo, hi):
        """integers in [lo, hi)"""
        return (lo + (self.raw(n) % np.uint64(hi - lo)).astype(np.int64)).astype(np.int64)

    def pow2(self, n, lo, hi):
        """magnitudes 2^e * (1 + u), e in [lo, hi): spread over orders of magnitude."""
        return np.ldexp(1.0 + self.uniform(n), self.ints(n, lo, hi).astype(np.int32))

    def bytes(self, n):
        return self.raw((n + 7) // 8).view(np.uint8)[:n].copy()


# ---------------------------------------------------------------- input classes
# Each returns n float32 values; be is the block size the type uses (1 for f32/f16/bf16,
# in which case "blocks" of 32 are used for the block-shaped classes).

def c_normal(r, n, be):
    return r.normal(n)


def c_zeros(r, n, be):
    return np.zeros(n)


def c_const(r, n, be):
    """each block one constant; signs alternate, the last block -0.0"""
    g = max(be, 32)
    v = r.normal(n // g) * 3.0
    v[1::2] = -np.abs(v[1::2])
    v[0::2] = np.abs(v[0::2])
    x = np.repeat(v, g)
    x[-g:] = -0.0
    return x


def c_large(r, n, be):
    """up to ~2^14 = 16384: scales and mins stay inside f16's range"""
    return r.normal(n) * np.repeat(r.pow2(n // 16, 8, 13), 16)


def c_small(r, n, be):
    """per 16 values magnitudes 2^-40 .. 2^-8: f16 scales go subnormal or underflow"""
    return r.normal(n) * np.repeat(r.pow2(n // 16, -40, -8), 16)


def c_negonly(r, n, be):
    return -r.uniform(n, 0.01, 2.0)


def c_posonly(r, n, be):
    return r.uniform(n, 0.01, 2.0)


def c_outlier(r, n, be):
    """small noise and one large value per 32"""
    x = r.normal(n) * 0.01
    k = max(n // 32, 1)
    pos = np.arange(k) * 32 + r.ints(k, 0, min(32, n))
    x[pos] = r.normal(k) * 20.0
    return x


def c_subscales(r, n, be):
    """each run of 16 values has its own magnitude (K-quant sub-block scales differ)"""
    return r.normal(n) * np.repeat(r.pow2(n // 16, -6, 4), 16)


def c_grid(r, n, be):
    """half- and quarter-integers: many quantities land exactly on rounding ties"""
    x = r.ints(n, -64, 65) / 4.0
    return x


def ties_for(name, r, n):
    """inputs whose scaled values hit the quantizer's rounding boundaries exactly"""
    if name == "f16":
        # midpoints of adjacent f16 values (ties to even) and one f32 ulp either side
        h = r.ints(n // 3, 0, 0x7BFF).astype(np.uint16)  # finite, so h + 1 is too
        a = quants.f16_bits_to_f32(h).astype(np.float64)
        b = quants.f16_bits_to_f32(h + 1).astype(np.float64)
        mid = ((a + b) / 2).astype(F)  # exact in f32
        sgn = np.where(r.ints(n // 3, 0, 2) == 0, -1.0, 1.0).astype(F)
        up = np.nextafter(mid, F(np.inf))
        dn = np.nextafter(mid, F(-np.inf))
        x = np.concatenate([mid * sgn, up * sgn, dn * sgn])
        return np.concatenate([x, np.zeros(n - x.size)]).astype(F)
    if name == "bf16":
        hi = r.ints(n, 0, 0x7F7F).astype(np.uint32) << 16
        lo = np.where(r.ints(n, 0, 2) == 0, 0x8000, r.ints(n, 0x7FFE, 0x8003)).astype(np.uint32)
        sign = (r.ints(n, 0, 2).astype(np.uint32) << 31)
        return (hi | lo | sign).astype(np.uint32).view(F)
    if name == "q8_0":  # amax 127 -> d = 1: x = k + 1/2 rounds away from zero
        x = r.ints(n, -254, 255) / 2.0
        x[::32] = 127.0
    elif name == "q4_0":  # max -8 -> d = 1: x + 8.5 lands on integers
        x = r.ints(n, -16, 16) / 2.0
        x[::32] = -8.0
    elif name == "q5_0":
        x = r.ints(n, -32, 32) / 2.0
        x[::32] = -16.0
    elif name in ("q4_1", "q5_1"):  # min 0, max 15 (31) -> d = 1
        top = 15 if name == "q4_1" else 31
        x = r.ints(n, 0, 2 * top + 1) / 2.0
        x[::32] = 0.0
        x[1::32] = float(top)
    else:  # K-quants: values on a grid of the largest magnitude / 2^k
        x = r.ints(n, -62, 63) / 2.0
        x[::16] = np.where(r.ints(n // 16, 0, 2) == 0, 31.5, -32.0)
    return x


def special_for(name, n):
    """f32/f16/bf16 only: zeros, infinities, NaNs, subnormals and range edges"""
    bits = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
            0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345, 0x7FBFFFFF, 0x7FFFFFFF,
            0x00000001, 0x80000001, 0x007FFFFF, 0x00400000, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
            0x7F7F8000, 0x7F7F7FFF, 0x3F808000, 0x3F818000, 0x3F807FFF]
    vals = [65504.0, -65504.0, 65519.0, 65519.996, 65520.0, -65520.0, 65536.0, 1e5, 1e-8,
            2.0 ** -24, 2.0 ** -25, -(2.0 ** -25), 3 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -14,
            2.0 ** -14 - 2.0 ** -25, 2.0 ** -14 - 2.0 ** -24, 6.1e-5, 1.0 + 2.0 ** -11,
            1.0 + 3 * 2.0 ** -11, 2049.0, 2051.0, 1.0 / 3.0, -0.1, 1e30, -1e-30]
    x = np.concatenate([np.array(bits, dtype=np.uint32).view(F), np.array(vals, dtype=F)])
    return np.concatenate([x, np.zeros(n - x.size, dtype=F)])


CLASSES = [("normal", c_normal), ("zeros", c_zeros), ("const", c_const), ("large", c_large),
           ("small", c_small), ("negonly", c_negonly), ("posonly", c_posonly),
           ("outlier", c_outlier), ("subscales", c_subscales), ("grid", c_grid)]


# ---------------------------------------------------------------- raw blocks

def random_f16_finite(r, n):
    h = r.raw(n).astype(np.uint16)
    inf_nan = (h & 0x7C00) == 0x7C00
    return np.where(inf_nan, h & 0xBFFF, h).astype(np.uint16)  # exponent 31 -> 15


# files written by ggml's own C (scripts/ggml_kquant_vectors.sh), not by this script
GGML_MADE = ("q2_k", "q3_k")

# byte offsets of the f16 scale fields in each block
F16_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
              "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}


def raw_blocks(name, r, nblocks, fill=None):
    _, be, bb = quants.TYPES[name]
    if fill is None:
        b = r.bytes(nblocks * bb).reshape(nblocks, bb)
    else:
        b = np.full((nblocks, bb), fill, dtype=np.uint8)
    for off in F16_FIELDS.get(name, []):
        h = random_f16_finite(r, nblocks)
        b[:, off] = (h & 0xFF).astype(np.uint8)
        b[:, off + 1] = (h >> 8).astype(np.uint8)
    return b.tobytes()


# ---------------------------------------------------------------- writing

def case_bytes(label, kind, n, inputs, blocks, deq):
    head = label.encode("ascii")[:16].ljust(16, b"\0") + struct.pack("<II", kind, n)
    parts = [head]
    if kind == 0:
        parts.append(np.asarray(inputs, dtype="<f4").tobytes())
    parts.append(blocks)
    parts.append(np.asarray(deq, dtype="<f4").tobytes())
    return b"".join(parts)


def make_type(name, seed, scale):
    tid, be, bb = quants.TYPES[name]
    r = Rng([seed, tid])
    # elements per quantize case: 2 super-blocks, 8 legacy blocks, 128 scalars
    n = {256: 512, 32: 256, 1: 128}[be] * scale
    cases = []

    def add_q(label, x):
        x = np.asarray(x, dtype=F)
        q = quants.quantize(name, x)
        cases.append(case_bytes(label, 0, x.size, x, q, quants.dequantize(name, q, x.size)))

    for label, fn in CLASSES:
        add_q(label, fn(r, n, be))
    if name in ("f32", "f16", "bf16"):
        add_q("special", special_for(name, n))
    add_q("ties", ties_for(name, r, n))

    # raw blocks straight into the dequantizer
    if name in ("f32", "f16", "bf16"):
        nraw = 256 * scale
        raws = [("raw", r.bytes(nraw * bb).tobytes())]
    else:
        nraw = (4 if be == 256 else 32) * scale
        raws = [("raw", raw_blocks(name, r, nraw)),
                ("raw_ones", raw_blocks(name, r, 2 if be == 256 else 4, fill=0xFF)),
                ("raw_zeros", raw_blocks(name, r, 2 if be == 256 else 4, fill=0x00))]
    for label, data in raws:
        m = len(data) // bb * be
        cases.append(case_bytes(label, 1, m, None, data, quants.dequantize(name, data, m)))

    head = MAGIC + struct.pack("<IIIII", VERSION, tid, be, bb, len(cases))
    return head + b"".join(cases)


def check(d, names):
    """quants.py against the files in d: each quantize case's bytes from its inputs, every
    case's floats from its blocks, bit for bit; returns the number of differences."""
    bad = 0
    for name in names:
        with open(os.path.join(d, name + ".bin"), "rb") as f:
            buf = f.read()
        _, _, be, bb, count = struct.unpack_from("<5I", buf, 4)
        off = 24
        for _ in range(count):
            label = buf[off:off + 16].rstrip(b"\0").decode()
            kind, n = struct.unpack_from("<II", buf, off + 16)
            off += 24
            x = None
            if kind == 0:
                x, off = np.frombuffer(buf, "<f4", n, off), off + 4 * n
            q, off = buf[off:off + n // be * bb], off + n // be * bb
            y, off = np.frombuffer(buf, "<u4", n, off), off + 4 * n
            if x is not None and quants.quantize(name, x) != q:
                print("%s/%s: numpy quantize differs" % (name, label))
                bad += 1
            if not np.array_equal(quants.dequantize(name, q, n).view(np.uint32), y):
                print("%s/%s: numpy dequantize differs" % (name, label))
                bad += 1
        print("%-5s %3d cases checked" % (name, count))
    return bad


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(root, "tests", "data", "formats"))
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--scale", type=int, default=1, help="multiply every case's size")
    ap.add_argument("--types", default=",".join(t for t in quants.TYPES if t not in GGML_MADE),
                    help="comma-separated type names")
    ap.add_argument("--check", action="store_true", help="check quants.py against --out's files of every type")
    args = ap.parse_args()
    if args.check:
        bad = check(args.out, quants.TYPES)
        print("%d differences" % bad)
        sys.exit(1 if bad else 0)
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for name in args.types.split(","):
        data = make_type(name, args.seed, args.scale)
        with open(os.path.join(args.out, name + ".bin"), "wb") as f:
            f.write(data)
        total += len(data)
        print("%-5s %8d bytes" % (name, len(data)))
    print("total %8d bytes in %s" % (total, args.out))


if __name__ == "__main__":
    main()
