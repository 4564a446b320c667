// The demo page: loads the model served under ./model/ (or ?model=URL),
// shows progress and model facts, streams generations with live TTFT and
// tokens/s, and the live routing/state view (live.js) as it generates. A vision model (info().vision) takes an image: chosen, dropped
// or pasted, shown as a preview and sent before the prompt.
//
// Test mode (?test=1, used by the browser E2E test): runs one greedy
// generation of ?prompt= (default "Hello, tessera!") for ?max= tokens,
// prints "RESULT <json>" to the console and POSTs the JSON (ids, text,
// stats, info, cache use) to ?report= (a same-origin path). With
// ?phases=N it then reloads itself as phase 2…N, which must load the model
// from the model store (OPFS). With ?vision=URL&image=URL it also loads the vision
// model at ?vision on the CPU-only bundle and on ?gpuwasm (WebGPU),
// generates greedily with the image and the prompt on both, and reports the
// ids with the image's RGBA (base64) as the engine received it; ?decode=
// URL,URL… adds the RGBA the browser decodes for more images. ?gguf=URL,…
// loads GGUF files (and ?ggufbad= broken ones) and reports their ids.
import { Tessera } from './tessera.js';
import { drawLive, inked } from './live.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const testMode = params.get('test') === '1';
// The service worker (sw.js) keeps the page, its scripts and the engine in
// Cache Storage, so the page works offline after the first visit (the model
// is cached by the engine itself). Resolves to whether it is active.
const offlineShell = ('serviceWorker' in navigator)
  ? navigator.serviceWorker.register('sw.js').then(() => navigator.serviceWorker.ready).then(() => true, (e) => {
    console.warn('tessera: no offline support (service worker: ' + (e && e.message || e) + ')');
    return false;
  })
  : Promise.resolve(false);
let engine = null;
let aborter = null;
let image = null; // the Blob sent with the prompt, if any
let previewURL = null;

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
    ['images', visionFact(info)],
    ['backend', info.backend],
    ['CPU kernels', info.cpuKernels],
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

