// node-exec.js runs a GOOS=js GOARCH=wasm test binary in Node the way the
// browser worker runs tessera.wasm: like Go's own wasm_exec_node.js, plus
// globalThis.wasm = the instantiated module (web/tessera-worker.js sets the
// same), so code that needs the instance's memory (core/ref's SIMD128
// kernels, the WebGPU binding) finds it.
//   go test -exec scripts/wasm/exec.sh …   (GOOS=js GOARCH=wasm)
"use strict";

if (process.argv.length < 3) {
  console.error("usage: node-exec.js WASM_BINARY [arguments]");
  process.exit(1);
}

const path = require("path");
const goroot = process.env.TESSERA_GOROOT;
if (!goroot) {
  console.error("node-exec.js: TESSERA_GOROOT is not set (scripts/wasm/exec.sh sets it)");
  process.exit(1);
}
globalThis.require = require;
globalThis.fs = require("fs");
globalThis.path = path;
globalThis.TextEncoder = require("util").TextEncoder;
globalThis.TextDecoder = require("util").TextDecoder;
globalThis.performance ??= require("perf_hooks").performance;
globalThis.crypto ??= require("crypto");

require(path.join(goroot, "lib", "wasm", "wasm_exec.js"));

const go = new Go();
go.argv = process.argv.slice(2);
go.env = Object.assign({ TMPDIR: require("os").tmpdir() }, process.env);
go.exit = process.exit;
WebAssembly.instantiate(fs.readFileSync(process.argv[2]), go.importObject).then((result) => {
  globalThis.wasm = result;
  process.on("exit", (code) => {
    if (code === 0 && !go.exited) {
      go._pendingEvent = { id: 0 };
      go._resume();
    }
  });
  return go.run(result.instance);
}).catch((err) => {
  console.error(err);
  process.exit(1);
});
