// bench.js — one measurement of `make bench-browser`: loads one runtime
// (tessera or wllama) on one path (WebGPU or the wasm CPU path), generates
// `max` greedy tokens from `prompt`, and POSTs what it measured to `report`.
// For tessera, model= and gpuMemory= choose the model URL and the GPU
// memory budget (make bench-browser-memory, bench-browser-experts:
// cmd/tessera/bench_browser_gpu_test.go).
// The Go test (cmd/tessera/bench_browser_test.go) opens this page in a
// fresh headless Chromium profile (phase "cold") and again in the same
// profile (phase "warm"), counts the bytes its server sent, and reads the
// browser's peak memory from /proc.
//
// instances=N loads the runtime N times on the page, as N tabs of an app
// would (shared=1: tessera's instances share one engine, the shared
// option); the first is timed as loadMs and generates, the others' load
// times are moreLoadMs, and each of them generates a few tokens, untimed,
// that must begin the first's.
//
// All times are taken here, on the page, the same way for both runtimes:
//   loadMs  the runtime's load call (engine wasm download + compile, model
//           download or cache read, weight upload), until it resolves
//           (tessera's cache writes may outlive it: the page waits for
//           them after the generation, untimed, as engine.stored();
//           engine.load.cacheWriteMs says by how much they outlived it);
//   ttftMs  the generate call until the first generated token reaches the
//           page (prefill of the whole prompt plus the first sampling);
//   decodeMs first token to last token on the page (decode tok/s =
//           (tokens - 1) / decodeMs).
// Each runtime's own figures are reported too (engine: {...}).

const q = new URLSearchParams(location.search);
const runtime = q.get('runtime');
const backend = q.get('backend');
const prompt = q.get('prompt') || '';
const max = parseInt(q.get('max') || '64', 10);
// bias=ID:-100,...: tokens banned in both runtimes (the Go test sets it
// for a model whose greedy output holds bytes that are not UTF-8 alone)
const banned = (q.get('bias') || '').split(',').filter((x) => x).map((x) => parseInt(x.split(':')[0], 10));
const instances = Math.max(1, parseInt(q.get('instances') || '1', 10));

// loaded tells the harness that every instance is loaded and has
// generated, before any is disposed: it samples the browser's resident
// memory then (the report's loadedRSS: what the loaded engines hold).
const loaded = () => (q.get('report') ? fetch('/__bench/loaded', { method: 'POST' }).catch(() => {}) : null);
const out = document.getElementById('out');

function log(s) { out.textContent += s + '\n'; }

// adapterInfo describes the WebGPU adapter this browser offers.
async function adapterInfo() {
  if (!navigator.gpu) return { available: false, reason: 'navigator.gpu is missing' };
  let a = null;
  try {
    a = await navigator.gpu.requestAdapter();
  } catch (e) {
    return { available: false, reason: String(e) };
  }
  if (!a) return { available: false, reason: 'requestAdapter returned null' };
  const info = a.info || {};
  return {
    available: true, vendor: info.vendor || '', architecture: info.architecture || '',
    description: info.description || '', fallback: !!(info.isFallbackAdapter || a.isFallbackAdapter),
    features: [...a.features].sort(),
  };
}

