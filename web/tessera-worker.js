// tessera Web Worker: runs the Go engine (tessera.wasm) off the page's main
// thread. Started by tessera.js; speaks the message protocol below.
//
//   page → worker  {type: 'load', id, modelUrl, wasmUrl, execUrl, cacheName, backend}
//                  {type: 'generate', id, request}   {type: 'cancel'}
//                  {type: 'info', id}                {type: 'dispose', id}
//                  {type: 'conformance', id, wasmUrl, execUrl, perOp}
//   worker → page  {type: 'progress', file, loaded, total, fromCache}
//                  {type: 'token', id, tokenId, text}
//                  {type: 'warning', message}
//                  {type: 'reply', id, ok, value | error}
//
// Weights: model.manifest.json (written by `tessera manifest`) lists every
// file with its size and sha256. Each file is read from Cache Storage when a
// verified copy is there, else downloaded with streaming progress, checked
// against the manifest and only then stored, so an interrupted or corrupt
// download never becomes a cache entry. When the network is unreachable the
// cached manifest is used, so a model loaded once works offline.
'use strict';

const MANIFEST = 'model.manifest.json';
const MANIFEST_FORMAT = 'tessera-manifest/1';

let started = null; // Promise: the Go program is running and exported tesseraWasm

function post(msg) { self.postMessage(msg); }

// startGo loads wasm_exec.js and tessera.wasm and runs the Go program.
function startGo(wasmUrl, execUrl) {
  if (started) return started;
  started = (async () => {
    try {
      importScripts(execUrl);
    } catch (e) {
      throw new Error(`could not load ${execUrl} (the Go wasm support script): ${e.message}`);
    }
    const go = new self.Go();
    const ready = new Promise((ok) => { self.__tesseraReady = ok; });
    const resp = await fetch(wasmUrl);
    if (!resp.ok) {
      throw new Error(`could not fetch ${wasmUrl}: HTTP ${resp.status} (build it with "make wasm")`);
    }
    let inst;
    if ((resp.headers.get('content-type') || '').startsWith('application/wasm')) {
      inst = await WebAssembly.instantiateStreaming(resp, go.importObject);
    } else {
      inst = await WebAssembly.instantiate(await resp.arrayBuffer(), go.importObject);
    }
    // webgpu.md §4: the WebGPU binding's Queue.WriteBuffer reads
    // globalThis.wasm.instance.exports.mem.
    self.wasm = inst;
    go.run(inst.instance).then(() => {
      post({ type: 'warning', message: 'the tessera engine exited' });
    });
    await ready;
    return self.tesseraWasm;
  })();
  return started;
}

function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
}

// validManifest checks the manifest's shape and returns its files by name.
function validManifest(m, url) {
  if (!m || m.format !== MANIFEST_FORMAT || !Array.isArray(m.files)) {
    throw new Error(`${url} is not a tessera manifest (want "format": "${MANIFEST_FORMAT}" and a "files" list)`);
  }
  const byName = new Map();
  for (const f of m.files) {
    if (!f || typeof f.name !== 'string' || !Number.isSafeInteger(f.size) || f.size < 0 ||
        typeof f.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(f.sha256) ||
        f.name.startsWith('/') || f.name.split('/').includes('..')) {
      throw new Error(`${url}: bad file entry ${JSON.stringify(f).slice(0, 200)}`);
    }
    byName.set(f.name, f);
  }
  return byName;
}

