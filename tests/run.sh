#!/usr/bin/env bash
# run.sh — the whole test suite in one command (`make test` runs it).
#
# Stages, in order (each prints a header, each program its tally and, when it passes, its
# "summary: " lines (run_prog), each stage its sums):
#   data    `make test-data`: test inputs rebuilt from committed scripts (the parity
#           models, checked against their recorded SHA-256); one program, one check
#   native  build/       the default compiler (gcc): every tests/test_* program,
#                        tests/install.sh (make install into a DESTDIR, used via pkg-config),
#                        and tests/serve/run.mjs (`lean serve` with the openai npm client)
#   asan    build-asan/  clang -Werror with ASan + UBSan (leaks, UB and overflows are fatal):
#                        the library, the CLI and the same programs, and tests/serve/run.mjs
#   wasm    build-wasm/  clang --target=wasm32-wasi: the library and every test not marked
#                        "lean-test: native-only", each run under Node's WASI (tests/wasm_run.mjs)
#   wasm-mt build-wasm-mt/ the same, threaded (`make wasm-mt`: atomics, shared memory), with
#                        16 threads per program (web/threads.mjs over Node's worker_threads),
#                        and the tests marked "lean-test: threads" (native and here only);
#                        then build-wasm-mt-relaxed/ (`make wasm-mt-relaxed`, clang-19: relaxed
#                        SIMD), the same way: test_kernels and the threads tests
#   webgpu  build-wasm/  the GPU tests ("lean-test: webgpu") of the wasm32 build, under Deno
#                        (scripts/setup_deno.sh, from npm): WebGPU through JavaScript
#                        (src/gpu/web.c, web/webgpu_imports.mjs), wgpu over Mesa's lavapipe
#                        (shader-f16, no subgroups);
#                        and tests/wasm_pump.mjs: the same calls with JSPI and without it;
#                        then build-web/'s lean.js against the native CLI (tests/web_api.mjs)
#   browser build-web/   `make web`: the browser build in Debian's Chromium and Firefox ESR,
#                        headless, driven by puppeteer-core (npm ci; package.json) through
#                        tests/browser/run.mjs, one program per browser: greedy and seeded ids
#                        against the native CLI's (a logit bias too), chat, abort, no JSPI, grammars and LoRA
#                        on both rungs, a stalled load's timeout, the chat page;
#                        tests/web_threads_start.mjs (a host thread that never starts); then
#                        webgpu's GPU test programs inside Chromium, whose SwiftShader has
#                        subgroups (tests/browser/program.mjs; CHROMIUM_PROGRAMS below)
#   neon    build-neon/  aarch64-linux-gnu-gcc, NEON with sdot, and build-neon-v8/ without, under
#           ASan + UBSan (`make neon`): the library and the Makefile's NEON_TESTS and
#           NEON_V8_TESTS, run under qemu-aarch64 (leak checks off: LSan cannot run there).
#           Only when the cross compiler and qemu-aarch64 are installed (.ci/run installs them).
#   fuzz    `make fuzz-run`, bounded; one program, one check. Only when the Makefile has it.
#   ledger  which GPU variant and CPU kernel table ran in which stage of this run (VARIANTS
#           and CPU_VARIANTS below), from the lines the test programs print (tests/gpu_test.h's
#           test_gpu_variant, tests/test_kernels.c, test_pool.c: "variant NAME: ran" or
#           "variant NAME: not here: WHY"); one check per variant, failed when it ran in no
#           stage. Always after the other stages, whatever its place in the list; without
#           it the ledger is printed unchecked.
# Parity tests (tests/test_parity*) are ordinary test programs and run in every stage.
#
# Counting, two numbers kept apart: test programs (each run of a test program, and each
# build, one-check stage and comparison run.sh makes itself, passes or fails as a whole) and
# checks (the CHECKs inside them: the sum of the programs' "<name>: N passed, N failed"
# tallies). A program fails when its tally counts a failed check, when it prints no tally, or
# when it exits non-zero while claiming 0 failed (a sanitizer report at exit, a trap, a
# timeout). A build that fails (make -k: every error is shown) is one failed program, with no
# checks; the programs that did build still run. Each stage ends with both sums, and so does
# the run: "test programs: N passed, N failed", then last "checks: N passed, N failed".
# Exit status 1 if anything failed.
#
# Two lanes: after data and the builds both lanes read (build/, build-wasm*, build-web), the
# threaded wasm32 stage and the GPU stages of the wasm32 build (wasm-mt webgpu browser) run
# in a lane of their own beside the others (native asan wasm neon fuzz), each lane's stages
# in the order given; lane B's output is printed after lane A's (see "two lanes" below). Each
# program's tally line ends with its wall and CPU seconds. Which parity fixtures each stage's
# programs sweep: fixture_sweep below.
#
# Usage: tests/run.sh [STAGE...]   (default: data native asan wasm wasm-mt webgpu browser neon fuzz ledger)
# Environment: JOBS (parallel make jobs; default: the number of CPUs),
#              LANES (1: every stage in turn; default 2, the two lanes),
#              LEAN_TEST_FIXTURES (all: every parity fixture in every stage),
#              LEAN_TEST_TIMEOUT (seconds one program may run, a guard against hangs; default
#              1800: the lanes share the CPUs).
set -u
cd "$(dirname "$0")/.."