// tessera's model URL (model=, default /model/: a directory, or a
// FILE.gguf URL) and GPU memory budget (gpuMemory=, e.g. 50%).
async function runTessera() {
  const { Tessera } = await import('/tessera.js');
  const opts = { backend, gpuMemory: q.get('gpuMemory') || undefined, shared: q.get('shared') === '1' };
  const t0 = performance.now();
  const engine = await Tessera.load(q.get('model') || '/model/', opts);
  const loadMs = performance.now() - t0;
  const others = [];
  const moreLoadMs = [];
  for (let i = 1; i < instances; i++) {
    const t = performance.now();
    others.push(await Tessera.load(q.get('model') || '/model/', opts));
    moreLoadMs.push(performance.now() - t);
  }
  const info = await engine.info();
  const ids = [];
  let tFirst = 0, tLast = 0;
  const g0 = performance.now();
  const logitBias = banned.length ? Object.fromEntries(banned.map((id) => [id, -100])) : undefined;
  for await (const piece of engine.generate(prompt, { maxTokens: max, temperature: 0, logitBias })) {
    if (piece.id < 0) continue; // held-back text, not a token
    const now = performance.now();
    if (ids.length === 0) tFirst = now;
    tLast = now;
    ids.push(piece.id);
  }
  const st = engine.lastStats || {};
  // untimed: the files the load downloaded committed to the cache (the
  // writes can outlive the load), so the warm load reads them
  await engine.stored();
  for (const [i, o] of others.entries()) {
    const few = [];
    for await (const piece of o.generate(prompt, { maxTokens: Math.min(4, max), temperature: 0, logitBias })) if (piece.id >= 0) few.push(piece.id);
    if (few.join() !== ids.slice(0, few.length).join() || few.length === 0) throw new Error(`instance ${i + 2} generated ${few}, the first ${ids.slice(0, 4)}`);
  }
  await loaded();
  for (const o of others) o.dispose();
  const r = {
    loadMs, moreLoadMs, ids, ttftMs: tFirst - g0, decodeMs: tLast - tFirst, promptTokens: st.promptTokens,
    ranOn: info.backend, engine: { ttftMs: st.ttftMs, decodeTokPerS: st.decodeTokPerS, dispatchesPerToken: st.dispatchesPerToken, submitsPerToken: st.submitsPerToken, stopped: st.stopped, load: engine.loadStats },
    // what the GPU holds (info().gpuMemory) and, when experts stream, the
    // expert cache over the generation and over its decode steps
    gpuMemory: info.gpuMemory, heapBytes: info.heapBytes, weightBytes: info.weightBytes, weightsDeferred: info.weightsDeferred,
    expertCache: st.expertCache, decodeExpertCache: st.decodeExpertCache,
  };
  engine.dispose();
  // check=1 (BENCH_CHECK=1): Tessera.check's decode estimate for this model
  // on this page, untimed, after the run (its kernel probe adds to the
  // page's peak memory), with a store of its own: as on a first visit, it
  // reads the headers from the network
  if (q.get('check') === '1') {
    r.check = await Tessera.check(q.get('model') || '/model/', { backend, cacheName: 'tessera-bench-check' }).then(
      (c) => ({ decodeTokPerSec: c.cpu.decodeTokPerSec, ranOn: c.backend, ms: c.ms, bytesFetched: c.bytesFetched }),
      (e) => ({ error: e.message }));
  }
  return r;
}

// wllamaOffload reads from llama.cpp's load log where the weights went:
// "offloaded N/M layers to GPU" and the model buffers by device
// ("CPU model buffer size = 26.32 MiB").
function wllamaOffload(lines) {
  const r = { layers: null, buffers: [] };
  for (const l of lines) {
    const m = /offloaded (\d+)\/(\d+) layers to GPU/.exec(l);
    if (m) r.layers = [parseInt(m[1], 10), parseInt(m[2], 10)];
    const b = /(\S+) model buffer size\s*=\s*([\d.]+) MiB/.exec(l);
    if (b) r.buffers.push(`${b[1]} ${b[2]} MiB`);
  }
  return r;
}

