#!/usr/bin/env bash
# cpu_vs_llamacpp.sh — lean's CPU backend against a natively built llama.cpp, on the same
# llama-quantize'd files, interleaved (issue 29 item 1). One command:
#
#   bash scripts/cpu_vs_llamacpp.sh [CELL...]     CELL = preset:type (default: the issue's eight,
#       smollm2-135m:q4_0 smollm2-135m:q8_0 smollm2-360m:q4_0 smollm2-360m:q8_0
#       smollm2-360m:q4_k_m qwen2.5-0.5b:q4_0 qwen2.5-0.5b:q8_0 qwen2.5-0.5b:q4_k_m)
#   environment: ROUNDS (2), THREADS (2), REPS (3), LLAMA_DIR (/tmp/llama-peer),
#                MODELS_DIR (build/llamacmp), OUT (a raw-results folder, default /tmp/cpu_vs_llamacpp)
#
# What it does:
#   1. llama.cpp: $LLAMA_DIR/build/bin/llama-bench and llama-quantize, built by
#      /work/shared/peers/build_llama.sh (source 3f545be, -DGGML_NATIVE=ON, Release) if missing.
#   2. lean: `make build/lean` in this tree (the CPU kernel table is chosen at run time).
#   3. the files: per preset `lean gen --preset P --type f16 --vocab V` (real shapes, the npm
#      vocabularies of scripts/make_vocabs.sh: smollm2.gguf, qwen.gguf), then `llama-quantize
#      F16 OUT Q4_0|Q8_0|Q4_K_M` (llama.cpp's own mixes: e.g. the tied embedding is Q6_K in a
#      Q4_0 file); both engines read the same file.
#   4. ROUNDS rounds; in each, per cell, lean then llama.cpp, each measuring prefill and decode
#      with the same lengths and repetitions:
#        lean bench  -m F -t T -p 128 -n 64 -r R --backend cpu --suffix none --json
#        llama-bench -m F -t T -p 128 -n 64 -r R -o json
#      the 1-minute load average recorded before each, the raw JSON kept in $OUT.
#   5. the table (Markdown, stdout): per cell, test and round, each engine's median tok/s of
#      its R repetitions (llama-bench's samples_ns; lean bench's median_ms) and lean / llama.cpp.
# Measure only on a quiet machine (load average < 1 before the start): llama.cpp's threads spin,
# and under other load both engines swing by up to 10x (docs/runs/2026-12-05-llamacpp-cpu.md).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
rounds=${ROUNDS:-2} threads=${THREADS:-2} reps=${REPS:-3}
llama_dir=${LLAMA_DIR:-/tmp/llama-peer}
models=${MODELS_DIR:-build/llamacmp}
out=${OUT:-/tmp/cpu_vs_llamacpp}
peers=${PEERS_DIR:-/work/shared/peers}
cells=("$@")
[ ${#cells[@]} -gt 0 ] || cells=(smollm2-135m:q4_0 smollm2-135m:q8_0 smollm2-360m:q4_0 smollm2-360m:q8_0
    smollm2-360m:q4_k_m qwen2.5-0.5b:q4_0 qwen2.5-0.5b:q8_0 qwen2.5-0.5b:q4_k_m)
bin=$llama_dir/build/bin

if [ ! -x "$bin/llama-bench" ] || [ ! -x "$bin/llama-quantize" ]; then
    echo "building llama.cpp in $llama_dir (about 10 minutes on 2 cores)" >&2
    bash "$peers/build_llama.sh" "$llama_dir" >&2
fi
make -j"$(nproc)" build/lean >&2
for v in smollm2 qwen; do [ -f "build/vocab/$v.gguf" ] || bash scripts/make_vocabs.sh >&2; done

# file CELL: the llama-quantize'd file of CELL, made on first use
file() {
    local preset=${1%%:*} type=${1#*:} vocab=build/vocab/smollm2.gguf
    case "$preset" in qwen*) vocab=build/vocab/qwen.gguf ;; esac
    local f16=$models/$preset-f16.gguf f=$models/$preset-$type.gguf
    mkdir -p "$models"
    [ -f "$f16" ] || build/lean gen --preset "$preset" --type f16 --vocab "$vocab" -o "$f16" >&2
    [ -f "$f" ] || "$bin/llama-quantize" "$f16" "$f" "${type^^}" >"$f.log" 2>&1 ||
        { echo "llama-quantize failed, see $f.log" >&2; return 1; }
    echo "$f"
}
for c in "${cells[@]}"; do file "$c" >/dev/null; done

mkdir -p "$out"
rm -f "$out"/*.json
load() { cut -d' ' -f1 /proc/loadavg; }
{
    echo "# $(date -u '+%F %T') UTC; lean $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')," \
        "llama.cpp 3f545be ($bin); $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "# -t $threads -p 128 -n 64 -r $reps, $rounds rounds; load average before the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/header.txt"
for r in $(seq "$rounds"); do
    for c in "${cells[@]}"; do
        f=$(file "$c") name=${c/:/-}
        echo "$(load)" >"$out/r$r-$name-lean.load"
        build/lean bench -m "$f" -t "$threads" -p 128 -n 64 -r "$reps" --backend cpu --suffix none --json -q \
            >"$out/r$r-$name-lean.json"
        echo "$(load)" >"$out/r$r-$name-llama.load"
        "$bin/llama-bench" -m "$f" -t "$threads" -p 128 -n 64 -r "$reps" -o json >"$out/r$r-$name-llama.json" 2>/dev/null
        echo "round $r $c done (load $(load))" >&2
    done
done

python3 - "$out" "$rounds" "${cells[@]}" <<'EOF'
import json, statistics, sys
out, rounds, cells = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def lean(path):  # test -> median tok/s
    res = {}
    for line in open(path):
        row = json.loads(line)
        if row["phase"] in ("prefill", "decode"):
            res[row["test"]] = row["tok_s_median"]
    return res
def llama(path):
    res = {}
    for row in json.load(open(path)):
        n = row["n_prompt"] or row["n_gen"]
        test = ("pp%d" if row["n_prompt"] else "tg%d") % n
        res[test] = statistics.median(n * 1e9 / ns for ns in row["samples_ns"])
    return res
print("| model | test | round | load (lean, llama.cpp) | lean tok/s | llama.cpp tok/s | lean / llama.cpp |")
print("|---|---|--:|---|--:|--:|--:|")
for c in cells:
    name = c.replace(":", "-")
    for test in ("pp128", "tg64"):
        for r in range(1, rounds + 1):
            p = f"{out}/r{r}-{name}"
            a, b = lean(p + "-lean.json")[test], llama(p + "-llama.json")[test]
            la, lb = open(p + "-lean.load").read().strip(), open(p + "-llama.load").read().strip()
            print(f"| {name} | {test} | {r} | {la}, {lb} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
EOF
