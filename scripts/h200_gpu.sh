#!/usr/bin/env bash
# h200_gpu.sh — what runs on the H200 machine (the `device` tool): Vulkan loader from the
# carried Debian package, lean built there, the GPU tests, and `lean bench --backend gpu`.
#
#   carry: .gl (Debian's .debs of the Vulkan loader and the GL dispatch libraries NVIDIA's
#          Vulkan driver, libGLX_nvidia, loads: with the loader alone it finds no driver —
#          `echo /.gl/ >>.git/info/exclude; mkdir -p .gl; (cd .gl && apt-get download
#          libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 libmicrohttpd-dev
#          libmicrohttpd12 libjansson-dev libjansson4)`: the last four because build/lean links
#          `lean serve`, and the machine has neither library), build/webgpu
#          (libwebgpu_wrapper.so from scripts/setup_webgpu.sh), build/vocab (tokenizer GGUFs
#          from scripts/make_vocabs.sh)
#   run:   bash scripts/h200_gpu.sh tests [NAME..] # the GPU test programs (or those named), against fixtures
#          bash scripts/h200_gpu.sh bench MODEL... # MODEL = preset:type, e.g. smollm2-360m:q4_0
#          bash scripts/h200_gpu.sh batch MODEL... # aggregate decode (issue 27 item 1): per model one
#              `lean bench --streams ${STREAMS:-1,8,32} -n ${N:-128} -r ${R:-3}` (lean_decode_batch, the
#              streams interleaved in every step), then one line: tg (one sequence, lean_gen: the
#              draw resident), xS tokens/s (medians) and x32/x1, x32/tg side by side; BATCH_FLAGS adds
#              bench flags (--profile: each kernel's time per step); carry .gl
#              build/webgpu build/vocab (as tests)
#          MODELS="smollm2-1.7b:q4_0 ..." FLAGS="-p 512 -n 0 -r 2" ROUNDS=2 \
#              bash scripts/h200_gpu.sh ab head VARIANT... # A/B: the tree and var/VARIANT/ over it
#          bash scripts/h200_gpu.sh deno MODEL...  # the same through Deno's WebGPU (wgpu) and the
#                                                  # wasm32 CLI: carry build/deno.xz (`xz -c` of
#                                                  # scripts/setup_deno.sh's binary: 91 MB, 29 MB
#                                                  # packed; the carry takes 64 MiB) and
#                                                  # build-wasm/lean.wasm, not build/webgpu
#          bash scripts/h200_gpu.sh dawn-node MODEL... # as deno, through npm's dawn.node with
#                                                  # LEAN_DAWN_FLAGS (tests/wasm_run.mjs): carry
#                                                  # build/dawn-node.xz too (`xz -c` of
#                                                  # scripts/setup_dawn_node.sh's addon, 4.9 MB)
#          bash scripts/h200_gpu.sh dawn-node tests [NAME..] # (or deno) the wasm32 GPU tests there:
#                                                  # `make wasm-webgpu`, carry build-wasm/tests
#          bash scripts/h200_gpu.sh web MODEL...   # the browser build (build-web/, `make web`)
#              against native, interleaved ROUNDS times (default 2): `lean bench --backend gpu
#              $BENCH_FLAGS`, then scripts/bench_web.mjs (lean.js under Deno, navigator.gpu from
#              npm's dawn.node, the Dawn Chromium ships, with LEAN_DAWN_FLAGS, default none, as in
#              Chromium) with JSPI and with the pump (no JSPI); BENCH_FLAGS: one -p, -n and -r
#              each (default "-p 128 -n 128 -r 3"); WEB_GPU=wgpu takes Deno's own WebGPU instead.
#              Prints web/native ratios of the medians' tokens/s (goal: >= 1/1.1) and whether
#              the greedy ids' hashes agree; first the wasm32 CLI's `info --gpu` on the same
#              Dawn (its features beside native's), when build-wasm/lean.wasm is carried.
#              Carry, 8 paths, 51 MB, and the tracked tree's 6 MB count towards the 64 MiB too
#              (so build/webgpu travels packed and build/vocab, 20 MB, only in the two files
#              the presets read):
#                .gl build/webgpu.xz build/vocab/smollm2.gguf build/vocab/qwen.gguf
#                build/deno.xz build/dawn-node.xz build-web build-wasm/lean.wasm
#              made here by `make web build-wasm/lean.wasm` and
#                xz -T1 -c build/webgpu/libwebgpu_wrapper.so >build/webgpu.xz
#                xz -T1 -c $(bash scripts/setup_deno.sh) >build/deno.xz
#                xz -T1 -c $(bash scripts/setup_dawn_node.sh) >build/dawn-node.xz
#              run (a call ends after 10 minutes: two or three models a call):
#                bash scripts/h200_gpu.sh web smollm2-360m:q4_0 smollm2-1.7b:q4_0 smollm2-1.7b:q8_0
#          bash scripts/h200_gpu.sh lora MODEL...  # LoRA on the GPU (docs/lora.md): a random adapter
#              (scripts/make_lora.py adapter, rank ${RANK:-8}, every weight) per model, then `lean
#              run --backend gpu` with and without it, interleaved ROUNDS times (default 3): a
#              128-id prompt, 256 greedy ids; prints each run's prefill and decode tokens/s
#          bash scripts/h200_gpu.sh matrix        # Dawn's subgroup matrices (tensor cores; issue 29
#              item 3): tests/test_gpu_matrix prints the shapes the adapter offers and runs
#              shaders/matrix_probe.wgsl and matrix_gemm.wgsl (a small matmul) on each against
#              the CPU: PASS/FAIL per shape, with the compiler's error where one is refused; then
#              `gpu_bench matrix`: each shape's TFLOP/s, register-held peak (tensor cores or
#              not) and a 512x2048x2048 matmul. DUMP=1 adds Dawn's log of what it compiled
#              each kernel to (SPIR-V) in $OUT/h200-matrix-dump.txt. Carry: .gl build/webgpu
#          bash scripts/h200_gpu.sh threads MODEL... # CPU thread scaling, native and the threaded
#                                                  # wasm32 build under Deno: carry build/deno.xz
#                                                  # and build-wasm-mt/lean.wasm (`make wasm-mt`)
# Output goes to stdout and, when $OUT is set, $OUT/h200-*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
unxz() { python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$@"; }
# build/webgpu.xz (`xz -c` of the library, 4.8 MB against 19.7) where the carry has no room for it
if [ ! -f build/webgpu/libwebgpu_wrapper.so ] && [ -f build/webgpu.xz ]; then
    mkdir -p build/webgpu && unxz build/webgpu.xz build/webgpu/libwebgpu_wrapper.so || exit 1
fi
export LEAN_WEBGPU_LIB=$PWD/build/webgpu/libwebgpu_wrapper.so
out=${OUT:-/tmp}
make -j16 BUILD=build-dev build-dev/lean >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
build-dev/lean info --gpu | tee "$out/h200-info.txt"

# model_file PRESET:TYPE: the path of that model, generated (with the preset's vocabulary) if absent
model_file() {
    local preset=${1%%:*} type=${1#*:} vocab=build/vocab/smollm2.gguf f
    case "$preset" in qwen*) vocab=build/vocab/qwen.gguf ;; esac
    f=build/models/$preset-$type.gguf
    mkdir -p build/models
    [ -f "$f" ] || build-dev/lean gen --preset "$preset" --type "$type" --vocab "$vocab" -o "$f" >/dev/null || return 1
    echo "$f"
}

mode=${1:-tests}; shift || true
case "$mode" in
tests)
    python3 scripts/make_fixtures.py models build/fixtures >/dev/null || exit 1
    python3 scripts/make_lora.py adapters build/lora >/dev/null || exit 1 # test_batch, test_gpu_lora
    names=${*:-$(ls tests/test_gpu_*.c | sed 's|tests/\(.*\)\.c|\1|')}
    tests=$(for n in $names; do echo build-dev/tests/$n; done)
    make -j16 BUILD=build-dev $tests >>/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
    for t in $tests; do echo "== $t"; timeout 300 "$t" 2>&1 | tail -40; done | tee "$out/h200-tests.txt"
    ;;
