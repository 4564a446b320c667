#!/usr/bin/env bash
# Builds the browser engine bundle into DIR (default bin/wasm, where
# `tessera serve` looks next to bin/tessera):
#   tessera.wasm      GOOS=js GOARCH=wasm build of ./wasm, stripped
#   tessera.wasm.gz   gzip -9 of it (served when the client accepts gzip)
#   wasm_exec.js      the Go toolchain's loader, matching the compiler
# and prints the raw and gzip sizes. The bundle has the WebGPU runner
# (~1.9 MB gzip; the page's backend 'auto' uses it whenever the browser
# offers an adapter, else the CPU path). WASM_TAGS=cpuonly leaves it out
# (~1.76 MB); WASM_TAGS=conformance adds the in-browser kernel conformance
# cases (tests).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-bin/wasm}"
go="${GO:-go}"
mkdir -p "$dir"
GOOS=js GOARCH=wasm "$go" build -trimpath -ldflags="-s -w" ${WASM_TAGS:+-tags="$WASM_TAGS"} -o "$dir/tessera.wasm" ./wasm
gzip -9 -n -c "$dir/tessera.wasm" > "$dir/tessera.wasm.gz.tmp"
mv "$dir/tessera.wasm.gz.tmp" "$dir/tessera.wasm.gz"
cp "$("$go" env GOROOT)/lib/wasm/wasm_exec.js" "$dir/wasm_exec.js"
raw=$(stat -c %s "$dir/tessera.wasm")
gz=$(stat -c %s "$dir/tessera.wasm.gz")
awk -v f="$dir/tessera.wasm" -v r="$raw" -v g="$gz" \
  'BEGIN { printf "wasm: %s  %d bytes (%.2f MB), gzip -9 %d bytes (%.2f MB)\n", f, r, r / 1e6, g, g / 1e6 }'