function visionFact(info) {
  const t = info.imageTokens;
  if (!info.vision) return 'no (text-only model)';
  if (!t) return 'yes';
  return `yes: ${t.sample} tokens for a ${t.sampleWidth}×${t.sampleHeight} image, at most ${t.max} (patch ${t.patchSize} px)`;
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

// kept resolves to the engine bundle the service worker keeps for offline
// visits ('' when it keeps none): keepEngineOffline's promise.
let kept = Promise.resolve('');

// keepEngineOffline has the service worker store the engine bundle this
// page runs (info.gpuRunner: tessera.wasm, else tessera-cpu.wasm), so the
// next visit works offline: the worker's install leaves the bundles out (a
// visit downloads only the one its backend needs), and the first visit's
// engine fetched its bundle before the worker controlled the page. The
// fetch goes through the worker, which stores it; the browser's HTTP cache
// answers it (a revalidation, not a second download).
async function keepEngineOffline(info) {
  if (!(await offlineShell)) return '';
  const sw = navigator.serviceWorker;
  if (!sw.controller) {
    await new Promise((ok) => {
      sw.addEventListener('controllerchange', ok, { once: true });
      setTimeout(ok, 10000);
    });
  }
  if (!sw.controller) return '';
  const name = info.gpuRunner ? 'tessera.wasm' : 'tessera-cpu.wasm';
  try {
    const r = await fetch(name);
    if (!r.ok) return '';
    await r.arrayBuffer();
    return name;
  } catch (e) {
    console.warn(`tessera: ${name} is not kept for offline use: ${e.message}`);
    return '';
  }
}

async function load() {
  const modelUrl = params.get('model') || new URL('model/', location.href).href;
  if (!navigator.gpu) {
    showNotice('<b>No WebGPU in this browser.</b> The model runs on the CPU (WebAssembly), which is slower but works everywhere.');
  }
  const backend = params.get('backend') || 'auto';
  // A model named by ?model= is checked before its download (Tessera.check:
  // its headers only): the page says what it will download and the decode
  // speed to expect on this CPU, and stops, saying why, where it cannot load.
  if (params.get('model') && !testMode) {
    $('load-label').textContent = 'Checking the model…';
    const c = await Tessera.check(modelUrl, { backend });
    const line = $('load-check');
    line.textContent = `${c.architecture}: ${fmtBytes(c.download.bytes)} to download` +
      (c.download.stored ? ` (${fmtBytes(c.download.stored)} already stored)` : '') +
      ` · ${fmtBytes(c.memoryBytes)} in memory · about ${c.cpu.decodeTokPerSec.toFixed(0)} tok/s to expect on this CPU` +
      (c.backend === 'gpu' ? ' (it runs on the GPU here)' : '') + [''].concat(c.warnings).join(' · ');
    line.hidden = false;
    if (!c.ok) throw new Error(c.problems.join('; '));
  }
  const t0 = performance.now();
  engine = await Tessera.load(modelUrl, { onProgress, backend });
  const info = await engine.info();
  const c = engine.loadStats || {};
  $('load-label').textContent = `Ready in ${((performance.now() - t0) / 1000).toFixed(2)} s` +
    (c.hits && !c.misses ? ' (from the cache' + (c.offline ? ', offline)' : ')') : '');
  $('load-progress').value = $('load-progress').max;
  // the downloaded files were committed to the store as the load ended
  if (c.misses && !c.cacheSkipped && c.cacheWriteMs > 0) $('load-label').textContent += ' · saved for offline use';
  showFacts(info);
  gpuNotice(info);
  kept = keepEngineOffline(info);
  // the demo works offline after the first visit, images included: the
  // vision tower's part of the weights is fetched now, after the load, not
  // on the first image
  if (info.vision) {
    engine.keepOffline().catch((e) => {
      console.warn(`tessera: the vision tower is not kept for offline use: ${e.message}`);
    });
  }
  return info;
}

// setImage shows blob (an image File/Blob) as the image of the next
// generation, or clears it (null).
function setImage(blob) {
  if (previewURL) URL.revokeObjectURL(previewURL);
  previewURL = null;
  image = null;
  const img = $('preview');
  const hint = $('drop-hint');
  if (!blob) {
    img.hidden = true;
    img.removeAttribute('src');
    $('image-clear').hidden = true;
    $('image').value = '';
    hint.textContent = hint.dataset.idle || '';
    return;
  }
  if (blob.type && !blob.type.startsWith('image/')) {
    hint.textContent = `${blob.name || 'That file'} is not an image (${blob.type}).`;
    return;
  }
  image = blob;
  previewURL = URL.createObjectURL(blob);
  img.onload = () => {
    hint.textContent = `${blob.name || 'pasted image'} · ${img.naturalWidth}×${img.naturalHeight} · ${fmtBytes(blob.size)}`;
  };
  img.onerror = () => {
    hint.textContent = `${blob.name || 'This image'} cannot be shown by this browser; it will likely fail to decode.`;
  };
  img.src = previewURL;
  img.hidden = false;
  $('image-clear').hidden = false;
}

// wireImage enables the image input (choose, drop, paste) for a vision
// model; for a text-only model it says why it is off.
function wireImage(info) {
  const drop = $('drop');
  const hint = $('drop-hint');
  if (!info.vision) {
    hint.textContent = 'This model is text-only (no vision tower): image input is off.';
    return;
  }
  const t = info.imageTokens;
  hint.dataset.idle = 'Drop, paste or choose an image; it goes before the prompt' +
    (t ? ` (${t.sample} tokens for ${t.sampleWidth}×${t.sampleHeight}).` : '.');
  hint.textContent = hint.dataset.idle;
  drop.classList.remove('disabled');
  drop.removeAttribute('aria-disabled');
  const input = $('image');
  input.disabled = false;
  input.addEventListener('change', () => setImage(input.files[0] || null));
  $('image-clear').addEventListener('click', () => setImage(null));
  const firstImage = (items) => {
    for (const it of items || []) {
      const f = it.kind === 'file' ? it.getAsFile() : it;
      if (f && f.type && f.type.startsWith('image/')) return f;
    }
    return null;
  };
  drop.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (ev) => {
    ev.preventDefault();
    drop.classList.remove('over');
    const f = firstImage(ev.dataTransfer.files);
    if (f) setImage(f);
    else hint.textContent = 'Drop an image file (PNG, JPEG, WebP, GIF…).';
  });
  document.addEventListener('paste', (ev) => {
    const f = firstImage(ev.clipboardData && ev.clipboardData.items);
    if (f) {
      ev.preventDefault();
      setImage(f);
    }
  });
}

