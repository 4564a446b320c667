// tessera.js — run a Kimi-K3-class model in the browser.
//
//   import { Tessera } from './tessera.js';
//   const engine = await Tessera.load('/model/', { onProgress: (p) => … });
//   for await (const piece of engine.generate('Hello', { maxTokens: 64 })) {
//     out.textContent += piece.text;            // piece: {id, text}
//   }
//   console.log(engine.lastStats, await engine.info());
//   // A vision model (info().vision) takes images: a Blob/File (decoded by
//   // the browser), an ImageBitmap or an ImageData, placed before the text.
//   for await (const piece of engine.generate('Describe it.', { image: file })) { … }
//   engine.dispose();
//
//   // OpenAI's chat API (the messages are rendered by the model's chat
//   // template; image_url parts take data: URLs):
//   const r = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 64 });
//   console.log(r.choices[0].message.content, r.usage);
//   const stream = await engine.chat.completions.create({ messages, stream: true });
//   for await (const chunk of stream) out.textContent += chunk.choices[0]?.delta?.content ?? '';
//
// The engine (Go compiled to WebAssembly) runs in a dedicated Web Worker, so
// the page never blocks. Weights are streamed with progress, verified
// against the sha256 values of model.manifest.json and kept in Cache
// Storage: a reload loads from the cache, also offline. Errors are Error
// objects (TesseraError) whose message says what is wrong.

/** An error from tessera: bad model URL, integrity failure, engine error. */
export class TesseraError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TesseraError';
  }
}

/**
 * An error of engine.chat.completions.create, in the shape of the OpenAI
 * SDK's APIError: status (400 for a bad request, 409 while the engine is
 * busy, 500 for an engine failure), error ({message, type, param, code},
 * OpenAI's error body), and type, param, code.
 */
export class ChatCompletionError extends TesseraError {
  constructor(body) {
    super(body.message);
    this.name = 'ChatCompletionError';
    this.status = body.status ?? 500;
    this.error = { message: body.message, type: body.type ?? 'server_error', param: body.param ?? null, code: body.code ?? null };
    this.type = this.error.type;
    this.param = this.error.param;
    this.code = this.error.code;
  }
}

const here = (name) => new URL(name, import.meta.url).href;

