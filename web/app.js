// The demo page: loads the model served under ./model/ (or ?model=URL),
// shows progress and model facts, streams generations with live TTFT and
// tokens/s.
//
// Test mode (?test=1, used by the browser E2E test): runs one greedy
// generation of ?prompt= (default "Hello, tessera!") for ?max= tokens,
// prints "RESULT <json>" to the console and POSTs the JSON (ids, text,
// stats, info, cache use) to ?report= (a same-origin path). With
// ?phases=N it then reloads itself as phase 2…N, which must load the model
// from Cache Storage.
import { Tessera } from './tessera.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const testMode = params.get('test') === '1';
let engine = null;
let aborter = null;

function fmtBytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}
function fmtCount(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(2) + ' B';
  if (n >= 1e6) return (n / 1e6).toFixed(2) + ' M';
  if (n >= 1e3) return (n / 1e3).toFixed(1) + ' K';
  return String(n);
}

function showNotice(html) {
  const n = $('notice');
  n.innerHTML = html;
  n.hidden = false;
}

function showFacts(info) {
  const a = info.adapter || {};
  const adapter = a.available
    ? [a.vendor, a.architecture, a.description].filter(Boolean).join(' ') + (a.fallback ? ' (software fallback)' : '')
    : 'none';
  const rows = [
    ['model', info.summary],
    ['layout', info.layout],
    ['parameters', `${fmtCount(info.paramsTotal)} total, ${fmtCount(info.paramsActive)} active per token`],
    ['experts', info.experts ? `${info.experts}, top-${info.expertsActive}` : 'dense'],
    ['weights', fmtBytes(info.weightBytes)],
    ['state', `${fmtBytes(info.stateBytes)} KDA state + ${info.cacheBytesPerTok} B/token MLA cache`],
    ['context', `${info.context.toLocaleString()} tokens`],
    ['tokenizer', info.tokenizer],
    ['backend', info.backend],
    ['WebGPU adapter', adapter],
  ];
  const dl = $('facts');
  dl.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    dl.append(dt, dd);
  }
}

function gpuNotice(info) {
  const a = info.adapter || {};
  const name = escapeHTML([a.vendor, a.architecture].filter(Boolean).join(' ') || 'adapter');
  const why = info.backend.split('; ').slice(1).join('; '); // "cpu (wasm); <why the GPU was not used>"
  if (info.backend.startsWith('gpu')) {
    showNotice(`<b>Running on WebGPU</b> (${name}${a.fallback ? ', a software adapter: expect it to be slow' : ''}).`);
  } else if (why) {
    showNotice(`<b>Running on the CPU (WebAssembly)</b>: ${escapeHTML(why)}`);
  } else if (!a.available) {
    showNotice(`<b>No WebGPU here.</b> ${escapeHTML(a.reason || '')} The model runs on the CPU (WebAssembly), which is slower but works everywhere.`);
  } else {
    showNotice(`<b>WebGPU found</b> (${name}); the model runs on the CPU (WebAssembly) because the page asked for it ` +
      '(open it with <code>?backend=auto</code> or <code>?backend=gpu</code> to use WebGPU).');
  }
}

function escapeHTML(s) {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

function onProgress(p) {
  const bar = $('load-progress');
  bar.max = Math.max(p.total, 1);
  bar.value = p.loaded;
  $('load-label').textContent = p.fromCache ? `Loading ${p.file} from the cache…` : `Downloading ${p.file}…`;
  $('load-bytes').textContent = `${fmtBytes(p.loaded)} / ${fmtBytes(p.total)}`;
}

async function load() {
  const modelUrl = params.get('model') || new URL('model/', location.href).href;
  if (!navigator.gpu) {
    showNotice('<b>No WebGPU in this browser.</b> The model runs on the CPU (WebAssembly), which is slower but works everywhere.');
  }
  const t0 = performance.now();
  engine = await Tessera.load(modelUrl, { onProgress, backend: params.get('backend') || 'auto' });
  const info = await engine.info();
  const c = engine.loadStats || {};
  $('load-label').textContent = `Ready in ${((performance.now() - t0) / 1000).toFixed(2)} s` +
    (c.hits && !c.misses ? ' (from the cache' + (c.offline ? ', offline)' : ')') : '');
  $('load-progress').value = $('load-progress').max;
  showFacts(info);
  gpuNotice(info);
  return info;
}

// run generates into the output box and returns {ids, text, stats}.
async function run(prompt, opts) {
  const out = $('output');
  out.textContent = '';
  $('ttft').textContent = $('tps').textContent = '–';
  $('ntok').textContent = '0';
  const ids = [];
  let text = '';
  const t0 = performance.now();
  let tFirst = 0;
  aborter = new AbortController();
  $('go').disabled = true;
  $('stop').disabled = false;
  try {
    for await (const piece of engine.generate(prompt, { ...opts, signal: aborter.signal })) {
      const now = performance.now();
      if (piece.id >= 0) {
        if (ids.length === 0) {
          tFirst = now;
          $('ttft').textContent = `${(now - t0).toFixed(0)} ms`;
        }
        ids.push(piece.id);
        $('ntok').textContent = String(ids.length);
        if (ids.length > 1) $('tps').textContent = `${((ids.length - 1) / ((now - tFirst) / 1000)).toFixed(1)} tok/s`;
      }
      text += piece.text;
      out.textContent = text;
    }
  } finally {
    $('go').disabled = false;
    $('stop').disabled = true;
    aborter = null;
  }
  const s = engine.lastStats;
  if (s) {
    $('ttft').textContent = `${s.ttftMs.toFixed(0)} ms`;
    if (s.tokens > 1) $('tps').textContent = `${s.decodeTokPerS.toFixed(1)} tok/s`;
  }
  return { ids, text, stats: s };
}

function wireForm() {
  $('prompt').disabled = false;
  $('go').disabled = false;
  $('form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const num = (id) => Number($(id).value);
    try {
      await run($('prompt').value, {
        maxTokens: num('max-tokens'), temperature: num('temperature'), topP: num('top-p'), seed: num('seed'),
      });
    } catch (e) {
      $('output').textContent += `\n\n[error] ${e.message}`;
    }
  });
  $('stop').addEventListener('click', () => { if (aborter) aborter.abort(); });
}

