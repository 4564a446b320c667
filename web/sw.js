// tessera's service worker: the page works offline after the first visit.
//
// The page shell (this page, its scripts and style, the worker and Go's
// wasm_exec.js) is stored in Cache Storage when the service worker installs
// and refreshed whenever the network serves a newer copy. The engine
// bundles (tessera.wasm, tessera-cpu.wasm) are stored when they are fetched
// through this worker, not at install: a visit downloads only the bundle
// its backend runs, and the page fetches that one through the worker once
// it controls the page (app.js keepEngineOffline). Shell requests go to the
// network first, so an online page is never stale; when the network fails
// or answers with an error, the stored copy is served. Model files are not handled here: the engine's worker keeps
// them in its own store (tessera-models-v1: OPFS, indexed in Cache Storage) and checks them against the
// manifest. Everything else (the OpenAI API under /v1/, other paths) passes
// through untouched.
'use strict';

const SHELL_CACHE = 'tessera-shell-v2';
// Relative to this script's URL (the page's directory).
const SHELL = ['./', 'style.css', 'app.js', 'live.js', 'tessera.js', 'tessera-worker.js',
  'favicon.svg', 'wasm_exec.js'];
const BUNDLES = ['tessera.wasm', 'tessera-cpu.wasm'];
const shellURLs = new Set([...SHELL, ...BUNDLES].map((p) => new URL(p, self.location.href).href));
const indexURL = new URL('./', self.location.href).href;

self.addEventListener('install', (event) => {
  // Fetched afresh (not from the HTTP cache), each must succeed, or the
  // install fails and the next visit tries again.
  event.waitUntil(caches.open(SHELL_CACHE)
    .then((c) => c.addAll(SHELL.map((p) => new Request(p, { cache: 'no-cache' }))))
    .then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((names) => Promise.all(names
      .filter((n) => n.startsWith('tessera-shell-') && n !== SHELL_CACHE)
      .map((n) => caches.delete(n))))
    .then(() => self.clients.claim()));
});

// shellKey is the cached URL that answers req, or '' when req is not part
// of the shell: a navigation to the page with any query answers from './'.
function shellKey(req) {
  if (req.method !== 'GET') return '';
  const u = new URL(req.url);
  if (u.origin !== self.location.origin) return '';
  u.search = '';
  u.hash = '';
  if (req.mode === 'navigate' && (u.href === indexURL || u.href === indexURL + 'index.html')) return indexURL;
  return shellURLs.has(u.href) ? u.href : '';
}

async function networkFirst(req, key) {
  const cache = await caches.open(SHELL_CACHE);
  let resp = null;
  try {
    resp = await fetch(req);
  } catch (e) {
    resp = null; // offline
  }
  if (resp && resp.ok) {
    const old = await cache.match(key);
    const tag = resp.headers.get('etag');
    if (!old || !tag || old.headers.get('etag') !== tag) {
      await cache.put(key, resp.clone()).catch(() => {});
    }
    return resp;
  }
  const cached = await cache.match(key);
  if (cached) return cached;
  return resp || Response.error();
}

self.addEventListener('fetch', (event) => {
  const key = shellKey(event.request);
  if (key) event.respondWith(networkFirst(event.request, key));
});
