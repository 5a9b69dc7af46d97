#!/usr/bin/env bash
# setup_webgpu.sh — installs the WebGPU implementation the native GPU backend dlopens:
# Dawn as built by the npm package bun-webgpu-linux-x64@0.1.7 (libwebgpu_wrapper.so, a 2025
# Dawn exporting the standard webgpu.h C API; src/gpu/webgpu.h declares the part lean uses).
#
# Installs into build/npm-webgpu (ignored by git), then copies the library to
# <dir>/webgpu/libwebgpu_wrapper.so for every build directory given (default: build
# build-asan): the loader (src/gpu/native.c) looks there, next to the lean binary or the
# library it was linked from. LEAN_WEBGPU_LIB=/path/to/lib.so overrides the search.
#
# On a machine without a GPU, Dawn runs over Mesa's llvmpipe through OpenGL ES: that needs
# Debian's libegl1 libegl-mesa0 libgles2 libgl1-mesa-dri (.ci/run installs them).
#
# Usage: bash scripts/setup_webgpu.sh [BUILD_DIR...]     (needs npm; idempotent)
set -euo pipefail
cd "$(dirname "$0")/.."

PKG=bun-webgpu-linux-x64
VERSION=0.1.7
NPM_DIR=build/npm-webgpu
LIB="$NPM_DIR/node_modules/$PKG/libwebgpu_wrapper.so"

pj="$NPM_DIR/node_modules/$PKG/package.json"
if [ ! -f "$pj" ] || ! grep -q "\"version\": \"$VERSION\"" "$pj"; then
    mkdir -p "$NPM_DIR"
    npm install --no-save --no-audit --no-fund --ignore-scripts --prefix "$NPM_DIR" "$PKG@$VERSION"
fi
if [ ! -f "$LIB" ]; then
    found=$(find "$NPM_DIR/node_modules/$PKG" -name libwebgpu_wrapper.so | head -n 1)
    [ -n "$found" ] || { echo "setup_webgpu: $PKG@$VERSION has no libwebgpu_wrapper.so" >&2; exit 1; }
    LIB=$found
fi

dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(build build-asan)
for d in "${dirs[@]}"; do
    mkdir -p "$d/webgpu"
    # cp to a temporary name, then rename: a test running meanwhile never sees half a file.
    cp "$LIB" "$d/webgpu/.libwebgpu_wrapper.so.tmp"
    mv -f "$d/webgpu/.libwebgpu_wrapper.so.tmp" "$d/webgpu/libwebgpu_wrapper.so"
    echo "setup_webgpu: $d/webgpu/libwebgpu_wrapper.so"
done