matrix)
    make -j16 BUILD=build-dev build-dev/tests/test_gpu_matrix build-dev/gpu_bench >>/tmp/build.log 2>&1 ||
        { tail -30 /tmp/build.log; exit 1; }
    if [ -n "${DUMP:-}" ]; then
        LEAN_GPU_DUMP=1 timeout 300 build-dev/tests/test_gpu_matrix >"$out/h200-matrix-dump.txt" 2>&1
        echo "Dawn's log: $out/h200-matrix-dump.txt, $(grep -c OpCooperativeMatrix "$out/h200-matrix-dump.txt") lines of cooperative-matrix SPIR-V"
    fi
    { timeout 300 build-dev/tests/test_gpu_matrix; timeout 120 build-dev/gpu_bench matrix; } 2>&1 | tee "$out/h200-matrix.txt"
    ;;
bench)
    for spec in "$@"; do
        f=$(model_file "$spec") || exit 1
        build-dev/lean bench -m "$f" --backend gpu ${BENCH_FLAGS:--p 128,512 -n 128 -r 3}
    done 2>&1 | tee "$out/h200-bench.txt"
    ;;
batch)
    for spec in "$@"; do
        f=$(model_file "$spec") || exit 1
        build-dev/lean bench -m "$f" --backend gpu --json -p 0 --suffix none -n "${N:-128}" -r "${R:-3}" \
            --streams "${STREAMS:-1,8,32}" ${BATCH_FLAGS:-} >"$out/h200-batch-${spec/:/-}.jsonl" || exit 1
        python3 - "$spec" "$out/h200-batch-${spec/:/-}.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[2]) if l.startswith('{')]
