// wasm_features.mjs — which of `make web`'s builds this engine runs: the relaxed-SIMD one
// (src/cpu/wasm_relaxed.c's integer dot products: lean-relaxed.wasm, threaded lean-mt-relaxed.wasm)
// where WebAssembly.validate accepts a function using i32x4.relaxed_dot_i8x16_i7x16_add_s, else
// the simd128 one (lean.wasm, threaded lean-mt.wasm). A module holding one instruction the engine
// lacks fails to validate as a whole, so the choice is made here, before fetching, not inside it.
//   import { leanWasmName } from './wasm_features.mjs';
//   const bytes = await (await fetch(leanWasmName())).arrayBuffer();   // leanWasmName(true): threaded

// (module (func (result v128) v128.const 0 v128.const 0 v128.const 0
//                             i32x4.relaxed_dot_i8x16_i7x16_add_s))
const V128_ZERO = [0xfd, 0x0c, ...new Array(16).fill(0)];
const RELAXED_DOT = new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // types: () -> v128
    0x03, 0x02, 0x01, 0x00, // functions: one of type 0
    0x0a, 0x3d, 0x01, 0x3b, 0x00, // code: one body of 59 bytes, no locals
    ...V128_ZERO, ...V128_ZERO, ...V128_ZERO,
    0xfd, 0x93, 0x02, // i32x4.relaxed_dot_i8x16_i7x16_add_s (0xfd 0x113)
    0x0b, // end
]);

export function relaxedSimd() {
    return WebAssembly.validate(RELAXED_DOT);
}

export function leanWasmName(threaded = false) {
    const relaxed = relaxedSimd();
    if (threaded) return relaxed ? 'lean-mt-relaxed.wasm' : 'lean-mt.wasm';
    return relaxed ? 'lean-relaxed.wasm' : 'lean.wasm';
}
