// format.mjs — `lean serve`'s response_format through the official OpenAI client: replies held
// to JSON ({"type": "json_object"}) or to a JSON schema ({"type": "json_schema"}). Called by
// run.mjs with a running server (a random tiny model: the grammar does all the work).
//   - json_schema: 8 seeded chat replies (temperature 1, the whole vocabulary) end because the
//     grammar is complete (finish_reason "stop") and validate against the schema with an
//     independent validator (Debian's python3-jsonschema, scripts/validate_json_replies.py);
//   - json_object with a schema beside it (llama-server's spelling): json_schema's replies;
//     json_object alone: llama.cpp's grammar for any object (the schema {}), the CLI's text
//     under it (a random model seldom closes a string: the reply is cut at max_tokens);
//   - a completion under a schema is the text `lean run --json-schema` prints for the same
//     prompt and seed (one sampler and grammar path), and streamed it is the same text;
//   - what cannot be held to is refused with an OpenAI-style 400 naming response_format: an
//     unknown type, json_schema without a schema, a malformed schema (its path named), a
//     keyword outside the subset lean converts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';

const SCHEMA = {
    type: 'object',
    properties: {
        name: { type: 'string', maxLength: 12 },
        age: { type: 'integer' },
        mood: { enum: ['calm', 'cross', 'merry'] },
        tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
        ok: { type: 'boolean' },
    },
    required: ['name', 'age', 'ok'],
};
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
// temperature 1 over the whole vocabulary, as tests/test_grammar_replies.c draws; a reply needs
// well under 300 ids, max_tokens is only a guard (a reply cut there fails the check)
const SAMPLING = { temperature: 1, top_k: 0, top_p: 1, max_tokens: 300 };

