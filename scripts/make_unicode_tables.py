#!/usr/bin/env python3
"""make_unicode_tables.py — writes src/text/unicode_tables.c, the Unicode data lean's tokenizers
use, from Debian's unicode-data package (`apt-get install unicode-data`: the Unicode Character
Database in /usr/share/unicode/, Unicode 15.0 in Debian 12).

    python3 scripts/make_unicode_tables.py [--ucd /usr/share/unicode] [--out src/text/unicode_tables.c]

What the tables hold (declared in src/text/unicode.h):
  lean_ucat_runs      the General_Category of every code point as runs: (first code point,
                      category); a run lasts until the next one starts. Unassigned code
                      points are Cn. From UnicodeData.txt (with its <..., First>/<..., Last>
                      ranges). lean_ucat_latin1: the same for U+0000..U+00FF, as a table.
  lean_space_ranges   the White_Space property (PropList.txt): what \\s matches in the regexes
                      of HF tokenizers (Oniguruma) — 25 code points.
  lean_ccc_runs       Canonical_Combining_Class as runs, like the categories.
  lean_decomp         every canonical decomposition (UnicodeData.txt field 5 without a <tag>),
                      fully expanded, sorted by code point; the code points live in
                      lean_decomp_pool. Hangul syllables are left to the algorithm.
  lean_comp           the primary composites: (first, second) -> composite, sorted, for
                      every two-character canonical decomposition whose composite is not
                      in Full_Composition_Exclusion (DerivedNormalizationProps.txt).

Before writing, the script checks its own NFC (the same algorithm as unicode.c, over these
tables) against every line of NormalizationTest.txt(.bz2), so a table that would give a wrong
normalization is never written. Plain python3, stdlib only.
"""
import argparse
import bz2
import os
import sys

CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd",
              "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf",
              "Cs", "Co"]
MAX_CP = 0x10FFFF
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
N_COUNT, S_COUNT = V_COUNT * T_COUNT, 19 * 21 * 28


