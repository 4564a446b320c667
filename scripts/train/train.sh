#!/bin/sh
# Trains k3-micro end to end (≈ 90 min on 2 quiet cores) and exports it to models/k3-micro/.
# Re-running resumes from models/train/work/ckpt.pt.  Needs (as root):
#   apt-get install -y python3-torch libopenblas0-pthread bible-kjv fortunes dataset-fashion-mnist python3-matplotlib
# Usage: scripts/train/train.sh [--smoke] [extra train.py flags]
#   background: nohup scripts/train/train.sh > models/train/work/train.out 2>&1 &
# Env: K3_THREADS (default 1: robust on a shared machine; 2 on a quiet one).
set -e
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
mkdir -p models/train/work
[ -f models/k3-micro/tokenizer.json ] || $PY models/train/make_tokenizer.py models/k3-micro
K3_THREADS=${K3_THREADS:-1} $PY models/train/train.py --work models/train/work --out models/k3-micro "$@"
$PY models/train/evaluate.py --model models/k3-micro --work models/train/work && $PY models/train/write_card.py --model models/k3-micro --work models/train/work