// liveView draws the latest live snapshot once per animation frame.
let liveSnap = null;
let liveFrame = 0;
let liveDrawn = null;
function onLive(s) {
  liveSnap = s;
  if (!liveFrame) {
    liveFrame = requestAnimationFrame(() => {
      liveFrame = 0;
      liveDrawn = drawLive($('live-heat'), $('live-norms'), $('live-caption'), liveSnap);
    });
  }
}

// liveReport (test mode) summarises the last snapshot and what was drawn.
function liveReport() {
  const s = liveSnap;
  if (!s) return null;
  liveDrawn = drawLive($('live-heat'), $('live-norms'), $('live-caption'), s);
  const rowSums = s.rows.map((_, r) => s.load.slice(r * s.experts, (r + 1) * s.experts).reduce((a, b) => a + b, 0));
  const kdaNorms = (s.last.kdaNorm || []).filter((x) => x !== null);
  return {
    tokens: s.tokens, window: s.window, rows: s.rows, experts: s.experts, topK: s.topK, rowSums, load: s.load,
    target: s.target, bandLo: s.bandLo, bandHi: s.bandHi, backend: s.last.backend, kdaNorms,
    steps: s.steps.length, drawnRows: liveDrawn.rows, drawnKDA: liveDrawn.kdaLayers,
    heatInk: inked($('live-heat')), normsInk: inked($('live-norms')), caption: $('live-caption').textContent,
  };
}

