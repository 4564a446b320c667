// tessera Web Worker: runs the Go engine (tessera.wasm) off the page's main
// thread. Started by tessera.js; speaks the message protocol below.
//
// It runs as a dedicated worker (one page's engine) or, for
// Tessera.load(url, {shared: true}), as a shared worker: one engine for
// every page of the origin that loads the same model with the same
// options (the SharedWorker's name says which). Each page attaches first
// ({type: 'attach', lock}); the engine is loaded by the first and
// joined by the others, their engine requests run one at a time, in the
// order they came, and it is freed when the last page has gone (disposed,
// or closed: the Web Lock named lock that the page holds is released).
//
//   page → worker  {type: 'load', id, modelUrl, wasmUrl, wasmFallbackUrl, execUrl, cacheName, backend, allowSoftwareAdapter, gpuMemory, exact, storageFreeForTest}
//                  {type: 'generate', id, request, images, hashImages}
//                  {type: 'chat', id, params}      (OpenAI chat completion)
//                  {type: 'pixels', id, image}       {type: 'cancel'}
//                  {type: 'info', id}                {type: 'dispose', id}
//                  {type: 'saveSession', id, name, messages}
//                  {type: 'restoreSession', id, name}  {type: 'deleteSession', id, name}
//                  {type: 'conformance', id, wasmUrl, execUrl, perOp}
//                  {type: 'check', id, modelUrl, wasmUrl, wasmFallbackUrl, execUrl, cacheName, backend, context, probeMs, allowSoftwareAdapter, storageFreeForTest}
//                  {type: 'attach', lock}  {type: 'detach'}  (shared worker)
//   worker → page  {type: 'progress', file, loaded, total, fromCache}
//                  {type: 'token', id, tokenId, text, live}  (live: request.live's snapshot, now and then)
//                  {type: 'chat-start', id, promptTokens}
//                  {type: 'warning', message}
//                  {type: 'reply', id, ok, value | error}
//
// Weights: model.manifest.json (written by `tessera manifest`) lists every
// file with its size and sha256 (for a GGUF file, <file>.gguf.manifest.json
// lists that one file). Each file is read from the store (openStore: OPFS,
// indexed in Cache Storage) when a verified copy is there, else downloaded
// with streaming progress, checked against the manifest and only then
// committed, so an interrupted or corrupt download never becomes a cache
// entry. When the network is unreachable the cached manifest is used, so a
// model loaded once works offline.
//
// Images: a Blob is decoded by the browser (createImageBitmap, EXIF
// orientation applied, no colour-space conversion, no premultiplication)
// after its header is checked against the engine's size caps; Blobs,
// ImageBitmaps and ImageData are drawn to an sRGB OffscreenCanvas and read
// back with getImageData; the RGBA pixels go to the Go engine, which
// composites transparency over white, resizes and normalises them as
// `tessera run --image` does.
'use strict';

const MANIFEST = 'model.manifest.json';
const MANIFEST_SUFFIX = '.manifest.json'; // a GGUF file's manifest: <file>.gguf.manifest.json
const MANIFEST_FORMAT = 'tessera-manifest/1';
const SESSION_EXT = '.tessera-session';
const WRITE_BATCH = 4 << 20; // a download is written to the store in pieces of this size
// ... through a writable stream (a shared worker: no synchronous handles),
// in pieces of this size: a 64 MiB part in one write. In 4 MiB pieces the
// parts' writes piled up and each part's commit came 5–7 s after its
// bytes (k3-mini Q8_0: cold load 14.6 / 12.4 s against 11.3 / 11.7 s in
// one write, alternating runs).
const STREAM_WRITE_BATCH = 64 << 20;
const WHOLE_READ = 256 << 20; // a stored file read without a synchronous handle is read whole up to this size
const RESIDENT = 2; // such files whose bytes are kept (storedFile)
const SPARE = 4; // part buffers kept for reuse while a model loads (partBuffer)
const HELD = 2; // downloaded parts kept for the engine's read when the store has no synchronous handles (openModel's hold)
const PEEK_BYTES = 1 << 20; // Tessera.check reads a model file's header in windows of this size

// sessionDir is the OPFS directory saved conversations live in.
async function sessionDir() {
  if (!navigator.storage || !navigator.storage.getDirectory) {
    throw new Error('saved sessions need the origin private file system (navigator.storage.getDirectory), which this browser does not offer');
  }
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle('tessera-sessions', { create: true });
}

let started = null; // Promise: the Go program is running and exported tesseraWasm

// shared: this is a shared worker (Tessera.load's shared option).
const shared = typeof SharedWorkerGlobalScope !== 'undefined' && self instanceof SharedWorkerGlobalScope;
// client is where post sends: the page of a dedicated worker; in a shared
// worker the port of the page whose request runs.
let client = self;
// running is the request being served ({port, msg, cancelled}; shared worker).
let running = null;

function post(msg) {
  if (client.postMessage) client.postMessage(msg); // a shared worker's self has none
  // A shared worker's load: the pages waiting to join the engine see its
  // progress too, and a page that joins later gets its last event.
  if (shared && msg.type === 'progress' && running && running.msg.type === 'load') {
    loadProgress = msg;
    for (const w of waiting) if (w.msg.type === 'load' && w.port !== client) w.port.postMessage(msg);
  }
}

// withHeap adds to the engine's info heapBytes: the size of its
// WebAssembly memory, which holds the model on the CPU path (it grows and
// never shrinks).
function withHeap(info) {
  const mem = self.wasm && self.wasm.instance.exports.mem;
  return mem ? { ...info, heapBytes: mem.buffer.byteLength } : info;
}

// fetchWasm fetches the engine bundle wasmUrl, or fallbackUrl (if given)
// when wasmUrl cannot be had: tessera.js asks for the CPU-only bundle for
// backend 'cpu' and falls back to the full one a server may only have.
async function fetchWasm(wasmUrl, fallbackUrl) {
  let resp = null;
  let why = '';
  try {
    resp = await fetch(wasmUrl);
    why = `HTTP ${resp.status}`;
  } catch (e) {
    why = e.message;
  }
  if (resp && resp.ok) return resp;
  if (fallbackUrl) return fetchWasm(fallbackUrl);
  throw new Error(`could not fetch ${wasmUrl}: ${why} (build it with "make wasm")`);
}

// autoCPUBundle says whether backend 'auto' can do with the CPU-only
// bundle: the browser offers no WebGPU adapter, or only its fallback
// adapter (SwiftShader) while allowSoftware is off. wgsl.ChooseAuto takes
// the CPU there whatever else it knows, and the CPU-only bundle runs the
// same ChooseAuto (the same reason in info().backend); on any other
// adapter the full bundle loads and ChooseAuto decides.
async function autoCPUBundle(allowSoftware) {
  if (!self.navigator || !navigator.gpu) return true;
  const ad = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }).catch(() => null);
  if (!ad) return true;
  const fallback = (ad.info && ad.info.isFallbackAdapter === true) || ad.isFallbackAdapter === true;
  return fallback && !allowSoftware;
}

