// chat.js: the chat page (index.html) over lean.js's public API only (docs/web.md: Lean).
//
// It loads a model (a URL, a picked or dropped file), shows what it runs on, and holds a
// conversation: each turn hands lean.chat the whole history, so lean reuses the KV cache
// for the prefix it already holds (lean.stats.nReused says how much).
// A failed turn is undone (its text goes back into the box); a stopped one is kept.
//
// Contract for the browser tests (tests/browser), kept stable:
//   ?model=URL&backend=auto|gpu|cpu&threads=N  prefill #model-url, #backend, #threads (no auto load);
//   ?jspi=0 loads with { jspi: false } (GPU waits return to JavaScript, as without JSPI)
//   #app[data-state]   empty (no model) | loading | ready | generating
//   #model-url #model-file #backend #threads #load       the loader (#load submits #loader)
//   #progress (<progress>, value/max 0..1) #progress-text  while loading
//   #info-model #info-backend (= lean.info.backend) #info-detail #info-adapter #info-threads #info-wasm #info-jspi #info-fallback
//   #system #greedy #temperature #top-k #top-p #repeat-penalty #seed #max-tokens #logit-bias   (in details#settings)
//   #prompt #send #stop #regenerate #new-chat
//   #messages > li.msg[data-role=user|assistant]; an assistant's li holds .reply (the streamed text)
//     and .stats; li[data-done] once it ended: lean.stats.stop, or "stopped" when Stop ended it
//     (a failed reply is removed, its user message too, and the text put back into #prompt)
//     .stats[data-n-prompt][data-n-reused][data-n-generated][data-prefill-tps][data-decode-tps][data-seed]
//   #status (aria-live) what is going on;  #error (role=alert, hidden when none) #error-text

// lean.js is imported when the first model loads, so that a missing or broken lean.js is an
// error shown in the page, not a page that silently does nothing.
const leanModule = () => import('./lean.js');

const $ = (id) => document.getElementById(id);
const app = $('app');
const ui = {};
for (const id of ['status', 'error', 'error-text', 'error-close', 'loader', 'model-url', 'model-file',
    'backend', 'threads', 'load', 'progress-box', 'progress', 'progress-text', 'info', 'system',
    'greedy', 'temperature', 'top-k', 'top-p', 'repeat-penalty', 'seed', 'max-tokens', 'logit-bias', 'messages',
    'composer', 'prompt', 'send', 'stop', 'regenerate', 'new-chat']) ui[id] = $(id);

const params = new URLSearchParams(location.search);
let lean = null;        // the loaded model
let history = [];       // [{role, content}]: what the next turn sends; alternates user/assistant
let controller = null;  // the AbortController of the reply being generated

// ---- state: which controls work now ----

function setState(state) {
  app.dataset.state = state;
  const busy = state === 'loading' || state === 'generating';
  for (const id of ['model-url', 'model-file', 'backend', 'threads', 'load']) ui[id].disabled = busy;
  ui.prompt.disabled = state === 'empty' || state === 'loading';
  ui.send.disabled = state !== 'ready';
  ui.stop.disabled = state !== 'generating';
  ui['new-chat'].disabled = state !== 'ready';
  ui.regenerate.disabled = state !== 'ready' || history.length === 0;
  ui.messages.setAttribute('aria-busy', String(state === 'generating'));
}

const status = (text) => { ui.status.textContent = text; };

function showError(text) {
  ui['error-text'].textContent = text;
  ui.error.hidden = false;
}
const hideError = () => { ui.error.hidden = true; };
const message = (e) => (e && e.message) || String(e);

// ---- loading ----

function formatBytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  return (n / 1024).toFixed(0) + ' KiB';
}

function onProgress({ phase, loaded, total }) {
  if (total > 0) ui.progress.value = Math.min(loaded / total, 1);
  else ui.progress.removeAttribute('value');   // indeterminate: the size is not known
  ui['progress-text'].textContent = total > 0
    ? `${phase} ${formatBytes(loaded)} of ${formatBytes(total)}` : `${phase} ${formatBytes(loaded)}`;
}

async function load(source, label) {
  if (app.dataset.state === 'loading' || app.dataset.state === 'generating') return;
  hideError();
  setState('loading');
  status(`Loading ${label}…`);
  ui.progress.value = 0;
  ui['progress-text'].textContent = '';
  ui['progress-box'].hidden = false;
  ui.info.hidden = true;
  clearChat();
  // The old model goes first: two sets of weights may not fit where one does.
  const old = lean;
  lean = null;
  if (old) await old.free().catch(() => {});   // it is gone either way; the new load matters
  try {
    const options = { backend: ui.backend.value, onProgress };
    const threads = parseInt(ui.threads.value, 10);
    if (threads > 0) options.threads = threads;
    if (params.get('jspi') === '0') options.jspi = false;   // the path of browsers without JSPI (Safari)
    const { Lean } = await leanModule();
    lean = await Lean.load(source, options);
    showInfo(lean.info, label);
    status(`Ready: ${label} on ${lean.info.backend}.`);
    setState('ready');
    ui.prompt.focus();
  } catch (e) {
    showError(`Could not load ${label}: ${message(e)}`);
    status('No model loaded.');
    setState('empty');
  } finally {
    ui['progress-box'].hidden = true;
  }
}

