// errors.mjs — `lean serve` when clients misbehave or come too many: a second server over
// run.mjs's model with one slot, a queue of one and --timeout 2 (called by run.mjs after its
// own server has stopped). Every check is on what the server answers and on /health:
//   - a full queue: with the slot and the queue taken by long streams, the next request is
//     503 server_busy as an OpenAI error object;
//   - a client gone while its request (a stream, then a whole reply) waits in the queue: the
//     queue empties at once, while the slot's stream goes on; a client gone mid-stream: its slot is free again; then a request
//     is served as before;
//   - a client that sends its headers and half its body, then stalls: other requests are
//     served meanwhile, no slot is taken, and the connection is closed after --timeout (no
//     reply: libmicrohttpd's idle timeout calls no handler that could make one);
//   - one that trickles its body a byte every 400 ms (never silent for --timeout): answered 408
//     request_timeout as an OpenAI error object at its first byte past --timeout, before its
//     body's end, and closed; a request is served after it;
//   - a body over --max-body sent chunked (no Content-Length to refuse it by): 413 as JSON; one
//     announced past it by a client waiting for "100 Continue": 413 before any of it is sent.
// The long streams are completions of up to the whole context with the end-of-generation ids
// banned (logit_bias), so they cannot end before the checks made while they run.
import http from 'node:http';
import net from 'node:net';
import { startServer } from './lora.mjs';

const N_CTX = 2048;

// An HTTP/1.1 POST on its own socket, written as given (head and body may be cut short), so a
// test can stall it or destroy it: data() is what came back so far, until(re) resolves once it
// matches re (or the socket closed: false), closed resolves when the server closes it, rest()
// is the body not yet written (write(s) writes more). head: more header lines ("Name: value\r\n").
function rawPost(url, path, json, { bodyBytes, head = '' } = {}) {
    const body = Buffer.from(JSON.stringify(json));
    const sock = net.connect(new URL(url).port, '127.0.0.1');
    let got = '', waiters = [];
    const closed = new Promise((resolve) => sock.on('close', resolve));
    sock.on('error', () => {}); /* a reset after destroy() or the server's close */
    sock.on('data', (d) => {
        got += d;
        waiters = waiters.filter((w) => !(w.re.test(got) && (w.resolve(true), true)));
    });
    closed.then(() => waiters.forEach((w) => w.resolve(false)));
    sock.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
               `Content-Length: ${body.length}\r\n${head}\r\n`);
    sock.write(body.subarray(0, bodyBytes ?? body.length));
    return {
        data: () => got,
        rest: () => body.subarray(bodyBytes ?? body.length).toString(),
        write: (s) => sock.write(s),
        until: (re) => new Promise((resolve) => {
            if (re.test(got)) resolve(true);
            else if (sock.destroyed) resolve(false);
            else waiters.push({ re, resolve });
        }),
        closed,
        destroy: () => sock.destroy(),
    };
}

// A request on a fresh connection (agent: false; fetch's pool would reuse one the server may be
// closing after --timeout): { status, type (Content-Type), text, json (null if not JSON) }.
// A body given as an array of strings is sent chunked, without a Content-Length.
function request(url, method, path, body) {
    return new Promise((resolve, reject) => {
        const chunked = Array.isArray(body);
        const req = http.request(url + path, { method, agent: false, headers: { 'Content-Type': 'application/json' } },
                                 (res) => {
            let text = '';
            res.on('data', (d) => { text += d; });
            res.on('end', () => {
                let json = null;
                try { json = JSON.parse(text); } catch { /* json stays null: checked by the caller */ }
                resolve({ status: res.statusCode, type: res.headers['content-type'], text, json });
            });
        });
        req.on('error', reject);
        if (chunked) body.forEach((c) => req.write(c));
        else if (body !== undefined) req.write(JSON.stringify(body));
        req.end();
    });
}

