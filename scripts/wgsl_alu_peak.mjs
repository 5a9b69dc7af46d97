// wgsl_alu_peak.mjs — the arithmetic peaks a WGSL kernel reaches on an adapter: f32 fma,
// f16 fma (vec4<f16>, where shader-f16 is granted) and dot4I8Packed (4 signed 8-bit products
// summed into an i32). Each invocation runs ITERS iterations of 8 independent vec4 chains (the
// dot4I8Packed one also steps its x by one integer multiply-add an iteration); GROUPS x 128
// invocations a dispatch, best of 3 wall times after a warm-up. Prints T(fl)ops/s (an fma 2,
// a dot4I8Packed 8) and lane multiply-adds a second (an fma 1, a dot4I8Packed 4), the figure
// to compare. Runs on npm's dawn.node (scripts/setup_dawn_node.sh) under Node or Deno:
//   DAWN_NODE=path/to/dawn.node DAWN_FLAGS="enable-dawn-features=vulkan_enable_f16_on_nvidia,disable_robustness" \
//       deno run -A scripts/wgsl_alu_peak.mjs        (KERNELS=f32,f16,dp4a ITERS=4096 GROUPS=2112)
// DAWN_FLAGS are dawn.node's create() options, space-separated; add
// polyfill_packed_4x8_dot_product to the features to time Dawn's replacement of dot4I8Packed.
import { createRequire } from 'node:module';
import path from 'node:path';
const req = createRequire(import.meta.url);
const { create, globals } = req(path.resolve(process.env.DAWN_NODE));
Object.assign(globalThis, globals);
const gpu = create((process.env.DAWN_FLAGS ?? '').split(' ').filter(Boolean));
let adapter = await gpu.requestAdapter() ?? await gpu.requestAdapter({ featureLevel: 'compatibility' });
const f16 = adapter.features.has('shader-f16');
const device = await adapter.requestDevice({ requiredFeatures: f16 ? ['shader-f16'] : [] });
console.log('adapter', adapter.info?.description ?? '', 'f16', f16);
const ITERS = Number(process.env.ITERS ?? 4096), GROUPS = Number(process.env.GROUPS ?? 132 * 16), WG = 128;
const kern = {
  f32: [`var a: array<vec4<f32>, 8>; for (var i = 0u; i < 8u; i++) { a[i] = vec4<f32>(f32(l + i)); }
    let x = vec4<f32>(1.0001, 0.9999, 1.0002, 0.9998); let y = vec4<f32>(0.5);
    for (var it = 0u; it < ITERS; it++) { for (var i = 0u; i < 8u; i++) { a[i] = fma(a[i], x, y); } }
    var s = 0.0; for (var i = 0u; i < 8u; i++) { s += dot(a[i], vec4<f32>(1.0)); } out[l] = s;`, 32],
  f16: [`var a: array<vec4<f16>, 8>; for (var i = 0u; i < 8u; i++) { a[i] = vec4<f16>(f16(l % 7u + i)); }
    let x = vec4<f16>(1.0h, 0.999h, 1.001h, 0.998h); let y = vec4<f16>(0.5h);
    for (var it = 0u; it < ITERS; it++) { for (var i = 0u; i < 8u; i++) { a[i] = fma(a[i], x, y); } }
    var s = 0.0; for (var i = 0u; i < 8u; i++) { s += f32(dot(a[i], vec4<f16>(1.0h))); } out[l] = s;`, 32],
  dp4a: [`var a: array<i32, 8>; for (var i = 0u; i < 8u; i++) { a[i] = i32(l + i); }
    var b: array<u32, 8>; for (var i = 0u; i < 8u; i++) { b[i] = (l * 0x01010101u) ^ (i * 0x3779b97fu); }
    var x = 0x01ff7f80u ^ l;
    for (var it = 0u; it < ITERS; it++) { x = x * 1664525u + 1013904223u; for (var i = 0u; i < 8u; i++) { a[i] += dot4I8Packed(b[i], x); } }
    var s = 0; for (var i = 0u; i < 8u; i++) { s += a[i]; } out[l] = f32(s);`, 32],
};
const which = (process.env.KERNELS ?? 'f32,f16,dp4a').split(',');
for (const name of which) {
  if (name === 'f16' && !f16) { console.log('f16: no shader-f16'); continue; }
  const [body] = kern[name];
  const code = `${name === 'f16' ? 'enable f16;' : ''}
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
const ITERS: u32 = ${ITERS}u;
@compute @workgroup_size(${WG}) fn main(@builtin(global_invocation_id) gid: vec3<u32>) { let l = gid.x; ${body} }`;
  const mod = device.createShaderModule({ code });
  const info = await mod.getCompilationInfo();
  for (const m of info.messages) console.log(name, m.type, m.message);
  const pipe = device.createComputePipeline({ layout: 'auto', compute: { module: mod, entryPoint: 'main' } });
  const buf = device.createBuffer({ size: GROUPS * WG * 4, usage: GPUBufferUsage.STORAGE });
  const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  const run = async () => {
    const enc = device.createCommandEncoder(); const p = enc.beginComputePass();
    p.setPipeline(pipe); p.setBindGroup(0, bg); p.dispatchWorkgroups(GROUPS); p.end();
    const t0 = performance.now(); device.queue.submit([enc.finish()]); await device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  };
  await run();
  let best = 1e9; for (let r = 0; r < 3; r++) best = Math.min(best, await run());
  // lanes: per invocation ITERS x 8 vec4 ops; an fma counts 2 ops, a dot4I8Packed 4 multiply-adds = 8 ops
  const lanes = GROUPS * WG * ITERS * 8 * 4;
  console.log(`${name}: ${best.toFixed(2)} ms, ${(lanes * 2 / best / 1e9).toFixed(2)} T(fl)ops/s (lane-MACs ${(lanes / best / 1e9).toFixed(2)} T/s)`);
}
process.exit(0);