async function runWllama() {
  const { Wllama } = await import('/wllama/index.js');
  const lines = [];
  const keep = (...a) => lines.push(a.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join(' '));
  const logger = { debug: keep, log: keep, warn: keep, error: keep };
  const w = new Wllama({ default: '/wllama/wllama.wasm' }, { logger });
  // n_threads: threads= when the row sets it, else wllama's default (half
  // of navigator.hardwareConcurrency)
  const params = { n_ctx: 1024 };
  if (q.get('threads')) params.n_threads = parseInt(q.get('threads'), 10);
  if (backend === 'cpu') params.n_gpu_layers = 0; // else wllama's default: every layer on WebGPU when it can
  const modelUrl = new URL('/gguf/model.gguf', location.href).href;
  const t0 = performance.now();
  await w.loadModelFromUrl(modelUrl, params);
  const loadMs = performance.now() - t0;
  // further instances (instances=): wllama has no shared engine
  const others = [];
  const moreLoadMs = [];
  for (let i = 1; i < instances; i++) {
    const o = new Wllama({ default: '/wllama/wllama.wasm' }, { logger: { debug() {}, log() {}, warn() {}, error() {} } });
    const t = performance.now();
    await o.loadModelFromUrl(modelUrl, params);
    moreLoadMs.push(performance.now() - t);
    others.push(o);
  }
  const ids = [];
  let tFirst = 0, tLast = 0, timings = null, promptN = null;
  const g0 = performance.now();
  try {
    await w.createCompletion({
      prompt, max_tokens: max, temperature: 0, stream: true, cache_prompt: false, logprobs: 1,
      // llama.cpp's ban: a bias of false is −∞ (its −100 is only added);
      // post-sampling probabilities, or the top log-probability could name
      // a banned token
      ...(banned.length ? { logit_bias: banned.map((id) => [id, false]), post_sampling_probs: true } : {}),
      onData: (chunk) => {
        const now = performance.now();
        // the ids come with the per-token log-probabilities (logprobs: 1);
        // the raw completion streams no ids otherwise
        const toks = [];
        for (const c of chunk.choices || []) {
          for (const p of (c.logprobs && c.logprobs.content) || []) toks.push(p.id);
        }
        if (toks.length > 0) {
          if (ids.length === 0) tFirst = now;
          tLast = now;
          ids.push(...toks);
        }
        if (chunk.timings) { timings = chunk.timings; promptN = chunk.timings.prompt_n; }
      },
    });
  } catch (e) {
    // llama.cpp's own account of a failure is in its log
    throw new Error(`wllama's completion failed: ${e.message}; its last log lines: ${lines.slice(-12).join(' | ')}`);
  }
  const offload = wllamaOffload(lines);
  // On the GPU when a model buffer is on a device other than the CPU (no
  // "offloaded" line is printed when ggml-webgpu found no usable device).
  const onGPU = (offload.layers !== null && offload.layers[0] > 0) || offload.buffers.some((b) => !b.startsWith('CPU'));
  await loaded();
  for (const o of others) await o.exit();
  const r = {
    loadMs, moreLoadMs, ids, ttftMs: tFirst - g0, decodeMs: tLast - tFirst, promptTokens: promptN,
    ranOn: onGPU ? `gpu (WebGPU; model buffers: ${offload.buffers.join(', ')})` : `cpu (wasm, ${w.getNumThreads()} thread${w.getNumThreads() === 1 ? '' : 's'}; model buffers: ${offload.buffers.join(', ')})`,
    engine: {
      threads: w.getNumThreads(), multithread: w.isMultithread(), offload, timings, logLines: lines.length,
      version: typeof Wllama.getLibllamaVersion === 'function' ? Wllama.getLibllamaVersion() : '',
    },
    log: lines.filter((l) => /webgpu|WebGPU|ggml_|offload|buffer size|shader|f16|error|fail/i.test(l)).slice(0, 80),
  };
  await w.exit();
  return r;
}

(async () => {
  const rep = { runtime, backend, phase: q.get('phase'), crossOriginIsolated: self.crossOriginIsolated };
  try {
    rep.adapter = await adapterInfo();
    const r = runtime === 'tessera' ? await runTessera() : runtime === 'wllama' ? await runWllama() : null;
    if (!r) throw new Error(`runtime=${runtime}: want tessera or wllama`);
    Object.assign(rep, r, { ok: true });
    if (performance.memory) rep.jsHeapBytes = performance.memory.usedJSHeapSize;
  } catch (e) {
    rep.ok = false;
    rep.error = String((e && e.stack) || e);
  }
  log(JSON.stringify(rep, null, 1));
  await fetch(q.get('report'), { method: 'POST', body: JSON.stringify(rep) });
})();
