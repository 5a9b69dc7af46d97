#!/usr/bin/env node
// program.mjs — one wasm32 test program (build-wasm/tests, `make wasm-webgpu`) inside a
// headless browser, as tests/wasm_run.mjs runs it under Node or Deno: WebGPU is the browser's
// navigator.gpu, the files are the repository's (tests/browser/program.html says how).
//
//   node tests/browser/program.mjs [--browser chromium|firefox] build-wasm/tests/test_gpu_ops.wasm [args...]
//
// tests/run.sh's browser stage runs the GPU test programs this way in Chromium, whose
// SwiftShader adapter has subgroups (no other stage's has), so reductions over subgroups
// (reduce_sg.wgsl) are tested in CI. Prints the program's output (its tally among it) and
// exits with its status: 134 when it traps, 1 when the browser or the page fails, 124 (after
// the lines so far) when it runs past LEAN_TEST_TIMEOUT less 30 s (run.sh exports its own
// limit, which would lose them; default 900).
// The environment the program sees: TMPDIR=/tmp, PWD=/ and the host's CI and LEAN_* variables.
import path from 'node:path';
import { BROWSERS, launch, serve } from './harness.mjs';

const LIMIT_MS = (Number(process.env.LEAN_TEST_TIMEOUT) || 900) * 1000 - 30_000;

let argv = process.argv.slice(2), name = 'chromium';
if (argv[0] === '--browser') {
    name = argv[1];
    argv = argv.slice(2);
}
const [file, ...args] = argv;
if (!file || !BROWSERS[name]) {
    console.error('usage: node tests/browser/program.mjs [--browser chromium|firefox] TEST.wasm [args...]');
    process.exit(2);
}
const prog = path.basename(file, '.wasm');
const env = { TMPDIR: '/tmp', PWD: '/' };
for (const [k, v] of Object.entries(process.env)) if (k === 'CI' || k.startsWith('LEAN_')) env[k] = v;

let server, browser, status = 1;
try {
    server = await serve(['/repo=.']);
    browser = await launch(name, LIMIT_MS + 60_000);
    const page = await browser.newPage();
    page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
    await page.goto(`${server.url}test/program.html`);
    await page.waitForFunction(() => window.programReady, { timeout: 60_000 });
    const url = `/repo/${path.relative('.', file).split(path.sep).join('/')}`;
    let timer;
    const limit = new Promise((resolve) => { timer = setTimeout(() => resolve(124), LIMIT_MS); });
    status = await Promise.race([limit, page.evaluate((url, args, env) => window.runProgram(url, args, env),
                                                      url, [prog, ...args], env)]);
    clearTimeout(timer);
    for (const line of await page.evaluate(() => window.programLines)) console.log(line);
    if (status === 124) console.log(`${prog}: ${name}: still running after ${LIMIT_MS / 1000} s`);
} catch (e) {
    console.error(`${prog}: ${name}: ${e.message}`);
} finally {
    await browser?.close().catch(() => {});
    server?.close();
}
process.exit(status);