MAKE=${MAKE:-make}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TIMEOUT=${LEAN_TEST_TIMEOUT:-1800}
export LEAN_TEST_TIMEOUT=$TIMEOUT # tests/browser/program.mjs stops a page before it
# Sub-makes get their own flags: the jobserver of a calling make is not ours to use.
unset MAKEFLAGS MFLAGS MAKELEVEL

total_passed=0 # checks
total_failed=0
stage_passed=0
stage_failed=0
progs_passed=0 # test programs
progs_failed=0
stage_progs_passed=0
stage_progs_failed=0
stage_start=0
stage_name=

# The GPU variants that need an adapter feature, each of which some stage must run (the
# ledger): reductions over subgroups (reduce_sg.wgsl: Chromium's SwiftShader), the f16 path
# (tiled_f16.wgsl: shader-f16, Deno's wgpu), the 8-bit prefill (matmul_tiled_i8.wgsl:
# packed_4x8_integer_dot_product, Dawn over llvmpipe and Deno's wgpu), the profile's kernel
# times (timestamp-query: Deno's wgpu).
VARIANTS=(subgroups f16 int8 timestamps)
# The CPU kernel tables (src/cpu/kernels.h), by backends.c's names, the same ledger's: each
# table's own 8-bit matmuls (cpu-NAME) and matmul_exact kernels (cpu-NAME-exact), as
# tests/test_kernels.c prints them for the tables it ran: generic everywhere, avx2 and avx512
# (cpuid: "not here" on a CPU without them) natively, neon (sdot) and neon-v8 (without) in the
# neon stage, simd128 in wasm and wasm-mt, relaxed in wasm (build-wasm-relaxed, no exact
# kernels of its own: simd128's stand in); and wasm-mt, the threaded wasm build's pool running
# chunks on its host threads (tests/test_pool.c in the wasm-mt stage).
CPU_VARIANTS=(cpu-generic cpu-generic-exact cpu-avx2 cpu-avx2-exact cpu-avx512 cpu-avx512-exact
              cpu-neon cpu-neon-v8 cpu-neon-exact cpu-simd128 cpu-simd128-exact cpu-relaxed wasm-mt)
ALL_VARIANTS=("${VARIANTS[@]}" "${CPU_VARIANTS[@]}")
# The GPU test programs the browser stage runs inside Chromium, with their arguments. SwiftShader
# runs them 10 to 20 times slower than Deno's lavapipe, so test_gpu_weights and test_gpu_forward
# run their --subgroups part only (their main says which); the rest of them, and test_gpu_sample
# (no reductions), gen, share and upload (the forward again, over the kernels these cover), run
# in the native, asan and webgpu stages.
CHROMIUM_PROGRAMS=("test_gpu_device" "test_gpu_ops" "test_gpu_weights --subgroups" "test_gpu_forward --subgroups")
declare -A ledger_ran=()  # variant -> " stage[/browser]/program ..." where it ran
declare -A ledger_not=()  # variant -> " stage[/browser] ..." where a program said the adapter lacks it
declare -A ledger_why=()  # "variant stage[/browser]" -> what the adapter lacks there
ledger_sub= # a part of the stage to name in the ledger (the browser stage's browser)

# ---- bookkeeping ----
stage_begin() { # stage_begin NAME DESCRIPTION
    stage_name=$1
    stage_passed=0
    stage_failed=0
    stage_progs_passed=0
    stage_progs_failed=0
    stage_start=$SECONDS
    echo
    echo "==== $1: $2 ===="
}
stage_end() {
    echo "---- $stage_name: test programs $stage_progs_passed passed, $stage_progs_failed failed;" \
         "checks $stage_passed passed, $stage_failed failed ($((SECONDS - stage_start)) s)"
    total_passed=$((total_passed + stage_passed))
    total_failed=$((total_failed + stage_failed))
    progs_passed=$((progs_passed + stage_progs_passed))
    progs_failed=$((progs_failed + stage_progs_failed))
}
count() { # count PASSED FAILED: checks
    stage_passed=$((stage_passed + $1))
    stage_failed=$((stage_failed + $2))
}
count_prog() { # count_prog OK: one test program, passed when OK is 1
    if [ "$1" = 1 ]; then stage_progs_passed=$((stage_progs_passed + 1))
    else stage_progs_failed=$((stage_progs_failed + 1)); fi
}
# one_test OK: a test that is one program and one check (a stage's make, a comparison)
one_test() {
    count_prog "$1"
    if [ "$1" = 1 ]; then count 1 0; else count 0 1; fi
}

