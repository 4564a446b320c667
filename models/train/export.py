"""Export k3-micro to the Hugging Face layout: config.json + model.safetensors (F16; router
e_score_correction_bias F32).  tokenizer.json is written by make_tokenizer.py.

  /usr/bin/python3 models/train/export.py [--ckpt models/train/work/ckpt.pt] [--out models/k3-micro]
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as M  # noqa: E402
import k3ref  # noqa: E402


def export(model, out, cfg):
    os.makedirs(out, exist_ok=True)
    t = model.hf_tensors()
    dts = {n: ("F32" if n.endswith("e_score_correction_bias") else "F16") for n in t}
    k3ref.save_safetensors(os.path.join(out, "model.safetensors"), t, metadata={"format": "pt"}, dtypes=dts)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def load_exported(out):
    """K3Micro (float32) with the weights as read back from out/model.safetensors."""
    cfg = json.load(open(os.path.join(out, "config.json")))
    m = M.K3Micro(cfg)
    w, _, _ = k3ref.load_safetensors(os.path.join(out, "model.safetensors"))
    m.load_hf(w)
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "work", "ckpt.pt"))
    ap.add_argument("--config", default=os.path.join(HERE, "k3-micro.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "k3-micro"))
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    m = M.K3Micro(cfg)
    m.load_state_dict(torch.load(a.ckpt)["model"])
    export(m, a.out, cfg)
    print("exported", a.out)