// run generates into the output box and returns {ids, text, stats}.
async function run(prompt, opts) {
  const out = $('output');
  out.textContent = '';
  $('ttft').textContent = $('tps').textContent = '–';
  $('ntok').textContent = '0';
  $('img-tok-wrap').hidden = true;
  const ids = [];
  let text = '';
  const t0 = performance.now();
  let tFirst = 0;
  aborter = new AbortController();
  $('go').disabled = true;
  $('stop').disabled = false;
  try {
    const live = $('live-on').checked ? onLive : undefined;
    for await (const piece of engine.generate(prompt, { ...opts, signal: aborter.signal, onLive: live })) {
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
    if (s.tokens > 1) {
      // on WebGPU, what a decoded token costs the device
      const gpu = s.dispatchesPerToken ? ` (${s.dispatchesPerToken} dispatches, ${s.submitsPerToken} submit per token)` : '';
      $('tps').textContent = `${s.decodeTokPerS.toFixed(1)} tok/s${gpu}`;
    }
    if (s.images && s.images.length) {
      $('img-tok').textContent = s.images.map((im) => `${im.tokens} tok`).join(' + ') + ` (${s.encodeMs.toFixed(0)} ms)`;
      $('img-tok-wrap').hidden = false;
    }
  }
  return { ids, text, stats: s };
}

function wireForm(info) {
  $('prompt').disabled = false;
  $('go').disabled = false;
  wireImage(info);
  $('form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const num = (id) => Number($(id).value);
    try {
      await run($('prompt').value, {
        maxTokens: num('max-tokens'), temperature: num('temperature'), topP: num('top-p'), seed: num('seed'), image,
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
  const st = engine.lastStats || {};
  return { tokens: n, stopped: st.stopped, generated: st.tokens };
}

// storeOrphans counts the files in the model store cacheName's OPFS
// directory that its Cache Storage index does not list (must be 0: a
// failed download leaves no bytes behind).
async function storeOrphans(cacheName) {
  const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle(cacheName, { create: true });
  let files = 0;
  for await (const entry of dir.keys()) void entry, files++;
  const weights = (await (await caches.open(cacheName)).keys()).filter((r) => /\?(sha256|bytes)=/.test(r.url)).length;
  return files - weights;
}

// failureChecks loads each model URL, expecting an error, and counts the
// weight files of that URL left in the model store (must be 0: nothing
// unverified is ever cached) and the store's unindexed files.
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
    out[url] = { error, cachedWeights, orphans: await storeOrphans('tessera-models-v1') };
  }
  return out;
}

// quotaCheck loads the model into an empty cache with 1 KB of storage
// free: it must load, skip caching, and leave no weights in the cache.
async function quotaCheck() {
  const name = 'tessera-quota-test';
  await caches.delete(name);
  const out = {};
  try {
    const e = await Tessera.load(new URL('model/', location.href).href, { cacheName: name, storageFreeForTest: 1000 });
    out.stats = e.loadStats;
    e.dispose();
  } catch (e) {
    out.error = e.message;
  }
  const c = await caches.open(name);
  out.cachedWeights = (await c.keys()).filter((r) => r.url.includes('.safetensors')).length;
  out.orphans = await storeOrphans(name);
  await caches.delete(name);
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
    // plain auto on this adapter: what it chose and why
    const a = await Tessera.load(params.get('model') || new URL('model/', location.href).href,
      { backend: 'auto', wasmUrl: params.get('gpuwasm') || undefined });
    out.autoBackend = (await a.info()).backend;
    a.dispose();
    // auto told to take a software adapter: the GPU runner, with auto's
    // fallback to the CPU when the device is lost
    const e = await Tessera.load(params.get('model') || new URL('model/', location.href).href,
      { backend: 'auto', allowSoftwareAdapter: true, wasmUrl: params.get('gpuwasm') || undefined });
    out.backend = (await e.info()).backend;
    out.ids = [];
    let live = null;
    for await (const p of e.generate(params.get('prompt') || 'Hello, tessera!', { maxTokens: Number(params.get('max') || '16'), temperature: 0,
      onLive: (s) => { live = s; } })) {
      if (p.id >= 0) out.ids.push(p.id);
    }
    out.stats = e.lastStats;
    // the live view on WebGPU: routing read back from the device
    if (live) out.live = { tokens: live.tokens, backend: live.last.backend, load: live.load, kdaNorms: live.last.kdaNorm };
    // seeded sampling, drawn on the GPU: the same ids as native CPU sampling
    out.sampledIds = [];
    for await (const p of e.generate(params.get('prompt') || 'Hello, tessera!', { maxTokens: Number(params.get('max') || '16'),
      temperature: 0.8, topK: 40, topP: 0.95, seed: 11 })) {
      if (p.id >= 0) out.sampledIds.push(p.id);
    }
    const info = await e.info();
    out.adapter = info.adapter;
    out.weightsDeferred = info.weightsDeferred;
    // a GPU budget of 25 % of the experts: the rest streamed (routing
    // read back, misses uploaded), the same ids
    const s = await Tessera.load(params.get('model') || new URL('model/', location.href).href,
      { backend: 'gpu', gpuMemory: '25%', wasmUrl: params.get('gpuwasm') || undefined });
    out.streamIds = [];
    for await (const p of s.generate(params.get('prompt') || 'Hello, tessera!', { maxTokens: Number(params.get('max') || '16'), temperature: 0 })) {
      if (p.id >= 0) out.streamIds.push(p.id);
    }
    out.streamCache = s.lastStats && s.lastStats.expertCache;
    s.dispose();
    // the GPU device is lost: backend 'auto' goes on on the CPU, same ids
    out.lost = await e._loseGPUForTest();
    out.afterLossIds = [];
    for await (const p of e.generate(params.get('prompt') || 'Hello, tessera!', { maxTokens: Number(params.get('max') || '16'), temperature: 0 })) {
      if (p.id >= 0) out.afterLossIds.push(p.id);
    }
    out.afterLossBackend = (await e.info()).backend;
    e.dispose();
  } catch (e) {
    out.error = e.message;
  }
  return out;
}

function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

async function fetchBlob(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`fetching ${url}: HTTP ${r.status}`);
  return r.blob();
}

// ggufCheck loads each GGUF file of ?gguf= (a .gguf URL, checked against
// its manifest) on the default bundle (CPU) and, with ?gpuwasm, the first
// on WebGPU too, and generates greedily; ?ggufexact= is run with exact
// products on both (Tessera.load's exact); each of ?gpumem= is loaded on
// WebGPU for info().gpuMemory; each of ?ggufbad= must fail to load and
// leave nothing in the cache.
async function ggufCheck() {
  const out = { runs: [], bad: {} };
  const prompt = params.get('prompt') || 'Hello, tessera!';
  const max = Number(params.get('max') || '16');
  const urls = params.get('gguf').split(',').filter(Boolean);
  const runs = urls.map((url) => ({ url, backend: 'auto' }));
  if (params.get('gpuwasm') && urls.length) runs.push({ url: urls[0], backend: 'gpu', wasmUrl: params.get('gpuwasm') });
  const exact = params.get('ggufexact');
  if (exact) {
    runs.push({ url: exact, backend: 'auto', exact: true });
    if (params.get('gpuwasm')) runs.push({ url: exact, backend: 'gpu', wasmUrl: params.get('gpuwasm'), exact: true });
  }
  for (const r of runs) {
    const rep = { url: r.url, want: r.backend, exact: !!r.exact, ids: [] };
    try {
      const e = await Tessera.load(r.url, { backend: r.backend, wasmUrl: r.wasmUrl, exact: !!r.exact });
      const info = await e.info();
      Object.assign(rep, { backend: info.backend, tokenizer: info.tokenizer, layout: info.layout, cache: e.loadStats });
      for await (const p of e.generate(prompt, { maxTokens: max, temperature: 0 })) {
        if (p.id >= 0) rep.ids.push(p.id);
      }
      e.dispose();
    } catch (err) {
      rep.error = err.message;
    }
    out.runs.push(rep);
  }
  // ?gpumem=: each file loaded on WebGPU (?gpuwasm) for its
  // info().gpuMemory alone
  out.gpuMemory = {};
  for (const url of (params.get('gpumem') || '').split(',').filter(Boolean)) {
    try {
      const e = await Tessera.load(url, { backend: 'gpu', wasmUrl: params.get('gpuwasm') || undefined });
      const info = await e.info();
      out.gpuMemory[url] = { backend: info.backend, gpuMemory: info.gpuMemory };
      e.dispose();
    } catch (err) {
      out.gpuMemory[url] = { error: err.message };
    }
  }
  const c = await caches.open('tessera-models-v1');
  for (const url of (params.get('ggufbad') || '').split(',').filter(Boolean)) {
    let error = null;
    try {
      const e = await Tessera.load(url);
      e.dispose();
    } catch (err) {
      error = err.message;
    }
    const abs = new URL(url, location.href).href;
    out.bad[url] = { error, cached: (await c.keys()).filter((q) => q.url.startsWith(abs + '?')).length, orphans: await storeOrphans('tessera-models-v1') };
  }
  return out;
}

// visionCheck generates with ?image before the prompt on the vision model
// at ?vision: on the CPU-only bundle with backend auto, then on ?gpuwasm
// with backend gpu (WebGPU). It reports ids, stats and the image's RGBA as decoded here.
// lazyVisionCheck runs a text-only generation on the vision model in a
// cache of its own, then one with an image, and reports the cache's keys
// after each: the vision tower's part of the weights is fetched (and kept)
// only for the image.
async function lazyVisionCheck(blob, prompt, max) {
  const name = 'tessera-lazy-vision-test';
  await caches.delete(name);
  const keys = async () => (await (await caches.open(name)).keys()).map((r) => r.url);
  const out = { ids: [] };
  try {
    const e = await Tessera.load(params.get('vision'), { cacheName: name });
    for await (const p of e.generate(prompt, { maxTokens: max, temperature: 0 })) {
      if (p.id >= 0) out.ids.push(p.id);
    }
    out.loadStats = await e.stored();
    out.keysTextOnly = await keys();
    for await (const p of e.generate(prompt, { image: blob, maxTokens: 1, temperature: 0 })) void p;
    out.keysAfterImage = await keys();
    e.dispose();
    // a server that ignores range requests sends the whole file: every
    // part is checked and cached from it
    if (params.get('visionnorange')) {
      await caches.delete(name);
      const w = await Tessera.load(params.get('visionnorange'), { cacheName: name });
      for await (const p of w.generate(prompt, { maxTokens: 1, temperature: 0 })) void p;
      out.noRange = { loadStats: await w.stored(), keys: await keys() };
      w.dispose();
    }
    // keepOffline fetches the part not read yet (the vision tower's)
    await caches.delete(name);
    const k = await Tessera.load(params.get('vision'), { cacheName: name });
    out.keep = { first: await k.keepOffline(), again: await k.keepOffline(), keys: await keys() };
    k.dispose();
  } catch (err) {
    out.error = err.message;
  }
  await caches.delete(name);
  return out;
}

async function visionCheck() {
  const out = {};
  const prompt = params.get('vprompt') || 'Describe the image.';
  const max = Number(params.get('max') || '16');
  try {
    const blob = await fetchBlob(params.get('image'));
    out.lazy = await lazyVisionCheck(blob, prompt, max);
    for (const [name, wasmUrl] of [['cpu', undefined], ['gpu', params.get('gpuwasm') || undefined]]) {
      const r = out[name] = {};
      try {
        const e = await Tessera.load(params.get('vision'), { backend: name === 'gpu' ? 'gpu' : 'auto', wasmUrl });
        const info = await e.info();
        Object.assign(r, { backend: info.backend, vision: info.vision, imageTokens: info.imageTokens, ids: [] });
        for await (const p of e.generate(prompt, { image: blob, maxTokens: max, temperature: 0, hashImages: true })) {
          if (p.id >= 0) r.ids.push(p.id);
        }
        r.stats = e.lastStats;
        if (!out.pixels) {
          const px = await e.imagePixels(blob);
          out.pixels = { width: px.width, height: px.height, sha256: px.sha256, rgba: base64(px.rgba) };
          out.decoded = {};
          for (const url of (params.get('decode') || '').split(',').filter(Boolean)) {
            try {
              const d = await e.imagePixels(await fetchBlob(url));
              out.decoded[url] = { width: d.width, height: d.height, rgba: base64(d.rgba) };
            } catch (err) {
              out.decoded[url] = { error: err.message };
            }
          }
          // Bad input is a clear error, not a crash.
          try {
            for await (const p of e.generate('x', { image: new Blob(['not an image'], { type: 'image/png' }), maxTokens: 1 })) void p;
          } catch (err) {
            out.badImage = err.message;
          }
        }
        e.dispose();
      } catch (err) {
        r.error = err.message;
      }
    }
  } catch (err) {
    out.error = err.message;
  }
  return out;
}

// checkCheck runs Tessera.check on each model of ?check= (in a cache of
// its own, so nothing is stored beforehand): its figures, the bytes it
// fetched and the cache keys it left; then on the models of ?checkbad=,
// which must reject; then on the first model with a tiny storage quota
// (storageFreeForTest) at a context of ?checkctx=, and with a bad context.
async function checkCheck() {
  const name = 'tessera-check-test';
  const keys = async () => (await (await caches.open(name)).keys()).map((r) => r.url);
  const out = { runs: {}, bad: {} };
  const urls = params.get('check').split(',').filter(Boolean);
  for (const url of urls) {
    await caches.delete(name);
    try {
      const r = await Tessera.check(url, { cacheName: name, probeMs: 20 });
      out.runs[url] = { ...r, keys: await keys() };
    } catch (err) {
      out.runs[url] = { error: err.message };
    }
  }
  for (const url of (params.get('checkbad') || '').split(',').filter(Boolean)) {
    try {
      await Tessera.check(url, { cacheName: name, probeMs: 5 });
      out.bad[url] = 'resolved';
    } catch (err) {
      out.bad[url] = err.message;
    }
  }
  try {
    const r = await Tessera.check(urls[0], { cacheName: name, probeMs: 5, storageFreeForTest: 1000, context: Number(params.get('checkctx') || '8192') });
    out.tight = { fitsStorage: r.download.fitsStorage, warnings: r.warnings, context: r.context, memoryBytes: r.memoryBytes, ok: r.ok };
  } catch (err) {
    out.tight = { error: err.message };
  }
  try {
    await Tessera.check(urls[0], { cacheName: name, context: 0 });
    out.badContext = 'resolved';
  } catch (err) {
    out.badContext = err.message;
  }
  await caches.delete(name);
  return out;
}

// sharedCheck runs the page's model as one engine shared by several
// Tessera instances (the shared option), in a store of its own: the first
// load downloads it (written to the store through the shared worker's
// writable streams), the second joins it; both generate at once (their
// requests run in turn); a generation aborted while it waits for its turn
// ends at once; a page (another tab) that joins, starts an endless
// generation and closes is dropped, and the next request is served;
// the engine is freed with its last page, and a new load reads it again
// from the store.
async function sharedCheck() {
  const name = 'tessera-shared-test';
  await caches.delete(name);
  const url = params.get('model') || new URL('model/', location.href).href;
  const opts = { shared: true, cacheName: name, backend: 'cpu' };
  const prompt = params.get('prompt') || 'Hello, tessera!';
  const max = Number(params.get('max') || '16');
  const greedy = async (e, n = max) => {
    const ids = [];
    for await (const p of e.generate(prompt, { maxTokens: n, temperature: 0 })) if (p.id >= 0) ids.push(p.id);
    return ids;
  };
  const within = (p, ms, what) => Promise.race([p, new Promise((_, no) => setTimeout(() => no(new Error(`${what}: nothing after ${ms} ms`)), ms))]);
  const stats = (s) => ({ bytesDownloaded: s.bytesDownloaded, hits: s.hits, misses: s.misses, joined: !!s.joined, cacheSkipped: s.cacheSkipped, storeRead: s.storeRead });
  const out = {};
  try {
    // b asks to load once a's load has begun: it waits to join, seeing a's
    // progress, and ends with its last event
    const seen = { a: [], b: [] };
    let begun0;
    const loading = new Promise((r) => { begun0 = r; });
    const pa = Tessera.load(url, { ...opts, onProgress: (p) => { seen.a.push(p); begun0(); } });
    await Promise.race([loading, pa]);
    const b = await Tessera.load(url, { ...opts, onProgress: (p) => seen.b.push(p) });
    const a = await pa;
    out.progress = { a: seen.a.length, b: seen.b.length, aLast: seen.a.at(-1), bLast: seen.b.at(-1) };
    out.first = stats(a.loadStats);
    out.second = stats(b.loadStats);
    out.pages = (await b.info()).shared;
    [out.idsA, out.idsB] = await Promise.all([greedy(a), greedy(b)]);

    // a's generation waits for b's long one and is aborted meanwhile
    // (asked for once b's has begun: requests from two ports have no
    // order between them)
    let begun;
    const running = new Promise((r) => { begun = r; });
    const long = (async () => {
      const ids = [];
      for await (const p of b.generate(prompt, { maxTokens: 200, temperature: 0 })) if (p.id >= 0) { ids.push(p.id); begun(); }
      return ids;
    })();
    await running;
    const ac = new AbortController();
    const it = a.generate(prompt, { maxTokens: 100000, temperature: 0, signal: ac.signal });
    const first = it.next(); // the request goes out, and waits its turn
    const t0 = performance.now();
    ac.abort();
    const r = await first;
    out.waitAbort = { done: r.done, ms: performance.now() - t0, stats: a.lastStats };
    out.longTokens = (await long).length;

    // a chat completion through the shared engine
    const chat = await a.chat.completions.create({ messages: [{ role: 'user', content: prompt }], max_tokens: 4, temperature: 0 });
    out.chat = { content: chat.choices[0].message.content, tokens: chat.usage.completion_tokens };

    // a page (another tab) that closes mid-generation
    const started = new Promise((ok, no) => {
      addEventListener('message', function on(ev) {
        if (ev.data && ev.data.sharedChild === 'generating') { removeEventListener('message', on); ok(); }
        if (ev.data && ev.data.sharedChild === 'error') { removeEventListener('message', on); no(new Error(ev.data.error)); }
      });
    });
    const tab = window.open(location.pathname + '?sharedchild=1' + (params.get('model') ? '&model=' + encodeURIComponent(params.get('model')) : ''));
    if (!tab) throw new Error('window.open gave no tab (popups blocked?)');
    await within(started, 120000, 'the other tab\'s generation');
    out.pagesWithChild = (await b.info()).shared;
    tab.close();
    const t1 = performance.now();
    out.idsAfterChild = await within(greedy(b), 60000, 'a generation after the other tab had closed');
    out.afterChildMs = performance.now() - t1;
    out.pagesAfterChild = (await b.info()).shared;

    a.dispose();
    // a's detach and b's request come by different ports: wait for the count
    for (let i = 0; i < 50; i++) {
      out.pagesAfterDispose = (await b.info()).shared;
      if (out.pagesAfterDispose.pages === 1) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    b.dispose();
    // the engine is freed once b's detach is in: c, by a port of its own, must find it gone
    await new Promise((r) => setTimeout(r, 200));
    const c = await Tessera.load(url, opts);
    out.third = stats(c.loadStats);
    out.idsC = await greedy(c);
    c.dispose();
  } catch (e) {
    out.error = e.message;
  }
  await caches.delete(name);
  return out;
}

// sharedChild is the other tab of sharedCheck: it joins the shared engine
// and generates until it is closed.
async function sharedChild() {
  try {
    const url = params.get('model') || new URL('model/', location.href).href;
    const e = await Tessera.load(url, { shared: true, cacheName: 'tessera-shared-test', backend: 'cpu' });
    let told = false;
    for await (const p of e.generate('endless', { maxTokens: 100000, temperature: 1, seed: 3 })) {
      if (!told && p.id >= 0) { told = true; window.opener.postMessage({ sharedChild: 'generating' }, location.origin); }
    }
  } catch (err) {
    if (window.opener) window.opener.postMessage({ sharedChild: 'error', error: err.message }, location.origin);
  }
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
    result.live = liveReport();
    // the next phase reloads from the cache (offline)
    result.stored = await engine.stored();
    if (params.get('abort') === '1' && phase === 1) result.abort = await abortCheck();
    if (params.get('gpu') === '1' && phase === 1) result.gpu = await gpuCheck();
    if (params.get('vision') && phase === 1) result.vision = await visionCheck();
    if (params.get('gguf') && phase === 1) result.gguf = await ggufCheck();
    if (params.get('check') && phase === 1) result.check = await checkCheck();
    if (params.get('shared') === '1' && phase === 1) result.shared = await sharedCheck();
    if (params.has('conformance') && phase === 1) result.conformance = await conformanceCheck();
    if (params.get('failures') && phase === 1) result.failures = await failureChecks(params.get('failures').split(','));
    if (params.get('quota') === '1' && phase === 1) result.quota = await quotaCheck();
    result.shell = { active: await offlineShell, controlled: Boolean(navigator.serviceWorker && navigator.serviceWorker.controller), kept: await kept };
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

if (params.get('sharedchild') === '1') {
  sharedChild();
} else if (testMode) {
  testRun();
} else {
  load().then((info) => wireForm(info), (e) => {
    $('load-label').textContent = 'Could not load the model';
    const err = $('load-error');
    err.textContent = e.message;
    err.hidden = false;
  });
}