// openModel returns a fetchFile(name) for the Go loader and load stats.
async function openModel(modelUrl, cacheName) {
  const base = new URL(modelUrl.endsWith('/') ? modelUrl : modelUrl + '/', self.location.href).href;
  const manifestUrl = base + MANIFEST;
  const cache = (self.caches && cacheName) ? await self.caches.open(cacheName).catch(() => null) : null;
  const stats = { hits: 0, misses: 0, bytesDownloaded: 0, offline: false };

  let manifest = null;
  let netErr = null;
  try {
    const r = await fetch(manifestUrl, { cache: 'no-cache' });
    if (r.status === 404) {
      throw new Error(`no ${MANIFEST} at ${base}: the model URL is wrong, or the manifest is missing (write it with "tessera manifest --model DIR")`);
    }
    if (!r.ok) {
      netErr = new Error(`fetching ${manifestUrl}: HTTP ${r.status}`);
    } else {
      const text = await r.text();
      try {
        manifest = JSON.parse(text);
      } catch (e) {
        throw new Error(`${manifestUrl} is not valid JSON: ${e.message}`);
      }
      validManifest(manifest, manifestUrl);
      if (cache) {
        await cache.put(manifestUrl, new Response(text, { headers: { 'content-type': 'application/json' } })).catch(() => {});
      }
    }
  } catch (e) {
    if (!(e instanceof TypeError)) throw e; // TypeError: the network is unreachable
    netErr = new Error(`cannot reach ${manifestUrl}: ${e.message}`);
  }
  if (!manifest) {
    const cached = cache ? await cache.match(manifestUrl) : null;
    if (!cached) {
      throw new Error(`${netErr.message}; no copy of this model is cached for offline use`);
    }
    manifest = await cached.json();
    stats.offline = true;
  }
  const files = validManifest(manifest, manifestUrl);
  const total = manifest.files.reduce((n, f) => n + f.size, 0);
  let done = 0;

  async function fromCache(f, key) {
    if (!cache) return null;
    const hit = await cache.match(key);
    if (!hit) return null;
    const buf = new Uint8Array(await hit.arrayBuffer());
    if (buf.length !== f.size) { // never put unverified, but be safe
      await cache.delete(key);
      return null;
    }
    return buf;
  }

  async function download(f) {
    let resp;
    try {
      resp = await fetch(base + f.name);
    } catch (e) {
      throw new Error(`downloading ${f.name} failed (network): ${e.message}`);
    }
    if (!resp.ok) throw new Error(`downloading ${base + f.name}: HTTP ${resp.status}`);
    const out = new Uint8Array(f.size);
    let off = 0;
    const reader = resp.body.getReader();
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        throw new Error(`downloading ${f.name} was interrupted after ${off} of ${f.size} bytes: ${e.message}`);
      }
      if (chunk.done) break;
      const c = chunk.value;
      if (off + c.length > f.size) {
        reader.cancel();
        throw new Error(`integrity check failed for ${f.name}: the server sent more than the ${f.size} bytes the manifest lists`);
      }
      out.set(c, off);
      off += c.length;
      done += c.length;
      stats.bytesDownloaded += c.length;
      post({ type: 'progress', file: f.name, loaded: done, total, fromCache: false });
    }
    if (off !== f.size) {
      throw new Error(`downloading ${f.name} stopped after ${off} of ${f.size} bytes (interrupted?); nothing was cached`);
    }
    const got = hex(await crypto.subtle.digest('SHA-256', out));
    if (got !== f.sha256) {
      throw new Error(`integrity check failed for ${f.name}: sha256 ${got}, manifest says ${f.sha256}; nothing was cached`);
    }
    return out;
  }

  async function store(f, key, buf) {
    if (!cache) return;
    try {
      await cache.put(key, new Response(buf, { headers: { 'content-type': 'application/octet-stream' } }));
      // Drop copies of this file with another hash (an older model version).
      const prefix = base + f.name + '?sha256=';
      for (const req of await cache.keys()) {
        if (req.url.startsWith(prefix) && req.url !== key) await cache.delete(req);
      }
    } catch (e) {
      post({ type: 'warning', message: `could not cache ${f.name} (${e.name}: ${e.message}); it will be downloaded again next time` });
    }
  }

  async function fetchFile(name) {
    const f = files.get(name);
    if (!f) return null; // the model has no such file
    const key = base + f.name + '?sha256=' + f.sha256;
    let buf = await fromCache(f, key);
    if (buf) {
      stats.hits++;
      done += f.size;
      post({ type: 'progress', file: f.name, loaded: done, total, fromCache: true });
      return buf;
    }
    if (stats.offline) {
      throw new Error(`${f.name} is not cached and the model URL cannot be reached (offline)`);
    }
    stats.misses++;
    buf = await download(f);
    await store(f, key, buf);
    return buf;
  }
  return { base, fetchFile, stats };
}

let loadStats = null;

async function handle(msg) {
  switch (msg.type) {
    case 'load': {
      const t0 = performance.now();
      const go = await startGo(msg.wasmUrl, msg.execUrl);
      const t1 = performance.now();
      const m = await openModel(msg.modelUrl, msg.cacheName);
      const info = await go.load(m.base, { fetchFile: m.fetchFile, backend: msg.backend || 'cpu' });
      loadStats = m.stats;
      loadStats.engineStartMs = t1 - t0; // fetch + compile tessera.wasm, start Go
      loadStats.modelMs = performance.now() - t1; // fetch/verify/cache files, bind the model, probe the GPU
      return { info, cache: loadStats };
    }
    case 'generate': {
      const go = await started;
      return go.generate(msg.request, (tokenId, text) => post({ type: 'token', id: msg.id, tokenId, text }));
    }
    case 'info':
      return (await started).info();
    case 'conformance': {
      // The WGSL kernel conformance cases on this browser's WebGPU
      // (bundles built with -tags conformance); no model needed.
      const go = await startGo(msg.wasmUrl, msg.execUrl);
      return go.conformance(msg.perOp || 0);
    }
    case 'dispose':
      if (started) (await started).dispose();
      return null;
    default:
      throw new Error(`unknown request type ${msg.type}`);
  }
}

self.onmessage = (ev) => {
  const msg = ev.data;
  if (msg.type === 'cancel') {
    if (self.tesseraWasm) self.tesseraWasm.cancel();
    return;
  }
  handle(msg).then(
    (value) => post({ type: 'reply', id: msg.id, ok: true, value }),
    (err) => post({ type: 'reply', id: msg.id, ok: false, error: String(err && err.message || err) }),
  );
};