// startGo loads wasm_exec.js and the engine bundle (wasmUrl, else
// fallbackUrl) and runs the Go program.
function startGo(wasmUrl, execUrl, fallbackUrl) {
  if (started) return started;
  started = (async () => {
    try {
      importScripts(execUrl);
    } catch (e) {
      throw new Error(`could not load ${execUrl} (the Go wasm support script): ${e.message}`);
    }
    const go = new self.Go();
    const ready = new Promise((ok) => { self.__tesseraReady = ok; });
    const resp = await fetchWasm(wasmUrl, fallbackUrl);
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
    if (f.parts !== undefined && !validParts(f)) {
      throw new Error(`${url}: ${f.name}: bad parts (want contiguous {offset, size, sha256} ranges covering its ${f.size} bytes)`);
    }
    byName.set(f.name, f);
  }
  return byName;
}

// validParts reports whether f.parts are contiguous byte ranges, each with
// a sha256, that cover the file from offset 0 to f.size.
function validParts(f) {
  if (!Array.isArray(f.parts) || f.parts.length === 0) return false;
  let at = 0;
  for (const p of f.parts) {
    if (!p || p.offset !== at || !Number.isSafeInteger(p.size) || p.size <= 0 ||
        typeof p.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(p.sha256) ||
        (p.vision !== undefined && typeof p.vision !== 'boolean')) return false;
    at += p.size;
  }
  return at === f.size;
}

// The store of verified model files named cacheName: their bytes in the
// origin private file system (OPFS), in the directory of that name, one
// file per cached file or part, named by the sha256 of its key; and an
// index in Cache Storage (the cache of that name, which also keeps the
// manifest), one small entry per key, put only once the bytes are written,
// flushed and moved to their final name. A key in the index is thus a
// complete, verified copy, and a download that fails leaves neither.
// OPFS is read with a synchronous access handle straight into the wasm
// heap, range by range: a cached model is never held in JavaScript memory,
// and reads run at file speed (Cache Storage reads ran at about a tenth).
// openStore resolves to null without cacheName or Cache Storage, and to
// {cache, files: null} (the manifest cached, the model not, with a
// warning) without OPFS's synchronous access handles.
async function openStore(cacheName) {
  if (!cacheName || !self.caches) return null;
  const cache = await self.caches.open(cacheName).catch(() => null);
  if (!cache) return null;
  let dir = null;
  // writes go through a synchronous access handle (dedicated workers) or
  // a writable stream (shared workers, which have no synchronous handles)
  const fhp = typeof FileSystemFileHandle !== 'undefined' ? FileSystemFileHandle.prototype : {};
  const sync = !!fhp.createSyncAccessHandle;
  if (self.navigator && navigator.storage && navigator.storage.getDirectory && (sync || fhp.createWritable)) {
    dir = await navigator.storage.getDirectory().then((root) => root.getDirectoryHandle(cacheName, { create: true })).catch(() => null);
  }
  if (!dir) {
    post({ type: 'warning', message: 'this browser offers no origin private file system in workers: the model is not cached and is downloaded again next time' });
    return { cache, files: null };
  }
  // a key's file: the sha256 of the key as Cache Storage lists it (a
  // parsed URL, so that sweep finds the names open uses)
  const fileOf = async (key) => hex(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(new URL(key).href)));
  const store = {
    cache,
    files: {
      sync, // written and read through synchronous access handles
      // open resolves to the committed copy under key (storedFile), or null; a key whose bytes are gone or of another size is
      // dropped. bytes, if given, are its bytes in hand (from partBuffer), for storedFile.
      async open(key, size, bytes) {
        const fh = (await cache.match(key)) ? await dir.getFileHandle(await fileOf(key)).catch(() => null) : null;
        const sf = fh && await storedFile(fh, bytes);
        if (!sf) releaseBuffer(bytes);
        if (sf && sf.size === size) return sf;
        if (sf) sf.close();
        if (fh) await store.drop(key);
        return null;
      },
      // writer opens a temporary file for key's bytes: write(bytes, at)
      // as they come, then commit() (flush, move to the final name, index)
      // or abort(). It rejects when the file cannot be created. Through a
      // writable stream (no synchronous handle) the writes run in order
      // in the background and the first one to fail fails commit.
      async writer(key) {
        const name = await fileOf(key);
        const tmp = `${name}.${Math.random().toString(36).slice(2)}.tmp`;
        let fh, h;
        try {
          fh = await dir.getFileHandle(tmp, { create: true });
          h = sync ? await fh.createSyncAccessHandle() : streamHandle(await fh.createWritable());
        } catch (e) {
          if (fh) await dir.removeEntry(tmp).catch(() => {});
          throw e;
        }
        let open = true;
        const abort = async () => {
          if (open) { open = false; await (sync ? h.close() : h.abort()); }
          await dir.removeEntry(tmp).catch(() => {});
        };
        return {
          write(bytes, at) {
            const n = h.write(bytes, { at });
            if (n !== bytes.length) throw new DOMException(`wrote ${n} of ${bytes.length} bytes (storage full?)`, 'QuotaExceededError');
          },
          abort,
          async commit() {
            try {
              await h.flush();
              await h.close();
              open = false;
              // a copy already there (another tab's, or an unindexed one)
              // is replaced; one being read stays, and ours is dropped
              await dir.removeEntry(name).catch(() => {});
              const moved = await fh.move(name).then(() => true, () => false);
              if (!moved && !(await dir.getFileHandle(name).catch(() => null))) throw new Error('could not move the written file to its name');
              if (!moved) await dir.removeEntry(tmp).catch(() => {});
              await cache.put(key, new Response('{}', { headers: { 'content-type': 'application/json' } }));
            } catch (e) {
              await abort();
              throw e;
            }
          },
        };
      },
    },
    // drop removes key from the index and its bytes.
    async drop(key) {
      await cache.delete(key);
      await dir.removeEntry(await fileOf(key)).catch(() => {});
    },
    // sweep removes the files no key indexes: left by a write that never
    // finished, or by a page that deleted the cache (Cache Storage) and not
    // the files. A file open elsewhere (another tab's write) is kept.
    async sweep() {
      const keep = new Set();
      for (const req of await cache.keys()) keep.add(await fileOf(req.url));
      for await (const [name] of dir.entries()) {
        if (!keep.has(name)) await dir.removeEntry(name).catch(() => {});
      }
    },
  };
  await store.sweep().catch(() => {});
  return store;
}

// streamHandle gives a writable stream (FileSystemWritableFileStream)
// the calls of the synchronous access handle the store writes through:
// write queues the bytes (they are not changed until the download ends),
// flush waits for the writes and throws the first error, close commits
// the stream's bytes to the file, abort drops them.
function streamHandle(ws) {
  let queue = Promise.resolve();
  let failed = null;
  return {
    write(bytes, { at }) {
      queue = queue.then(() => failed || ws.write({ type: 'write', position: at, data: bytes })).catch((e) => { failed = failed || e; });
      return bytes.length;
    },
    async flush() {
      await queue;
      if (failed) throw failed;
    },
    close: () => ws.close(),
    abort: () => queue.then(() => ws.abort()).catch(() => {}),
  };
}

// Part buffers: a downloaded part (download) and a stored part read whole
// (storedFile) each need one, 64 MiB for a model's usual parts. A fresh
// buffer each left the whole model as garbage for the collector to find
// (a shared worker's load of k3-mini Q8_0 peaked 0.3 GiB above two
// dedicated workers' loads); while a model loads, released buffers are
// kept, SPARE at most, and reused.
const spareBuffers = [];
let loadsRunning = 0; // models loading (openModel up to its stop): while any is, buffers are kept

// partBuffer returns n bytes to fill, in a spare buffer when one is large
// enough; WHOLE_READ bytes at most are reused.
function partBuffer(n) {
  const i = n <= WHOLE_READ ? spareBuffers.findIndex((b) => b.byteLength >= n) : -1;
  return i < 0 ? new Uint8Array(n) : new Uint8Array(spareBuffers.splice(i, 1)[0], 0, n);
}

// releaseBuffer hands back bytes from partBuffer that nothing reads any
// more: kept for reuse while a model loads, else freed.
function releaseBuffer(bytes) {
  const b = bytes && bytes.buffer;
  if (!b || spareBuffers.includes(b)) return;
  if (loadsRunning === 0 || b.byteLength > WHOLE_READ) {
    freeBuffer(b);
    return;
  }
  spareBuffers.push(b);
  if (spareBuffers.length > SPARE) freeBuffer(spareBuffers.sort((x, y) => y.byteLength - x.byteLength).pop());
}

