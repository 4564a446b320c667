// Package web holds tessera's browser front end, embedded into the tessera
// binary for `tessera serve`: the demo page (index.html, style.css,
// app.js with live.js (the live routing/state view), and favicon.svg, which the page declares so that browsers do
// not ask for a missing /favicon.ico), the JavaScript API (tessera.js, an
// ES module) and the Web Worker that runs the WebAssembly engine
// (tessera-worker.js), and the service worker that keeps the page working
// offline after the first visit (sw.js). The wasm itself (tessera.wasm, built from ../wasm
// by `make wasm`) and the Go toolchain's wasm_exec.js are served from the
// wasm directory, not embedded.
package web

import "embed"

// FS holds the page and JavaScript files at its root.
//
//go:embed index.html style.css app.js live.js tessera.js tessera-worker.js favicon.svg sw.js
var FS embed.FS