function formatCount(n) {
  if (!(n > 0)) return '?';
  return n >= 1e9 ? (n / 1e9).toFixed(2) + 'B' : (n / 1e6).toFixed(1) + 'M';
}

let modelLabel = '';   // the loaded model's URL or file name

function showInfo(info, label = modelLabel) {
  modelLabel = label;
  const formats = Object.entries(info.formats || {}).map(([f, n]) => `${f}×${n}`).join(' ');
  const set = (id, text) => { $(id).textContent = text; };
  set('info-model', [info.name || label, info.arch, `${formatCount(info.nParams)} parameters`,
    `context ${info.nCtx}`, formats].filter(Boolean).join(' · '));
  set('info-backend', info.backend);
  set('info-detail', info.detail || '—');
  set('info-adapter', info.adapter || '—');
  set('info-threads', info.threads > 0 ? String(info.threads) : '—');
  set('info-wasm', info.wasm || '—');
  set('info-jspi', info.jspi ? 'yes' : 'no (GPU waits return to JavaScript)');
  const fallback = info.fallback || [];
  set('info-fallback', fallback.length ? fallback.map((f) => `${f.backend}: ${f.reason}`).join('; ') : 'none');
  ui['max-tokens'].max = String(info.nCtx - 1);   // a reply needs one position of the context at least
  ui.info.hidden = false;
}

function labelOf(url) {
  try { return decodeURIComponent(new URL(url, location.href).pathname.split('/').pop()) || url; }
  catch { return url; }
}

// ---- the conversation ----

function addMessage(role, text) {
  const li = document.createElement('li');
  li.className = 'msg';
  li.dataset.role = role;
  const body = document.createElement('div');
  body.className = role === 'user' ? 'text' : 'reply';
  body.textContent = text;
  li.append(body);
  if (role === 'assistant') {
    const stats = document.createElement('div');
    stats.className = 'stats';
    li.append(stats);
  }
  ui.messages.append(li);
  li.scrollIntoView({ block: 'end' });
  return li;
}

// Makes a change to li, keeping the page scrolled to the end if it was there: one who
// scrolled up to read is not pulled down.
function follow(li, change) {
  const atEnd = innerHeight + scrollY >= document.documentElement.scrollHeight - 48;
  change();
  if (atEnd) li.scrollIntoView({ block: 'end' });
}

function clearChat() {
  history = [];
  ui.messages.replaceChildren();
}

// The sampling options of one reply; greedy sends none, so the reply is lean's greedy one (the
// logit bias applies to both: JSON { "id": bias }; text that is not JSON goes to lean.js as it
// is, which rejects it, so the turn fails with lean's message like any other).
function options() {
  const num = (id, fallback) => { const v = parseFloat(ui[id].value); return Number.isFinite(v) ? v : fallback; };
  const o = { maxTokens: Math.max(1, Math.round(num('max-tokens', 512))) };
  if (ui.system.value.trim()) o.system = ui.system.value;
  const bias = ui['logit-bias'].value.trim();
  if (bias) { try { o.logitBias = JSON.parse(bias); } catch { o.logitBias = bias; } }
  if (!ui.greedy.checked) {
    o.temperature = num('temperature', 0.7);
    o.topK = Math.round(num('top-k', 40));
    o.topP = num('top-p', 0.95);
    o.repeatPenalty = num('repeat-penalty', 1.1);
    // A seed is always sent and shown, so any reply can be drawn again.
    o.seed = ui.seed.value === '' ? crypto.getRandomValues(new Uint32Array(1))[0] : Math.round(num('seed', 0));
  }
  return o;
}

function showStats(li, stats, seed) {
  const el = li.querySelector('.stats');
  const tps = (x) => (x > 0 ? x.toFixed(1) : '—');
  el.dataset.nPrompt = stats.nPrompt;
  el.dataset.nReused = stats.nReused;
  el.dataset.prefillTps = stats.prefillTokensPerSecond;
  el.dataset.decodeTps = stats.decodeTokensPerSecond;
  el.dataset.nGenerated = stats.nGenerated;
  let text = `${stats.nPrompt} prompt tokens, ${stats.nReused} reused, ${stats.nGenerated} generated · prefill ${tps(stats.prefillTokensPerSecond)}` +
    ` tok/s · decode ${tps(stats.decodeTokensPerSecond)} tok/s · stop: ${stats.stop}`;
  if (seed !== undefined) { el.dataset.seed = seed; text += ` · seed ${seed}`; }
  el.textContent = text;
}