// freeBuffer frees ArrayBuffer b's memory now, not when the collector
// finds it: a worker busy binding a model may not collect for seconds, and
// a shared worker that had loaded k3-mini Q8_0 kept 0.3 GiB it no longer
// used (the bench's loaded RSS; with --expose-gc and a gc() it was gone).
// Transferring b into a message that is never delivered, its channel
// closed, drops its bytes (b.transfer(0) did not, in Chromium 156).
function freeBuffer(b) {
  if (!b || b.detached) return;
  try {
    const ch = new MessageChannel();
    ch.port1.postMessage(null, [b]);
    ch.port1.close();
    ch.port2.close();
  } catch {
    // not transferable
  }
}

// readWhole resolves to File f's bytes, read into dst (f.size bytes from
// partBuffer): through a BYOB reader, straight into dst's memory, which
// the stream hands back in a new ArrayBuffer each read (the one resolved
// to is the last); else a chunk at a time, copied (small garbage, where
// f.arrayBuffer() would allocate f.size anew).
async function readWhole(f, dst) {
  const n = dst.length; // a BYOB read detaches dst's buffer: its length reads 0 after
  let off = 0;
  let byob = null;
  try {
    byob = f.stream().getReader({ mode: 'byob' });
  } catch {
    // not a byte stream here
  }
  storeRead = byob ? 'byob' : 'stream';
  if (byob) {
    let buf = dst.buffer;
    while (off < n) {
      const { done, value } = await byob.read(new Uint8Array(buf, off, n - off));
      if (done) break;
      off += value.byteLength;
      buf = value.buffer;
    }
    dst = new Uint8Array(buf, 0, n);
    if (off === n && !(await byob.read(new Uint8Array(1))).done) throw new Error(`the stored file grew past ${n} bytes as it was read`);
  } else {
    const rd = f.stream().getReader();
    for (;;) {
      const { done, value } = await rd.read();
      if (done) break;
      if (off + value.length > n) {
        rd.cancel().catch(() => {});
        throw new Error(`the stored file grew past ${n} bytes as it was read`);
      }
      dst.set(value, off);
      off += value.length;
    }
  }
  if (off !== n) throw new Error(`the stored file ended after ${off} of ${n} bytes`);
  return dst;
}

const residentParts = []; // the stored files read whole whose bytes are kept, oldest first
let storeRead = ''; // how storedFile read the store last: 'sync', 'byob', 'stream' or 'slices' (loadStats.storeRead)

// storedFile opens an OPFS file for reading by range: {size, readInto(dst,
// at) → bytes read, readHeap(addr, n, at), close()}, both reads
// synchronous; readHeap reads into tessera.wasm's heap at addr, its view of
// the memory made here, at the call (the Go side's allocations while it
// passes the arguments may grow the memory, detaching any older view).
// Another open handle on the file (a second tab reading the same model),
// or a shared worker, which has no synchronous handles, makes it read the
// file whole (a part of a model) into a part buffer, or in slices through
// FileReaderSync, without a lock.
async function storedFile(fh, bytes) {
  const heap = (addr, n) => new Uint8Array(self.wasm.instance.exports.mem.buffer, addr, n);
  if (typeof fh.createSyncAccessHandle === 'function') {
    try {
      const h = await fh.createSyncAccessHandle();
      storeRead = 'sync';
      releaseBuffer(bytes);
      const readInto = (dst, at) => h.read(dst, { at });
      return { size: h.getSize(), readInto, readHeap: (addr, n, at) => readInto(heap(addr, n), at), close: () => h.close() };
    } catch (e) {
      if (e.name !== 'NoModificationAllowedError') return null;
    }
  }
  const f = await fh.getFile().catch(() => null);
  if (!f) return null;
  // A part (at most WHOLE_READ bytes) is read whole, at once: a
  // FileReaderSync read per tensor made a shared worker's warm load of
  // k3-mini's Q8_0 GGUF 3× slower than a dedicated worker's. Only the
  // RESIDENT parts read last keep their bytes (a loader reads a file
  // front to back), whose buffers are reused; an older one is read
  // through FileReaderSync again.
  let whole = null;
  if (bytes && bytes.length !== f.size) {
    releaseBuffer(bytes);
    bytes = null;
  }
  if (bytes || f.size <= WHOLE_READ) {
    while (residentParts.length >= RESIDENT) residentParts.shift().drop();
    whole = bytes || await readWhole(f, partBuffer(f.size)).catch((e) => { storeRead = `slices (${e.name}: ${e.message})`; return null; });
  }
  let r = null;
  const readInto = (dst, at) => {
    let b;
    if (whole) {
      b = whole.subarray(at, at + dst.length);
    } else {
      r = r || new FileReaderSync();
      b = new Uint8Array(r.readAsArrayBuffer(f.slice(at, at + dst.length)));
    }
    dst.set(b);
    return b.length;
  };
  const sf = { size: f.size, readInto, readHeap: (addr, n, at) => readInto(heap(addr, n), at), drop() { releaseBuffer(whole); whole = null; } };
  sf.close = () => {
    sf.drop();
    const i = residentParts.indexOf(sf);
    if (i >= 0) residentParts.splice(i, 1);
  };
  if (whole) residentParts.push(sf);
  return sf;
}

