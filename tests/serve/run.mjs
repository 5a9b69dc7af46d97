#!/usr/bin/env node
// run.mjs — `lean serve` tested from outside, as its users meet it: a tiny generated model is
// served on a free loopback port, then
//   api.mjs   the official OpenAI JavaScript client (npm openai) and plain fetch: chat, streaming
//             chat, completions, models, health, tokenize/detokenize, the chat page, the
//             prefix cache, stop strings, the CLI's own replies, and every error the server
//             answers (malformed JSON, unknown model, a prompt over the context, absurd
//             parameters, an oversized body, a wrong method or path, a vanished client);
//   format.mjs response_format: replies held to JSON or a JSON schema parse and validate, the
//             CLI's own text under a schema, bad schemas refused with 400s;
//   bias.mjs  logit_bias: -100 bans (20 seeded replies batched beside unbiased ones), 100
//             forces, values between added to the logits, bad values refused with 400s;
//   load.mjs  the loopback load test: 200 requests from 32 concurrent clients, some cancelled
//             midway; every reply equal to the same request made alone; p50/p99 latency and
//             aggregate tokens/s printed;
// and the server must stop cleanly on SIGTERM (exit status 0); then
//   errors.mjs a server of one slot, a queue of one and --timeout 2: a full queue is 503, a
//             client gone while queued or mid-stream frees the queue and the slot, a sender
//             stalled halfway through its body is closed while others are served, bodies
//             past --max-body (chunked, or announced with Expect: 100-continue) are 413;
//   lora.mjs  a second server with --lora / --lora-scaled: replies equal `lean run --lora`'s,
//             in every slot; a misfit adapter refused at start;
//   gpu.mjs   a server on the GPU (the draws on the device): requests at once, one under a
//             grammar, each the reply made alone (LEAN_TEST_GPU=0 or a sanitizer build skips).
//
//   node tests/serve/run.mjs [BUILD_DIR]     (default build: BUILD_DIR/lean is the server)
//
// Prints "serve: N passed, N failed" last (tests/run.sh's tally). Node 18 or later (fetch).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { apiTests } from './api.mjs';
import { errorTests } from './errors.mjs';
import { logitBiasTests } from './bias.mjs';
import { formatTests } from './format.mjs';
import { gpuTests } from './gpu.mjs';
import { loadTest } from './load.mjs';
import { loraTests, startServer } from './lora.mjs';

const build = process.argv[2] || 'build';
const lean = path.resolve(build, 'lean');
let passed = 0, failed = 0;
const check = (ok, what, detail) => {
    if (ok) passed++;
    else {
        failed++;
        console.log(`FAIL: ${what}${detail !== undefined ? `: ${detail}` : ''}`);
    }
    return ok;
};

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lean-serve-'));
const model = path.join(dir, 'tiny.gguf');
// tiny-qwen2 (2 layers, 256 wide) with SmolLM2's vocabulary and chat template (ChatML), from
// the data stage (make build/vocab/.made): real words, so stop strings and pieces mean something.
const vocab = 'build/vocab/smollm2.gguf';
if (!fs.existsSync(vocab)) {
    console.log(`FAIL: ${vocab} is missing: make build/vocab/.made makes it\nserve: 0 passed, 1 failed`);
    process.exit(1);
}
execFileSync(lean, ['gen', '--preset', 'tiny-qwen2', '--type', 'q8_0', '--seed', '3', '--vocab', vocab, '-o', model]);

// 8 slots of 1024 tokens; 2 threads (this machine's cores); the CPU kernels, as the `lean run`
// the replies are held to (auto would probe the GPU once per slot, and take one where there is).
const server = await startServer(lean, ['-m', model, '--backend', 'cpu', '--parallel', '8', '--ctx', '1024', '-t', '2',
                                        '--max-body', '65536', '--alias', 'tiny']);
const url = server.url;
console.log(`lean serve at ${url}`);

try {
    await apiTests({ url, lean, model, modelId: 'tiny', nCtx: 1024, check });
    await formatTests({ url, lean, model, modelId: 'tiny', check });
    await logitBiasTests({ url, modelId: 'tiny', check });
    await loadTest({ url, check });
} catch (e) {
    check(false, 'the tests ran to the end', e.stack || e);
}
const { code, signal } = await server.stop();
check(code === 0, 'lean serve stops cleanly on SIGTERM', `exit ${code} ${signal || ''}`);
if (failed) console.log(server.log().split('\n').slice(-40).join('\n'));
try {
    await errorTests({ lean, model, check });
} catch (e) {
    check(false, 'the error tests ran to the end', e.stack || e);
}
try {
    await loraTests({ lean, model, dir, check });
} catch (e) {
    check(false, 'the LoRA tests ran to the end', e.stack || e);
}
if (process.env.LEAN_TEST_GPU === '0' || /asan/.test(build)) {
    console.log(`gpu: skipped (${process.env.LEAN_TEST_GPU === '0' ? 'LEAN_TEST_GPU=0' : 'a sanitizer build'})`);
} else {
    try {
        await gpuTests({ lean, model, check });
    } catch (e) {
        check(false, 'the GPU tests ran to the end', e.stack || e);
    }
}
fs.rmSync(dir, { recursive: true, force: true });
console.log(`serve: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
