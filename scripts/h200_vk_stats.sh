#!/usr/bin/env bash
# h200_vk_stats.sh — what NVIDIA's Vulkan compiler made of lean's kernels on the H200 (the
# `device` tool): registers a thread, spills, shared memory, as VK_KHR_pipeline_executable_-
# properties reports them, which Dawn does not. lean runs a short bench with LEAN_GPU_DUMP=1
# (Dawn's dump_shaders: each kernel's SPIR-V, as text, on stderr after a line naming it); the
# SPIR-V is reassembled (spirv-as) and tools/vk_stats.c builds each module into a pipeline
# with statistics captured.
#
#   carry: what scripts/h200_gpu.sh needs, plus .gl/dev: `mkdir -p .gl/dev; (cd .gl/dev &&
#          apt-get download libvulkan-dev spirv-tools)` (headers and spirv-as, unpacked under
#          /tmp/vkdev, not over /)
#   run:   bash scripts/h200_gpu.sh bench MODEL...   # builds lean and the files, then
#          bash scripts/h200_vk_stats.sh MODEL...    # MODEL = preset:type
# Output: one line a kernel on stdout (and $OUT/h200-vk-stats.txt when $OUT is set); the
# modules under /tmp/vk_stats/MODEL/.
set -uo pipefail
cd "$(dirname "$0")/.."
export LEAN_WEBGPU_LIB=$PWD/build/webgpu/libwebgpu_wrapper.so
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/vkdev
for f in .gl/dev/*.deb; do dpkg -x "$f" /tmp/vkdev; done
cc -O2 -I/tmp/vkdev/usr/include tools/vk_stats.c -o build-dev/vk_stats -ldl || exit 1
for spec in "$@"; do
    name=${spec%%:*}-${spec#*:}
    dir=/tmp/vk_stats/$name
    rm -rf "$dir" && mkdir -p "$dir"
    LEAN_GPU_DUMP=1 build-dev/lean bench -m "build/models/$name.gguf" --backend gpu -p 512 -n 4 -r 1 \
        --suffix none >/dev/null 2>"$dir/dump.txt" || { tail -5 "$dir/dump.txt"; continue; }
    # each log message between its markers; a SPIR-V one belongs to the pipeline named last
    python3 - "$dir" <<'EOF'
import re, sys
d = sys.argv[1]
text = open(d + "/dump.txt", errors="replace").read()
label, n = "unnamed", 0
for m in re.finditer(r"^=== lean-gpu-pipeline ([^\n]*)$|<<< lean-gpu-log\n(.*?)\n>>> lean-gpu-log", text, re.M | re.S):
    if m.group(1) is not None:
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", m.group(1))
        continue
    body = m.group(2)
    if "OpCapability" not in body:
        continue
    lines = body.split("\n")
    first = next(i for i, l in enumerate(lines) if l.startswith(";") or "OpCapability" in l)
    open(f"{d}/{n:03d}-{label}.spvasm", "w").write("\n".join(lines[first:]) + "\n")
    n += 1
print(f"{d}: {n} SPIR-V modules", file=sys.stderr)
EOF
    for a in "$dir"/*.spvasm; do
        [ -e "$a" ] || continue
        v=$(sed -n 's/^; Version: \([0-9.]*\).*/\1/p' "$a" | head -1) # the module's SPIR-V version
        /tmp/vkdev/usr/bin/spirv-as --target-env "spv${v:-1.3}" --preserve-numeric-ids "$a" -o "${a%.spvasm}.spv" 2>&1 |
            head -3
    done
    ls "$dir"/*.spv >/dev/null 2>&1 || { echo "$name: no SPIR-V in the dump (not Vulkan?)"; continue; }
    build-dev/vk_stats "$dir"/*.spv | sed "s|$dir/||"
done 2>&1 | tee "${OUT:-/tmp}/h200-vk-stats.txt"