// openModel returns a fetchFile(name) for the Go loader and load stats.
// A file the manifest splits into parts is fetched part by part as the
// engine reads it (HTTP Range requests), each part checked against its own
// sha256 and cached on its own: a text-only session never downloads the
// part that holds the vision tower. fetchFile resolves to the file's
// bytes (a Uint8Array, when it is not cached) or its cached copy
// ({size, readInto, close}: storedFile), and for a file in parts to
// {size, parts: [{offset, size}], read(i)}, read(i) resolving to part i
// as either. A download is written to the store as it arrives and
// committed only after its sha256 check (see openStore); the load then
// reads the stored copy, so the downloaded bytes and the wasm heap's copy
// of the weights are not held at once.
// storageFree, when a number, replaces the free storage the browser reports
// (tests). forCheck (Tessera.check) counts what a load would download
// without warning about it.
async function openModel(modelUrl, cacheName, storageFree, forCheck) {
  // A URL ending in .gguf is one GGUF file, checked against the manifest
  // beside it (<file>.manifest.json, written by "tessera manifest --model
  // FILE.gguf"); any other URL is a model directory with model.manifest.json.
  const gguf = /\.gguf$/i.test(modelUrl);
  const base = gguf ? new URL('./', new URL(modelUrl, self.location.href)).href
    : new URL(modelUrl.endsWith('/') ? modelUrl : modelUrl + '/', self.location.href).href;
  const fileUrl = new URL(modelUrl, self.location.href).href;
  const manifestName = gguf ? fileUrl.slice(base.length) + MANIFEST_SUFFIX : MANIFEST;
  const manifestUrl = base + manifestName;
  const opened = await openStore(cacheName);
  const cache = opened ? opened.cache : null; // the manifest's copy
  let store = opened && opened.files ? opened : null; // the weights'
  const stats = { hits: 0, misses: 0, fetchedAhead: 0, bytesDownloaded: 0, offline: false, cacheSkipped: false, downloadMs: 0, verifyMs: 0, cacheWriteMs: 0, peekedBytes: 0 };

  let manifest = null;
  let netErr = null;
  try {
    const r = await fetch(manifestUrl, { cache: 'no-cache' });
    if (r.status === 404) {
      throw new Error(gguf
        ? `no ${manifestName} at ${base}: the GGUF URL is wrong, or its manifest is missing (write it with "tessera manifest --model FILE.gguf")`
        : `no ${MANIFEST} at ${base}: the model URL is wrong, or the manifest is missing (write it with "tessera manifest --model DIR")`);
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
  // what a load downloads: every file, less the parts read on demand only
  // (the vision tower's)
  const eager = (f) => (f.parts ? f.parts.filter((p) => !p.vision).reduce((n, p) => n + p.size, 0) : f.size);
  const total = manifest.files.reduce((n, f) => n + eager(f), 0);
  // A directory whose manifest lists one .gguf file and no config.json
  // (tessera serve --model FILE.gguf) is that GGUF file.
  let loadUrl = gguf ? fileUrl : base;
  const ggufs = manifest.files.filter((f) => /\.gguf$/i.test(f.name));
  if (!gguf && !files.has('config.json') && ggufs.length === 1) loadUrl = base + ggufs[0].name;
  let done = 0;
  const keyOf = (f) => base + f.name + '?sha256=' + f.sha256;
  const partKey = (f, p) => base + f.name + '?bytes=' + p.offset + '-' + (p.offset + p.size - 1) + '&sha256=' + p.sha256;
  // the cache keys of f under this manifest (older versions are dropped)
  const keysOf = (f) => new Set(f.parts ? f.parts.map((p) => partKey(f, p)) : [keyOf(f)]);

  // Storage: the files still to download must fit in what the browser lets
  // this origin keep (with 10 % to spare), else they are downloaded but not
  // cached — better than failing halfway through filling the quota.
  // need: the bytes a text-only load downloads; stored: those it finds in
  // the store.
  let need = 0;
  let storedBytes = 0;
  for (const f of files.values()) {
    for (const p of (f.parts || [f])) {
      if (p.vision) continue;
      if (store && await store.cache.match(f.parts ? partKey(f, p) : keyOf(f))) storedBytes += p.size;
      else need += p.size;
    }
  }
  const toFetch = { bytes: need, stored: storedBytes, total, vision: manifest.files.reduce((n, f) => n + f.size, 0) - total, storageFree: null, fitsStorage: true };
  if (store && !stats.offline) {
    let free = typeof storageFree === 'number' ? storageFree : null;
    if (free === null && self.navigator && navigator.storage && navigator.storage.estimate) {
      const est = await navigator.storage.estimate().catch(() => null);
      if (est && Number.isFinite(est.quota) && Number.isFinite(est.usage)) free = est.quota - est.usage;
    }
    stats.storageFree = toFetch.storageFree = free;
    toFetch.fitsStorage = free === null || need <= 0.9 * free;
    if (!toFetch.fitsStorage && !forCheck) { // Tessera.check reports it instead
      const mb = (n) => (n / 1e6).toFixed(1) + ' MB';
      post({ type: 'warning', message: `not enough browser storage to keep this model for offline use (it needs ${mb(need)}, ${mb(Math.max(0, free))} are free): it is loaded now and downloaded again next time` });
      stats.cacheSkipped = true;
      store = null;
    }
  }

  // share runs one fetch of key at a time (fn: its bytes, or null once
  // the store has them), shared by the callers asking meanwhile (the
  // engine's read of a vision part and keepOffline's, say, or a part
  // fetched ahead and then read).
  const fetching = new Map();
  const counted = new Set(); // keys this load has counted (hits, misses, progress): once each
  function share(key, fn) {
    if (!fetching.has(key)) fetching.set(key, fn().finally(() => fetching.delete(key)));
    return fetching.get(key);
  }

  // once resolves to key's bytes (get: a shared fetch of them) or, when
  // the store has them, to the caller's own handle on the stored copy
  // (closing it closes no other's). A copy the index lists but that cannot
  // be opened (its file gone, or of another size) is dropped and fetched
  // again.
  async function once(key, size, get) {
    for (let attempt = 0; ; attempt++) {
      const bytes = await get();
      if (bytes) return bytes;
      const sf = await store.files.open(key, size, takeHeld(key));
      if (sf) return sf;
      if (attempt > 0) throw new Error(`the browser's model store lost ${key} as it was read`);
    }
  }

  // stored reports whether key is in the store.
  async function stored(key) {
    return store ? !!(await store.cache.match(key)) : false;
  }

  // download fetches file f, or only its part p (an HTTP Range request)
  // when p is given, and checks it against the manifest's sha256. A server
  // that ignores the Range header sends the whole file, checked whole: the
  // result is then {buf: the file, whole: true}, else {buf, whole: false,
  // stored}, stored saying whether the bytes were committed to the store
  // under key as well (written as they came, committed once checked).
  // arrived, if given, is called once a ranged part's bytes are all in,
  // before they are checked and committed; the check waits for the promise
  // it may return (the next part's request going out first). requested, if
  // given, is called once this download's request is out.
  async function download(f, p, key, arrived, requested) {
    const what = p ? `${f.name} (bytes ${p.offset}-${p.offset + p.size - 1})` : f.name;
    let resp;
    try {
      // no-store: the store keeps the checked copy; the browser's HTTP
      // cache would write every byte to disk a second time (parts of a
      // size it caches: 64 MiB parts made the cold load a fifth slower)
      const init = { cache: 'no-store' };
      if (p) init.headers = { Range: `bytes=${p.offset}-${p.offset + p.size - 1}` };
      const answer = fetch(base + f.name, init);
      if (requested) requested();
      resp = await answer;
    } catch (e) {
      throw new Error(`downloading ${what} failed (network): ${e.message}`);
    }
    if (!resp.ok) throw new Error(`downloading ${base + f.name}${p ? ` (bytes ${p.offset}-${p.offset + p.size - 1})` : ''}: HTTP ${resp.status}`);
    const ranged = p && resp.status === 206;
    if (ranged) {
      // a cross-origin server may not expose Content-Range; the length and
      // the sha256 below check the bytes either way
      const cr = resp.headers.get('content-range');
      if (cr !== null && !cr.startsWith(`bytes ${p.offset}-${p.offset + p.size - 1}/`)) {
        resp.body.cancel().catch(() => {});
        throw new Error(`downloading ${what}: the server answered with the range "${cr}"`);
      }
    }
    const t0 = performance.now();
    const want = ranged ? p : f;
    const label = ranged ? what : f.name;
    const out = partBuffer(want.size);
    // The store's copy, written as the bytes come. A whole file sent for
    // a part is stored part by part by readPart.
    let w = store && (ranged || !p) ? await store.files.writer(key).catch((e) => { cannotStore(f, e); return null; }) : null;
    const batch = store && store.files.sync ? WRITE_BATCH : STREAM_WRITE_BATCH;
    let wrote = 0; // ms spent writing
    const write = (c, at) => {
      if (!w) return;
      const t = performance.now();
      try {
        w.write(c, at);
      } catch (e) {
        cannotStore(f, e);
        w.abort();
        w = null;
      }
      wrote += performance.now() - t;
    };
    const fail = (msg) => {
      if (w) w.abort();
      releaseBuffer(out);
      return new Error(msg);
    };
    let off = 0;
    let shown = 0; // when progress was last posted
    let written = 0; // bytes written to the store's copy
    const reader = resp.body.getReader();
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        throw fail(`downloading ${label} was interrupted after ${off} of ${want.size} bytes: ${e.message}`);
      }
      if (chunk.done) break;
      const c = chunk.value;
      if (off + c.length > want.size) {
        reader.cancel();
        throw fail(`integrity check failed for ${label}: the server sent more than the ${want.size} bytes the manifest lists`);
      }
      out.set(c, off);
      off += c.length;
      if (off - written >= batch) { // few large writes: each is a call into the file system
        write(out.subarray(written, off), written);
        written = off;
      }
      stats.bytesDownloaded += c.length;
      if (!(p && p.vision)) done += c.length;
      // progress at most every 50 ms (a message per network chunk cost
      // the page's thread, and so the download, seconds per GB)
      const now = performance.now();
      if (now - shown >= 50 || off === want.size) {
        shown = now;
        if (p && p.vision) {
          // read on demand, after the load: its own progress
          post({ type: 'progress', file: f.name, loaded: off, total: want.size, fromCache: false });
        } else {
          post({ type: 'progress', file: f.name, loaded: done, total, fromCache: false });
        }
      }
    }
    if (off > written) write(out.subarray(written, off), written);
    if (off !== want.size) {
      throw fail(`downloading ${label} stopped after ${off} of ${want.size} bytes (interrupted?); nothing was cached`);
    }
    if (ranged && arrived) await arrived();
    const t1 = performance.now();
    const got = hex(await crypto.subtle.digest('SHA-256', out));
    stats.downloadMs += t1 - t0 - wrote;
    stats.verifyMs += performance.now() - t1;
    if (got !== want.sha256) {
      throw fail(`integrity check failed for ${label}: sha256 ${got}, manifest says ${want.sha256}; nothing was cached`);
    }
    let stored = false;
    if (w) {
      const t = performance.now();
      stored = await w.commit().then(() => true, (e) => { cannotStore(f, e); return false; });
      if (stored) await dropOthers(f);
      stats.cacheWriteMs += wrote + performance.now() - t;
    }
    return { buf: out, whole: !ranged, stored };
  }

  // cannotStore warns, once per file, that f could not be cached.
  const warned = new Set();
  function cannotStore(f, e) {
    if (warned.has(f.name)) return;
    warned.add(f.name);
    post({ type: 'warning', message: `could not cache ${f.name} (${e.name}: ${e.message}); it will be downloaded again next time` });
  }

  // dropOthers removes the copies of f with another hash (an older model
  // version, or the file cached whole before it came in parts).
  async function dropOthers(f) {
    const prefix = base + f.name + '?';
    const keep = keysOf(f);
    for (const req of await store.cache.keys()) {
      if (req.url.startsWith(prefix) && !keep.has(req.url)) await store.drop(req.url);
    }
  }

  // store writes bytes already checked under key (a part of a file a
  // server sent whole), reporting whether it did.
  async function storeChecked(f, key, bytes) {
    let w = null;
    try {
      w = await store.files.writer(key);
      w.write(bytes, 0);
      await w.commit();
      return true;
    } catch (e) {
      if (w) await w.abort();
      cannotStore(f, e);
      return false;
    }
  }

  // readPart resolves to part i of f: from the store, else downloaded (a
  // server without Range support sends the whole file: every part of it
  // is then stored). With a store, the other parts download meanwhile, in
  // file order (pump).
  function readPart(f, i) {
    const got = once(partKey(f, f.parts[i]), f.parts[i].size, () => partFetch(f, i));
    pump(f);
    return got;
  }

  // pump keeps one download streaming while the model loads: once no
  // part's bytes are arriving, it starts the first part of f in file order
  // that is neither fetched, nor being fetched, nor failed, nor the vision
  // tower's. One stream at a time takes the link's whole speed, and the
  // next starts as the last byte of one arrives, so the link never waits
  // on a check, a commit or the engine. The parts go to the store, not to
  // memory, so it runs ahead of the engine as far as the file goes: a
  // loader that reads out of file order (a safetensors file keeps its
  // tensors in name order, layers.10 before layers.2) finds them there or
  // on their way. Only with a store, until the load ends (stop), and once
  // the server has answered a range request with a range: one without
  // sends the whole file for every request.
  const arriving = new Set(); // keys being fetched whose bytes are not all in
  const failed = new Set(); // keys whose fetch failed
  let ranges = false; // the server answered a range request with a range
  let stopped = false; // the load ended
  function pump(f) {
    if (!store || !ranges || stopped || arriving.size > 0) return null;
    for (const [j, p] of f.parts.entries()) {
      const key = partKey(f, p);
      if (p.vision || fetching.has(key) || counted.has(key) || failed.has(key)) continue;
      // an error comes again when the engine reads it
      return new Promise((out) => {
        partFetch(f, j, () => { stats.fetchedAhead++; out(); }).catch(() => {}).finally(out);
      });
    }
    return null;
  }

  // kept is what a download (got) leaves the engine: null once the bytes
  // are in the store, which the engine then reads (the download's buffer
  // goes back for the next part), else the bytes.
  function kept(got, key) {
    if (!got.stored) return got.buf;
    if (store.files.sync) {
      releaseBuffer(got.buf);
    } else {
      hold(key, got.buf);
    }
    return null;
  }

  // Without synchronous handles (a shared worker) the store is read whole,
  // part by part: the last HELD downloads keep their bytes for the read
  // that opens them (once), instead of reading them back while the
  // store is busy with the next parts' writes.
  const held = new Map(); // key → bytes, oldest first
  function hold(key, bytes) {
    held.set(key, bytes);
    for (const [k, b] of held) {
      if (held.size <= HELD) break;
      held.delete(k);
      releaseBuffer(b);
    }
  }
  function takeHeld(key) {
    const b = held.get(key);
    held.delete(key);
    return b;
  }

  // partFetch resolves to part i's bytes, or null once the store has them;
  // requested, if given, is called once its download's request is out.
  function partFetch(f, i, requested) {
    const p = f.parts[i];
    const key = partKey(f, p);
    return share(key, async () => {
      arriving.add(key);
      try {
        return await fetchPart(f, p, key, requested);
      } catch (e) {
        failed.add(key); // not fetched ahead again: the engine's read retries it
        throw e;
      } finally {
        arriving.delete(key);
        pump(f);
      }
    });
  }

  // fetchPart is partFetch's fetch of part p of f, under key.
  async function fetchPart(f, p, key, requested) {
    if (await stored(key)) {
      if (!counted.has(key)) {
        counted.add(key);
        stats.hits++;
        if (!p.vision) {
          done += p.size;
          post({ type: 'progress', file: f.name, loaded: done, total, fromCache: true });
        }
      }
      return null;
    }
    if (stats.offline) {
      throw new Error(`${f.name} (bytes ${p.offset}-${p.offset + p.size - 1}) is not cached and the model URL cannot be reached (offline)`);
    }
    stats.misses++;
    // The next part downloads while this one is checked and committed:
    // its request goes out first (the check holds the thread).
    const got = await download(f, p, key, () => { ranges = true; arriving.delete(key); return pump(f); }, requested);
    counted.add(key);
    if (!got.whole) return kept(got, key);
    for (const q of f.parts) {
      const b = got.buf.subarray(q.offset, q.offset + q.size);
      if (hex(await crypto.subtle.digest('SHA-256', b)) !== q.sha256) {
        throw new Error(`integrity check failed for ${f.name}: bytes ${q.offset}-${q.offset + q.size - 1} do not match the manifest's sha256 for them; nothing was cached`);
      }
    }
    let all = false;
    if (store) {
      const t = performance.now();
      all = true;
      for (const q of f.parts) {
        const k = partKey(f, q);
        all = (await storeChecked(f, k, got.buf.subarray(q.offset, q.offset + q.size))) && all;
        counted.add(k);
      }
      if (all) await dropOthers(f);
      stats.cacheWriteMs += performance.now() - t;
    }
    return all ? null : got.buf.slice(p.offset, p.offset + p.size);
  }

  async function fetchFile(name) {
    const f = files.get(name);
    if (!f) return null; // the model has no such file
    if (f.parts) {
      return { size: f.size, parts: f.parts.map((p) => ({ offset: p.offset, size: p.size })), read: (i) => readPart(f, i) };
    }
    const key = keyOf(f);
    return once(key, f.size, () => share(key, async () => {
      if (await stored(key)) {
        stats.hits++;
        done += f.size;
        post({ type: 'progress', file: f.name, loaded: done, total, fromCache: true });
        return null;
      }
      if (stats.offline) {
        throw new Error(`${f.name} is not cached and the model URL cannot be reached (offline)`);
      }
      stats.misses++;
      return kept(await download(f, null, key), key);
    }));
  }

  // keepAll downloads and stores every part the engine has not read (the
  // vision tower's, otherwise fetched on the first image), so that the
  // model works offline with images too; it resolves to the bytes it
  // downloaded.
  async function keepAll() {
    if (!store) throw new Error('the model is not being cached (no Cache Storage or OPFS, caching disabled, or too little storage)');
    const before = stats.bytesDownloaded;
    for (const f of files.values()) {
      for (let i = 0; f.parts && i < f.parts.length; i++) {
        if (!(await store.cache.match(partKey(f, f.parts[i])))) {
          const sf = await readPart(f, i);
          if (sf && sf.close) sf.close();
        }
      }
    }
    return stats.bytesDownloaded - before;
  }
  // peekFile is fetchFile for Tessera.check, which reads the model's
  // headers only: a file over PEEK_BYTES comes as windows of PEEK_BYTES,
  // each read when the engine reads it, from the store's copy of the
  // part holding it or else by an HTTP Range request. A window is no
  // whole part, so it is neither checked against a sha256 nor stored;
  // stats.peekedBytes counts the bytes fetched. Smaller files (config.json)
  // are fetched, checked and stored as a load fetches them.
  async function peekFile(name) {
    const f = files.get(name);
    if (!f) return null;
    if (f.size <= PEEK_BYTES) return fetchFile(name);
    const windows = [];
    for (let off = 0; off < f.size; off += PEEK_BYTES) windows.push({ offset: off, size: Math.min(PEEK_BYTES, f.size - off) });
    return { size: f.size, parts: windows, read: (i) => peek(f, windows[i]) };
  }

  async function peek(f, w) {
    const inside = (p) => p.offset <= w.offset && w.offset + w.size <= p.offset + p.size;
    const p = f.parts ? f.parts.find(inside) : f;
    const key = p && (f.parts ? partKey(f, p) : keyOf(f));
    if (store && key && await stored(key)) {
      const sf = await store.files.open(key, p.size);
      if (sf) {
        try {
          const buf = new Uint8Array(w.size);
          const n = sf.readInto(buf, w.offset - (p.offset ?? 0)); // a whole file (p = f) has no offset
          if (n === w.size) return buf;
        } finally {
          sf.close();
        }
      }
    }
    const range = `bytes=${w.offset}-${w.offset + w.size - 1}`;
    let resp;
    try {
      resp = await fetch(base + f.name, { cache: 'no-store', headers: { Range: range } });
    } catch (e) {
      throw new Error(`reading ${f.name} (${range}) failed (network): ${e.message}`);
    }
    if (resp.status !== 206) {
      if (resp.body) resp.body.cancel().catch(() => {});
      throw new Error(resp.ok
        ? `${base + f.name}: the server answered a Range request with the whole file (HTTP ${resp.status}); the check reads only the model's headers and needs a server that serves ranges`
        : `reading ${base + f.name} (${range}): HTTP ${resp.status}`);
    }
    const buf = new Uint8Array(await resp.arrayBuffer());
    if (buf.length !== w.size) throw new Error(`reading ${f.name} (${range}): the server sent ${buf.length} bytes`);
    stats.peekedBytes += buf.length;
    return buf;
  }
  // stop ends the read-ahead (the load is over: bound, or failed).
  // The part buffers kept for reuse go with the last running load.
  loadsRunning++;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    for (const b of held.values()) releaseBuffer(b);
    held.clear();
    if (--loadsRunning === 0) spareBuffers.splice(0).forEach(freeBuffer);
  };
  return { base, loadUrl, fetchFile, peekFile, stats, toFetch, keepAll, stop };
}