// /health until want(h) holds (polled every 20 ms, at most ~10 s); the last reply either way.
async function healthUntil(url, want = () => true) {
    let h;
    for (let i = 0; i < 500; i++) {
        h = (await request(url, 'GET', '/health')).json;
        if (want(h)) return h;
        await new Promise((r) => setTimeout(r, 20));
    }
    return h;
}
const idle = (h) => h.slots_processing === 0 && h.queued === 0;

const isErrorObject = (j, code) => j && j.error && typeof j.error.message === 'string' && j.error.message.length > 0 &&
    typeof j.error.type === 'string' && j.error.code === code;

export async function errorTests({ lean, model, check: report }) {
    let failed = 0;
    const check = (ok, ...what) => (failed += !ok, report(ok, ...what));
    const srv = await startServer(lean, ['-m', model, '--backend', 'cpu', '--parallel', '1', '--max-queue', '1',
                                         '--ctx', String(N_CTX), '-t', '2', '--timeout', '2', '--max-body', '4096',
                                         '--alias', 'tiny']);
    const url = srv.url;
    try {
        const post = (path, json) => request(url, 'POST', path, json);
        const eog = (await post('/tokenize', { content: '<|endoftext|><|im_end|>' })).json.tokens;
        const prompt = 'Once upon a time';
        const long = { model: 'tiny', prompt, max_tokens: N_CTX - 16, temperature: 0.8, seed: 1, stream: true,
                       logit_bias: Object.fromEntries(eog.map((id) => [String(id), -100])) };
        const short = { model: 'tiny', prompt, max_tokens: 8, temperature: 0 };
        const alone = (await post('/v1/completions', short)).json.choices[0].text;
        const h0 = await healthUntil(url, idle);
        check(eog.length === 2 && h0.slots_idle === 1 && h0.queued === 0, 'errors: one idle slot, nothing queued',
              JSON.stringify([eog, h0]));

        // ---- the slot and the queue full: 503 ----
        const a = rawPost(url, '/v1/completions', long);
        const aStreaming = await a.until(/\r\n\r\n[\s\S]*data: \{/); /* its first text: A has the slot */
        const b = rawPost(url, '/v1/completions', long);
        const h1 = await healthUntil(url, (h) => h.queued === 1);
        check(aStreaming && h1.slots_processing === 1 && h1.queued === 1, 'errors: a stream in the slot, one queued',
              JSON.stringify(h1));
        const busy = await post('/v1/completions', short);
        check(busy.status === 503 && busy.type === 'application/json' && isErrorObject(busy.json, 'server_busy') &&
              busy.json.error.type === 'server_error',
              'errors: a request past --max-queue: 503 server_busy, an OpenAI error object', `${busy.status} ${busy.text}`);

        // ---- clients gone: queued ones leave the queue while A goes on; A frees the slot ----
        b.destroy();
        const h2 = await healthUntil(url, (h) => h.queued === 0);
        check(h2.queued === 0 && h2.slots_processing === 1 && !/data: \[DONE\]/.test(a.data()),
              'errors: a stream\'s client gone while queued: it leaves the queue at once, the slot\'s stream goes on',
              JSON.stringify(h2));
        const c = rawPost(url, '/v1/completions', { ...long, stream: false }); /* whole: its thread waits on the job */
        const c1 = await healthUntil(url, (h) => h.queued === 1);
        c.destroy();
        const c2 = await healthUntil(url, (h) => h.queued === 0);
        check(c1.queued === 1 && c2.queued === 0 && c2.slots_processing === 1 && !/data: \[DONE\]/.test(a.data()),
              'errors: a whole reply\'s client gone while queued: it leaves the queue at once too',
              JSON.stringify([c1, c2]));
        a.destroy();
        const h3 = await healthUntil(url, (h) => idle(h) && h.requests_cancelled >= h0.requests_cancelled + 3);
        check(h3.slots_idle === 1 && h3.queued === 0 && h3.requests_cancelled === h0.requests_cancelled + 3,
              'errors: a client gone mid-stream: its slot free, the three jobs counted cancelled', JSON.stringify(h3));
        const after = await post('/v1/completions', short);
        check(after.status === 200 && after.json.choices[0].text === alone,
              'errors: after the 503 and the cancellations a request is served, the same reply', after.text);

        // ---- a sender that stalls halfway through its body ----
        const stall = rawPost(url, '/v1/completions', short, { bodyBytes: 20 });
        let stallClosed = false;
        stall.closed.then(() => { stallClosed = true; });
        const served = await post('/v1/completions', short);
        const h4 = (await request(url, 'GET', '/health')).json;
        check(!stallClosed && served.status === 200 && served.json.choices[0].text === alone && idle(h4),
              'errors: while a sender stalls halfway through its body, another request is served; no slot taken',
              JSON.stringify([stallClosed, h4]));
        const timedOut = await Promise.race([stall.closed.then(() => true),
                                             new Promise((r) => setTimeout(() => r(false), 15000))]);
        check(timedOut && stall.data() === '', 'errors: the stalled connection is closed after --timeout, no reply',
              JSON.stringify(stall.data()));
        stall.destroy();

        // ---- a sender that trickles its body, never silent for --timeout: 408 at the deadline ----
        const trickle = rawPost(url, '/v1/completions', short, { bodyBytes: 20 });
        const rest = trickle.rest();
        let sent = 0;
        while (sent < rest.length &&
               await Promise.race([trickle.closed.then(() => false), new Promise((r) => setTimeout(() => r(true), 400))]))
            trickle.write(rest[sent++]);
        const [head, body] = trickle.data().split('\r\n\r\n');
        let late = null;
        try { late = JSON.parse(body); } catch { /* late stays null: the check fails */ }
        check(sent < rest.length && /^HTTP\/1\.1 408 /.test(head) && /\r\ncontent-type: application\/json\r\n/i.test(head + '\r\n') &&
              isErrorObject(late, 'request_timeout'),
              'errors: a body trickled a byte every 400 ms: 408 request_timeout past --timeout, before its end',
              JSON.stringify([sent, rest.length, trickle.data()]));
        trickle.destroy();
        const servedAfter = await post('/v1/completions', short);
        const h6 = await healthUntil(url, idle);
        check(servedAfter.status === 200 && servedAfter.json.choices[0].text === alone && idle(h6),
              'errors: after the trickler a request is served, no slot left busy', JSON.stringify([servedAfter.text, h6]));

        // ---- a body over --max-body without a Content-Length (chunked): read up to the limit, 413 ----
        const big = await post('/v1/completions', ['{"prompt": "', ...Array(8).fill('x'.repeat(1000)), '"}']);
        check(big.status === 413 && isErrorObject(big.json, 'request_too_large'),
              'errors: a chunked body over --max-body: 413 request_too_large as JSON', `${big.status} ${big.text}`);
        // announced past --max-body by a client waiting for "100 Continue": answered before any of it
        const waiting = rawPost(url, '/v1/completions', { prompt: 'x'.repeat(5000) },
                                { bodyBytes: 0, head: 'Expect: 100-continue\r\n' });
        const refused = await waiting.until(/\r\n\r\n\{[^]*\}$/);
        const [refusedHead, refusedBody] = waiting.data().split('\r\n\r\n');
        let refusedJson = null;
        try { refusedJson = JSON.parse(refusedBody); } catch { /* checked below */ }
        check(refused && /^HTTP\/1\.1 413 /.test(refusedHead) &&
              isErrorObject(refusedJson, 'request_too_large'),
              'errors: a body announced past --max-body with Expect: 100-continue: 413 as JSON, none of it read',
              JSON.stringify(waiting.data()));
        waiting.destroy();
        const h5 = await healthUntil(url, idle);
        check(h5.slots_idle === 1 && h5.queued === 0 && h5.requests_cancelled === h0.requests_cancelled + 3,
              'errors: every slot idle at the end, no other job cancelled', JSON.stringify(h5));
    } finally {
        check((await srv.stop()).code === 0, 'errors: the server stops cleanly on SIGTERM');
        if (failed) console.log(srv.log().split('\n').slice(-20).join('\n'));
    }
}
