#!/usr/bin/env bash
# go test -exec for GOOS=js GOARCH=wasm: runs the test binary in Node with
# scripts/wasm/node-exec.js (Go's wasm_exec plus globalThis.wasm).
set -euo pipefail
command -v node >/dev/null 2>&1 || { echo "scripts/wasm/exec.sh: node is required (scripts/setup.sh npm installs it)" >&2; exit 1; }
TESSERA_GOROOT="$(GOOS= GOARCH= go env GOROOT)" exec node --stack-size=8192 ${TESSERA_NODE_FLAGS:-} "$(dirname "$0")/node-exec.js" "$@"