// Image size caps: the engine's (Go engine.ImageLimits =
// imageio.DefaultLimits), checked here before any pixel is decoded.
const IMAGE_MAX_PIXELS = 40_000_000;
const IMAGE_MAX_SIDE = 16384;
const IMAGE_MAX_BYTES = 64 << 20;

function checkImageSize(w, h, what) {
  if (!(w > 0 && h > 0)) throw new Error(`${what} has invalid size ${w}x${h}`);
  if (w > IMAGE_MAX_SIDE || h > IMAGE_MAX_SIDE) {
    throw new Error(`${what} is too large: ${w}x${h} has a side over the ${IMAGE_MAX_SIDE} px cap`);
  }
  if (w * h > IMAGE_MAX_PIXELS) {
    throw new Error(`${what} is too large: ${w}x${h} = ${w * h} pixels exceeds the cap of ${IMAGE_MAX_PIXELS}`);
  }
}

// headerSize reads the width and height from the header of a PNG, GIF,
// JPEG or WebP file (null for other formats or a header it cannot find:
// then the size is checked after decoding).
function headerSize(b) {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const ascii = (o, n) => String.fromCharCode(...b.subarray(o, o + n));
  if (b.length >= 24 && ascii(1, 3) === 'PNG' && ascii(12, 4) === 'IHDR') {
    return [dv.getUint32(16), dv.getUint32(20)];
  }
  if (b.length >= 10 && ascii(0, 4) === 'GIF8') return [dv.getUint16(6, true), dv.getUint16(8, true)];
  if (b.length >= 30 && ascii(0, 4) === 'RIFF' && ascii(8, 4) === 'WEBP') {
    const kind = ascii(12, 4);
    if (kind === 'VP8 ') return [dv.getUint16(26, true) & 0x3fff, dv.getUint16(28, true) & 0x3fff];
    if (kind === 'VP8L') {
      const v = dv.getUint32(21, true);
      return [(v & 0x3fff) + 1, ((v >>> 14) & 0x3fff) + 1];
    }
    if (kind === 'VP8X') return [(dv.getUint32(24, true) & 0xffffff) + 1, (dv.getUint32(27, true) & 0xffffff) + 1];
    return null;
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) { // JPEG: find the SOF segment
    let o = 2;
    while (o + 9 <= b.length) {
      if (b[o] !== 0xff) return null;
      const m = b[o + 1];
      if (m === 0xff) { o++; continue; }
      if (m === 0xd8 || m === 0x01 || (m >= 0xd0 && m <= 0xd7)) { o += 2; continue; }
      if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) {
        return [dv.getUint16(o + 7), dv.getUint16(o + 5)];
      }
      o += 2 + dv.getUint16(o + 2);
    }
  }
  return null;
}