# ledger_note NAME OUTPUT: the variant lines of a program's output into the ledger; a line
# naming a variant not in VARIANTS fails the program's run (a typo must not hide a variant).
# Returns 1 when it found such a line.
ledger_note() {
    local name=$1 out=$2 line v how stage where bad=0
    stage=$stage_name${ledger_sub:+/$ledger_sub}
    where=$stage/$name
    while IFS= read -r line; do
        v=$(printf '%s\n' "$line" | sed -E 's/^variant ([^:]*): .*/\1/')
        how=$(printf '%s\n' "$line" | sed -E 's/^variant [^:]*: //')
        if [[ " ${ALL_VARIANTS[*]} " != *" $v "* ]]; then
            echo "$name: variant '$v' is not one of run.sh's VARIANTS or CPU_VARIANTS (${ALL_VARIANTS[*]})"
            bad=1
        elif [ "$how" = ran ]; then
            [[ " ${ledger_ran[$v]:-} " == *" $where "* ]] || ledger_ran[$v]+=" $where"
        else
            [[ " ${ledger_not[$v]:-} " == *" $stage "* ]] || ledger_not[$v]+=" $stage"
            ledger_why["$v $stage"]=${how#not here: }
        fi
    done < <(printf '%s\n' "$out" | grep -E '^variant [^:]+: (ran|not here: .*)$')
    return $bad
}

# build DESCRIPTION MAKE-ARGS...: runs make; a failure is one failed test. Returns make's status.
build() {
    local what=$1; shift
    local t0=$SECONDS
    if ! "$MAKE" -k -j"$JOBS" --no-print-directory "$@"; then
        echo "$what: build failed (make $*)"
        count_prog 0
        return 1
    fi
    echo "$what: built in $((SECONDS - t0)) s"
}

# children_cpu VAR: VAR = the CPU seconds (user + system) of every child this shell has waited
# for, from /proc/$BASHPID/stat (cutime, cstime: clock ticks), read here, not in a subshell
children_cpu() {
    local st
    read -r -a st </proc/$BASHPID/stat 2>/dev/null || st=()
    printf -v "$1" '%s' $(((${st[15]:-0} + ${st[16]:-0} + CLK_TCK / 2) / CLK_TCK))
}
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# run_prog NAME COMMAND...: runs one test program and adds its tally. A failing program's whole
# output is printed; a passing one's tally line, then its own "summary: " lines (a program's
# totals worth seeing in CI's log: waived near-ties, the load test's latency), indented, at
# most SUMMARY_MAX of them.
SUMMARY_MAX=6
run_prog() {
    local name=$1; shift
    local out rc line p f ledger_ok=1 t0=$SECONDS c0 c1
    children_cpu c0
    out=$(timeout "$TIMEOUT" "$@" 2>&1 </dev/null); rc=$?
    children_cpu c1
    # where CI's time goes, per program: wall and CPU seconds (CPU above wall: threads)
    local took="($((SECONDS - t0)) s, CPU $((c1 - c0)) s)"
    ledger_note "$name" "$out" || ledger_ok=0
    line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z_0-9]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out"
        if [ $rc -eq 124 ]; then
            echo "$name: timed out after $TIMEOUT s without a tally"
        else
            echo "$name: exited $rc without a tally $took"
        fi
        count_prog 0
        return
    fi
    p=$(printf '%s\n' "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(printf '%s\n' "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    if [ $rc -eq 0 ]; then
        echo "$line $took"
        local n_sums
        n_sums=$(printf '%s\n' "$out" | grep -c '^summary: ')
        printf '%s\n' "$out" | grep '^summary: ' | head -n "$SUMMARY_MAX" | sed 's/^/  /'
        [ "$n_sums" -le "$SUMMARY_MAX" ] || echo "  ($((n_sums - SUMMARY_MAX)) more summary lines)"
    else
        printf '%s\n' "$out" # the FAIL lines, the tally and whatever came after it
        # A clean tally with a failing exit: the failure happened outside the CHECKs.
        [ "$f" -ne 0 ] || echo "$name: exited $rc after its tally"
        echo "$name: $took"
    fi
    count "$p" "$f"
    if [ $rc -eq 0 ] && [ "$f" -eq 0 ] && [ $ledger_ok = 1 ]; then count_prog 1; else count_prog 0; fi
}

# run_tests DIR SUFFIX BUILT RUNNER...: runs the program DIR/tests/test_<x>SUFFIX of every
# tests/test_<x>.c (in wasm, those not marked native-only), through RUNNER if given.
# After a failed build (BUILT=0) a program runs only if make says it is up to date, so
# nothing stale runs; the build failure itself was already counted.
run_tests() {
    local dir=$1 suffix=$2 built=$3; shift 3
    local src name prog n=0
    for src in tests/test_*.c; do
        [ -f "$src" ] || continue
        name=$(basename "$src" .c)
        if [ "$suffix" = .wasm ]; then # wasm_set: which programs of the wasm build this stage runs
            grep -q 'lean-test: native-only' "$src" && continue
            if grep -q 'lean-test: webgpu' "$src"; then [ "$wasm_set" = webgpu ] || continue
            elif grep -q 'lean-test: threads' "$src"; then [ "$wasm_set" = threads ] || continue
            else [ "$wasm_set" != webgpu ] || continue; fi
        fi
        prog=$dir/tests/$name$suffix
        if [ "$built" = 0 ] && ! "$MAKE" -q "${qargs[@]}" "$prog" >/dev/null 2>&1; then
            echo "$name: not built"
            continue
        fi
        if [ ! -f "$prog" ]; then
            echo "$name: $prog is missing"
            count_prog 0
            continue
        fi
        local envs=()
        # Mesa's llvmpipe keeps memory of closed GPU contexts: see tests/lsan_gpu.supp (test_exact,
        # test_batch and test_bench run GPU contexts too).
        case $name in
        test_gpu_* | test_exact | test_batch | test_bench)
            envs+=(LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=tests/lsan_gpu.supp}") ;;
        esac
        # the part of the fixture sweep the stage names for this program (fixture_sweep)
        local w sweep=
        for w in $fixture_sweep; do if [[ ${w%=*} == "$name" || ${w%=*} == all ]]; then sweep=${w#*=}; fi; done
        [ -z "$sweep" ] || envs+=(LEAN_TEST_FIXTURES="${LEAN_TEST_FIXTURES:-$sweep}")
        run_prog "$name" env "${envs[@]}" "$@" "$prog"
        n=$((n + 1))
    done
    [ $n -gt 0 ] || echo "(no test programs ran)"
}

# ---- the stages ----
qargs=()
wasm_set=plain
# Which part of the parity fixtures a stage's programs sweep (tests/fixture.h's
# fixture_selected), as words PROGRAM=PART (PROGRAM all: every program). pairs: half of them,
# every format still on every architecture, tied and untied, where sanitizers or emulation
# make the whole sweep minutes long (asan's test_gpu_forward). rest: the other half (the native stage's
# test_gpu_forward: asan sweeps pairs of it on the same llvmpipe, so between them every
# fixture runs). formats: each format once (the webgpu stage's test_gpu_forward: wgpu runs
# the kernels every fixture ran over llvmpipe; asan's other programs, whose sanitizers look at
# each format's and architecture's code, not at one more model's numbers; the neon stage,
# stage_neon's own setting). Unnamed programs sweep every fixture;
# LEAN_TEST_FIXTURES=all runs every one everywhere.
fixture_sweep=

stage_native() {
    stage_begin native "$("${CC:-cc}" --version 2>/dev/null | sed -n 1p), build/"
    local built=1
    build native all || built=0
    qargs=(BUILD=build)
    fixture_sweep=test_gpu_forward=rest
    run_tests build "" $built
    fixture_sweep=
    # make install into a temporary DESTDIR, a program built against it through pkg-config
    run_prog test_install bash tests/install.sh build
    # lean serve through npm's openai client, its load test, and on the GPU (~50 s; tests/serve/run.mjs)
    run_prog serve node tests/serve/run.mjs build
    stage_end
}

stage_asan() {
    stage_begin asan "clang, ASan + UBSan, build-asan/"
    local built=1
    build asan asan || built=0
    qargs=(BUILD=build-asan)
    # each format once, but test_gpu_forward on pairs (the native stage sweeps the rest of it);
    # the native stage runs every fixture of the others
    fixture_sweep="all=formats test_gpu_forward=pairs"
    # intercept_tls_get_addr=0: ASan's record of the dynamic TLS of what Dawn dlopens (its Vulkan
    # and GL drivers) can hold a bogus block, on which LeakSanitizer's exit scan crashes ("Tracer
    # caught signal 11"), or not, by the binary's layout (test_gen_mask built under /tmp/ci25 did,
    # the same source under /tmp/bis did not); without it the scan finds no leak either
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:intercept_tls_get_addr=0} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        run_tests build-asan "" $built
    # lean serve's threads, jobs and buffers under the sanitizers (~20 s; a leak fails its exit)
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0} \
        run_prog serve node tests/serve/run.mjs build-asan
    fixture_sweep=
    stage_end
}