// Every reply valid under SCHEMA, by python3-jsonschema; its verdict line, or why it failed.
function validate(replies) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lean-serve-json-'));
    try {
        fs.writeFileSync(path.join(dir, 'schemas.jsonl'), JSON.stringify(SCHEMA) + '\n');
        fs.writeFileSync(path.join(dir, 'replies.jsonl'), replies.map((r) => JSON.stringify({ schema: 0, reply: r }) + '\n').join(''));
        return execFileSync('python3', ['scripts/validate_json_replies.py', path.join(dir, 'schemas.jsonl'),
                                        path.join(dir, 'replies.jsonl')]).toString().trim();
    } catch (e) {
        return `${e.message}\n${e.stdout ?? ''}`;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

export async function formatTests({ url, lean, model, modelId, check }) {
    const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0 });
    const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];
    const schemaFormat = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: SCHEMA } };

    // ---- json_schema: 8 seeds at once (the server's 8 slots), all complete and valid ----
    const held = await Promise.all(SEEDS.map((seed) => client.chat.completions.create({
        model: modelId, messages, seed, ...SAMPLING, response_format: schemaFormat })));
    const texts = held.map((r) => r.choices[0].message.content);
    check(held.every((r) => r.choices[0].finish_reason === 'stop'),
          'json_schema: every reply ends because the grammar is complete (finish_reason stop)',
          JSON.stringify(held.map((r) => [r.choices[0].finish_reason, r.usage.completion_tokens])));
    const verdict = validate(texts);
    check(verdict === `valid ${SEEDS.length} of ${SEEDS.length}`, 'json_schema: every reply validates (python3-jsonschema)',
          `${verdict}\n${texts.join('\n')}`);
    check(new Set(texts).size > 1, 'json_schema: different seeds, different replies', texts.join('\n'));

    // ---- json_object with a schema beside it (llama-server's form): held to it the same ----
    const beside = await Promise.all(SEEDS.slice(0, 4).map((seed) => client.chat.completions.create({
        model: modelId, messages, seed, ...SAMPLING, response_format: { type: 'json_object', schema: SCHEMA } })));
    check(beside.every((r, i) => r.choices[0].message.content === texts[i]),
          "json_object with a schema: json_schema's replies", beside.map((r) => r.choices[0].message.content).join('\n'));
    // ---- json_object: any JSON object, llama.cpp's grammar for it (the schema {}). A random
    // model seldom closes a string it opened, so the reply is held to the CLI's under that
    // grammar, cut at max_tokens, rather than waited for ----
    const object = await client.completions.create({ model: modelId, prompt: 'An object:', seed: 3, ...SAMPLING,
                                                     max_tokens: 24, response_format: { type: 'json_object' } });
    const runObject = execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-q', '-p', 'An object:', '-n', '24',
                                          '--seed', '3', '--temp', '1', '--top-k', '0', '--top-p', '1', '--json-schema', '{}'],
                                   { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    check(object.choices[0].text === runObject && /^\s*\{/.test(runObject),
          "json_object: an object begun, the text `lean run --json-schema '{}'` prints",
          JSON.stringify([object.choices[0].text, runObject]));
    const text = await client.chat.completions.create({ model: modelId, messages, seed: 1, ...SAMPLING, max_tokens: 16,
                                                         response_format: { type: 'text' } });
    const free = await client.chat.completions.create({ model: modelId, messages, seed: 1, ...SAMPLING, max_tokens: 16 });
    check(text.choices[0].message.content === free.choices[0].message.content,
          "response_format text: the reply of a request without one");

    // ---- a completion under the schema: `lean run --json-schema`'s text, streamed or not ----
    const prompt = 'A person:';
    const whole = await client.completions.create({ model: modelId, prompt, seed: 11, ...SAMPLING,
                                                    response_format: schemaFormat });
    const run = execFileSync(lean, ['run', '-m', model, '--backend', 'cpu', '-q', '-p', prompt, '-n', '300', '--seed', '11',
                                    '--temp', '1', '--top-k', '0', '--top-p', '1', '--json-schema', JSON.stringify(SCHEMA)],
                             { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    check(whole.choices[0].text === run && whole.choices[0].finish_reason === 'stop',
          'completions under a schema: the text `lean run --json-schema` prints', JSON.stringify([whole.choices[0].text, run]));
    let streamed = '';
    for await (const c of await client.completions.create({ model: modelId, prompt, seed: 11, ...SAMPLING, stream: true,
                                                              response_format: schemaFormat }))
        streamed += c.choices[0]?.text ?? '';
    check(streamed === whole.choices[0].text, 'completions under a schema, streamed: the same text',
          JSON.stringify([streamed, whole.choices[0].text]));

    // ---- refused: OpenAI-style 400s naming response_format ----
    const refused = async (what, format, pattern) => {
        try {
            await client.chat.completions.create({ model: modelId, messages, max_tokens: 4, response_format: format });
            check(false, what, 'no error');
        } catch (e) {
            check(e instanceof OpenAI.APIError && e.status === 400 && e.param === 'response_format' &&
                  pattern.test(e.error?.message ?? ''), what, `${e.status} ${e.param} ${e.message}`);
        }
    };
    await refused('response_format type xml: 400', { type: 'xml' }, /'text', 'json_object' or 'json_schema'/);
    await refused('response_format a string: 400', 'json', /must be an object/);
    await refused('json_schema without a schema: 400', { type: 'json_schema', json_schema: { name: 'x' } },
                  /json_schema.*schema/);
    await refused('a malformed schema: 400 naming its path', {
        type: 'json_schema', json_schema: { schema: { type: 'object', properties: { age: { type: 5 } } } } },
                  /#\/properties\/age/);
    await refused('a keyword outside the subset: 400 naming it', {
        type: 'json_schema', json_schema: { schema: { type: 'object', properties: { age: { type: 'integer', minimum: 0 } } } } },
                  /minimum/);
    const after = await client.chat.completions.create({ model: modelId, messages, seed: 1, ...SAMPLING,
                                                          response_format: schemaFormat });
    check(after.choices[0].message.content === texts[0], 'after the refusals: the same reply under the schema');
}
