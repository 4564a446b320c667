#!/bin/sh
# Long context on the GPU backend — minutes on lavapipe, so not part of
# `make test` (which runs real prefills across small cache pages instead):
#   1. a real TESSERA_LONG_PREFILL-token (default 32768) prefill of k3-nano
#      on the GPU (cache pages of 4,096 rows), every piece's last logits and
#      8 decode steps against the CPU (≤ 1e-4 relative);
#   2. `tessera bench --backend gpu --ctx-sweep 1k,64k,1M` on k3-nano: decode
#      at each context with the latent caches filled with synthetic rows;
#      fails unless the GPU state memory is within 1.1× of the analytic figure.
# Usage: scripts/gpu-long-context.sh [OUT_DIR]   (default out/long-context)
set -eu
cd "$(dirname "$0")/.."
out=${1:-out/long-context}
mkdir -p "$out"
n=${TESSERA_LONG_PREFILL:-32768}
echo "== real $n-token prefill on the GPU against the CPU"
TESSERA_LONG_PREFILL=$n go test -count=1 -run 'TestRunnerLongPrefillMatchesCPU$' -v -timeout 90m ./wgsl | tee "$out/prefill.log"
echo "== decode at 1k, 64k and 1M tokens on the GPU"
go build -o bin/tessera ./cmd/tessera
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin/tessera init-random --config k3-nano --seed 1 --out "$tmp/k3-nano" >/dev/null
bin/tessera bench --model "$tmp/k3-nano" --backend gpu --prompt-len 16 --gen 8 --repeats 1 \
	--ctx-sweep 1k,64k,1M --json "$out/sweep.json" | tee "$out/sweep.txt"
# the ratio column (GPU state / analytic) of the sweep table
awk '/^ *[0-9]+ +[0-9.]+ .*x +[0-9]+$/ { r = $(NF-1); sub("x", "", r); n++; if (r + 0 > 1.1) { bad = 1; print "state memory " r "x the analytic figure at context " $1 } }
	END { if (n != 3 || bad) { print "gpu-long-context: sweep check failed (" n " rows)"; exit 1 } }' "$out/sweep.txt"
echo "gpu-long-context: passed"