tg = next((r for r in rows if r['phase'] == 'decode'), None)
xs = {r['streams']: r for r in rows if r['phase'] == 'batch'}
cells = ['tg %.0f' % tg['tok_s_median'] if tg else 'tg -']
cells += ['x%d %.0f%s' % (s, r['tok_s_median'], '' if r.get('same_ids_as_alone') else ' (ids NOT tg\'s)')
          for s, r in sorted(xs.items())]
big = max(xs) if xs else 0
if 1 in xs and big > 1:
    cells.append('x%d/x1 %.2f' % (big, xs[big]['tok_s_median'] / xs[1]['tok_s_median']))
if tg and big:
    cells.append('x%d/tg %.2f' % (big, xs[big]['tok_s_median'] / tg['tok_s_median']))
print('%s: %s' % (sys.argv[1], ', '.join(cells)))
PY
    done 2>&1 | tee "$out/h200-batch.txt"
    ;;
ab)
    # the working tree ("head") and variants of it side by side: var/NAME/ holds changed copies
    # of files at their paths in the tree (untracked, so it travels); each built apart under
    # /tmp/v/NAME, then MODELS benched with FLAGS by every build in turn, ROUNDS times
    for v in "$@"; do
        d=/tmp/v/$v
        rm -rf "$d" && mkdir -p "$d"
        git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - | tar -xf - -C "$d"
        [ -d "var/$v" ] && cp -r "var/$v/." "$d/"
        (cd "$d" && make -j16 BUILD=build-dev build-dev/lean >"/tmp/v/$v.log" 2>&1) ||
            { echo "h200_gpu.sh: $v does not build"; tail -20 "/tmp/v/$v.log"; } &
    done
    wait
    for spec in $MODELS; do model_file "$spec" >/dev/null || exit 1; done
    for r in $(seq "${ROUNDS:-2}"); do
        for spec in $MODELS; do
            for v in "$@"; do
                res=$("/tmp/v/$v/build-dev/lean" bench -m "$(model_file "$spec")" --backend gpu $FLAGS --suffix none 2>&1 |
                    awk -F'|' '/ pp| tg/ {printf "%s %s  ", $7, $10}')
                echo "r$r $spec $v: $res"
            done
        done
    done 2>&1 | tee "$out/h200-ab.txt"
    ;;