async function sha256hex(bytes) {
  return hex(await crypto.subtle.digest('SHA-256', bytes));
}

// decodeImage turns a Blob, ImageBitmap, ImageData or {rgba, width,
// height} into {rgba, width, height}: non-premultiplied sRGB pixels.
async function decodeImage(image, what) {
  if (image && !(image instanceof Blob) && (image.rgba instanceof Uint8Array || image.rgba instanceof Uint8ClampedArray)) {
    const { rgba, width, height } = image;
    if (!Number.isInteger(width) || !Number.isInteger(height)) throw new Error(`${what}: width and height must be integers`);
    checkImageSize(width, height, what);
    if (rgba.length !== width * height * 4) {
      throw new Error(`${what}: rgba has ${rgba.length} bytes, a ${width}x${height} RGBA image needs ${width * height * 4}`);
    }
    return { rgba, width, height };
  }
  if (typeof ImageData !== 'undefined' && image instanceof ImageData && (image.colorSpace || 'srgb') === 'srgb') {
    checkImageSize(image.width, image.height, what);
    return { rgba: image.data, width: image.width, height: image.height };
  }
  if (typeof OffscreenCanvas === 'undefined') {
    throw new Error(`${what}: this browser has no OffscreenCanvas in workers, needed to read image pixels; pass an ImageData instead`);
  }
  let src = image;
  let owned = false;
  if (image instanceof Blob) {
    if (image.size > IMAGE_MAX_BYTES) throw new Error(`${what} is too large: ${image.size} bytes exceeds the cap of ${IMAGE_MAX_BYTES}`);
    const size = headerSize(new Uint8Array(await image.slice(0, 256 << 10).arrayBuffer()));
    if (size) checkImageSize(size[0], size[1], what);
    try {
      src = await createImageBitmap(image, { imageOrientation: 'from-image', premultiplyAlpha: 'none', colorSpaceConversion: 'none' });
    } catch (e) {
      throw new Error(`${what}: this browser cannot decode the ${image.type || 'file'} (${e.message})`);
    }
    owned = true;
  } else if (!(typeof ImageBitmap !== 'undefined' && image instanceof ImageBitmap) && !(typeof ImageData !== 'undefined' && image instanceof ImageData)) {
    throw new Error(`${what} must be a Blob/File, an ImageBitmap, an ImageData or {rgba, width, height}`);
  }
  try {
    const { width, height } = src;
    checkImageSize(width, height, what);
    const canvas = new OffscreenCanvas(width, height);
    const ctx = canvas.getContext('2d', { colorSpace: 'srgb', willReadFrequently: true });
    if (!ctx) throw new Error(`${what}: could not get a 2D context of ${width}x${height}`);
    if (src instanceof ImageData) ctx.putImageData(src, 0, 0); // another colour space: converted to sRGB
    else ctx.drawImage(src, 0, 0);
    const data = ctx.getImageData(0, 0, width, height, { colorSpace: 'srgb' });
    return { rgba: data.data, width, height };
  } finally {
    if (owned) src.close();
  }
}

