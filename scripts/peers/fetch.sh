#!/usr/bin/env bash
# fetch.sh downloads the peer runtime tessera is compared against: llama.cpp
# as prebuilt Linux x86-64 shared libraries (libllama, libggml, libggml-base
# and one libggml-cpu-<family>.so per CPU family; ggml picks the best one at
# run time), from the npm package @node-llama-cpp/linux-x64 at an exact
# version, checked by the SHA-256 of the package tarball. Idempotent: a
# complete, checked copy is kept.
#
#   scripts/peers/fetch.sh [CACHE_DIR]
#   scripts/peers/fetch.sh vulkan [CACHE_DIR]
#
# The second form fetches the Vulkan build of the same release instead
# (@node-llama-cpp/linux-x64-vulkan: libllama.vulkan, libggml.vulkan and
# libggml-vulkan.so, ~24 MB) into CACHE_DIR/node-llama-cpp-linux-x64-vulkan-3.22.1
# ($TESSERA_LLAMACPP_VULKAN_DIR overrides where native/llamacpp looks); it
# needs a Vulkan loader (libvulkan1) and driver to run (scripts/setup.sh gpu).
#
# CACHE_DIR defaults to $TESSERA_PEER_CACHE, else testdata/peers/cache
# (git-ignored). The libraries end up in
#   CACHE_DIR/node-llama-cpp-linux-x64-3.22.1/
# (the directory native/llamacpp looks in; $TESSERA_LLAMACPP_DIR overrides
# it). Needs npm, tar and sha256sum.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
variant=cpu
if [ "${1:-}" = vulkan ]; then variant=vulkan; shift; fi
cache="${1:-${TESSERA_PEER_CACHE:-$root/testdata/peers/cache}}"
. "$root/scripts/peers/npm-fetch.sh"

if [ $variant = vulkan ]; then
  copy_vulkan() {
    cp -p "$1"/package/bins/linux-x64-vulkan/*.so "$2/"
    cp -p "$1"/package/LICENSE "$2/LICENSE"
  }
  npm_fetch fetch.sh "@node-llama-cpp/linux-x64-vulkan@3.22.1" \
    e10577190fc4bd1649d3b655588e5c7a85fc6b6dbf7136fee596cbe9e25521e7 \
    "$cache/node-llama-cpp-linux-x64-vulkan-3.22.1" "llama.cpp Vulkan build, ~24 MB" \
    libllama.vulkan.v0.5.0.so libggml.vulkan.v0.5.0.so libggml-vulkan.so libggml-base.so libggml-cpu-x64.so -- copy_vulkan
  exit 0
fi

copy_llamacpp() {
  cp -p "$1"/package/bins/linux-x64/*.so "$2/"
  cp -p "$1"/package/LICENSE "$2/LICENSE"
}
npm_fetch fetch.sh "@node-llama-cpp/linux-x64@3.22.1" \
  0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0 \
  "$cache/node-llama-cpp-linux-x64-3.22.1" "llama.cpp shared libraries, ~11 MB" \
  libllama.v0.5.0.so libggml.v0.5.0.so libggml-base.so libggml-cpu-x64.so -- copy_llamacpp
