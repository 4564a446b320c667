#!/bin/sh
# Progress of the k3-micro training run: last step, loss, speed, ETA, whether it is running.
cd "$(dirname "$0")/../.."
pgrep -f "models/train/train.py" >/dev/null && echo "train.py: running" || echo "train.py: NOT running (rerun scripts/train/train.sh to resume)"
/usr/bin/python3 - <<'PY'
import json, os
p = "models/train/work/log.jsonl"
if not os.path.exists(p):
    raise SystemExit("no log yet")
steps, total = [], 3000
for l in open(p):
    r = json.loads(l)
    if r.get("event") == "start":
        total = r["args"]["steps"]
    elif "loss" in r:
        steps.append(r)
if not steps:
    raise SystemExit("no steps yet")
last = steps[-1]
recent = steps[-100:]
sps = sum(r["sec"] for r in recent) / len(recent)
rest = total - last["step"] - 1
# later stages cost more per step (512: ~1.2x, 2048: ~1.6x of the 128-token stage)
s1, s2 = int(total * 0.8), int(total * 0.92)
base = sps if last["L"] == 128 else sps / (1.2 if last["L"] == 512 else 1.6)
eta = sum(base * (1 if s < s1 else 1.2 if s < s2 else 1.6) for s in range(last["step"] + 1, total))
print("step %d/%d  L=%d  loss %.3f (mean of last 100: %.3f)  maxvio %.2f  %.2f s/step  ETA %.0f min (+ ~5 min eval)" % (
    last["step"] + 1, total, last["L"], last["loss"], sum(r["loss"] for r in recent) / len(recent), last["maxvio"], sps, eta / 60))
PY