// Draws the assistant's reply to the history as it stands (which ends with a user message).
async function reply() {
  const li = addMessage('assistant', '');
  const out = li.querySelector('.reply');
  const opts = options();
  controller = new AbortController();
  opts.signal = controller.signal;
  setState('generating');
  status('Generating… (Escape stops)');
  let text = '';
  try {
    for await (const piece of lean.chat(history.slice(), opts)) {
      text += piece;
      follow(li, () => { out.textContent = text; });
    }
    history.push({ role: 'assistant', content: text });
    const stats = lean.stats;
    showInfo(lean.info);   // a GPU lost mid-reply moves 'auto' to the CPU, and info says why
    li.dataset.done = controller.signal.aborted ? 'stopped' : String(stats.stop);
    follow(li, () => showStats(li, stats, opts.seed));
    status(controller.signal.aborted ? 'Stopped.' : 'Ready.');
  } catch (e) {
    if (controller.signal.aborted && e && e.name === 'AbortError') {
      // An abort that rejects instead of ending the stream: the reply so far is kept all the same.
      history.push({ role: 'assistant', content: text });
      li.dataset.done = 'stopped';
      status('Stopped.');
    } else {
      // Undo the turn (lean's session keeps nothing of a failed one): the text goes back into the box.
      li.remove();
      const user = history.pop();
      ui.messages.lastElementChild?.remove();
      if (!ui.prompt.value) ui.prompt.value = user.content;
      showError(`The reply failed: ${message(e)}`);
      status('Ready (the last turn failed).');
    }
  } finally {
    controller = null;
    setState('ready');
  }
}

async function send() {
  const text = ui.prompt.value;
  if (app.dataset.state !== 'ready' || !text.trim()) return;
  hideError();
  ui.prompt.value = '';
  history.push({ role: 'user', content: text });
  addMessage('user', text);
  await reply();
}

async function regenerate() {
  if (app.dataset.state !== 'ready' || history.length === 0) return;
  hideError();
  if (history[history.length - 1].role === 'assistant') {
    history.pop();
    ui.messages.lastElementChild.remove();
  }
  await reply();
}

async function newChat() {
  if (app.dataset.state !== 'ready') return;
  hideError();
  clearChat();
  setState('ready');
  try {
    await lean.resetChat();
    status('New chat.');
  } catch (e) {
    showError(`Could not reset the chat: ${message(e)}`);
  }
  ui.prompt.focus();
}

const stop = () => { if (controller) controller.abort(); };

// ---- wiring ----

ui.loader.addEventListener('submit', (e) => {
  e.preventDefault();
  const url = ui['model-url'].value.trim();
  if (!url) { showError('Give a model URL, pick a file, or drop one on the page.'); return; }
  load(url, labelOf(url));
});
ui['model-file'].addEventListener('change', () => {
  const file = ui['model-file'].files[0];
  if (file) load(file, file.name);
});
ui.composer.addEventListener('submit', (e) => { e.preventDefault(); send(); });
ui.prompt.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && controller) { e.preventDefault(); stop(); } });
ui.stop.addEventListener('click', stop);
ui.regenerate.addEventListener('click', regenerate);
ui['new-chat'].addEventListener('click', newChat);
ui['error-close'].addEventListener('click', hideError);
// Greedy ignores the sampling fields; a browser may restore the box checked on reload.
const syncGreedy = () => {
  for (const id of ['temperature', 'top-k', 'top-p', 'repeat-penalty', 'seed']) ui[id].disabled = ui.greedy.checked;
};
ui.greedy.addEventListener('change', syncGreedy);

// Drag and drop anywhere on the page: a file, or a link to one.
document.addEventListener('dragover', (e) => { e.preventDefault(); app.classList.add('dragging'); });
document.addEventListener('dragleave', (e) => { if (!e.relatedTarget) app.classList.remove('dragging'); });
document.addEventListener('drop', (e) => {
  e.preventDefault();
  app.classList.remove('dragging');
  const file = e.dataTransfer.files[0];
  const url = e.dataTransfer.getData('text/uri-list').split('\n').find((l) => l && !l.startsWith('#'));
  if (app.dataset.state === 'loading' || app.dataset.state === 'generating') status('Busy: drop the model again when this is done.');
  else if (file) load(file, file.name);
  else if (url) { ui['model-url'].value = url.trim(); load(url.trim(), labelOf(url.trim())); }
});

// Whatever slips past the handlers above still reaches the page, never only the console.
addEventListener('unhandledrejection', (e) => showError(message(e.reason)));
addEventListener('error', (e) => showError(e.message));

if (params.has('model')) ui['model-url'].value = params.get('model');
if (['auto', 'gpu', 'cpu'].includes(params.get('backend'))) ui.backend.value = params.get('backend');
if (params.has('threads')) ui.threads.value = params.get('threads');
syncGreedy();
setState('empty');
