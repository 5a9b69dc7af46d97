#!/bin/sh
# Regenerates tests/data/formats/q2_k.bin and q3_k.bin from ggml's own Q2_K / Q3_K code
# (scripts/ggml_kquant_vectors.c says what is in them), with the llama.cpp source in
# ../shared/peers (llama.cpp-3f545be.tar.xz). Run from the repository root.
set -e
tarball=${1:-../shared/peers/llama.cpp-3f545be.tar.xz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$tarball" -C "$tmp" --wildcards '*/ggml/include/*' '*/ggml/src/*.h' \
    '*/ggml/src/ggml-quants.c'
g=$(echo "$tmp"/*/ggml)
cc -O1 -ffp-contract=off -std=gnu11 -I"$g/include" -I"$g/src" -c "$g/src/ggml-quants.c" -o "$tmp/gq.o"
cc -O1 -ffp-contract=off -std=c11 scripts/ggml_kquant_vectors.c "$tmp/gq.o" -lm -o "$tmp/vectors"
"$tmp/vectors" tests/data/formats
