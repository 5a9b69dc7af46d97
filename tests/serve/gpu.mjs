// gpu.mjs — `lean serve --backend gpu` (WebGPU: Dawn over llvmpipe here), where each step's
// draws stay on the device (lean_gen_next_batch_masked): 4 requests at once over 4 slots, one
// held to a grammar (response_format json_object: its mask goes down each step), one to a
// logit_bias banning the tokens of the greedy reply (its mask each step) beside two free ones
// (greedy and seeded), each reply the one made alone. Called by run.mjs after its own server
// has stopped; LEAN_TEST_GPU=0 skips it, and so does a sanitizer build (llvmpipe keeps memory
// of closed GPU contexts, which the leak check of the serve run would count). About 30 s.
import OpenAI from 'openai';
import { startServer } from './lora.mjs';

export async function gpuTests({ lean, model, check }) {
    const server = await startServer(lean, ['-m', model, '--backend', 'gpu', '--parallel', '4', '--ctx', '256', '-t', '2',
                                            '--alias', 'tiny']);
    try {
        const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0 });
        const reqs = [
            { prompt: 'Once upon a time', max_tokens: 8, temperature: 0 },
            { prompt: 'In the beginning', max_tokens: 8, seed: 9, temperature: 0.8 },
            { prompt: 'An object:', max_tokens: 8, seed: 3, temperature: 1, top_k: 0, top_p: 1,
              response_format: { type: 'json_object' } },
        ].map((r) => ({ model: 'tiny', ...r }));
        const alone = [];
        for (const r of reqs) alone.push((await client.completions.create(r)).choices[0].text);
        const greedy = await (await fetch(server.url + '/tokenize', {
            method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ content: alone[0] }) })).json();
        reqs.push({ ...reqs[0], logit_bias: Object.fromEntries(greedy.tokens.map((id) => [String(id), -100])) });
        alone.push((await client.completions.create(reqs[3])).choices[0].text);
        check(alone[3].length > 0 && alone[3] !== alone[0],
              'gpu: logit_bias -100 on the greedy reply\'s tokens: another reply', JSON.stringify([alone[0], alone[3]]));
        const together = (await Promise.all(reqs.map((r) => client.completions.create(r)))).map((c) => c.choices[0].text);
        check(/^\s*\{/.test(alone[2]) && alone.every((t) => t.length > 0), 'gpu: replies, the grammar one an object begun',
              JSON.stringify(alone));
        check(together.every((t, i) => t === alone[i]),
              'gpu: 4 requests at once (one under a grammar, one under logit_bias) each the reply made alone (draws on the device)',
              JSON.stringify([together, alone]));
    } finally {
        const { code } = await server.stop();
        check(code === 0, 'gpu: the server stops cleanly', `exit ${code}`);
    }
}
