#!/usr/bin/env bash
# Builds the browser engine bundle into DIR (default bin/wasm, where
# `tessera serve` looks next to bin/tessera):
#   tessera.wasm          GOOS=js GOARCH=wasm build of ./wasm, stripped,
#                         with the WebGPU runner (backend 'gpu' and 'auto')
#   tessera-cpu.wasm      the same -tags cpuonly: no WebGPU runner, what
#                         tessera.js loads for backend 'cpu'
#   NAME.gz               gzip -9 of each (served when the client accepts gzip)
#   wasm_exec.js          the Go toolchain's loader, matching the compiler
# and prints the raw and gzip sizes. WASM_TAGS adds build tags to both:
# cpuonly leaves the WebGPU runner out of tessera.wasm too, conformance
# adds the in-browser kernel conformance cases (tests).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-bin/wasm}"
go="${GO:-go}"
mkdir -p "$dir"
# build NAME TAGS: one bundle and its gzip, with its sizes printed
build() {
  GOOS=js GOARCH=wasm "$go" build -trimpath -ldflags="-s -w" ${2:+-tags="$2"} -o "$dir/$1" ./wasm
  gzip -9 -n -c "$dir/$1" > "$dir/$1.gz.tmp"
  mv "$dir/$1.gz.tmp" "$dir/$1.gz"
  raw=$(stat -c %s "$dir/$1")
  gz=$(stat -c %s "$dir/$1.gz")
  awk -v f="$dir/$1" -v r="$raw" -v g="$gz" \
    'BEGIN { printf "wasm: %s  %d bytes (%.2f MB), gzip -9 %d bytes (%.2f MB)\n", f, r, r / 1e6, g, g / 1e6 }'
}
build tessera.wasm "${WASM_TAGS:-}"
build tessera-cpu.wasm "cpuonly${WASM_TAGS:+,$WASM_TAGS}"
cp "$("$go" env GOROOT)/lib/wasm/wasm_exec.js" "$dir/wasm_exec.js"
