// load.mjs — the loopback load test of `lean serve` (called by run.mjs): 200 requests from 32
// concurrent clients over 24 distinct requests (chat and completions, streamed and not, greedy
// and seeded, one and two turns, a few held to a JSON grammar beside the free ones in the same
// decode steps), every tenth a stream cancelled after its first text. Each
// request is first made alone, one at a time; under load every reply that was not cancelled
// must be that same reply (text, finish_reason, completion_tokens): nothing lost, nothing mixed
// between clients. Prints p50/p99 latency and the aggregate tokens/s (measures, asserts nothing
// about speed).
import { settle } from './api.mjs';

const N_REQUESTS = 200, N_CLIENTS = 32, N_DISTINCT = 24;

function distinct(i) {
    const stream = i % 2 === 0, seed = 1000 + i, temperature = i % 4 === 0 ? 0 : 0.8;
    const max_tokens = 4 + (i * 5) % 13;
    if (i % 3 === 2) return { path: '/v1/completions', body: { prompt: `Story ${i}: once`, max_tokens, seed, temperature, stream } };
    const messages = [{ role: 'system', content: 'You answer briefly.' }];
    if (i % 5 === 0) messages.push({ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello there.' });
    messages.push({ role: 'user', content: `Question ${i}: what is ${i} + ${i}?` });
    // response_format: the grammar's mask on one slot's draws, none on the others'
    const format = i % 4 === 1 ? { response_format: { type: 'json_object' } } : {};
    return { path: '/v1/chat/completions', body: { messages, max_tokens, seed, temperature, stream, ...format } };
}

// One request; with cancel, a stream is aborted once its first text arrives.
async function send(url, r, cancel = false) {
    const body = { ...r.body };
    if (body.stream) body.stream_options = { include_usage: true };
    if (cancel) Object.assign(body, { stream: true, max_tokens: 600 });
    const ac = new AbortController();
    const t0 = performance.now();
    const res = await fetch(url + r.path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                            body: JSON.stringify(body), signal: ac.signal });
    if (!body.stream) {
        const j = await res.json();
        if (res.status !== 200) return { error: `${res.status} ${JSON.stringify(j)}` };
        const c = j.choices[0];
        return { id: j.id, text: c.message ? c.message.content : c.text, finish: c.finish_reason,
                 tokens: j.usage.completion_tokens, ms: performance.now() - t0 };
    }
    if (res.status !== 200) return { error: `${res.status} ${await res.text()}` };
    const reader = res.body.getReader(), dec = new TextDecoder();
    let buf = '', text = '', finish = null, tokens = null, id = null, done = false;
    try {
        while (!done) {
            const { value, done: end } = await reader.read();
            if (end) break;
            buf += dec.decode(value, { stream: true });
            let k;
            while ((k = buf.indexOf('\n\n')) >= 0) {
                const ev = buf.slice(0, k);
                buf = buf.slice(k + 2);
                if (!ev.startsWith('data: ')) continue;
                if (ev === 'data: [DONE]') { done = true; break; }
                const j = JSON.parse(ev.slice(6));
                if (j.error) return { error: JSON.stringify(j.error) };
                id = j.id;
                if (j.usage) tokens = j.usage.completion_tokens;
                for (const c of j.choices) {
                    text += (c.delta ? c.delta.content : c.text) || '';
                    if (c.finish_reason) finish = c.finish_reason;
                }
                if (cancel && text) {
                    ac.abort();
                    return { cancelled: true, text };
                }
            }
        }
    } catch (e) {
        if (!cancel) throw e;
    }
    return { id, text, finish, tokens, ms: performance.now() - t0 };
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

export async function loadTest({ url, check }) {
    const reqs = Array.from({ length: N_DISTINCT }, (_, i) => distinct(i));
    const alone = [];
    for (const r of reqs) alone.push(await send(url, r));
    check(alone.every((a) => !a.error && a.text !== undefined && a.tokens > 0), 'load: every request alone has a reply',
          JSON.stringify(alone.filter((a) => a.error)));
    const before = await settle(url);

    let next = 0, cancelled = 0, mismatched = [], errors = [], lost = 0;
    const done = [];
    const client = async () => {
        while (next < N_REQUESTS) {
            const k = next++;
            const i = (k * 7) % N_DISTINCT, cancel = k % 10 === 3;
            try {
                const got = await send(url, reqs[i], cancel);
                if (got.error) errors.push(got.error);
                else if (got.cancelled) cancelled++;
                else {
                    done.push(got);
                    const a = alone[i];
                    if (got.text !== a.text || got.finish !== a.finish || got.tokens !== a.tokens)
                        mismatched.push({ k, i, got, alone: a });
                }
            } catch (e) {
                lost++;
                errors.push(String(e));
            }
        }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: N_CLIENTS }, client));
    const wall = (performance.now() - t0) / 1e3;
    const after = await settle(url, (h) => h.requests_cancelled >= before.requests_cancelled + cancelled);

    check(errors.length === 0 && lost === 0, 'load: no request failed or was lost', errors.slice(0, 3).join(' | '));
    check(done.length + cancelled === N_REQUESTS && cancelled === N_REQUESTS / 10,
          `load: ${N_REQUESTS} requests answered, ${N_REQUESTS / 10} of them cancelled midway`,
          `${done.length} + ${cancelled}`);
    check(mismatched.length === 0, 'load: every reply equals the same request made alone (nothing mixed)',
          JSON.stringify(mismatched.slice(0, 2)));
    check(new Set(done.map((d) => d.id)).size === done.length, 'load: every reply has its own id');
    check(after.requests_cancelled - before.requests_cancelled === cancelled && after.slots_idle === before.slots_idle &&
          after.slots_processing === 0 && after.queued === 0,
          'load: the server freed the slot of every cancelled request, none left busy', JSON.stringify(after));
    check(after.requests_done - before.requests_done === N_REQUESTS, 'load: the engine finished every request',
          `${after.requests_done - before.requests_done}`);

    const ms = done.map((d) => d.ms).sort((a, b) => a - b);
    const tokens = done.reduce((s, d) => s + d.tokens, 0);
    console.log(`summary: load: ${N_REQUESTS} requests from ${N_CLIENTS} clients (${cancelled} cancelled) in ${wall.toFixed(2)} s: ` +
                `latency p50 ${pct(ms, 0.5).toFixed(0)} ms, p99 ${pct(ms, 0.99).toFixed(0)} ms; ` +
                `${tokens} tokens, ${(tokens / wall).toFixed(1)} tok/s aggregate (replies not cancelled)`);
}