let loadStats = null;
let model = null; // the loaded model's openModel: its files and cache

// dataURLBlob decodes a data: URL ("data:[type][;base64],data") into a
// Blob without fetch (which the page's Content-Security-Policy may not
// allow for data: URLs).
function dataURLBlob(url) {
  const comma = url.indexOf(',');
  if (comma < 0) throw new Error('a data: URL needs a comma before its data');
  const meta = url.slice(5, comma).split(';');
  const type = meta[0] || 'text/plain';
  const body = url.slice(comma + 1);
  let bytes;
  if (meta.includes('base64')) {
    let bin;
    try {
      bin = atob(body.replace(/\s/g, ''));
    } catch (e) {
      throw new Error('its base64 data does not decode');
    }
    bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  } else {
    bytes = new TextEncoder().encode(decodeURIComponent(body));
  }
  return new Blob([bytes], { type });
}

// chatImages fetches and decodes the image parts of an OpenAI request's
// messages in order (data: URLs, or http(s) URLs the page may fetch). It
// returns {images} or {error} in OpenAI's shape.
async function chatImages(messages) {
  const images = [];
  if (!Array.isArray(messages)) return { images };
  for (const [i, m] of messages.entries()) {
    if (!m || !Array.isArray(m.content)) continue;
    for (const [j, part] of m.content.entries()) {
      if (!part || (part.type !== 'image_url' && part.type !== 'image')) continue;
      const param = `messages[${i}].content[${j}]`;
      const url = part.image_url && typeof part.image_url.url === 'string' ? part.image_url.url : null;
      if (!url) {
        return { error: { status: 400, type: 'invalid_request_error', param, code: null, message: `${param}: an image part needs image_url.url (a data: or http(s) URL)` } };
      }
      try {
        let blob;
        if (url.startsWith('data:')) {
          blob = dataURLBlob(url);
        } else {
          const resp = await fetch(url);
          if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
          blob = await resp.blob();
        }
        images.push(await decodeImage(blob, `${param} (image ${images.length + 1})`));
      } catch (e) {
        const what = url.startsWith('data:') ? 'the data: URL' : url.slice(0, 200);
        return { error: { status: 400, type: 'invalid_request_error', param, code: 'invalid_image', message: `${param}: could not read the image at ${what}: ${e.message}` } };
      }
    }
  }
  return { images };
}

// stopIfCancelled stops the running generation when its page cancelled
// it before it began (shared worker: it was waiting its turn).
function stopIfCancelled() {
  if (running && running.cancelled) self.tesseraWasm.cancel();
}

async function handle(msg) {
  switch (msg.type) {
    case 'load': {
      const t0 = performance.now();
      let wasmUrl = msg.wasmUrl;
      let fallbackUrl = msg.wasmFallbackUrl;
      if (msg.autoCPUWasmUrl && !started && await autoCPUBundle(!!msg.allowSoftwareAdapter)) {
        [wasmUrl, fallbackUrl] = [msg.autoCPUWasmUrl, msg.wasmUrl];
      }
      const go = await startGo(wasmUrl, msg.execUrl, fallbackUrl);
      const t1 = performance.now();
      storeRead = '';
      const m = await openModel(msg.modelUrl, msg.cacheName, msg.storageFreeForTest);
      const info = await go.load(m.loadUrl, { fetchFile: m.fetchFile, backend: msg.backend || 'cpu', allowSoftwareAdapter: !!msg.allowSoftwareAdapter,
        gpuMemory: msg.gpuMemory || undefined, exact: !!msg.exact }).finally(m.stop);
      loadStats = m.stats;
      loadStats.storeRead = storeRead;
      model = m;
      loadStats.engineStartMs = t1 - t0; // fetch + compile tessera.wasm, start Go
      loadStats.modelMs = performance.now() - t1; // fetch/verify files, bind the model, probe the GPU
      return { info, cache: loadStats };
    }
    case 'generate': {
      const go = await started;
      const images = [];
      for (const [i, im] of (msg.images || []).entries()) images.push(await decodeImage(im, `image ${i + 1}`));
      const hashes = msg.hashImages ? await Promise.all(images.map((im) => sha256hex(im.rgba))) : null;
      const request = images.length ? { ...msg.request, images } : msg.request;
      // live: a snapshot of the routing/state view (request.live), now and then
      const stats = await go.generate(request, (tokenId, text, live) => {
        stopIfCancelled();
        post({ type: 'token', id: msg.id, tokenId, text, live });
      });
      if (hashes && stats.images) stats.images.forEach((im, i) => { im.sha256 = hashes[i]; });
      return stats;
    }
    case 'chat': {
      // An OpenAI chat completion: the Go engine validates the request,
      // renders the messages with the model's chat template and generates.
      const go = await started;
      const { images, error } = await chatImages(msg.params && msg.params.messages);
      if (error) return { error };
      let body;
      try {
        body = JSON.stringify(msg.params);
      } catch (e) {
        return { error: { status: 400, type: 'invalid_request_error', param: null, code: null, message: `the request cannot be sent as JSON: ${e.message}` } };
      }
      return go.chat(body, images, (kind, a, b, c) => {
        stopIfCancelled();
        if (kind === 'start') post({ type: 'chat-start', id: msg.id, promptTokens: a });
        else post({ type: 'token', id: msg.id, tokenId: b, text: a, ...(c ? { logprob: c } : {}) });
      });
    }
    case 'pixels': {
      const px = await decodeImage(msg.image, 'the image');
      return { ...px, sha256: await sha256hex(px.rgba) };
    }
    case 'info':
      return withHeap(await (await started).info());
    case 'keepOffline':
      if (!model) throw new Error('keepOffline: no model is loaded');
      return { bytes: await model.keepAll() };
    case 'stored':
      if (!model) throw new Error('stored: no model is loaded');
      return { cache: loadStats };
    case 'saveSession': {
      // The engine's snapshot of the conversation, written to OPFS under a
      // temporary name and then moved over the old copy, so a failed save
      // never leaves half a file.
      const go = await started;
      const { images, error } = await chatImages(msg.messages);
      if (error) throw new Error(error.message);
      const bytes = await go.saveSession({ chat: JSON.stringify(msg.messages), images });
      const dir = await sessionDir();
      const tmp = await dir.getFileHandle(msg.name + '.partial', { create: true });
      const w = await tmp.createWritable();
      await w.write(bytes);
      await w.close();
      await tmp.move(dir, msg.name + SESSION_EXT);
      return { name: msg.name, bytes: bytes.length };
    }
    case 'restoreSession': {
      const dir = await sessionDir();
      let file;
      try {
        file = await (await dir.getFileHandle(msg.name + SESSION_EXT)).getFile();
      } catch (e) {
        throw new Error(`no saved session named ${JSON.stringify(msg.name)}`);
      }
      return (await started).restoreSession(new Uint8Array(await file.arrayBuffer()));
    }
    case 'deleteSession': {
      const dir = await sessionDir();
      await dir.removeEntry(msg.name + SESSION_EXT).catch(() => {});
      return null;
    }
    case 'loseGPU':
      return (await started).loseGPUForTest(!!msg.wait);
    case 'check': {
      // Tessera.check: the model's headers, checked, with its figures and
      // a decode estimate from this CPU's kernels; no weights downloaded.
      const t0 = performance.now();
      const go = await startGo(msg.wasmUrl, msg.execUrl, msg.wasmFallbackUrl);
      const m = await openModel(msg.modelUrl, msg.cacheName, msg.storageFreeForTest, true);
      const r = await go.check(m.loadUrl, { fetchFile: m.peekFile, context: msg.context, probeMs: msg.probeMs,
        allowSoftwareAdapter: !!msg.allowSoftwareAdapter }).finally(m.stop);
      const d = m.toFetch;
      const gb = (n) => (n / 2 ** 30).toFixed(2) + ' GiB';
      r.download = d;
      r.bytesFetched = m.stats.bytesDownloaded + m.stats.peekedBytes;
      r.offline = m.stats.offline;
      r.backend = msg.backend === 'auto' ? r.auto.backend : (msg.backend || 'cpu');
      r.problems = [];
      r.warnings = [];
      if (r.backend === 'gpu' && !r.adapter.available) {
        r.problems.push(`backend 'gpu' needs a WebGPU adapter, and this browser offers none: ${r.adapter.reason}`);
      }
      if (r.backend === 'cpu' && !r.fitsCPU) {
        r.problems.push(`the model needs ${gb(r.memoryBytes)} of memory on the CPU (weights and state for ${r.context} tokens), more than the ${gb(r.heapLimit)} the WebAssembly heap can hold: use a smaller or quantized file, or a GPU`);
      }
      if (!r.download.fitsStorage) {
        r.warnings.push(`not enough browser storage to keep this model for offline use (it needs ${gb(d.bytes)}, ${gb(Math.max(0, d.storageFree))} are free): it would load, and download again next time`);
      }
      if (r.backend === 'gpu') {
        r.warnings.push('the decode estimate is for the CPU path; the GPU runs its own kernels (this check does not time them)');
      }
      r.ok = r.problems.length === 0;
      r.ms = performance.now() - t0;
      return r;
    }
    case 'conformance': {
      // The WGSL kernel conformance cases on this browser's WebGPU
      // (bundles built with -tags conformance); no model needed.
      let wasmUrl = msg.wasmUrl;
      let fallbackUrl = msg.wasmFallbackUrl;
      if (msg.autoCPUWasmUrl && !started && await autoCPUBundle(!!msg.allowSoftwareAdapter)) {
        [wasmUrl, fallbackUrl] = [msg.autoCPUWasmUrl, msg.wasmUrl];
      }
      const go = await startGo(wasmUrl, msg.execUrl, fallbackUrl);
      return go.conformance(msg.perOp || 0);
    }
    case 'dispose':
      if (started) (await started).dispose();
      return null;
    default:
      throw new Error(`unknown request type ${msg.type}`);
  }
}