def read_unicode_data(path):
    cat, ccc, decomp = {}, {}, {}
    with open(path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n").split(";") for ln in f if ln.strip()]
    i = 0
    while i < len(lines):
        f = lines[i]
        cp = int(f[0], 16)
        if f[1].endswith(", First>"):
            last = int(lines[i + 1][0], 16)
            for c in range(cp, last + 1):
                cat[c] = f[2]
                if int(f[3]):
                    ccc[c] = int(f[3])
            i += 2
            continue
        cat[cp] = f[2]
        if int(f[3]):
            ccc[cp] = int(f[3])
        if f[5] and not f[5].startswith("<"):
            decomp[cp] = [int(x, 16) for x in f[5].split()]
        i += 1
    return cat, ccc, decomp


def read_ranges(path, prop):
    out = set()
    with open(path, encoding="utf-8") as f:
        for ln in f:
            ln = ln.split("#")[0].strip()
            if not ln:
                continue
            fields = [x.strip() for x in ln.split(";")]
            if fields[1] != prop:
                continue
            a, _, b = fields[0].partition("..")
            out.update(range(int(a, 16), int(b or a, 16) + 1))
    return out


def runs(value_of):
    """[(first, value)] for every change of value_of(cp) over 0..MAX_CP."""
    out, prev = [], None
    for cp in range(MAX_CP + 1):
        v = value_of(cp)
        if v != prev:
            out.append((cp, v))
            prev = v
    return out


def ranges(cps):
    out = []
    for cp in sorted(cps):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


# ---- NFC over the tables, the same algorithm as src/text/unicode.c (to check the tables) ----
def nfc(s, ccc, full, comp):
    d = []
    for ch in s:
        cp = ord(ch)
        if S_BASE <= cp < S_BASE + S_COUNT:
            si = cp - S_BASE
            d += [L_BASE + si // N_COUNT, V_BASE + (si % N_COUNT) // T_COUNT]
            if si % T_COUNT:
                d.append(T_BASE + si % T_COUNT)
        else:
            d += full.get(cp, [cp])
    # canonical ordering: a stable sort of each run of non-starters by class
    i = 0
    while i < len(d):
        if ccc.get(d[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(d) and ccc.get(d[j], 0) != 0:
            j += 1
        d[i:j] = sorted(d[i:j], key=lambda c: ccc.get(c, 0))
        i = j
    # canonical composition: each character composes with the last starter unless blocked
    # (a character between them of class 0 or >= its own; after the ordering above, the
    # last one appended is the largest). last_ccc is -1 when nothing follows the starter.
    out, starter, last_ccc = [], None, -1
    for c in d:
        cc = ccc.get(c, 0)
        if starter is not None and (last_ccc == -1 or last_ccc < cc):
            first, composite = out[starter], None
            if L_BASE <= first < L_BASE + L_COUNT and V_BASE <= c < V_BASE + V_COUNT:
                composite = S_BASE + ((first - L_BASE) * V_COUNT + (c - V_BASE)) * T_COUNT
            elif (S_BASE <= first < S_BASE + S_COUNT and (first - S_BASE) % T_COUNT == 0
                  and T_BASE < c < T_BASE + T_COUNT):
                composite = first + (c - T_BASE)
            else:
                composite = comp.get((first, c))
            if composite is not None:
                out[starter] = composite
                continue
        if cc == 0:
            starter, last_ccc = len(out), -1
        else:
            last_ccc = cc
        out.append(c)
    return "".join(map(chr, out))


def check_nfc(path, ccc, full, comp):
    opener = bz2.open if path.endswith(".bz2") else open
    n = 0
    with opener(path, "rt", encoding="utf-8") as f:
        for ln in f:
            if not ln.strip() or ln[0] in "#@":
                continue
            cols = ["".join(chr(int(h, 16)) for h in c.split()) for c in ln.split(";")[:5]]
            want = [cols[1], cols[1], cols[1], cols[3], cols[3]]
            for c, w in zip(cols, want):
                got = nfc(c, ccc, full, comp)
                if got != w:
                    raise SystemExit(f"NFC check failed on {ln.strip()!r}: got "
                                     f"{' '.join('%04X' % ord(x) for x in got)}")
            n += 1
    return n


def c_array(name, ctype, rows, per_line):
    out = [f"const {ctype} {name}[] = {{"]
    for i in range(0, len(rows), per_line):
        out.append("    " + " ".join(rows[i:i + per_line]))
    out.append("};")
    out.append(f"const size_t {name}_count = sizeof {name} / sizeof {name}[0];")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ucd", default="/usr/share/unicode")
    ap.add_argument("--out", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src/text/unicode_tables.c")))
    a = ap.parse_args()
    ucd = a.ucd
    with open(os.path.join(ucd, "ReadMe.txt"), encoding="utf-8") as f:
        readme = f.read()
    version = next((ln.split("Version")[-1].split()[0] for ln in readme.splitlines() if "Version" in ln), "?")
    cat, ccc, decomp = read_unicode_data(os.path.join(ucd, "UnicodeData.txt"))
    space = read_ranges(os.path.join(ucd, "PropList.txt"), "White_Space")
    excluded = read_ranges(os.path.join(ucd, "DerivedNormalizationProps.txt"), "Full_Composition_Exclusion")

    def expand(cp):
        return [x for c in decomp[cp] for x in (expand(c) if c in decomp else [c])]
    full = {cp: expand(cp) for cp in decomp}
    comp = {}
    for cp, d in decomp.items():
        if len(d) == 2 and cp not in excluded:
            comp[(d[0], d[1])] = cp
    tests = os.path.join(ucd, "NormalizationTest.txt")
    tests = tests if os.path.exists(tests) else tests + ".bz2"
    n_checked = check_nfc(tests, ccc, full, comp)

    cat_idx = {c: i for i, c in enumerate(CATEGORIES)}
    cat_runs = runs(lambda cp: cat_idx[cat.get(cp, "Cn")])
    ccc_runs = runs(lambda cp: ccc.get(cp, 0))
    pool, decomp_rows = [], []
    for cp in sorted(full):
        d = full[cp]
        decomp_rows.append(f"{{0x{cp:05X}, {len(pool)}, {len(d)}}},")
        pool += d
    # unicode.c's MAX_DECOMP and the table's u16 offsets rely on these
    if len(pool) >= 65536 or max(len(d) for d in full.values()) > 4:
        raise SystemExit('decompositions outgrew unicode.c (MAX_DECOMP 4, u16 offsets)')
    comp_rows = [f"{{0x{f:05X}, 0x{s:05X}, 0x{c:05X}}}," for (f, s), c in sorted(comp.items())]

    lines = [
        "/* unicode_tables.c — GENERATED by scripts/make_unicode_tables.py; do not edit.",
        f" * From the Unicode Character Database {version} (Debian's unicode-data package):",
        " * UnicodeData.txt, PropList.txt, DerivedNormalizationProps.txt. NFC over these tables was",
        f" * checked against all {n_checked} lines of NormalizationTest.txt. Layouts: src/text/unicode.h. */",
        '#include "unicode.h"',
        "",
        "/* General_Category runs: (first code point, LEAN_UCAT_*) until the next run. */",
    ]
    lines += c_array("lean_ucat_runs", "lean_urun", [f"{{0x{cp:05X}, {v}}}," for cp, v in cat_runs], 6)
    lines += ["", "/* The categories of U+0000..U+00FF, looked up first. */"]
    lines += [f"const uint8_t lean_ucat_latin1[256] = {{"]
    lines += ["    " + " ".join(f"{cat_idx[cat.get(c, 'Cn')]}," for c in range(r, r + 16)) for r in range(0, 256, 16)]
    lines += ["};"]
    lines += ["", "/* White_Space: inclusive ranges. */"]
    lines += c_array("lean_space_ranges", "lean_urange", [f"{{0x{a:05X}, 0x{b:05X}}}," for a, b in ranges(space)], 4)
    lines += ["", "/* Canonical_Combining_Class runs. */"]
    lines += c_array("lean_ccc_runs", "lean_urun", [f"{{0x{cp:05X}, {v}}}," for cp, v in ccc_runs], 6)
    lines += ["", "/* Full canonical decompositions (Hangul excepted): code point, offset and length in the pool. */"]
    lines += c_array("lean_decomp", "lean_udecomp", decomp_rows, 4)
    lines += c_array("lean_decomp_pool", "uint32_t", [f"0x{c:05X}," for c in pool], 8)
    lines += ["", "/* Primary composites: (first, second) -> composite, sorted by (first, second). */"]
    lines += c_array("lean_comp", "lean_ucomp", comp_rows, 3)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{a.out}: Unicode {version}: {len(cat_runs)} category runs, {len(ranges(space))} space ranges, "
          f"{len(ccc_runs)} ccc runs, {len(full)} decompositions ({len(pool)} code points), "
          f"{len(comp)} composites; NFC checked on {n_checked} test lines")


if __name__ == "__main__":
    sys.exit(main())
