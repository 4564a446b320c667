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

spec="@wllama/wllama@3.8.1"
sum="bbe65fcc6d128d7853aed6d1699db7541e51a0363dc0135b8b68153acbf74670"
dest="$cache/wllama-3.8.1"
stamp="$dest/.sha256"
required=(index.js wllama.wasm LICENCE)

complete() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] || return 1
  for f in "${required[@]}"; do [ -f "$dest/$f" ] || return 1; done
}
if complete; then
  echo "fetch-wllama.sh: wllama ($spec) ready in $dest" >&2
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-wllama.sh: npm is needed to fetch $spec (as root: scripts/setup.sh npm)" >&2
  exit 1
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "fetch-wllama.sh: npm pack $spec (~5.8 MB)" >&2
tgz="$(cd "$work" && npm pack --silent "$spec" | tail -n1)"
got="$(sha256sum "$work/$tgz" | cut -d' ' -f1)"
if [ "$got" != "$sum" ]; then
  echo "fetch-wllama.sh: $spec: SHA-256 mismatch: got $got, want $sum" >&2
  exit 1
fi
tar -xzf "$work/$tgz" -C "$work"
mkdir -p "$work/out"
for p in esm/index.js esm/wasm/wllama.wasm LICENCE; do
  [ -f "$work/package/$p" ] || { echo "fetch-wllama.sh: $spec has no $p" >&2; exit 1; }
  cp -p "$work/package/$p" "$work/out/"
done
echo "$sum" >"$work/out/.sha256"
rm -rf "$dest"
mv "$work/out" "$dest"
echo "fetch-wllama.sh: wllama ($spec) ready in $dest" >&2