// reply answers request msg on port (but for one answered already).
function reply(port, msg, work) {
  work.then(
    (value) => port.postMessage({ type: 'reply', id: msg.id, ok: true, value }),
    (err) => { if (err !== skipped) port.postMessage({ type: 'reply', id: msg.id, ok: false, error: String(err && err.message || err) }); },
  );
}

if (shared) {
  self.onconnect = (ev) => {
    const port = ev.ports[0];
    port.onmessage = (e) => receive(port, e.data);
  };
} else {
  self.onmessage = (ev) => {
    const msg = ev.data;
    if (msg.type === 'cancel') {
      if (self.tesseraWasm) self.tesseraWasm.cancel();
      return;
    }
    reply(self, msg, handle(msg));
  };
}

// The shared worker's pages (their ports); the engine's requests, one at
// a time (queue); loaded: the model is loaded (by the first page).
const pages = new Set();
const waiting = new Set(); // requests queued behind the running one
let dropped = 0; // running requests stopped because their page went
let queue = Promise.resolve();
let loaded = false;
let loadProgress = null; // the last progress event of the engine's load, for the pages that join it

// engineRequests are the requests that use the engine (or post to the
// page): they wait for the ones before them, whichever page sent them.
const engineRequests = new Set(['load', 'generate', 'chat', 'keepOffline', 'saveSession', 'restoreSession', 'deleteSession', 'loseGPU']);

// receive serves msg from a page of the shared worker.
function receive(port, msg) {
  switch (msg.type) {
    case 'attach': {
      pages.add(port);
      // the page holds the lock while it lives: it is ours once the page
      // has disposed its engine or closed
      if (msg.lock && navigator.locks) navigator.locks.request(msg.lock, () => leave(port));
      return;
    }
    case 'detach':
    case 'dispose': // the engine is the other pages' too
      leave(port);
      if (msg.id) port.postMessage({ type: 'reply', id: msg.id, ok: true, value: null });
      return;
    case 'cancel':
      // the page's requests, running or waiting, stop at their next token
      if (running && running.port === port) {
        running.cancelled = true;
        if (self.tesseraWasm) self.tesseraWasm.cancel();
      }
      for (const w of waiting) {
        if (w.port !== port) continue;
        w.cancelled = true;
        // a generation that has not begun ends now, with no token
        if (w.msg.type === 'generate' && !w.answered) {
          w.answered = true;
          port.postMessage({ type: 'reply', id: w.msg.id, ok: true, value: { promptTokens: 0, tokens: 0, stopped: 'cancelled', waited: true } });
        }
      }
      return;
  }
  if (!engineRequests.has(msg.type)) {
    reply(port, msg, msg.type === 'info' ? sharedInfo() : handle(msg));
    return;
  }
  const req = { port, msg, cancelled: false, answered: false };
  waiting.add(req);
  const work = queue.then(async () => {
    waiting.delete(req);
    if (!pages.has(port)) throw new Error('the page has gone');
    if (req.answered) return null;
    running = req;
    client = port;
    try {
      if (msg.type === 'load' && loaded) {
        if (loadProgress) port.postMessage(loadProgress);
        return { info: await sharedInfo(), cache: { ...joinedStats(), joined: true } };
      }
      const v = await handle(msg);
      if (msg.type === 'load') loaded = true;
      return v;
    } finally {
      running = null;
      client = self;
    }
  });
  queue = work.catch(() => {});
  reply(port, msg, work.then((v) => { if (req.answered) throw skipped; return v; }));
}
const skipped = new Error('answered already');

// sharedInfo is the engine's info with shared: {pages, dropped} added.
async function sharedInfo() {
  const info = withHeap(await (await started).info());
  return { ...info, shared: { pages: pages.size, dropped } };
}

// joinedStats is loadStats for a page that joined the loaded engine:
// nothing fetched, nothing read.
function joinedStats() {
  const z = {};
  for (const [k, v] of Object.entries(loadStats || {})) z[k] = typeof v === 'number' ? 0 : typeof v === 'boolean' ? false : v;
  return z;
}

// leave forgets the page on port: its queued requests are dropped, its
// running one stops at the next token, and the engine is freed when no
// page is left.
function leave(port) {
  if (!pages.delete(port)) return;
  if (running && running.port === port) {
    dropped++;
    running.cancelled = true;
    if (self.tesseraWasm) self.tesseraWasm.cancel();
  }
  if (pages.size > 0) return;
  queue = queue.then(async () => {
    if (pages.size > 0 || !loaded) return;
    loaded = false;
    loadProgress = null;
    model = null;
    loadStats = null;
    (await started).dispose();
  }).catch(() => {});
}
