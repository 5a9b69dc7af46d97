#!/usr/bin/env bash
# quickstart.sh — build lean and run a model end to end.
#
#   bash scripts/quickstart.sh [MODEL.gguf]
#
# It first installs what a bare Debian 12 lacks (build-essential, npm, python3, and for `lean
# serve` libmicrohttpd-dev and libjansson-dev: apt-get, with sudo unless root). Without MODEL it
# runs the project's demo model (models/lean-demo.gguf, 19 M parameters trained on fortunes and
# WordNet: docs/demo_model.md): it prints what the file holds, completes a prompt greedily and
# answers one chat question. With MODEL, the same prompt on that model.
set -euo pipefail
cd "$(dirname "$0")/.."

# A bare Debian has neither make nor a C compiler; npm brings the WebGPU library (Dawn).
missing=()
command -v make >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 || missing+=(build-essential)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# `lean serve` (serve/) links libmicrohttpd and jansson.
[ -f /usr/include/microhttpd.h ] || missing+=(libmicrohttpd-dev)
[ -f /usr/include/jansson.h ] || missing+=(libjansson-dev)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "quickstart: installing ${missing[*]} (apt-get)" >&2
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null </dev/null
fi

make -j"$(nproc)" build/lean >/dev/null
# WebGPU (Dawn from npm) for the GPU backend; without it lean runs on the CPU.
bash scripts/setup_webgpu.sh >/dev/null 2>&1 || echo "quickstart: no WebGPU library (npm unreachable): CPU only" >&2

model=${1:-models/lean-demo.gguf}
prompt="Once upon a time, there was"
build/lean info "$model"
build/lean info --gpu 2>/dev/null | sed -n 1,3p || true
echo "prompt ids: $(build/lean tokenize -m "$model" -p "$prompt")"
echo "completion:"
build/lean run -m "$model" -p "$prompt" -n 48
echo
if [ -z "${1:-}" ]; then
    echo "chat: Tell me a fortune."
    echo "Tell me a fortune." | build/lean chat -q -m "$model" --temp 0
fi
