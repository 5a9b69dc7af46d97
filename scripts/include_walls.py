#!/usr/bin/env python3
"""include_walls.py — checks the walls between src/'s folders from the include lines alone.

Every file in src/ includes by path from src/ ("gpu/weights.h"), so a wall crossed shows in
the line. The rules (README's Layout says what each folder holds):
  core/      the engine: core/ and text/ (a model owns its tokenizer), never cpu/ gpu/ dev/
  text/      tokenizers: core/common.h and core/gguf.h only, besides text/
  template/  the Jinja engine: core/common.h and text/unicode.h only, besides template/
  cpu/, gpu/ backends: core/ and themselves, never each other
  dev/       the developer tools: core/ and dev/; nothing outside dev/ includes dev/
  src/*.c    (backends.c) core/
and no two units depend on each other: a.c includes b.h while b.c includes a.h.
Prints each violation; exits 1 if there is any.

    python3 scripts/include_walls.py
"""
import glob
import os
import re
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ALLOWED = {  # folder -> folders it may include, or headers where only some may be
    "core": {"core", "text"},
    "text": {"text", "core/common.h", "core/gguf.h"},
    "template": {"template", "core/common.h", "text/unicode.h"},
    "cpu": {"cpu", "core"},
    "gpu": {"gpu", "core"},
    "dev": {"dev", "core"},
    "": {"core"},
}
files = sorted(glob.glob("src/*.[ch]") + glob.glob("src/*/*.[ch]"))
inc = {f: re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(f).read(), re.M) for f in files}
bad = []
for f, hs in inc.items():
    folder = f.split("/")[1] if f.count("/") == 2 else ""
    for h in hs:
        if "/" not in h:
            if h != "lean.h":
                bad.append(f"{f}: includes \"{h}\" without its folder")
            continue
        if h.split("/")[0] not in ALLOWED[folder] and h not in ALLOWED[folder]:
            bad.append(f"{f}: includes \"{h}\" across a wall")
unit = lambda p: p.rsplit(".", 1)[0]
for f, hs in inc.items():
    for h in hs:
        other = "src/" + unit(h) + ".c"
        if unit("src/" + h) != unit(f) and f.endswith(".c") and any(unit("src/" + x) == unit(f) for x in inc.get(other, [])):
            if f < other:
                bad.append(f"{f} and {other}: each includes the other's header")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
