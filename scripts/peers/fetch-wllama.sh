#!/usr/bin/env bash
# fetch-wllama.sh downloads the browser peer tessera is compared against in
# `make bench-browser`: wllama (llama.cpp compiled to WebAssembly, with
# ggml's WebGPU backend) from the npm package @wllama/wllama at an exact
# version, checked by the SHA-256 of the package tarball. Idempotent: a
# complete, checked copy is kept.
#
#   scripts/peers/fetch-wllama.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $TESSERA_PEER_CACHE, else testdata/peers/cache
# (git-ignored), as for scripts/peers/fetch.sh. The files end up in
#   CACHE_DIR/wllama-3.8.1/{index.js,wllama.wasm,LICENCE}
# (index.js: the package's self-contained ES module, esm/index.js; the
# worker code is inlined in it). Needs npm, tar and sha256sum.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${1:-${TESSERA_PEER_CACHE:-$root/testdata/peers/cache}}"
. "$root/scripts/peers/npm-fetch.sh"

copy_wllama() {
  local p
  for p in esm/index.js esm/wasm/wllama.wasm LICENCE; do
    [ -f "$1/package/$p" ] || { echo "fetch-wllama.sh: the package has no $p" >&2; return 1; }
    cp -p "$1/package/$p" "$2/"
  done
}
npm_fetch fetch-wllama.sh "@wllama/wllama@3.8.1" \
  bbe65fcc6d128d7853aed6d1699db7541e51a0363dc0135b8b68153acbf74670 \
  "$cache/wllama-3.8.1" "~5.8 MB" index.js wllama.wasm LICENCE -- copy_wllama
