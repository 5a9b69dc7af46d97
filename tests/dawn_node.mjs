// dawn_node.mjs — imported for its effect: where LEAN_DAWN_NODE=PATH names a dawn.node addon
// (npm's webgpu package, Dawn for Node: scripts/setup_dawn_node.sh), navigator.gpu becomes that
// Dawn, made with LEAN_DAWN_FLAGS (its create() options, space-separated, e.g.
// "enable-dawn-features=vulkan_enable_f16_on_nvidia", the toggle that lets Dawn grant
// shader-f16 on NVIDIA, or "backend=opengles"); Node and Deno load such addons. Its adapter is
// asked for as the program asks, then, if none, at the compatibility level (OpenGL ES: Dawn
// refuses Mesa's lavapipe for Vulkan, so a machine without a GPU gets llvmpipe's GLES).
// Without the variable it does nothing. Synchronous, so the module that imports it first sees
// the GPU from its own first line (tests/wasm_run.mjs; a Worker: scripts/bench_web_worker.mjs).
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';

if (process.env.LEAN_DAWN_NODE) {
    const { create } = createRequire(import.meta.url)(path.resolve(process.env.LEAN_DAWN_NODE));
    const dawn = create((process.env.LEAN_DAWN_FLAGS ?? '').split(' ').filter(Boolean));
    const request = dawn.requestAdapter.bind(dawn);
    dawn.requestAdapter = async (o) => (await request(o)) ?? request({ ...o, featureLevel: 'compatibility' });
    globalThis.navigator ??= {};
    Object.defineProperty(globalThis.navigator, 'gpu', { value: dawn, configurable: true });
}