stage_wasm() {
    stage_begin wasm "clang --target=wasm32-wasi, build-wasm/, under $(node --version 2>/dev/null || echo 'no node')"
    local skipped built=1 node_flags=()
    skipped=$(grep -l 'lean-test: native-only' tests/test_*.c 2>/dev/null | xargs -r -n 1 basename | paste -sd ' ')
    [ -z "$skipped" ] || echo "native-only, not built for wasm: $skipped"
    skipped=$(grep -l 'lean-test: webgpu' tests/test_*.c 2>/dev/null | xargs -r -n 1 basename | paste -sd ' ')
    [ -z "$skipped" ] || echo "for the webgpu stage (Node has no WebGPU): $skipped"
    build wasm wasm || built=0
    # Node 18 keeps WASI behind a flag; from Node 20 it needs none.
    case $(node --version 2>/dev/null) in v18.*) node_flags=(--experimental-wasi-unstable-preview1) ;; esac
    qargs=()
    run_tests build-wasm .wasm $built node "${node_flags[@]}" tests/wasm_run.mjs
    # The relaxed-SIMD build's kernel tables (src/cpu/wasm_relaxed.c and simd128's) under Deno:
    # Node 20 has relaxed SIMD only behind a flag, and its baseline compiler (Liftoff) computes
    # the dot product wrongly (docs/runs/2026-12-05-wasm-relaxed.md).
    local deno
    if ! deno=$(bash scripts/setup_deno.sh); then
        echo "wasm-relaxed: no Deno: scripts/setup_deno.sh failed (it needs npm and the npm registry)"
        count_prog 0
    elif build wasm-relaxed wasm-relaxed; then
        run_prog test_kernels "$deno" run -A tests/wasm_run.mjs build-wasm-relaxed/tests/test_kernels.wasm
    fi
    stage_end
}

