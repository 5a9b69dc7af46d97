// api.mjs — `lean serve`'s API through the official OpenAI client (npm openai) and fetch.
// Called by run.mjs with a running server; every check goes through check(ok, what, detail).
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import OpenAI from 'openai';

// The reply text of a streamed request: every delta joined, the last finish_reason, the usage.
async function collect(stream, kind) {
    let text = '', finish = null, usage = null, role = null, chunks = 0;
    for await (const c of stream) {
        chunks++;
        if (c.usage) usage = c.usage;
        for (const ch of c.choices) {
            if (kind === 'chat') {
                if (ch.delta.role) role = ch.delta.role;
                text += ch.delta.content || '';
            } else {
                text += ch.text || '';
            }
            if (ch.finish_reason) finish = ch.finish_reason;
        }
    }
    return { text, finish, usage, role, chunks };
}

// The status and parsed body of a raw request.
async function raw(url, path, init) {
    const r = await fetch(url + path, init);
    const body = await r.text();
    let json = null;
    try { json = JSON.parse(body); } catch { /* the page, or a bad reply: json stays null */ }
    return { status: r.status, headers: r.headers, body, json };
}

const post = (body) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' },
                          body: typeof body === 'string' ? body : JSON.stringify(body) });

// The /health counts once the engine has no job and none waits (a cancelled job is freed at
// the engine's next step, not at once).
export async function settle(url, want = () => true) {
    for (let i = 0; i < 600; i++) {
        const h = (await raw(url, '/health')).json;
        if (h.slots_processing === 0 && h.queued === 0 && want(h)) return h;
        await new Promise((r) => setTimeout(r, 50));
    }
    return (await raw(url, '/health')).json;
}

