#!/usr/bin/env bash
# setup_dawn_node.sh — installs npm's webgpu package (Dawn for Node: dist/<platform>/dawn.node),
# a second Dawn for the wasm32 build under Deno (tests/wasm_run.mjs's LEAN_DAWN_NODE). Unlike
# the pinned bun-webgpu library (scripts/setup_webgpu.sh) it takes Dawn's adapter toggles, among
# them vulkan_enable_f16_on_nvidia: Dawn leaves shader-f16 off on NVIDIA unless it is given
# (docs/runs/2026-12-04-gpu-h200-dots.md). From the npm registry: webgpu@0.6.2, no install
# scripts, into build/npm-dawn-node (ignored by git); prints the addon's path.
#
# Usage: bash scripts/setup_dawn_node.sh      (needs npm; idempotent)
set -euo pipefail
cd "$(dirname "$0")/.."

PKG=webgpu
VERSION=0.6.2
NPM_DIR=build/npm-dawn-node
ADDON="$NPM_DIR/node_modules/$PKG/dist/linux-x64/dawn.node"

pj="$NPM_DIR/node_modules/$PKG/package.json"
if [ ! -f "$ADDON" ] || ! grep -q "\"version\": \"$VERSION\"" "$pj" 2>/dev/null; then
    mkdir -p "$NPM_DIR"
    npm install --no-save --no-audit --no-fund --ignore-scripts --prefix "$NPM_DIR" "$PKG@$VERSION" >&2
fi
[ -f "$ADDON" ] || { echo "setup_dawn_node.sh: $ADDON is missing after the install" >&2; exit 1; }
echo "$ADDON"