stage_wasm-mt() {
    stage_begin wasm-mt "the threaded wasm32 build, build-wasm-mt/, 16 threads, under $(node --version 2>/dev/null || echo 'no node')"
    local built=1
    build wasm-mt wasm-mt || built=0
    qargs=(WASM_BUILD=build-wasm-mt WASM_THREADS=1)
    wasm_set=threads
    run_tests build-wasm-mt .wasm $built node tests/wasm_run.mjs --threads 16
    wasm_set=plain
    # The threaded relaxed-SIMD build (make web's lean-mt-relaxed.wasm): its kernel tables and the
    # thread tests (not test_cpu_backend: over 4 min here), under Node's TurboFan: Node 20's
    # Liftoff computes the relaxed dot product wrongly (docs/runs/2026-12-05-wasm-relaxed.md).
    local name node_flags=(--no-liftoff)
    case $(node --version 2>/dev/null) in v20.* | v21.*) node_flags+=(--experimental-wasm-relaxed-simd) ;; esac
    if build wasm-mt-relaxed wasm-mt-relaxed; then
        for name in $("$MAKE" -s --no-print-directory print-wasm-mt-relaxed-tests); do
            run_prog "$name (relaxed)" node "${node_flags[@]}" tests/wasm_run.mjs --threads 16 \
                build-wasm-mt-relaxed/tests/$name.wasm
        done
    fi
    stage_end
}

stage_webgpu() {
    stage_begin webgpu "the wasm32 GPU tests under Deno, WebGPU through JavaScript (src/gpu/web.c)"
    local deno built=1 xdg
    if ! deno=$(bash scripts/setup_deno.sh); then
        echo "webgpu: no Deno: scripts/setup_deno.sh failed (it needs npm and the npm registry)"
        count_prog 0
        stage_end
        return
    fi
    "$deno" --version | sed -n 1p
    build wasm-webgpu wasm-webgpu web build/lean || built=0
    qargs=()
    wasm_set=webgpu
    # the wasm32 CPU tables' exact parity on pairs; test_gpu_forward (its F32, f16, 8-bit and
    # exact sweeps) on each format once: on pairs it took 897 s of CI's 90 minutes
    fixture_sweep="test_exact=pairs test_gpu_forward=formats"
    xdg=$(mktemp -d) # wgpu asks for a runtime directory, though it opens no window
    XDG_RUNTIME_DIR=$xdg run_tests build-wasm .wasm $built "$deno" run -A tests/wasm_run.mjs
    fixture_sweep=
    wasm_set=plain
    # without JSPI (the pump: LEAN_PENDING) against with it, lean.h called from JavaScript
    XDG_RUNTIME_DIR=$xdg run_prog wasm_pump "$deno" run -A tests/wasm_pump.mjs build-wasm/wasm_pump_host.wasm
    XDG_RUNTIME_DIR=$xdg cli_same_ids "$deno" build/fixtures/llama-q4_k.gguf
    XDG_RUNTIME_DIR=$xdg cli_same_ids "$deno" build/fixtures/qwen2-q8_0.gguf
    # the browser module (build-web/lean.js, its worker, lean.wasm) against the native CLI
    XDG_RUNTIME_DIR=$xdg run_prog web_api "$deno" run -A tests/web_api.mjs
    rm -rf "$xdg"
    stage_end
}

# cli_same_ids DENO MODEL: the wasm32 CLI's `lean bench --backend gpu` under Deno (wgpu) hashes
# the same greedy ids as the native CLI's through Dawn: the same kernels on two WebGPU
# implementations (one test), both on the F32 path (--exact: Deno's adapter has shader-f16,
# Dawn's here has not). (Not the CPU's: on these random models a near-tie can go the
# other way under the CPU's 8-bit activations.)
cli_same_ids() {
    local deno=$1 model=$2 want got args=(bench -m "$2" -p 16 -n 24 -r 1 --backend gpu --exact)
    want=$(timeout "$TIMEOUT" build/lean "${args[@]}" 2>&1 </dev/null | grep -o 'fnv1a64 [0-9a-f]*')
    got=$(timeout "$TIMEOUT" "$deno" run -A tests/wasm_run.mjs build-wasm/lean.wasm "${args[@]}" 2>&1 </dev/null |
          grep -o 'fnv1a64 [0-9a-f]*')
    if [ -n "$want" ] && [ "$want" = "$got" ]; then
        echo "lean.wasm bench ($model): 1 passed, 0 failed"
        one_test 1
    else
        echo "lean.wasm bench ($model): FAIL: greedy ids '${got:-none}' through Deno's WebGPU, '${want:-none}' through Dawn"
        one_test 0
    fi
}