export async function apiTests({ url, lean, model, modelId, nCtx, check }) {
    const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0 });

    // ---- models, health ----
    const models = await client.models.list();
    check(models.data.length === 1 && models.data[0].id === modelId, 'GET /v1/models lists the model by its alias',
          JSON.stringify(models.data));
    const health = await raw(url, '/health');
    check(health.status === 200 && health.json.status === 'ok' && health.json.slots_idle === 8,
          'GET /health: ok, 8 idle slots', health.body);

    // ---- chat, whole and streamed: the same reply ----
    const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me a story.' }];
    const req = { model: modelId, messages, max_tokens: 24, seed: 42, temperature: 0.9 };
    const whole = await client.chat.completions.create(req);
    const w = whole.choices[0];
    check(whole.object === 'chat.completion' && w.message.role === 'assistant' && typeof w.message.content === 'string' &&
          w.message.content.length > 0, 'chat: an assistant message', JSON.stringify(whole));
    check(['stop', 'length'].includes(w.finish_reason) && whole.usage.completion_tokens <= 24 &&
          whole.usage.prompt_tokens > 10 &&
          whole.usage.total_tokens === whole.usage.prompt_tokens + whole.usage.completion_tokens,
          'chat: finish_reason and usage counts', JSON.stringify(whole.usage));
    check(w.finish_reason !== 'length' || whole.usage.completion_tokens === 24, 'chat: length means max_tokens ids');
    const again = await client.chat.completions.create(req);
    check(again.choices[0].message.content === w.message.content, 'chat: the same seed, the same reply');
    check(again.usage.prompt_tokens_details.cached_tokens === again.usage.prompt_tokens - 1,
          'chat: a repeated prompt comes from the prefix cache (all but its last id)',
          JSON.stringify(again.usage));
    const st = await collect(await client.chat.completions.create({ ...req, stream: true,
                                                                    stream_options: { include_usage: true } }), 'chat');
    check(st.text === w.message.content && st.finish === w.finish_reason && st.role === 'assistant',
          'streamed chat: the deltas join to the whole reply, same finish_reason',
          JSON.stringify([st.text, w.message.content]));
    check(st.chunks > 3 && st.usage && st.usage.completion_tokens === whole.usage.completion_tokens &&
          st.usage.prompt_tokens === whole.usage.prompt_tokens, 'streamed chat: several chunks, then the usage chunk',
          JSON.stringify(st.usage));
    // ---- the prefix cache: a conversation's next turn reuses its KV (the turn right after: a
    // request sharing the prompt but not the reply, such as the seed 43 one below, would take
    // the same slot and keep only the prompt) ----
    const turn2 = [...messages, { role: 'assistant', content: w.message.content }, { role: 'user', content: 'More.' }];
    const next = await client.chat.completions.create({ ...req, messages: turn2 });
    check(next.usage.prompt_tokens_details.cached_tokens > whole.usage.prompt_tokens,
          'prefix cache: the second turn reuses the first turn and its reply',
          `${next.usage.prompt_tokens_details.cached_tokens} cached of ${next.usage.prompt_tokens}`);

    const other = await client.chat.completions.create({ ...req, seed: 43 });
    check(other.choices[0].message.content !== w.message.content, 'chat: another seed, another reply');

    // ---- stop strings: the reply ends before the first one, streamed or not ----
    const long = await client.chat.completions.create({ ...req, max_tokens: 40, seed: 7 });
    const text = long.choices[0].message.content;
    const chars = Array.from(text);
    const stop = chars.slice(Math.floor(chars.length / 2), Math.floor(chars.length / 2) + 3).join('');
    if (check(stop.length > 0, 'stop: the reply is long enough to pick a stop string from', text)) {
        const want = text.slice(0, text.indexOf(stop));
        const cut = await client.chat.completions.create({ ...req, max_tokens: 40, seed: 7, stop: ['\u2603never', stop] });
        check(cut.choices[0].message.content === want && cut.choices[0].finish_reason === 'stop',
              'stop: the reply ends before the stop string, finish_reason stop',
              JSON.stringify([cut.choices[0].message.content, want]));
        const cs = await collect(await client.chat.completions.create({ ...req, max_tokens: 40, seed: 7, stop,
                                                                         stream: true }), 'chat');
        check(cs.text === want && cs.finish === 'stop', 'stop: streamed, the same cut (text held back meanwhile)',
              JSON.stringify([cs.text, want]));
    }

    // ---- completions: against `lean run`'s own text, greedy and seeded ----
    const prompt = 'Once upon a time';
    const runText = (args) => execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-p', prompt, '-q', ...args],
                                           { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    const greedy = await client.completions.create({ model: modelId, prompt, max_tokens: 16, temperature: 0 });
    check(greedy.object === 'text_completion' && greedy.choices[0].text === runText(['-n', '16', '--temp', '0']),
          'completions: greedy, the text `lean run --temp 0` prints', JSON.stringify(greedy.choices[0].text));
    const seeded = await client.completions.create({ model: modelId, prompt, max_tokens: 16, seed: 5, temperature: 0.8,
                                                     top_k: 40, top_p: 0.95, repeat_penalty: 1.1 });
    check(seeded.choices[0].text === runText(['-n', '16', '--temp', '0.8', '--seed', '5', '--repeat-penalty', '1.1']),
          'completions: seeded with top_k, top_p and repeat_penalty, the text `lean run --seed 5` prints',
          JSON.stringify(seeded.choices[0].text));
    const cst = await collect(await client.completions.create({ model: modelId, prompt, max_tokens: 16, seed: 5,
                                                                temperature: 0.8, repeat_penalty: 1.1, stream: true }),
                              'completion');
    check(cst.text === seeded.choices[0].text && cst.finish === seeded.choices[0].finish_reason,
          'completions: streamed, the same text', JSON.stringify([cst.text, seeded.choices[0].text]));
    // a prompt of several prefill chunks (the CPU's n_batch is 64), prefilled a chunk per engine step
    const longPrompt = 'The quick brown fox jumps over the lazy dog. '.repeat(25) + prompt;
    const longReply = await client.completions.create({ model: modelId, prompt: longPrompt, max_tokens: 8, temperature: 0 });
    const longRun = execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-p', longPrompt, '-q', '-n', '8', '--temp', '0'],
                                 { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    check(longReply.usage.prompt_tokens > 200 && longReply.choices[0].text === longRun,
          'completions: a prompt of several chunks, the text `lean run` prints',
          JSON.stringify([longReply.usage.prompt_tokens, longReply.choices[0].text, longRun]));
    const ids = (await raw(url, '/tokenize', post({ content: prompt, add_special: true }))).json.tokens;
    const byIds = await client.completions.create({ model: modelId, prompt: ids, max_tokens: 16, temperature: 0 });
    check(byIds.choices[0].text === greedy.choices[0].text, 'completions: a prompt of token ids, the same reply');

    // ---- tokenize / detokenize (llama-server's) ----
    const words = 'Hello, wörld! 12345 <|im_start|>';
    const tk = await raw(url, '/tokenize', post({ content: words }));
    const dt = await raw(url, '/detokenize', post({ tokens: tk.json.tokens }));
    check(tk.status === 200 && tk.json.tokens.length > 5 && dt.json.content === words,
          '/tokenize then /detokenize gives the text back', tk.body + ' ' + dt.body);
    const pieces = await raw(url, '/tokenize', post({ content: 'Hi there', with_pieces: true }));
    check(pieces.json.tokens.map((t) => t.piece).join('') === 'Hi there' && Number.isInteger(pieces.json.tokens[0].id),
          '/tokenize with_pieces: ids and their pieces', pieces.body);
    const special = await raw(url, '/tokenize', post({ content: '<|im_start|>', parse_special: false }));
    check(special.json.tokens.length > 1 && tk.json.tokens.length > 0,
          '/tokenize parse_special false: control-token text stays text', special.body);

    // ---- errors: OpenAI-style objects with the right status ----
    const expectError = async (what, status, code, p) => {
        try {
            await p;
            check(false, what, 'no error');
        } catch (e) {
            check(e instanceof OpenAI.APIError && e.status === status && (!code || e.code === code) &&
                  typeof e.error?.message === 'string', what, `${e.status} ${e.code} ${e.message}`);
        }
    };
    await expectError('an unknown model: 404 model_not_found', 404, 'model_not_found',
                      client.chat.completions.create({ ...req, model: 'gpt-4' }));
    await expectError('temperature -1: 400', 400, 'invalid_value',
                      client.chat.completions.create({ ...req, temperature: -1 }));
    await expectError('top_p 2: 400', 400, 'invalid_value', client.chat.completions.create({ ...req, top_p: 2 }));
    await expectError('max_tokens 0: 400', 400, 'invalid_value', client.chat.completions.create({ ...req, max_tokens: 0 }));
    await expectError('n 3: 400 unsupported_parameter', 400, 'unsupported_parameter',
                      client.chat.completions.create({ ...req, n: 3 }));
    await expectError('empty messages: 400', 400, null, client.chat.completions.create({ ...req, messages: [] }));
    await expectError('a prompt over the context: 400 context_length_exceeded', 400, 'context_length_exceeded',
                      client.completions.create({ model: modelId, prompt: 'word '.repeat(nCtx + 10), max_tokens: 4 }));
    await expectError('max_tokens past the context: 400 context_length_exceeded', 400, 'context_length_exceeded',
                      client.completions.create({ model: modelId, prompt, max_tokens: nCtx }));
    await expectError('an id outside the vocabulary: 400', 400, 'invalid_value',
                      client.completions.create({ model: modelId, prompt: [1, 2, 1 << 30], max_tokens: 4 }));
    const bad = await raw(url, '/v1/chat/completions', post('{"messages": [{"role": "user", "content": "hi"}'));
    check(bad.status === 400 && bad.json.error.code === 'invalid_json' && /line 1 column \d+/.test(bad.json.error.message),
          'malformed JSON: 400 naming the line and column', bad.body);
    const notObj = await raw(url, '/v1/completions', post('[1, 2]'));
    check(notObj.status === 400 && notObj.json.error.type === 'invalid_request_error', 'a body that is not an object: 400',
          notObj.body);
    const big = await raw(url, '/v1/completions', post({ prompt: 'x'.repeat(70000) }));
    check(big.status === 413 && big.json.error.code === 'request_too_large', 'a body over --max-body: 413', big.body);
    const method = await raw(url, '/v1/chat/completions');
    check(method.status === 405 && method.json.error, 'GET on a POST endpoint: 405', method.body);
    const nowhere = await raw(url, '/v1/embeddings', post({ input: 'x' }));
    check(nowhere.status === 404 && nowhere.json.error, 'an unknown endpoint: 404', nowhere.body);
    const traversal = await raw(url, '/../Makefile');
    const traversal2 = await raw(url, '/%2e%2e/Makefile');
    check(traversal.status === 404 && traversal2.status === 404, 'a path out of the page folder: 404');

    // ---- the chat page at / (build-web/ when the server was started where it is) ----
    const page = await raw(url, '/');
    if (page.status === 200) {
        check(/<title>lean chat<\/title>/.test(page.body) &&
              page.headers.get('cross-origin-opener-policy') === 'same-origin' &&
              page.headers.get('content-type').startsWith('text/html'), 'GET /: the chat page, cross-origin isolated');
        const wasm = await fetch(url + '/lean.wasm');
        check(wasm.status === 200 && wasm.headers.get('content-type') === 'application/wasm',
              'GET /lean.wasm: application/wasm');
        await wasm.arrayBuffer();
    } else {
        check(page.status === 404 && page.json.error, 'GET / without a page folder: 404', page.body);
    }

    // ---- a client that goes away frees its slot ----
    const before = (await settle(url)).requests_cancelled;
    const ac = new AbortController();
    const s = await client.chat.completions.create({ ...req, max_tokens: 900, stream: true }, { signal: ac.signal });
    try {
        for await (const c of s) if (c.choices[0]?.delta?.content) ac.abort();
    } catch { /* the abort */ }
    // a whole (not streamed) request whose socket closes while it waits
    await new Promise((resolve) => {
        const sock = net.connect(new URL(url).port, '127.0.0.1', () => {
            const body = JSON.stringify({ ...req, max_tokens: 900 });
            sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                       `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
            setTimeout(() => { sock.destroy(); resolve(); }, 30);
        });
    });
    const after = await settle(url, (h) => h.requests_cancelled >= before + 2);
    check(after.requests_cancelled === before + 2 && after.slots_idle === 8,
          'a cancelled stream and a vanished client: both jobs cancelled, every slot free again',
          JSON.stringify(after));
    // a stream cancelled midway leaves its slot's cache exactly the ids it holds (the last id
    // drawn is decoded by the next step, which never comes): a prompt going on from the cut
    // reply reuses its rows past the prompt and gets the reply `lean run` makes from scratch
    const cutPrompt = 'Once upon a time, in a quiet town,';
    const ac2 = new AbortController();
    let cutText = '';
    try {
        const cs = await client.completions.create({ model: modelId, prompt: cutPrompt, max_tokens: 900, seed: 5,
                                                     temperature: 0.8, stream: true }, { signal: ac2.signal });
        for await (const c of cs) if ((cutText += c.choices[0]?.text ?? '').length > 40) ac2.abort();
    } catch { /* the abort */ }
    await settle(url, (h) => h.requests_cancelled >= before + 3);
    const goOn = cutPrompt + cutText;
    const cutIds = (await raw(url, '/tokenize', post({ content: cutPrompt, add_special: true }))).json.tokens;
    const reused = await client.completions.create({ model: modelId, prompt: goOn, max_tokens: 12, temperature: 0 });
    const goOnRun = execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-p', goOn, '-q', '-n', '12', '--temp', '0'],
                                 { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    check(reused.usage.prompt_tokens_details.cached_tokens > cutIds.length && reused.choices[0].text === goOnRun,
          'a stream cancelled midway: its reply\'s rows reused, the text `lean run` prints',
          JSON.stringify([reused.usage.prompt_tokens_details.cached_tokens, cutIds.length, reused.choices[0].text, goOnRun]));
    // and a reply ended by max_tokens: its last id was drawn, never decoded; a prompt going on
    // past the whole reply reuses all but that id, and gets `lean run`'s reply
    const cut16 = await client.completions.create({ model: modelId, prompt: cutPrompt, max_tokens: 16, seed: 6,
                                                   temperature: 0.8 });
    const past = cutPrompt + cut16.choices[0].text + ' and';
    const pastIds = (await raw(url, '/tokenize', post({ content: past, add_special: true }))).json.tokens;
    const pastReply = await client.completions.create({ model: modelId, prompt: past, max_tokens: 12, temperature: 0 });
    const pastRun = execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-p', past, '-q', '-n', '12', '--temp', '0'],
                                 { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    const pastCached = pastReply.usage.prompt_tokens_details.cached_tokens;
    check(cut16.choices[0].finish_reason === 'length' && pastCached === cutIds.length + 15 &&
          pastIds.length > pastCached + 1 && pastReply.choices[0].text === pastRun,
          'a reply ended by max_tokens: the prompt and all its ids but the last reused, the text `lean run` prints',
          JSON.stringify([cut16.choices[0].finish_reason, pastCached, cutIds.length, pastIds.length,
                          pastReply.choices[0].text, pastRun]));
    // a client that never reads its stream holds no slot: the reply is made at the engine's pace
    const doneBefore = (await settle(url)).requests_done; // settled: no job of the tests above pending
    const slow = net.connect(new URL(url).port, '127.0.0.1', () => {
        const body = JSON.stringify({ ...req, max_tokens: 40, stream: true });
        slow.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                   `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    slow.pause();
    const slowDone = await settle(url, (h) => h.requests_done >= doneBefore + 1);
    check(slowDone.requests_done === doneBefore + 1 && slowDone.slots_idle === 8,
          'a client that never reads its stream: its job ends anyway, its slot free', JSON.stringify(slowDone));
    slow.destroy();
    const fine = await client.chat.completions.create(req);
    check(fine.choices[0].message.content === w.message.content, 'after the cancellations: the same reply as before');
}
