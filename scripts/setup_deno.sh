#!/usr/bin/env bash
# setup_deno.sh — installs Deno, the JavaScript host the "webgpu" test stage runs the wasm32
# build's GPU tests in: its navigator.gpu is wgpu (Firefox's WebGPU), which on a machine
# without a GPU runs over Mesa's lavapipe (Debian's mesa-vulkan-drivers) and offers
# shader-f16, and it has JSPI (WebAssembly.Suspending), which src/gpu/web.c waits with.
# From the npm registry: @deno/linux-x64-glibc@2.9.6 (the binary alone, no install script),
# into build/npm-deno (ignored by git); prints the binary's path.
#
# Usage: bash scripts/setup_deno.sh      (needs npm; idempotent)
set -euo pipefail
cd "$(dirname "$0")/.."

PKG=@deno/linux-x64-glibc
VERSION=2.9.6
NPM_DIR=build/npm-deno
BIN="$NPM_DIR/node_modules/$PKG/deno"

pj="$NPM_DIR/node_modules/$PKG/package.json"
if [ ! -x "$BIN" ] || ! grep -q "\"version\": \"$VERSION\"" "$pj" 2>/dev/null; then
    mkdir -p "$NPM_DIR"
    npm install --no-save --no-audit --no-fund --ignore-scripts --prefix "$NPM_DIR" "$PKG@$VERSION" >&2
    chmod +x "$BIN"
fi
"$BIN" --version >/dev/null
echo "$BIN"
