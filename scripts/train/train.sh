#!/bin/sh
# Trains k3-micro end to end (≈ 2 h on 2 quiet cores: 3000 + 1500 steps) and exports it to models/k3-micro/.
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
# Phase 1: 3000 steps, the context curriculum 128 → 512 → 2048.
K3_THREADS=${K3_THREADS:-1} $PY models/train/train.py --work models/train/work --out models/k3-micro "$@"
# Phase 2: 1500 more steps weighted to images (scene captions were the weak
# point after phase 1), resuming from phase 1's checkpoint (skipped by --smoke).
case " $* " in
*" --smoke "*) ;;
*) K3_THREADS=${K3_THREADS:-1} $PY models/train/train.py --work models/train/work --out models/k3-micro \
	--steps 4500 --phase-start 3000 --warmup 50 --lr 1e-3 --image-frac 0.7 --fashion-frac 0.25 ;;
esac
$PY models/train/evaluate.py --model models/k3-micro --work models/train/work
# tessera's own answers, for the card's per-attribute breakdown (when the binary is built)
pred=
if [ -x bin/tessera ] && bin/tessera eval caption --model models/k3-micro --data models/k3-micro/eval/captions.jsonl \
	--predictions models/train/work/predictions.jsonl; then
	pred="--predictions models/train/work/predictions.jsonl"
fi
# shellcheck disable=SC2086
$PY models/train/write_card.py --model models/k3-micro --work models/train/work $pred