stage_browser() {
    stage_begin browser "build-web/ in $(chromium --version 2>/dev/null | sed -n 1p) and $(firefox-esr --version 2>/dev/null | sed -n 1p), headless"
    local b
    # .ci/run installs the npm packages; a machine that skipped it gets them here.
    if [ ! -d node_modules/puppeteer-core ] && ! npm ci --no-audit --no-fund </dev/null; then
        echo "browser: npm ci failed (puppeteer-core from the npm registry: package-lock.json)"
        count_prog 0
        stage_end
        return
    fi
    # The tests compare with the native CLI and need the fixtures and SmolLM2's vocabulary;
    # after a failed build nothing runs (build-web/ could be stale).
    if build browser web build/lean build/fixtures/.made build/vocab/.made; then
        for b in chromium firefox; do run_prog "browser_$b" node tests/browser/run.mjs "$b"; done
        # web/threads.mjs gives up on a host thread that never starts (~1.5 s, Node)
        run_prog web_threads_start node tests/web_threads_start.mjs build-web/lean-mt.wasm
    fi
    # The GPU test programs inside Chromium (tests/browser/program.mjs): its SwiftShader is the
    # one CI adapter with subgroups (the ledger's variant subgroups).
    local p built=1
    build browser-programs wasm-webgpu || built=0
    ledger_sub=chromium
    for p in "${CHROMIUM_PROGRAMS[@]}"; do
        set -- $p
        if [ "$built" = 0 ] && ! "$MAKE" -q "build-wasm/tests/$1.wasm" >/dev/null 2>&1; then
            echo "$1: not built"
            continue
        fi
        run_prog "$1" node tests/browser/program.mjs "build-wasm/tests/$1.wasm" "${@:2}"
    done
    ledger_sub=
    stage_end
}

stage_neon() {
    local cc=${NEON_CC:-aarch64-linux-gnu-gcc}
    if ! command -v "$cc" >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
        echo
        echo "==== neon: no $cc or qemu-aarch64 (apt: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user); skipped ===="
        return
    fi
    stage_begin neon "$cc, build-neon/ (sdot) and build-neon-v8/ (armv8-a), under $(qemu-aarch64 --version | sed -n 1p)"
    local built=1 dir progs p
    build neon neon || built=0
    while read -r dir progs; do
        echo "-- $dir"
        for p in $progs; do
            if [ "$built" = 0 ] && ! "$MAKE" -q BUILD="$dir" "$dir/tests/$p" >/dev/null 2>&1; then
                echo "$dir/tests/$p: not built"
                continue
            fi
            # LEAN_TEST_GPU=0: the aarch64 builds have no WebGPU library (test_exact's GPU replies);
            # each format once (fixture_sweep's formats): the NEON kernels of every format, under
            # qemu and both sanitizers, in whole forwards (test_cpu_backend took 555 s on pairs)
            LEAN_TEST_GPU=0 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
            LEAN_TEST_FIXTURES=${LEAN_TEST_FIXTURES:-formats} \
                run_prog "$p ($dir)" qemu-aarch64 -L /usr/aarch64-linux-gnu "$dir/tests/$p"
        done
    done < <("$MAKE" -s --no-print-directory neon-builds)
    stage_end
}

stage_data() {
    stage_begin data "make test-data, one program, one check"
    if "$MAKE" --no-print-directory test-data </dev/null; then
        echo "data: 1 passed, 0 failed"
        one_test 1
    else
        echo "data: 0 passed, 1 failed"
        one_test 0
    fi
    stage_end
}

stage_fuzz() {
    if ! grep -qE '^fuzz-run[[:space:]]*:' Makefile; then
        echo
        echo "==== fuzz: no fuzz-run target in the Makefile; skipped ===="
        return
    fi
    stage_begin fuzz "make fuzz-run (bounded), one program, one check"
    local t0=$SECONDS
    if "$MAKE" -j"$JOBS" --no-print-directory fuzz-run </dev/null; then
        echo "fuzz: 1 passed, 0 failed ($((SECONDS - t0)) s)"
        one_test 1
    else
        echo "fuzz: 0 passed, 1 failed ($((SECONDS - t0)) s)"
        one_test 0
    fi
    stage_end
}

