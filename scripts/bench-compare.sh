#!/usr/bin/env bash
# tessera vs PyTorch eager on the CPU, same checkpoint, same prompt, same
# thread count, in one run: prints both and the ratios.
#   scripts/bench-compare.sh MODEL_DIR [PROMPT_LEN] [GEN] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/bench-compare.sh MODEL_DIR [PROMPT_LEN] [GEN] [REPEATS]}
plen=${2:-128}; gen=${3:-32}; reps=${4:-3}
threads=$(nproc)
out=$(mktemp -d)
scripts/setup.sh torch
go build -o bin/tessera ./cmd/tessera
bin/tessera bench --model "$model" --prompt-len "$plen" --gen "$gen" --repeats "$reps" --threads "$threads" --json "$out/tessera.json" 2>/dev/null
/usr/bin/python3 models/reference/bench_torch.py --model "$model" --prompt-len "$plen" --gen "$gen" --repeats "$reps" --threads "$threads" --json "$out/torch.json"
/usr/bin/python3 - "$out/tessera.json" "$out/torch.json" <<'PY'
import json, sys
t, p = (json.load(open(f)) for f in sys.argv[1:3])
print("tessera / PyTorch eager: prefill %.2fx, decode %.2fx" % (
    t["prefill_tok_per_s"] / p["prefill_tok_per_s"], t["decode_tok_per_s"] / p["decode_tok_per_s"]))
PY
