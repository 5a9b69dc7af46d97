#!/usr/bin/env bash
# h200_tile_sweep.sh — speed of the kernels' shapes on the H200 (the `device` tool): for each
# shape given, rewrites it into a scratch copy of the source, rebuilds and runs
# `lean bench -p 512 -n 128` on the models given (pp512 and tg128 tokens/s, median of 3). A
# shape is one of:
#   GR,GT,TR,TT   matmul_tiled.wgsl's (matmul.c's TILE_* enum)
#   widetr:N      TILE_WIDE_TR, the outputs an invocation of the wide shape takes outside SwiGLU
#   widegr:N      TILE_WIDE_GR, invocations of the wide tiled shape (4 rows x 32 tokens each;
#                 past 128 only where the device grants the invocations, e.g. the H200's 1024)
#   wide:N        TILE_WIDE_MIN, the fewest outputs and columns that take the wide tiled shape
#   ksplit:N      TILE_SPLIT_WG, the prefill workgroups below which a matmul is split over its
#                 columns (1: never split)
#   kmin:N        TILE_SPLIT_MIN_STEPS, the fewest 128-column steps a split's part takes
#   vec:WG,RPW[,RPW_SHORT,SHORT_CPL]  matmul_vec.wgsl's (matmul.c's VEC_* enum; RPW_SHORT
#                 defaults to RPW, SHORT_CPL to 1)
#   vocab:N       VEC_RPW_VOCAB, outputs a matmul_vec workgroup of the logits' matrix
#   vecn:N        VEC_RPW_NORMED, a normed matmul_vec's outputs a workgroup (matmul.c)
#   norm:N        NORM_FUSE_MAX_COLS, the widest row decode's matmuls normalize themselves
#   chunk:N       GPU_ATTN_MIN_CHUNK, the fewest keys a decode attention workgroup takes (ops.h)
#   attn:BK       attention_tiled.wgsl's keys a tile at most (ops.c)
#   attnks:N      GPU_ATTN_KSPLITS, prefill attention's key splits (ops.h)
#   attntq:N      GPU_ATTN_TILED_TQ_LANES, prefill attention's lanes a split (ops.h)
# Tiled matmul shapes sum in the same order (one fma a weight, in chunk order): they change
# speed, never bits; a split over the columns (ksplit, kmin) changes the order, not its
# independence from n_tok.
# Knobs joined by + are one shape (e.g. attnks:1+attntq:16).
# SWEEP_FLAGS replaces the bench flags (default -p 512 -n 128 -r 3), e.g. "-p 512 -n 0 -r 3".
# Run after scripts/h200_gpu.sh has built and generated the models:
#   bash scripts/h200_tile_sweep.sh "32,1,2,16 128,1,1,16 attn:16" smollm2-360m:q4_0 ...
set -uo pipefail
cd "$(dirname "$0")/.."
export LEAN_WEBGPU_LIB=$PWD/build/webgpu/libwebgpu_wrapper.so
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
shapes=$1; shift
# set_n FILE TEXT VALUE: the number where TEXT has @, in FILE, becomes VALUE
set_n() { sed -i -E "s/${2/@/[0-9]+}/${2/@/$3}/" "$1"; }
cp src/gpu/matmul.c /tmp/matmul.c.orig
cp src/gpu/ops.c /tmp/ops.c.orig
cp src/gpu/ops.h /tmp/ops.h.orig
for shape in $shapes; do
    cp /tmp/matmul.c.orig src/gpu/matmul.c
    cp /tmp/ops.c.orig src/gpu/ops.c
    cp /tmp/ops.h.orig src/gpu/ops.h
    for knob in ${shape//+/ }; do # knobs joined by + apply together
        case "$knob" in
        vec:*)
            IFS=, read -r wg rpw rpw_short short_cpl <<<"${knob#vec:}"
            sed -i -E "s/enum \{ VEC_WG = [0-9]+, VEC_RPW = [0-9]+, VEC_RPW_SHORT = [0-9]+, VEC_SHORT_CPL = [0-9]+ \};/enum { VEC_WG = $wg, VEC_RPW = $rpw, VEC_RPW_SHORT = ${rpw_short:-$rpw}, VEC_SHORT_CPL = ${short_cpl:-1} };/" src/gpu/matmul.c ;;
        widetr:*) set_n src/gpu/matmul.c "TILE_WIDE_TR = @" "${knob#*:}" ;;
        widegr:*) set_n src/gpu/matmul.c "TILE_WIDE_GR = @" "${knob#*:}" ;;
        wide:*) set_n src/gpu/matmul.c "TILE_WIDE_MIN = @" "${knob#*:}" ;;
        ksplit:*) set_n src/gpu/matmul.c "TILE_SPLIT_WG = @" "${knob#*:}" ;;
        kmin:*) set_n src/gpu/matmul.c "TILE_SPLIT_MIN_STEPS = @" "${knob#*:}" ;;
        vocab:*) set_n src/gpu/matmul.c "VEC_RPW_VOCAB = @" "${knob#*:}" ;;
        vecn:*) set_n src/gpu/matmul.c "VEC_RPW_NORMED = @" "${knob#*:}" ;;
        norm:*) set_n src/gpu/matmul.c "define NORM_FUSE_MAX_COLS @" "${knob#*:}" ;;
        chunk:*) set_n src/gpu/ops.h "define GPU_ATTN_MIN_CHUNK @" "${knob#*:}" ;;
        attnks:*) set_n src/gpu/ops.h "define GPU_ATTN_KSPLITS @" "${knob#*:}" ;;
        attntq:*) set_n src/gpu/ops.h "define GPU_ATTN_TILED_TQ_LANES @" "${knob#*:}" ;;
        attn:*) set_n src/gpu/ops.c "uint32_t bk = @;" "${knob#*:}" ;;
        *)
            IFS=, read -r gr gt tr tt <<<"$knob"
            sed -i -E "s/enum \{ TILE_GR = [0-9]+, TILE_GT = [0-9]+, TILE_TR = [0-9]+, TILE_TT = [0-9]+,/enum { TILE_GR = $gr, TILE_GT = $gt, TILE_TR = $tr, TILE_TT = $tt,/" \
                src/gpu/matmul.c ;;
        esac
    done
    make -j16 BUILD=build-dev build-dev/lean >/tmp/build.log 2>&1 || { tail -5 /tmp/build.log; continue; }
    for spec in "$@"; do
        f=build/models/${spec%%:*}-${spec#*:}.gguf
        printf '%s %s ' "$shape" "$spec"
        build-dev/lean bench -m "$f" --backend gpu ${SWEEP_FLAGS:--p 512 -n 128 -r 3} --batch 512 --suffix none |
            grep -E 'pp512|tg128' | awk -F'|' '{printf "%s %s", $7, $10} END {print ""}'
    done
done
cp /tmp/matmul.c.orig src/gpu/matmul.c
cp /tmp/ops.c.orig src/gpu/ops.c
cp /tmp/ops.h.orig src/gpu/ops.h
