// lora.mjs — `lean serve --lora FILE` / `--lora-scaled FILE SCALE` (llama-server's flags): a
// second server over run.mjs's model with two random adapters (scripts/make_lora.py, rank 4),
// applied in every slot. Called by run.mjs after its own server has stopped.
//   - completions, greedy and seeded, are the text `lean run` prints with the same adapters
//     (one adapter path for both), and differ from the model's own reply without them;
//   - 4 requests at once over 2 slots (each slot and the batched decode hold the adapters):
//     every reply the one made alone;
//   - an adapter of another architecture is refused at start, naming the tensor and the file;
//     a bad SCALE is a usage error.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';

// `lean serve ARGS` on a free port (run.mjs's server too): its url, its stderr so far (log())
// and stop(), SIGTERM, resolving to { code, signal } once it has exited.
export async function startServer(lean, args) {
    const server = spawn(lean, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
    const url = await new Promise((resolve, reject) => {
        server.stderr.on('data', (d) => {
            log += d;
            const m = /listening on (http:\/\/\S+?)\/\n/.exec(log);
            if (m) resolve(m[1]);
        });
        server.on('exit', (code) => reject(new Error(`lean serve exited ${code} before listening:\n${log}`)));
    });
    return { url, log: () => log, stop: () => (server.kill('SIGTERM'), exited) };
}

export async function loraTests({ lean, model, dir, check }) {
    const adapters = ['a', 'b'].map((n, i) => {
        const out = path.join(dir, `lora-${n}.gguf`);
        // Debian's python where there is one (numpy), as the Makefile's
        execFileSync('/bin/sh', ['-c', 'p=python3; [ ! -x /usr/bin/python3 ] || p=/usr/bin/python3; ' +
                                 `"$p" scripts/make_lora.py adapter "$0" "$1" --rank 4 --seed ${11 + i} >/dev/null`,
                                 model, out]);
        return out;
    });
    const loraArgs = ['--lora', adapters[0], '--lora-scaled', adapters[1], '0.5'];
    const prompt = 'Once upon a time';
    const runText = (args) => execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-t', '2', '-p', prompt, '-q',
                                                  ...args], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    const greedyArgs = ['-n', '16', '--temp', '0'], seededArgs = ['-n', '16', '--temp', '0.8', '--seed', '5'];

    const srv = await startServer(lean, ['-m', model, '--backend', 'cpu', '--parallel', '2', '--ctx', '256', '-t', '2',
                                         '--alias', 'tiny', ...loraArgs]);
    try {
        check(/, 2 LoRA adapters/.test(srv.log()), 'lora: the start-up line counts the adapters', srv.log());
        const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'none', maxRetries: 0 });
        const ask = (extra) => client.completions.create({ model: 'tiny', prompt, max_tokens: 16, ...extra })
            .then((r) => r.choices[0].text);
        const greedy = await ask({ temperature: 0 });
        const seeded = await ask({ temperature: 0.8, seed: 5 });
        const plain = runText(greedyArgs);
        check(greedy === runText([...greedyArgs, ...loraArgs]), 'lora: greedy, the text `lean run --lora` prints',
              JSON.stringify(greedy));
        check(seeded === runText([...seededArgs, ...loraArgs]), 'lora: seeded, the text `lean run --lora` prints',
              JSON.stringify(seeded));
        check(greedy !== plain, 'lora: the adapters change the reply', JSON.stringify([greedy, plain]));
        // both slots at once, and the batched decode: each reply the one made alone
        const many = await Promise.all([0, 1, 2, 3].map((i) => ask(i % 2 ? { temperature: 0.8, seed: 5 } : { temperature: 0 })));
        check(many.every((t, i) => t === (i % 2 ? seeded : greedy)), 'lora: 4 requests on 2 slots, each the reply alone',
              JSON.stringify(many));
    } finally {
        check((await srv.stop()).code === 0, 'lora: the server stops cleanly on SIGTERM');
    }

    // an adapter that does not fit (a llama fixture's against this qwen2 model): refused at start
    const misfit = spawnSync(lean, ['serve', '-m', model, '--port', '0', '--backend', 'cpu', '--lora',
                                    'build/lora/llama-a.gguf'], { timeout: 60000 });
    check(misfit.status === 1 && /llama-a\.gguf/.test(misfit.stderr) && /architecture|lora_|tensor/.test(misfit.stderr),
          'lora: a misfit adapter is refused, named', `${misfit.status}: ${misfit.stderr}`);
    const bad = spawnSync(lean, ['serve', '-m', model, '--lora-scaled', adapters[0], 'half'], { timeout: 60000 });
    check(bad.status === 2 && /--lora-scaled expects FILE SCALE/.test(bad.stderr), 'lora: a bad SCALE is a usage error',
          `${bad.status}: ${bad.stderr}`);
}