# prerequisites STAGE...: what the stages need from Debian, checked before anything runs, so a
# machine without them hears which packages are missing instead of failing a build midway.
prerequisites() {
    local s missing=()
    # need COMMAND-OR-PATH-PATTERN PACKAGE
    need() { command -v "$1" >/dev/null 2>&1 || compgen -G "$1" >/dev/null || missing+=("$2"); }
    for s in "$@"; do
        case $s in
        data) # the Makefile's python: Debian's, where there is one (a pyenv python has no numpy)
            local py=python3; [ ! -x /usr/bin/python3 ] || py=/usr/bin/python3
            need "$py" python3; "$py" -c "import numpy" 2>/dev/null || missing+=(python3-numpy); need npm npm ;;
        native) need make build-essential; need "${CC:-cc}" build-essential
            # the GPU tests' WebGPU on a machine without a GPU: OpenGL ES over Mesa's llvmpipe
            need "/usr/lib/*/libEGL_mesa.so.0" libegl-mesa0; need "/usr/lib/*/libGLESv2.so.2" libgles2
            need "/usr/lib/*/dri/swrast_dri.so" libgl1-mesa-dri ;;
        asan) need clang-14 clang-14; need "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.asan-*.a" libclang-rt-14-dev ;;
        wasm | wasm-mt | webgpu) need clang-14 clang-14; need wasm-ld-14 lld-14; need llvm-ar-14 llvm-14; need node nodejs
            need /usr/include/wasm32-wasi/stdio.h wasi-libc
            need "/usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a" libclang-rt-14-dev-wasm32
            need clang-19 clang-19; need wasm-ld-19 lld-19
            need "/usr/lib/llvm-19/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a" libclang-rt-19-dev-wasm32
            [ "$s" = wasm ] || need "/usr/lib/*/libvulkan_lvp.so" mesa-vulkan-drivers ;;
        browser) need clang-14 clang-14; need wasm-ld-14 lld-14; need llvm-ar-14 llvm-14; need node nodejs; need npm npm
            need /usr/include/wasm32-wasi/stdio.h wasi-libc
            need "/usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a" libclang-rt-14-dev-wasm32
            need clang-19 clang-19; need wasm-ld-19 lld-19 # make web's lean-relaxed.wasm
            need "/usr/lib/llvm-19/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a" libclang-rt-19-dev-wasm32
            need chromium chromium; need firefox-esr firefox-esr ;;
        fuzz) need clang-14 clang-14 ;;
        esac
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    echo "run.sh: missing Debian packages: ${missing[*]}" >&2
    echo "run.sh: \`bash .ci/run\` installs every package the suite needs (apt-get, as root or with sudo) and runs it;" >&2
    echo "run.sh: or: sudo apt-get install ${missing[*]}" >&2
    return 1
}

# ledger_print: per variant, the stages (stage[/browser]/program) where it ran and those where
# the adapter lacked what it needs.
ledger_print() {
    local v s
    for v in "${ALL_VARIANTS[@]}"; do
        echo "variant $v: ran in:${ledger_ran[$v]:- nothing}"
        for s in ${ledger_not[$v]:-}; do echo "variant $v: not here in $s: ${ledger_why["$v $s"]}"; done
    done
}

# ledger_cpuid_only V: whether every stage that did not run CPU variant V said its CPU lacks it
ledger_cpuid_only() {
    local s
    [ -n "${ledger_not[$1]:-}" ] || return 1
    for s in ${ledger_not[$1]}; do [[ ${ledger_why["$1 $s"]} == *"(cpuid)" ]] || return 1; done
}

# The ledger: one check per variant, failed when no stage of this run ran it (an x86 table the
# CPU lacks is reported as not run instead: ledger_cpuid_only).
stage_ledger() {
    stage_begin ledger "which GPU variant and CPU kernel table ran in which stage"
    ledger_print
    local v ok=1
    for v in "${ALL_VARIANTS[@]}"; do
        if [ -n "${ledger_ran[$v]:-}" ]; then
            count 1 0
        elif ledger_cpuid_only "$v"; then
            # an x86 table this run's CPU cannot execute: said, not hidden, and not a failure of
            # the suite (the machine decides it; every stage reports the same cpuid)
            echo "ledger: NOT RUN: variant $v: no stage's CPU has it (cpuid)"
        else
            echo "ledger: FAIL: variant $v ran in no stage of this run"
            count 0 1
            ok=0
        fi
    done
    count_prog $ok
    stage_end
}

# ---- two lanes ----
# The threaded wasm32 stage and the GPU stages of the wasm32 build (LANE_B: wasm-mt, webgpu,
# browser) run one after
# another in a lane of their own, beside the other stages in theirs, once data has run and everything both lanes
# read is built: build/ (build/lean), build-wasm, build-wasm-mt and build-web, in turn, before
# the split (PREBUILD: each stage's make; a failure there and the stages run in turn instead,
# each building what it needs, as with LANES=1). After it, no two lanes' makes write one
# directory: a stage's make finds its targets made, or builds its own (build-asan, build-neon*,
# build-fuzz). On CI's two CPUs a stage rarely keeps both busy (one thread most of the time:
# Node, Deno, qemu, the sanitizers), so the lanes overlap where one stage would leave a CPU
# idle. Lane B's output is held and printed after lane A's, whole; the sums and the ledger add
# up as if the stages had run in turn. wasm-mt (~5 min) is in lane B, fuzz (~2 min, its own
# build-fuzz/) in lane A, to even the lanes (docs/runs/2026-12-06-ci-time-3.md). LANES=1: one after another, in the order given (data
# first, as always).
LANES=${LANES:-2}
LANE_B=(wasm-mt webgpu browser)
declare -A PREBUILD=([native]="all" [wasm]="wasm wasm-relaxed" [wasm-mt]="wasm-mt wasm-mt-relaxed" [webgpu]="wasm-webgpu web build/lean"
                     [browser]="web build/lean build/fixtures/.made build/vocab/.made wasm-webgpu")

