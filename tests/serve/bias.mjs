// bias.mjs — `lean serve`'s logit_bias through the official OpenAI client. Called by run.mjs
// with a running server (8 slots, the CPU kernels):
//   - -100 bans: 20 seeded one-token replies (top_k 2) without logit_bias draw only the two
//     likeliest first tokens; with both banned, sent at once beside unbiased requests (the
//     server's batched step: slots with a mask beside slots without), none of the 20 is either;
//   - 100 selects: a reply of 6 tokens with one id at 100 is that token 6 times, seeded and hot;
//   - 0 changes nothing: the reply of the same request without logit_bias;
//   - values between are added to the logits: -8 on the likeliest first token makes it rarer in
//     the 20 seeded replies (completions) and -60 on both leaves neither (chat, beside a ban
//     through -100 on another id); +60 on one token makes greedy replies that token; a biased
//     request's reply is the same when sent again (seeded);
//   - refused, 400 naming logit_bias: not an object, a key that is not an id, an id past the
//     vocabulary, a value past [-100, 100] or not a number, one id given twice ("7", "007").
import OpenAI from 'openai';

const post = (body) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
async function json(url, path, body) {
    return (await fetch(url + path, post(body))).json();
}

export async function logitBiasTests({ url, modelId, check }) {
    const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0 });
    const prompt = 'Once upon a time';
    const seeds = Array.from({ length: 20 }, (_, i) => i + 1);
    const one = { model: modelId, prompt, temperature: 1, top_k: 2, top_p: 1, max_tokens: 1 };
    const idOf = async (text) => {
        const t = (await json(url, '/tokenize', { content: text })).tokens;
        return t.length === 1 ? t[0] : -1;
    };

    // ---- -100: banned ids never drawn ----
    const free = await Promise.all(seeds.map((seed) => client.completions.create({ ...one, seed })));
    const firsts = [...new Set(free.map((r) => r.choices[0].text))];
    const banned = await Promise.all(firsts.map(idOf));
    check(firsts.length >= 1 && firsts.length <= 2 && banned.every((id) => id >= 0),
          'logit_bias: the unbiased one-token replies (top_k 2) are one of two tokens', JSON.stringify([firsts, banned]));
    const bias = Object.fromEntries(banned.map((id) => [String(id), -100]));
    const [held] = await Promise.all([
        Promise.all(seeds.map((seed) => client.completions.create({ ...one, seed, logit_bias: bias }))),
        Promise.all(seeds.slice(0, 6).map((seed) => client.completions.create({ ...one, seed, max_tokens: 8 }))),
    ]);
    const texts = held.map((r) => r.choices[0].text);
    check(texts.every((t) => !firsts.includes(t)), 'logit_bias -100: no banned token in 20 seeded replies',
          JSON.stringify([firsts, texts]));
    check(texts.every((t) => t.length > 0), 'logit_bias -100: every reply drew another token',
          JSON.stringify(texts));

    // ---- 100: only that id ----
    const word = ' castle', forced = await idOf(word);
    check(forced >= 0, `'${word}' is one token`, String(forced));
    for (const seed of [1, 2, 3]) {
        const r = await client.completions.create({ model: modelId, prompt, seed, temperature: 1.5, top_k: 0, top_p: 1,
                                                    max_tokens: 6, logit_bias: { [forced]: 100 } });
        check(r.choices[0].text === word.repeat(6) && r.choices[0].finish_reason === 'length',
              `logit_bias 100 (seed ${seed}): the reply is the forced token 6 times`, JSON.stringify(r.choices[0].text));
    }
    const chat = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'Hi' }],
                                                        seed: 4, max_tokens: 3, logit_bias: { [forced]: 100 } });
    const content = chat.choices[0].message.content;
    check((content.match(/castle/g) || []).length === 3 && content.replace(/ ?castle/g, '') === '',
          'logit_bias 100 in a chat reply: the forced token 3 times', JSON.stringify(content));

    // ---- 0: no change ----
    const plain = await client.completions.create({ ...one, seed: 9, max_tokens: 8 });
    const zero = await client.completions.create({ ...one, seed: 9, max_tokens: 8, logit_bias: { [forced]: 0 } });
    check(zero.choices[0].text === plain.choices[0].text, 'logit_bias 0: the reply without it',
          JSON.stringify([zero.choices[0].text, plain.choices[0].text]));

    // ---- values between: added to the logits ----
    const count = (rs, t) => rs.filter((r) => r.choices[0].text === t).length;
    const top = firsts.reduce((a, b) => (count(free, a) >= count(free, b) ? a : b));
    const topId = await idOf(top);
    const lowered = await Promise.all(seeds.map((seed) =>
        client.completions.create({ ...one, seed, logit_bias: { [topId]: -8 } })));
    check(count(lowered, top) < count(free, top), 'logit_bias -8: the likeliest first token is drawn less often',
          JSON.stringify([top, count(free, top), count(lowered, top)]));
    const again = await client.completions.create({ ...one, seed: 3, max_tokens: 6, logit_bias: { [forced]: 2.5 } });
    const again2 = await client.completions.create({ ...one, seed: 3, max_tokens: 6, logit_bias: { [forced]: 2.5 } });
    check(again.choices[0].text === again2.choices[0].text, 'logit_bias 2.5: the same seeded reply twice',
          JSON.stringify([again.choices[0].text, again2.choices[0].text]));
    const greedy = await client.completions.create({ model: modelId, prompt, temperature: 0, max_tokens: 4,
                                                     logit_bias: { [forced]: 60 } });
    check(greedy.choices[0].text === word.repeat(4), 'logit_bias +60, greedy: the biased token every time',
          JSON.stringify(greedy.choices[0].text));
    const chatOne = { model: modelId, messages: [{ role: 'user', content: 'Hi' }], temperature: 1, top_k: 2, top_p: 1,
                      max_tokens: 1 };
    const chatFree = await Promise.all(seeds.slice(0, 8).map((seed) => client.chat.completions.create({ ...chatOne, seed })));
    const chatFirsts = [...new Set(chatFree.map((r) => r.choices[0].message.content))];
    const chatIds = await Promise.all(chatFirsts.map(idOf));
    const lb = Object.fromEntries(chatIds.filter((id) => id >= 0).map((id) => [String(id), -60]));
    lb[forced] = -100; // a ban beside the additive values: the mask and the bias together
    const chatHeld = await Promise.all(seeds.slice(0, 8).map((seed) =>
        client.chat.completions.create({ ...chatOne, seed, logit_bias: lb })));
    const chatTexts = chatHeld.map((r) => r.choices[0].message.content);
    check(chatIds.every((id) => id >= 0) && chatTexts.every((t) => !chatFirsts.includes(t) && t !== word),
          'logit_bias -60 in chat: neither of the likeliest first tokens (nor the banned one)',
          JSON.stringify([chatFirsts, chatTexts]));

    // ---- refused: 400 naming logit_bias ----
    const refused = async (what, lb, pattern) => {
        try {
            await client.completions.create({ ...one, logit_bias: lb });
            check(false, what, 'no error');
        } catch (e) {
            check(e instanceof OpenAI.APIError && e.status === 400 && e.param === 'logit_bias' &&
                  pattern.test(e.error?.message ?? ''), what, `${e.status} ${e.param} ${e.message}`);
        }
    };
    await refused('logit_bias an array: 400', [1, 2], /must be an object/);
    await refused('logit_bias a key that is not an id: 400', { abc: -100 }, /'abc' is not a token id/);
    await refused('logit_bias a negative key: 400', { '-3': -100 }, /'-3' is not a token id/);
    await refused('logit_bias a key with a leading tab: 400', { '\t5': -100 }, /'\t5' is not a token id/);
    await refused('logit_bias an id past the vocabulary: 400', { 99999999: -100 }, /'99999999' is not a token id .*\[0, \d+\)/);
    await refused('logit_bias a value over 100: 400', { [forced]: 101 }, /must be a number in \[-100, 100\]/);
    await refused('logit_bias a value that is not a number: 400', { [forced]: 'ban' }, /must be a number in \[-100, 100\]/);
    await refused('logit_bias one id twice: 400', { [String(forced)]: 5, ['00' + forced]: -5 }, /gives token id \d+ twice/);
}