// abortCheck starts a long sampled generation, aborts it after 3 tokens
// and reports how it ended (the engine must stop within a token or two).
async function abortCheck() {
  const ac = new AbortController();
  let n = 0;
  for await (const piece of engine.generate('abort me', { maxTokens: 100000, temperature: 1, seed: 7, signal: ac.signal })) {
    if (piece.id >= 0 && ++n === 3) ac.abort();
  }
  return { tokens: n, stopped: engine.lastStats && engine.lastStats.stopped };
}

// failureChecks loads each model URL, expecting an error, and counts the
// weight files of that URL left in Cache Storage (must be 0: nothing
// unverified is ever cached).
async function failureChecks(urls) {
  const out = {};
  for (const url of urls) {
    let error = null;
    try {
      const e = await Tessera.load(url);
      e.dispose();
    } catch (e) {
      error = e.message;
    }
    const c = await caches.open('tessera-models-v1');
    const abs = new URL(url, location.href).href;
    const cachedWeights = (await c.keys()).filter((r) => r.url.startsWith(abs) && r.url.includes('.safetensors')).length;
    out[url] = { error, cachedWeights };
  }
  return out;
}

// conformanceCheck runs the WGSL kernel conformance cases on this
// browser's WebGPU (?conformance=N: the first N cases of every op × dtype,
// 0 all) from the bundle at ?gpuwasm.
async function conformanceCheck() {
  try {
    return await Tessera.conformance({ wasmUrl: params.get('gpuwasm') || undefined, perOp: Number(params.get('conformance')) });
  } catch (e) {
    return { error: e.message };
  }
}

// gpuCheck loads the model a second time on the WebGPU backend and runs
// the same greedy generation there.
async function gpuCheck() {
  const out = {};
  try {
    const e = await Tessera.load(params.get('model') || new URL('model/', location.href).href,
      { backend: 'auto', wasmUrl: params.get('gpuwasm') || undefined });
    out.backend = (await e.info()).backend;
    out.ids = [];
    for await (const p of e.generate(params.get('prompt') || 'Hello, tessera!', { maxTokens: Number(params.get('max') || '16'), temperature: 0 })) {
      if (p.id >= 0) out.ids.push(p.id);
    }
    out.stats = e.lastStats;
    out.adapter = (await e.info()).adapter;
    e.dispose();
  } catch (e) {
    out.error = e.message;
  }
  return out;
}

async function testRun() {
  const phase = Number(params.get('phase') || '1');
  const phases = Number(params.get('phases') || '1');
  const result = { ok: false, phase };
  $('prompt').value = params.get('prompt') || 'Hello, tessera!';
  const t0 = performance.now();
  try {
    result.info = await load();
    result.cache = engine.loadStats;
    result.loadMs = performance.now() - t0;
    const r = await run(params.get('prompt') || 'Hello, tessera!', {
      maxTokens: Number(params.get('max') || '16'), temperature: 0,
    });
    Object.assign(result, r, { ok: true });
    if (params.get('abort') === '1' && phase === 1) result.abort = await abortCheck();
    if (params.get('gpu') === '1' && phase === 1) result.gpu = await gpuCheck();
    if (params.has('conformance') && phase === 1) result.conformance = await conformanceCheck();
    if (params.get('failures') && phase === 1) result.failures = await failureChecks(params.get('failures').split(','));
  } catch (e) {
    result.error = String(e && e.message || e);
  }
  const body = JSON.stringify(result);
  console.log('RESULT ' + body);
  const report = params.get('report');
  if (report && report.startsWith('/')) {
    await fetch(report, { method: 'POST', body, headers: { 'content-type': 'application/json' } }).catch(() => {});
  }
  document.body.dataset.testDone = String(phase);
  if (result.ok && phase < phases) {
    const next = new URLSearchParams(params);
    next.set('phase', String(phase + 1));
    location.replace(location.pathname + '?' + next);
  }
}

if (testMode) {
  testRun();
} else {
  load().then(wireForm, (e) => {
    $('load-label').textContent = 'Could not load the model';
    const err = $('load-error');
    err.textContent = e.message;
    err.hidden = false;
  });
}