# lane_state FILE: this (sub)shell's sums and ledger, for lane_merge
lane_state() {
    local k
    {
        printf 'sums\t%s %s %s %s\n' "$total_passed" "$total_failed" "$progs_passed" "$progs_failed"
        for k in "${!ledger_ran[@]}"; do printf 'ran\t%s\t%s\n' "$k" "${ledger_ran[$k]}"; done
        for k in "${!ledger_not[@]}"; do printf 'not\t%s\t%s\n' "$k" "${ledger_not[$k]}"; done
        for k in "${!ledger_why[@]}"; do printf 'why\t%s\t%s\n' "$k" "${ledger_why[$k]}"; done
    } >"$1"
}

# lane_merge FILE: a lane's lane_state added to this shell's
lane_merge() {
    local kind k v a b c d merged=0
    while IFS=$'\t' read -r kind k v; do
        case $kind in
        sums) read -r a b c d <<<"$k"
            total_passed=$((total_passed + a)) total_failed=$((total_failed + b))
            progs_passed=$((progs_passed + c)) progs_failed=$((progs_failed + d)) merged=1 ;;
        ran) ledger_ran[$k]+=$v ;;
        not) ledger_not[$k]+=$v ;;
        why) ledger_why[$k]=$v ;;
        esac
    done <"$1"
    if [ $merged = 0 ]; then # the lane died before its sums: one failed program, not a silent pass
        echo "run.sh: lane B (${LANE_B[*]}) ended without its sums"
        progs_failed=$((progs_failed + 1))
    fi
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(data native asan wasm wasm-mt webgpu browser neon fuzz ledger)
for s in "${stages[@]}"; do
    case $s in
    data | native | asan | wasm | wasm-mt | webgpu | browser | neon | fuzz | ledger) ;;
    *)
        echo "run.sh: unknown stage '$s' (data, native, asan, wasm, wasm-mt, webgpu, browser, neon, fuzz, ledger)" >&2
        exit 2
        ;;
    esac
done
prerequisites "${stages[@]}" || exit 2
ledger=0
first=() lane_a=() lane_b=()
for s in "${stages[@]}"; do
    case $s in
    ledger) ledger=1 ;; # after the others
    data) first+=(data) ;;
    *) if [ "$LANES" -gt 1 ] && [[ " ${LANE_B[*]} " == *" $s "* ]]; then lane_b+=("$s"); else lane_a+=("$s"); fi ;;
    esac
done
if [ ${#lane_b[@]} -eq 0 ] || [ ${#lane_a[@]} -eq 0 ]; then # one lane: in the order given
    lane_a=() lane_b=()
    for s in "${stages[@]}"; do [ "$s" = ledger ] || [ "$s" = data ] || lane_a+=("$s"); done
fi
for s in "${first[@]}"; do "stage_$s"; done
if [ ${#lane_b[@]} -gt 0 ]; then
    echo
    echo "==== the builds both lanes read, before they split (each stage's make, in turn) ===="
    t0=$SECONDS
    for s in "${lane_a[@]}" "${lane_b[@]}"; do
        [ -n "${PREBUILD[$s]:-}" ] || continue
        # shellcheck disable=SC2086 # the targets are words
        if ! "$MAKE" -j"$JOBS" --no-print-directory ${PREBUILD[$s]} </dev/null; then
            echo "run.sh: the $s stage's make failed before the lanes: every stage runs in turn (it counts there)"
            lane_a=() lane_b=()
            for s in "${stages[@]}"; do [ "$s" = ledger ] || [ "$s" = data ] || lane_a+=("$s"); done
            break
        fi
    done
    echo "built in $((SECONDS - t0)) s"
fi
if [ ${#lane_b[@]} -gt 0 ]; then
    lane_dir=$(mktemp -d)
    trap 'rm -rf "$lane_dir"' EXIT
    echo
    echo "==== two lanes: ${lane_a[*]} here, ${lane_b[*]} beside them (printed after) ===="
    (
        total_passed=0 total_failed=0 progs_passed=0 progs_failed=0
        ledger_ran=() ledger_not=() ledger_why=()
        for s in "${lane_b[@]}"; do "stage_$s"; done
        lane_state "$lane_dir/state"
    ) >"$lane_dir/log" 2>&1 </dev/null &
    lane_pid=$!
    # a background job ignores the terminal's Ctrl-C: stop the lane with this shell
    trap 'kill "$lane_pid" 2>/dev/null; exit 130' INT TERM
    for s in "${lane_a[@]}"; do "stage_$s"; done
    wait "$lane_pid"
    echo
    echo "==== lane B: ${lane_b[*]} (ran beside the stages above) ===="
    cat "$lane_dir/log"
    lane_merge "$lane_dir/state"
else
    for s in "${lane_a[@]}"; do "stage_$s"; done
fi
if [ $ledger = 1 ]; then
    stage_ledger
elif [ ${#ledger_ran[@]} -gt 0 ] || [ ${#ledger_not[@]} -gt 0 ]; then
    echo
    echo "==== the variants' ledger (GPU, CPU), not checked (the ledger stage checks it) ===="
    ledger_print
fi

echo
echo "test programs: $progs_passed passed, $progs_failed failed"
echo "checks: $total_passed passed, $total_failed failed"
[ $total_failed -eq 0 ] && [ $progs_failed -eq 0 ]