deno | dawn-node)
    # deno: what wgpu grants on the H200 (shader-f16? Dawn there does not) and lean's speed on
    # it; dawn-node: Dawn again, npm's dawn.node under Deno, given LEAN_DAWN_FLAGS (by default
    # the toggle that grants shader-f16 on NVIDIA)
    unxz build/deno.xz /tmp/deno && chmod +x /tmp/deno || exit 1
    if [ "$mode" = dawn-node ]; then
        unxz build/dawn-node.xz /tmp/dawn.node || exit 1
        export LEAN_DAWN_NODE=/tmp/dawn.node LEAN_DAWN_FLAGS=${LEAN_DAWN_FLAGS-enable-dawn-features=vulkan_enable_f16_on_nvidia}
    fi
    export XDG_RUNTIME_DIR=/tmp
    run_wasm=(/tmp/deno run -A tests/wasm_run.mjs) # then the program and its arguments
    "${run_wasm[@]}" build-wasm/lean.wasm info --gpu 2>&1 | tee "$out/h200-$mode-info.txt"
    if [ "${1:-}" = tests ]; then # the wasm32 GPU tests (`make wasm-webgpu`, carry build-wasm/tests)
        shift
        python3 scripts/make_fixtures.py models build/fixtures >/dev/null || exit 1
        for n in ${*:-$(cd build-wasm/tests && ls test_gpu_*.wasm | sed 's/\.wasm$//')}; do
            echo "== $n"; timeout 300 "${run_wasm[@]}" "build-wasm/tests/$n.wasm" 2>&1 | tail -40
        done | tee "$out/h200-$mode-tests.txt"
        exit
    fi
    for spec in "$@"; do
        f=$(model_file "$spec") || exit 1
        "${run_wasm[@]}" build-wasm/lean.wasm bench -m "$f" --backend gpu ${BENCH_FLAGS:--p 128,512 -n 128 -r 3}
    done 2>&1 | tee "$out/h200-$mode-bench.txt"
    ;;
lora)
    ids=$(seq -s, 1 128)
    for spec in "$@"; do
        f=$(model_file "$spec") || exit 1
        python3 scripts/make_lora.py adapter "$f" "${f%.gguf}-lora.gguf" --rank "${RANK:-8}" >/dev/null || exit 1
    done
    for r in $(seq "${ROUNDS:-3}"); do
        for spec in "$@"; do
            f=$(model_file "$spec")
            for with in none lora; do
                flags=()
                [ $with = lora ] && flags=(--lora "${f%.gguf}-lora.gguf")
                t=$(build-dev/lean run -m "$f" --backend gpu --ids "$ids" -n 256 "${flags[@]}" 2>&1 >/dev/null |
                    grep -o 'prefill: .*')
                echo "r$r $spec $with: $t"
            done
        done
    done 2>&1 | tee "$out/h200-lora.txt"
    ;;