// completionID is a fresh OpenAI-style id.
function completionID() {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return 'chatcmpl-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// checkImage throws unless image is something the worker can decode.
// sessionName checks a saved conversation's name: a file name in OPFS.
function sessionName(name) {
  if (typeof name !== 'string' || !/^[A-Za-z0-9._-]{1,100}$/.test(name) || name.startsWith('.')) {
    throw new TesseraError(`session name ${JSON.stringify(name)}: want 1-100 letters, digits, '.', '_' or '-', not starting with '.'`);
  }
  return name;
}

function checkImage(image, what) {
  const is = (name, v) => typeof globalThis[name] === 'function' && v instanceof globalThis[name];
  if (is('Blob', image) || is('ImageBitmap', image) || is('ImageData', image)) return;
  if (image && typeof image === 'object' && (is('Uint8Array', image.rgba) || is('Uint8ClampedArray', image.rgba))) return;
  throw new TesseraError(`${what} must be a Blob/File, an ImageBitmap, an ImageData or {rgba, width, height}, got ${
    image === null ? 'null' : (image && image.constructor && image.constructor.name) || typeof image}`);
}

/** A loaded model running in its own worker. Create it with Tessera.load. */
export class Tessera {
  /**
   * Loads the model at modelUrl: a directory URL holding config.json, the
   * safetensors files and model.manifest.json, or the URL of one .gguf file
   * with FILE.gguf.manifest.json beside it (tessera manifest --model
   * FILE.gguf), loaded as `tessera run --model FILE.gguf` loads it.
   * options: onProgress({file, loaded, total, fromCache}); backend: 'cpu'
   * (default), 'gpu' (WebGPU; fails with a clear error without an adapter)
   * or 'auto' (the GPU when the browser offers a real GPU adapter; the CPU
   * on a software or fallback adapter such as SwiftShader, which is slower
   * than the CPU path, unless allowSoftwareAdapter is true; the CPU when
   * there is no adapter or the GPU runner fails; what was chosen and why is
   * in info().backend);
   * gpuMemory: the GPU memory budget ('512MiB', '2G', or '50%' of the
   * routed experts): a model over it keeps its dense part and as many
   * experts as fit on the GPU and uploads the others when routed
   * (info().expertCache, lastStats.expertCache: slots, hitRate,
   * uploadBytes, uploadBytesPerToken, uploadMs); on the GPU,
   * info().gpuMemory says what the model holds there in bytes (bytes: all
   * buffers; weights resident, modelWeights, state, scratch);
   * exact: the CPU path multiplies quantized (GGUF block-format) weights
   * in float32 as WebGPU does, where it would round activations to int8
   * for integer kernels — the same greedy tokens as `tessera run --exact`
   * and as the GPU;
   * wasmUrl (default: tessera-cpu.wasm, the bundle without the WebGPU
   * runner, for backend 'cpu', and for 'auto' where the browser offers no
   * WebGPU adapter or only its fallback adapter (without
   * allowSoftwareAdapter), where auto always takes the CPU; each falls back
   * to tessera.wasm where the server has no such file; tessera.wasm
   * otherwise; info().gpuRunner says which bundle runs), execUrl
   * (wasm_exec.js), workerUrl, cacheName (the model store: the OPFS
   * directory holding the weights and the Cache Storage bucket indexing
   * them, both of this name; '' disables caching). When the files to download do not fit in
   * the storage the browser grants (navigator.storage.estimate), the model
   * loads without being cached, with a console warning and
   * loadStats.cacheSkipped; loadStats.storeRead says how the store was
   * read ('sync' handles, a shared worker's whole parts by 'byob' or
   * 'stream' reader, or 'slices (why a whole read failed)'; '' when
   * nothing was read back);
   * loadStats.persisted says whether the browser
   * agreed to keep the cache under storage pressure (storage.persist()).
   * shared: one engine for every page of this origin that loads the same
   * model with the same options (a SharedWorker; without SharedWorker
   * support, a worker of its own as without the option): the first page
   * loads it, the others join it (loadStats.joined, nothing fetched; a
   * page that asks during the load gets its onProgress events); the
   * pages' generations run one after another, in the order asked; info()
   * adds shared: {pages, dropped (generations stopped as their page
   * went)}; the engine is freed when the last page disposes
   * its instance or closes. A generation aborted while it waits for its
   * turn ends at once (lastStats: tokens 0, stopped 'cancelled').
   * It resolves once the model is ready, its downloaded files committed
   * to the store (written while they download, committed once their
   * sha256 matches).
   */
  static async load(modelUrl, options = {}) {
    if (typeof modelUrl !== 'string' || modelUrl === '') {
      throw new TesseraError('Tessera.load: the model URL must be a non-empty string');
    }
    if (typeof Worker === 'undefined') {
      throw new TesseraError('this browser has no Web Workers; tessera needs them to run the model off the page');
    }
    const backend = options.backend || 'cpu';
    // backend 'cpu' needs no WebGPU runner: the smaller CPU-only bundle,
    // else (a server without it) the full one; for 'auto' the worker takes
    // the CPU-only bundle where auto cannot choose the GPU (autoCPUBundle)
    const cpuBundle = !options.wasmUrl && backend === 'cpu';
    const autoBundle = !options.wasmUrl && backend === 'auto';
    const msg = {
      type: 'load',
      modelUrl: new URL(modelUrl, location.href).href,
      wasmUrl: options.wasmUrl || here(cpuBundle ? 'tessera-cpu.wasm' : 'tessera.wasm'),
      wasmFallbackUrl: cpuBundle ? here('tessera.wasm') : undefined,
      autoCPUWasmUrl: autoBundle ? here('tessera-cpu.wasm') : undefined,
      execUrl: options.execUrl || here('wasm_exec.js'),
      cacheName: options.cacheName ?? 'tessera-models-v1',
      backend,
      allowSoftwareAdapter: !!options.allowSoftwareAdapter,
      gpuMemory: options.gpuMemory,
      exact: !!options.exact,
      storageFreeForTest: options.storageFreeForTest,
    };
    // shared: one engine in a SharedWorker named after the model and the
    // options that shape it, for every page of the origin that asks for it
    const sharedName = options.shared && typeof SharedWorker === 'function'
      ? 'tessera ' + JSON.stringify([msg.modelUrl, msg.wasmUrl, backend, msg.cacheName, msg.allowSoftwareAdapter, msg.gpuMemory ?? null, msg.exact])
      : null;
    const t = new Tessera(options.workerUrl || here('tessera-worker.js'), options.onProgress, sharedName);
    try {
      if (sharedName) await t.#attach();
      const r = await t.#call(msg);
      t.loadStats = r.cache;
      // Ask the browser to keep the cached model under storage pressure
      // (granted or not at its discretion; only pages can ask).
      if (navigator.storage && navigator.storage.persist) {
        t.loadStats.persisted = await navigator.storage.persist().catch(() => false);
      }
    } catch (e) {
      t.dispose();
      throw e;
    }
    return t;
  }

  /**
   * Checks a model before downloading it: reads only its manifest and
   * headers (config.json and the safetensors headers, or the GGUF header,
   * by HTTP Range requests; from the model store when it has them), makes
   * every check loading it would make that they can answer (each tensor
   * present with its shape and a supported type), and times this CPU's
   * matrix products for the model's weight types to estimate its decode
   * speed here. It runs in a worker of its own, gone when it resolves, to
   * {ok, problems, warnings, backend (what options.backend, default
   * 'cpu', would run on: 'auto' resolved), auto: {backend, reason},
   * adapter, architecture, layout, params, activeParams, weightBytes,
   * visionBytes, decodeBytesPerToken, decodeBytesByType, stateBytes,
   * cacheBytesPerToken, maxContext, context, memoryBytes (weights, state
   * and cache at context tokens), heapLimit, fitsCPU, cpu:
   * {decodeTokPerSec, kernels: [{type, bytesPerToken, gbPerSec,
   * measured}], ms, kernel}, download: {bytes (what a text-only load
   * would download now), stored (found in the model store), total,
   * vision (fetched on the first image), storageFree, fitsStorage},
   * bytesFetched (by the check itself), offline, ms}. problems say why a
   * load would fail (the model too large for the WebAssembly heap on the
   * CPU); a model that cannot load at all (a missing tensor, an
   * unsupported type or architecture) rejects with the error the load
   * would give. options: backend, context (4096: the context memoryBytes
   * and the estimate are for), probeMs (150: timing per weight type),
   * allowSoftwareAdapter, cacheName, wasmUrl, execUrl, workerUrl.
   */
  static async check(modelUrl, options = {}) {
    if (typeof modelUrl !== 'string' || modelUrl === '') {
      throw new TesseraError('Tessera.check: the model URL must be a non-empty string');
    }
    if (typeof Worker === 'undefined') {
      throw new TesseraError('this browser has no Web Workers; tessera needs them to run the model off the page');
    }
    const t = new Tessera(options.workerUrl || here('tessera-worker.js'));
    try {
      return await t.#call({
        type: 'check',
        modelUrl: new URL(modelUrl, location.href).href,
        wasmUrl: options.wasmUrl || here('tessera-cpu.wasm'),
        wasmFallbackUrl: options.wasmUrl ? undefined : here('tessera.wasm'),
        execUrl: options.execUrl || here('wasm_exec.js'),
        cacheName: options.cacheName ?? 'tessera-models-v1',
        backend: options.backend || 'cpu',
        context: options.context,
        probeMs: options.probeMs,
        allowSoftwareAdapter: !!options.allowSoftwareAdapter,
        storageFreeForTest: options.storageFreeForTest,
      });
    } finally {
      t.dispose();
    }
  }

  /**
   * Runs the WGSL kernel conformance cases on this browser's WebGPU in a
   * fresh worker (bundles built with -tags conformance) and resolves to
   * {adapter, cases: [{name, op, dtype, nmse, bound, ok, error}], passed,
   * failed, total, ms}. options: perOp (first cases of every op × dtype;
   * 0 = all), wasmUrl, execUrl, workerUrl.
   */
  static async conformance(options = {}) {
    const t = new Tessera(options.workerUrl || here('tessera-worker.js'));
    try {
      return await t.#call({
        type: 'conformance',
        wasmUrl: options.wasmUrl || here('tessera.wasm'),
        execUrl: options.execUrl || here('wasm_exec.js'),
        perOp: options.perOp || 0,
      });
    } finally {
      t.dispose();
    }
  }

  #worker; // the dedicated worker, or null (shared)
  #port; // where requests go: the worker, or the shared worker's port
  #release = null; // releases the Web Lock that tells a shared worker this page lives
  #next = 1;
  #pending = new Map(); // id → {resolve, reject, onToken}
  #onProgress;
  #dead = null;
  #busy = false;
  /**
   * Statistics of the load: {hits, misses, fetchedAhead, bytesDownloaded,
   * offline, cacheSkipped, storageFree, persisted, engineStartMs, modelMs,
   * downloadMs, verifyMs, cacheWriteMs}: downloadMs and verifyMs split
   * modelMs's file handling (download, sha256 check) from binding the
   * model; cacheWriteMs is the time spent writing downloaded files to the
   * store (OPFS), part of modelMs; fetchedAhead counts the parts that began
   * downloading before the engine asked for them.
   */
  loadStats = null;
  /** Statistics of the last finished generation (see Go engine.Stats). */
  lastStats = null;
  /**
   * OpenAI's chat API: chat.completions.create(params, {signal}) — see
   * #createChat.
   */
  chat = { completions: { create: (params, options) => this.#createChat(params, options) } };

  constructor(workerUrl, onProgress, sharedName) {
    this.#onProgress = onProgress;
    const w = sharedName ? new SharedWorker(workerUrl, { name: sharedName }) : new Worker(workerUrl);
    w.onerror = (ev) => {
      ev.preventDefault();
      this.#fail(`the tessera worker failed: ${ev.message || 'could not start ' + workerUrl}`);
    };
    this.#worker = sharedName ? null : w;
    this.#port = sharedName ? w.port : w;
    this.#port.onmessage = (ev) => this.#receive(ev.data);
  }

  // attach introduces this page to its shared worker, with the name of a
  // Web Lock it holds until dispose or until the page is gone: the worker
  // then stops the page's requests and frees the engine when no page is
  // left.
  async #attach() {
    let lock = null;
    if (navigator.locks) {
      lock = 'tessera-page-' + (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
      await new Promise((held) => navigator.locks.request(lock, () => new Promise((release) => { this.#release = release; held(); })));
    }
    this.#port.postMessage({ type: 'attach', lock });
  }

  #fail(message) {
    this.#dead = new TesseraError(message);
    for (const p of this.#pending.values()) p.reject(this.#dead);
    this.#pending.clear();
  }

  #receive(msg) {
    switch (msg.type) {
      case 'progress':
        if (this.#onProgress) {
          try { this.#onProgress({ file: msg.file, loaded: msg.loaded, total: msg.total, fromCache: msg.fromCache }); } catch (e) { console.error(e); }
        }
        return;
      case 'warning':
        console.warn('tessera:', msg.message);
        return;
      case 'token': {
        const p = this.#pending.get(msg.id);
        if (p && p.onToken) p.onToken({ id: msg.tokenId, text: msg.text, live: msg.live, ...(msg.logprob ? { logprob: msg.logprob } : {}) });
        return;
      }
      case 'chat-start': {
        const p = this.#pending.get(msg.id);
        if (p && p.onStart) p.onStart(msg.promptTokens);
        return;
      }
      case 'reply': {
        const p = this.#pending.get(msg.id);
        if (!p) return;
        this.#pending.delete(msg.id);
        if (msg.ok) p.resolve(msg.value);
        else p.reject(new TesseraError(msg.error));
      }
    }
  }

  #call(msg, onToken, onStart) {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onToken, onStart });
      this.#port.postMessage({ ...msg, id });
    });
  }

  /**
   * Model facts: params total/active, weight and state bytes, backend,
   * adapter ({available, reason, vendor, architecture, fallback, features,
   * limits}), tokenizer, context; vision (the model takes images) and
   * imageTokens ({sampleWidth, sampleHeight, sample: tokens of a sample
   * image, max: tokens of the largest image after resizing, patchSize,
   * minPixels, maxPixels}) for a vision model; chatTemplate: where the
   * template of chat.completions.create comes from ("tokenizer_config.json",
   * "chat_template.jinja", … or "built-in Kimi format").
   */
  async info() {
    return this.#call({ type: 'info' });
  }

  /**
   * Downloads and caches the parts of the model not read yet — the vision
   * tower's, which a model in parts otherwise fetches on the first image —
   * so that the model also takes images offline. Resolves to {bytes}: what
   * it downloaded (0 when everything was cached). Fails when the model is
   * not being cached (cacheName '', or too little storage).
   */
  async keepOffline() {
    return this.#call({ type: 'keepOffline' });
  }

  /**
   * Resolves to loadStats once the files the load downloaded are committed
   * to the store, so that the next visit loads them offline: at once, as
   * load() commits them before it resolves (kept for pages written when
   * the write could outlive the load).
   */
  async stored() {
    const r = await this.#call({ type: 'stored' });
    this.loadStats = { ...r.cache, persisted: this.loadStats ? this.loadStats.persisted : undefined };
    return this.loadStats;
  }

  /**
   * Saves a conversation and the model state its last reply left (the
   * prefix cache's snapshot) under name in the origin's private file system
   * (OPFS), so that after a reload restoreSession(name) puts the state back
   * and the next chat.completions.create on these messages plus a new one
   * prefills only the new one. messages: the chat.completions message list
   * up to and including the last assistant reply. Resolves to {name, bytes}.
   */
  async saveSession(name, messages) {
    return this.#call({ type: 'saveSession', name: sessionName(name), messages });
  }

  /**
   * Restores a conversation saveSession stored under name: resolves to
   * {messages}. Rejects with a clear error when there is none, or when it
   * was saved by another model or another tessera version.
   */
  async restoreSession(name) {
    return this.#call({ type: 'restoreSession', name: sessionName(name) });
  }

  /** Deletes the conversation saved under name (no error if there is none). */
  async deleteSession(name) {
    return this.#call({ type: 'deleteSession', name: sessionName(name) });
  }

  /**
   * Returns the pixels generate() feeds the model for image (see
   * generate's image option): {width, height, rgba (Uint8ClampedArray,
   * non-premultiplied sRGB), sha256 (hex, of rgba)}. For previews and
   * debugging.
   */
  async imagePixels(image) {
    checkImage(image, 'imagePixels: image');
    return this.#call({ type: 'pixels', image });
  }

  /**
   * Generates from prompt (text, or an array of token ids), yielding
   * {id, text} per token. options: maxTokens (default 128), temperature
   * (0 = greedy), topK, topP, minP, repetitionPenalty, seed, logitBias
   * ({tokenId: bias}, bias in [-100, 100] added to the token's logit; -100
   * bans it, as OpenAI's logit_bias), signal (an
   * AbortSignal: aborting stops the generation after the token being
   * computed and ends the iteration at once, with no token after the
   * abort), image or images (an array): for a vision model
   * (info().vision), a Blob/File (decoded by the browser, EXIF orientation
   * applied), an ImageBitmap, an ImageData or {rgba, width, height}, placed
   * before the prompt; hashImages (debugging: lastStats.images[i].sha256 is
   * the SHA-256 of the RGBA pixels the model was given); onLive(snapshot):
   * the live routing/state view — called now and then while generating and
   * once at the end with {rows (MoE layer of each row), experts, topK,
   * tokens in the routing window, load [rows × experts] (fraction of the
   * window's tokens that chose each expert), target and bandLo/bandHi (the
   * Quantile Balancing target K/E and its ±2σ band), norms (per layer, the
   * recent KDA state norms), last (the last step: backend, kdaNorm,
   * cacheTokens, stateBytes), expertCache ({hitRate, bytesPerToken} when
   * experts are streamed)}; without it nothing extra is read back.
   * Breaking out of the loop also stops the generation. When text is held
   * back at the end (an incomplete UTF-8 character) a last piece with id -1
   * carries it. Statistics (TTFT, tokens/s, why it stopped, tokens per
   * image in images[i].tokens) are in engine.lastStats afterwards.
   */
  async *generate(prompt, options = {}) {
    if (this.#busy) throw new TesseraError('a generation is already running on this engine; wait for it or abort it');
    let images = [];
    if (options.images !== undefined && options.images !== null) {
      if (!Array.isArray(options.images)) throw new TesseraError('generate: images must be an array');
      images = options.images.slice();
    }
    if (options.image !== undefined && options.image !== null) images.unshift(options.image);
    images.forEach((im, i) => checkImage(im, `generate: image ${i + 1}`));
    const request = {};
    if (typeof prompt === 'string') request.prompt = prompt;
    else if (Array.isArray(prompt)) request.tokens = prompt;
    else throw new TesseraError('generate: the prompt must be a string or an array of token ids');
    for (const k of ['maxTokens', 'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'seed']) {
      if (options[k] !== undefined) {
        if (typeof options[k] !== 'number' || !Number.isFinite(options[k])) {
          throw new TesseraError(`generate: ${k} must be a finite number, got ${options[k]}`);
        }
        request[k] = options[k];
      }
    }
    if (options.logitBias !== undefined && options.logitBias !== null) {
      const lb = options.logitBias;
      if (typeof lb !== 'object' || Array.isArray(lb)) throw new TesseraError('generate: logitBias must be an object {tokenId: bias}');
      for (const [id, b] of Object.entries(lb)) {
        if (typeof b !== 'number' || !Number.isFinite(b)) throw new TesseraError(`generate: logitBias[${id}] must be a finite number, got ${b}`);
      }
      request.logitBias = { ...lb };
    }
    const onLive = options.onLive;
    if (onLive !== undefined && onLive !== null) {
      if (typeof onLive !== 'function') throw new TesseraError('generate: onLive must be a function');
      request.live = true;
    }
    const live = (snap) => { if (snap && onLive) { try { onLive(snap); } catch (e) { console.error(e); } } };
    const signal = options.signal;
    if (signal && signal.aborted) return;
    const queue = [];
    let wake = null;
    let finished = false;
    let failure = null;
    const poke = () => { if (wake) { const w = wake; wake = null; w(); } };
    const cancel = () => { if (this.#port) this.#port.postMessage({ type: 'cancel' }); };
    this.#busy = true;
    this.lastStats = null;
    const msg = { type: 'generate', request, images, hashImages: !!options.hashImages };
    const done = this.#call(msg, (piece) => { live(piece.live); queue.push({ id: piece.id, text: piece.text }); poke(); })
      .then((stats) => {
        if (stats.live) {
          live(stats.live);
          delete stats.live;
        }
        this.lastStats = stats;
        if (stats.tail) queue.push({ id: -1, text: stats.tail });
      },
        (err) => { failure = err; })
      .finally(() => { finished = true; this.#busy = false; poke(); });
    const onAbort = () => { cancel(); poke(); };
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (signal && signal.aborted) {
          // no token after the abort: those already sent are dropped
          await done;
          break;
        }
        if (queue.length > 0) {
          yield queue.shift();
          continue;
        }
        if (finished) break;
        await new Promise((r) => { wake = r; });
      }
      if (failure) throw failure;
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
      if (!finished) {
        cancel(); // the consumer stopped early
        await done;
      }
    }
  }

  /**
   * engine.chat.completions.create(params, {signal}): OpenAI's chat
   * completion, run by this engine. params as OpenAI's API takes them:
   * messages (role system/developer/user/assistant/tool; content a string
   * or a list of {type: 'text', text} and {type: 'image_url', image_url:
   * {url}} parts — data: URLs, or URLs the page may fetch — for a vision
   * model; name, tool_calls, tool_call_id), max_tokens or
   * max_completion_tokens, temperature (default 1), top_p, seed (random
   * when absent), stop (a string or up to 4), stream, stream_options
   * ({include_usage}), tools and tool_choice (passed to the chat template),
   * model (any name; echoed back), logprobs and top_logprobs (choices'
   * and chunks' logprobs.content), response_format ({type: 'json_object'}
   * or {type: 'json_schema', json_schema: {name, schema}}: the output is
   * grammar-constrained JSON), and the extensions top_k, min_p,
   * repetition_penalty and chat_template_kwargs (e.g. {enable_thinking:
   * false}). The request is checked by the same Go code as tessera serve's
   * API (core/chat). The messages are rendered by the model's chat
   * template (its tokenizer_config.json), else in the built-in Kimi
   * format.
   *
   * Without stream it resolves to a ChatCompletion object; with stream:
   * true to an async iterable of ChatCompletionChunk objects (the first
   * carries delta.role, the last an empty delta and finish_reason, then a
   * usage chunk with empty choices when stream_options.include_usage) with
   * a controller (AbortController) that stops it. A bad request rejects
   * with a ChatCompletionError (status 400, OpenAI's error body, the
   * offending param) before anything streams. options.signal aborts: the
   * stream ends at once (no chunk after the abort, not even one already
   * generated), a pending non-stream call rejects with an AbortError.
   */
  async #createChat(params, options = {}) {
    if (params === null || typeof params !== 'object' || Array.isArray(params)) {
      throw new ChatCompletionError({ status: 400, type: 'invalid_request_error', message: 'chat.completions.create: params must be an object with messages' });
    }
    if (this.#busy) {
      throw new ChatCompletionError({ status: 409, type: 'invalid_request_error', code: 'engine_busy', message: 'a generation is already running on this engine; wait for it or abort it' });
    }
    const controller = new AbortController();
    const signal = options && options.signal;
    if (signal) {
      if (signal.aborted) controller.abort();
      else signal.addEventListener('abort', () => controller.abort(), { once: true });
    }
    const id = completionID();
    const created = Math.floor(Date.now() / 1000);
    const model = typeof params.model === 'string' && params.model ? params.model : 'tessera';
    const queue = [];
    let wake = null;
    let finished = false;
    let result = null;
    let failure = null;
    let onStarted;
    const started = new Promise((resolve) => { onStarted = resolve; });
    const poke = () => { if (wake) { const w = wake; wake = null; w(); } };
    const cancel = () => { if (!finished && this.#port) this.#port.postMessage({ type: 'cancel' }); };
    this.#busy = true;
    this.lastStats = null;
    const done = this.#call({ type: 'chat', params }, (piece) => { queue.push(piece); poke(); }, () => onStarted(true))
      .then((value) => {
        if (value && value.error) failure = new ChatCompletionError(value.error);
        else { result = value; this.lastStats = value.stats; }
      }, (err) => { failure = new ChatCompletionError({ status: 500, type: 'server_error', message: err.message }); })
      .finally(() => { finished = true; this.#busy = false; onStarted(false); poke(); });
    controller.signal.addEventListener('abort', () => { cancel(); poke(); }, { once: true });
    if (controller.signal.aborted) cancel();
    const usage = (r) => ({ prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens,
      prompt_tokens_details: { cached_tokens: (r.stats && r.stats.cachedTokens) || 0 } });

    if (!params.stream) {
      await done;
      if (failure) throw failure;
      if (result.stats.stopped === 'cancelled' && controller.signal.aborted) {
        const e = new TesseraError('Request was aborted.');
        e.name = 'AbortError';
        throw e;
      }
      return {
        id, object: 'chat.completion', created, model,
        choices: [{ index: 0, message: { role: 'assistant', content: result.content, refusal: null },
          logprobs: result.logprobs ? { content: result.logprobs, refusal: null } : null, finish_reason: result.finishReason }],
        usage: usage(result),
        system_fingerprint: null,
      };
    }

    // Streaming: resolve once the request was accepted (or reject with
    // its error), then yield chunks.
    if (!(await started)) {
      await done;
      if (failure) throw failure;
    }
    const includeUsage = !!(params.stream_options && params.stream_options.include_usage);
    const chunk = (choices, extra) => ({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: null, choices, ...(includeUsage ? { usage: null } : {}), ...extra });
    const delta = (d, finish = null, lp = null) => chunk([{ index: 0, delta: d, logprobs: lp ? { content: [lp], refusal: null } : null, finish_reason: finish }]);
    async function* chunks() {
      try {
        yield delta({ role: 'assistant', content: '' });
        for (;;) {
          // nothing after an abort, not even pieces already queued (a fast
          // model has produced many by the time the consumer aborts)
          if (controller.signal.aborted) return;
          if (queue.length > 0) {
            const piece = queue.shift();
            yield delta({ content: piece.text }, null, piece.logprob);
            continue;
          }
          if (finished) break;
          await new Promise((r) => { wake = r; });
        }
        if (failure) throw failure;
        if (result.stats.stopped === 'cancelled' && controller.signal.aborted) return;
        yield delta({}, result.finishReason);
        if (includeUsage) yield chunk([], { usage: usage(result) });
      } finally {
        if (!finished) {
          cancel(); // the consumer stopped early
          await done;
        }
      }
    }
    const it = chunks();
    return { [Symbol.asyncIterator]: () => it, controller };
  }

  /**
   * Test hook: destroys the engine's GPU device as a lost GPU would. The
   * next generation runs on the CPU when the engine was loaded with
   * backend 'auto' (info().backend says why), else fails with an error.
   * Resolves to whether there was a GPU device to lose; with wait, only
   * once the engine has observed the loss.
   */
  async _loseGPUForTest(wait = false) {
    return this.#call({ type: 'loseGPU', wait });
  }

  /**
   * Frees the model and stops the worker; a shared engine (the shared
   * option) is freed once no page holds it.
   */
  dispose() {
    if (this.#worker) {
      this.#worker.terminate();
    } else if (this.#port) { // shared
      this.#port.postMessage({ type: 'detach' });
      this.#port.close();
      if (this.#release) this.#release();
    }
    this.#worker = null;
    this.#port = null;
    if (!this.#dead) this.#fail('the engine was disposed');
  }
}
