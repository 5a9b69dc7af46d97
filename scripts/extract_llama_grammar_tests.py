#!/usr/bin/env python3
"""extract_llama_grammar_tests.py — llama.cpp's grammar integration tests as data.

Reads tests/test-grammar-integration.cpp from llama.cpp's source (the tarball
/work/shared/peers/llama.cpp-3f545be.tar.xz, or a path given) and writes
tests/data/grammar/llama_integration.json: a list of
  {"kind": "grammar" | "schema", "desc": ..., "text": GBNF or schema,
   "pass": [...], "fail": [...]}          from test_grammar(...) / test_schema(...)
  {"kind": "fails", "desc": NAME, "text": GBNF}   from test_build_grammar_fails(NAME)
A string with llama.cpp's token(N) markers becomes a list of pieces: text, or an int id.

Usage: python3 scripts/extract_llama_grammar_tests.py [test-grammar-integration.cpp]
"""
import json, re, sys, tarfile

def source():
    if len(sys.argv) > 1:
        return open(sys.argv[1], encoding="utf-8").read()
    with tarfile.open("/work/shared/peers/llama.cpp-3f545be.tar.xz") as t:
        return t.extractfile("llama.cpp/tests/test-grammar-integration.cpp").read().decode("utf-8")

def unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c); i += 1; continue
        n = s[i + 1]
        simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
        if n == "x":
            m = re.match(r"[0-9a-fA-F]+", s[i + 2:]); out.append(chr(int(m.group(0), 16))); i += 2 + len(m.group(0))
        elif n == "u":
            out.append(chr(int(s[i + 2:i + 6], 16))); i += 6
        elif n in simple:
            out.append(simple[n]); i += 2
        else:
            raise ValueError("escape \\" + n)
    return "".join(out)

def tokens(src):
    """C++ tokens: ('str', text), ('id', name), ('num', n), ('p', char)."""
    i, out = 0, []
    while i < len(src):
        c = src[i]
        if src.startswith("//", i):
            i = src.index("\n", i)
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 2
        elif c.isspace():
            i += 1
        elif src.startswith('R"', i):
            d = src[i + 2:src.index("(", i)]
            start = src.index("(", i) + 1
            end = src.index(")" + d + '"', start)
            out.append(("str", src[start:end])); i = end + len(d) + 2
        elif c == '"':
            j = i + 1
            while src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            # the bytes of a C++ narrow string: \x escapes are bytes; decode as UTF-8 where whole
            raw = unescape(src[i + 1:j])
            try:
                raw = raw.encode("latin-1").decode("utf-8")
            except (UnicodeEncodeError, UnicodeDecodeError):
                pass
            out.append(("str", raw)); i = j + 1
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z0-9_:]*", src[i:]); out.append(("id", m.group(0))); i += len(m.group(0))
        elif c.isdigit():
            m = re.match(r"[0-9]+", src[i:]); out.append(("num", int(m.group(0)))); i += len(m.group(0))
        else:
            out.append(("p", c)); i += 1
    return out

def parse_expr(tk, i):
    """A string expression: literals, token(N), joined by + or adjacency; returns (pieces, i)."""
    pieces = []
    while True:
        t = tk[i]
        if t[0] == "str":
            pieces.append(t[1]); i += 1
        elif t == ("id", "token"):
            pieces.append(tk[i + 2][1]); i += 4
        elif t == ("p", "+"):
            i += 1
        else:
            break
    merged = []
    for p in pieces:
        if merged and isinstance(p, str) and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    if len(merged) == 1 and isinstance(merged[0], str):
        return merged[0], i
    return merged, i

def parse_list(tk, i):
    assert tk[i] == ("p", "{"), tk[i]
    i += 1
    items = []
    while tk[i] != ("p", "}"):
        e, i = parse_expr(tk, i)
        items.append(e)
        if tk[i] == ("p", ","):
            i += 1
    return items, i + 1

def main():
    tk = tokens(source())
    cases, named = [], {}
    i = 0
    while i < len(tk):
        t = tk[i]
        if t[0] == "id" and t[1] in ("test_grammar", "test_schema") and tk[i + 1] == ("p", "(") and tk[i + 2][0] == "str":
            desc, j = parse_expr(tk, i + 2); j += 1
            text, j = parse_expr(tk, j); j += 1
            good, j = parse_list(tk, j); j += 1
            bad, j = parse_list(tk, j)
            cases.append({"kind": t[1][5:], "desc": desc, "text": text, "pass": good, "fail": bad})
            i = j
        elif t == ("id", "std::string") and tk[i + 2] == ("p", "=") and tk[i + 3][0] == "str":
            text, j = parse_expr(tk, i + 3)
            named[tk[i + 1][1]] = text
            i = j
        elif t == ("id", "test_build_grammar_fails") and tk[i + 1] == ("p", "(") and tk[i + 2][0] == "id" and tk[i + 2][1] in named:
            cases.append({"kind": "fails", "desc": tk[i + 2][1], "text": named[tk[i + 2][1]]})
            i += 3
        else:
            i += 1
    with open("tests/data/grammar/llama_integration.json", "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {sum(c['kind'] == k for c in cases)}" for k in ("grammar", "schema", "fails")))

main()