web)
    unxz build/deno.xz /tmp/deno && chmod +x /tmp/deno || exit 1
    if [ "${WEB_GPU:-dawn}" = dawn ]; then
        unxz build/dawn-node.xz /tmp/dawn.node || exit 1
        export LEAN_DAWN_NODE=/tmp/dawn.node LEAN_DAWN_FLAGS=${LEAN_DAWN_FLAGS-}
    fi
    export XDG_RUNTIME_DIR=/tmp NO_COLOR=1
    [ -f build-wasm/lean.wasm ] && /tmp/deno run -A tests/wasm_run.mjs build-wasm/lean.wasm info --gpu 2>&1 |
        tee "$out/h200-web-info.txt"
    flags=${BENCH_FLAGS:--p 128 -n 128 -r 3}
    rows=$out/h200-web-rows.txt
    : >"$rows"
    for spec in "$@"; do model_file "$spec" >/dev/null || exit 1; done
    for r in $(seq "${ROUNDS:-2}"); do
        for spec in "$@"; do
            f=$(model_file "$spec")
            for run in native jspi pump; do
                case $run in
                native) cmd=(build-dev/lean bench -m "$f" --backend gpu $flags) ;;
                jspi) cmd=(/tmp/deno run -A scripts/bench_web.mjs "$f" --backend gpu $flags) ;;
                pump) cmd=(/tmp/deno run -A scripts/bench_web.mjs "$f" --backend gpu $flags --no-jspi) ;;
                esac
                echo "== round $r, $spec, $run: ${cmd[*]}"
                o=$(timeout 590 "${cmd[@]}" 2>&1)
                echo "$o"
                # "round spec run test t/s-median" for pp and tg rows, then the ids' hash
                echo "$o" | awk -F'|' -v r="$r" -v s="$spec" -v w="$run" '$7 ~ /^ *(pp|tg)[0-9]+ *$/ {
                    gsub(/ /, "", $7); gsub(/ /, "", $10); print r, s, w, $7, $10 }' >>"$rows"
                h=$(echo "$o" | grep -o 'fnv1a64 [0-9a-f]*' | head -1)
                echo "$r $spec $run hash ${h#fnv1a64 }" >>"$rows"
            done
        done
    done 2>&1 | tee "$out/h200-web-log.txt"
    # per model and test: the median over rounds of each run's median t/s, web over native
    python3 - "$rows" <<'PY' | tee "$out/h200-web.txt"
import statistics, sys
tps, hashes = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    spec, run, test, val = f[1], f[2], f[3], f[4] if len(f) > 4 else 'none'
    if test == 'hash':
        hashes.setdefault((spec, run), set()).add(val)
    else:
        tps.setdefault((spec, test), {}).setdefault(run, []).append(float(val))
print('| model | test | native t/s | web, JSPI t/s | ratio | web, pump t/s | ratio |')
print('|---|---|--:|--:|--:|--:|--:|')
for (spec, test), runs in tps.items():
    nat = statistics.median(runs['native']) if 'native' in runs else float('nan')
    cells = []
    for w in ('jspi', 'pump'):
        v = statistics.median(runs[w]) if w in runs else float('nan')
        cells += [f'{v:.2f}', f'{v / nat:.3f}x']
    print(f'| {spec} | {test} | {nat:.2f} | ' + ' | '.join(cells) + ' |')
for spec in dict.fromkeys(s for s, _ in hashes):
    h = {run: hashes.get((spec, run), set()) for run in ('native', 'jspi', 'pump')}
    same = len(set().union(*h.values())) == 1
    print(f'- {spec}: greedy ids fnv1a64 ' + ', '.join(f'{run} {"/".join(sorted(v))}' for run, v in h.items()) +
          (' (the same)' if same else ' (DIFFERENT)'))
PY
    ;;
threads)
    # CPU thread scaling on this machine's cores: native `lean bench --backend cpu`, then the
    # threaded wasm32 build (build-wasm-mt/lean.wasm, carried; its pool threads are Deno's
    # Workers through web/threads.mjs) at the same counts: THREADS (default 1,2,4,8,16)
    unxz build/deno.xz /tmp/deno && chmod +x /tmp/deno || exit 1
    export NO_COLOR=1
    t=${THREADS:-1,2,4,8,16}
    for spec in "$@"; do
        f=$(model_file "$spec") || exit 1
        a=(bench -m "$f" --backend cpu ${BENCH_FLAGS:--p 128 -n 64 -r 3} -t "$t")
        echo "== native: lean ${a[*]}"
        build-dev/lean "${a[@]}"
        echo "== wasm-mt: deno run -A tests/wasm_run.mjs --threads ${t##*,} build-wasm-mt/lean.wasm ${a[*]}"
        /tmp/deno run -A tests/wasm_run.mjs --threads "${t##*,}" build-wasm-mt/lean.wasm "${a[@]}"
    done 2>&1 | tee "$out/h200-threads.txt"
    ;;
esac
