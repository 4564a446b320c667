"""Write random-weight checkpoints and per-layer golden activations for the Go engine tests.

    /usr/bin/python3 models/reference/make_goldens.py [--out testdata/golden]

Deterministic (fixed seeds).  For each config it writes testdata/golden/<name>/:
  config.json, model.safetensors (the checkpoint), golden.safetensors (F32 activations).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402
import families  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
T_TOKENS = 70  # straddles the 64-token KDA chunk
KDA_CHUNK = 64

MODELS = [
    # name, preset, layout, checkpoint dtype, seed
    ("k3-nano", "models/presets/k3-nano.json", "kimi_k3", "F32", 1234),
    ("kimi-linear-nano", "models/presets/kimi-linear-nano.json", "kimi_linear", "BF16", 5678),
]

# The other families (families.py): name, preset, seed; F32 checkpoints in the Hugging Face layout.
FAMILY_MODELS = [
    ("qwen3-next-nano", "models/presets/qwen3-next-nano.json", 2468),
    ("deepseek-v3-nano", "models/presets/deepseek-v3-nano.json", 1357),
    # the other branches of each family (configs/*.json): Qwen3-Next by full_attention_interval with a
    # dense layer, dk != dv, no shared expert, unnormalised top-k; DeepSeek-V3 with a direct q_proj, no
    # YaRN, no groups, top-1 renormalised, two dense layers
    ("qwen3-next-variant", "models/reference/configs/qwen3-next-variant.json", 97531),
    ("deepseek-v3-variant", "models/reference/configs/deepseek-v3-variant.json", 86420),
]

# Qwen3-Next's zero-centred RMSNorm weights (the model scales by 1 + w; HF initialises them to 0).
ZERO_CENTRED = ("input_layernorm.weight", "post_attention_layernorm.weight", "model.norm.weight",
                "q_norm.weight", "k_norm.weight")


def init_weights(cfg, gen, shapes=None, zero_centred=False):
    """Random weights whose activations stay O(1).  Drawn in shapes order (default
    k3ref.param_shapes) from one generator.  zero_centred: Qwen3-Next's (1 + w) norm weights are
    drawn 0.1·N."""
    d, out = cfg.d, {}
    for name, shape in (shapes if shapes is not None else k3ref.param_shapes(cfg)):
        n = lambda: torch.randn(shape, generator=gen, dtype=torch.float64)
        if zero_centred and name.endswith(ZERO_CENTRED):
            t = 0.1 * n()
        elif name == "model.embed_tokens.weight":
            t = n()
        elif name.endswith("A_log"):
            t = torch.log(1.0 + 15.0 * torch.rand(shape, generator=gen, dtype=torch.float64))  # log U(1,16)
        elif name.endswith("dt_bias"):
            t = 0.1 * n()
        elif name.endswith("e_score_correction_bias"):
            t = 0.1 * n()
        elif name.endswith("_res_proj.weight"):  # AttnRes pseudo-queries (nonzero)
            t = n() / math.sqrt(d)
        elif name.endswith("conv1d.weight"):
            t = n() / math.sqrt(shape[-1])
        elif name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            t = 1.0 + 0.1 * n()
        elif len(shape) == 2:
            t = n() / math.sqrt(shape[1])
        else:
            raise ValueError("no init rule for " + name)
        out[name] = t.to(torch.float32)
    return out


def build(name, preset, layout, ckpt_dtype, seed, outdir):
    with open(os.path.join(ROOT, preset)) as f:
        text_cfg = json.load(f)
    cfg = k3ref.Config(text_cfg)
    gen = torch.Generator().manual_seed(seed)
    weights = init_weights(cfg, gen)
    ids = torch.randint(0, cfg.vocab, (T_TOKENS,), generator=gen).tolist()

    if layout == "kimi_k3":
        full_cfg, prefix = {"model_type": "kimi_k3", "text_config": text_cfg}, "language_model."
    else:
        full_cfg, prefix = text_cfg, ""
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(full_cfg, f, indent=2)
        f.write("\n")
    # CHOICE: in the BF16 checkpoint the router bias e_score_correction_bias stays F32, as in the
    # released Kimi checkpoints (it is an fp32 selection bias); every other tensor is BF16.
    dtypes = {prefix + k: ("F32" if k.endswith("e_score_correction_bias") else ckpt_dtype) for k in weights}
    k3ref.save_safetensors(os.path.join(d, "model.safetensors"), {prefix + k: v for k, v in weights.items()},
                           metadata={"format": "pt"}, dtypes=dtypes)

    # Reference computes with the values as read back (bf16-rounded for the BF16 checkpoint).
    model = k3ref.K3Ref.from_dir(d, dtype=torch.float64)
    cap = {}
    with torch.no_grad():
        model.forward(ids, kda_mode="chunk", chunk=KDA_CHUNK, capture=cap)
        # cross-checks: recurrent KDA, absorbed MLA, dense MoE, other chunk sizes must agree
        for kw in ({"kda_mode": "recurrent"}, {"mla_mode": "absorbed", "moe_mode": "dense"},
                   {"chunk": 16}):
            cap2 = {}
            model.forward(ids, capture=cap2, **kw)
            for k in cap:
                diff = (cap[k] - cap2[k]).abs().max().item()
                scale = max(1.0, cap[k].abs().max().item())
                assert diff <= 1e-10 * scale, (name, kw, k, diff)

    golden = {k: v.to(torch.float32) for k, v in cap.items()}
    meta = {
        "input_ids": ",".join(str(i) for i in ids),
        "kda_chunk": str(KDA_CHUNK),
        "checkpoint_dtype": ckpt_dtype,
        "note": ("k3ref.py float64 forward (chunked KDA, naive MLA, routed MoE) of model.safetensors as "
                 "read back, stored F32. layer_in.i = value entering input_layernorm (AttnRes output if "
                 "attn_res_block_size is set); mixer_out.i = KDA/MLA output after o_proj; ffn_in.i = value "
                 "entering post_attention_layernorm; ffn_out.i = dense-MLP/MoE output; final_hidden = after "
                 "model.norm; logits = lm_head(final_hidden). Recurrent KDA, absorbed MLA and dense MoE "
                 "agree to <=1e-10."),
    }
    k3ref.save_safetensors(os.path.join(d, "golden.safetensors"), golden, metadata=meta)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    print(name, "layers", cfg.kinds, "moe", [cfg.is_moe(i) for i in range(cfg.L)], sizes)
    for k in sorted(cap, key=lambda s: (s.split(".")[-1].isdigit() and int(s.split(".")[-1]), s)):
        v = cap[k]
        print("  %-14s %-10s rms %.4f max %.4f" % (k, list(v.shape), v.pow(2).mean().sqrt().item(), v.abs().max().item()))


def build_family(name, preset, seed, outdir):
    with open(os.path.join(ROOT, preset)) as f:
        raw = json.load(f)
    Cfg, shapes, _ = families.FAMILIES[raw["model_type"]]
    cfg = Cfg(raw)
    gen = torch.Generator().manual_seed(seed)
    weights = init_weights(cfg, gen, shapes(cfg), zero_centred=raw["model_type"] == "qwen3_next")
    ids = torch.randint(0, cfg.vocab, (T_TOKENS,), generator=gen).tolist()
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(raw, f, indent=2)
        f.write("\n")
    k3ref.save_safetensors(os.path.join(d, "model.safetensors"), weights, metadata={"format": "pt"})
    model = families.from_dir(d)
    cap = {}
    with torch.no_grad():
        if raw["model_type"] == "qwen3_next":
            model.forward(ids, gdn_mode="recurrent", capture=cap)
            checks = ({"gdn_mode": "chunk", "chunk": KDA_CHUNK}, {"gdn_mode": "chunk", "chunk": 16},
                      {"moe_mode": "dense"})
        else:
            model.forward(ids, capture=cap)
            checks = ({"mla_mode": "absorbed"}, {"moe_mode": "dense"})
        for kw in checks:  # other forms of the same math must agree
            cap2 = {}
            model.forward(ids, capture=cap2, **kw)
            for k in cap:
                diff = (cap[k] - cap2[k]).abs().max().item()
                assert diff <= 1e-10 * max(1.0, cap[k].abs().max().item()), (name, kw, k, diff)
    golden = {k: v.to(torch.float32) for k, v in cap.items()}
    meta = {
        "input_ids": ",".join(str(i) for i in ids),
        "checkpoint_dtype": "F32",
        "note": ("families.py float64 forward of model.safetensors, stored F32; keys as for k3-nano "
                 "(layer_in, mixer_out, ffn_in, ffn_out per layer, final_hidden, logits). Cross-checked "
                 "(<=1e-10): " + "; ".join(str(c) for c in checks)),
    }
    k3ref.save_safetensors(os.path.join(d, "golden.safetensors"), golden, metadata=meta)
    print(name, "layers", getattr(cfg, "kinds", None), "moe", [cfg.is_moe(i) for i in range(cfg.L)])
    for k in ("layer_in.1", "mixer_out.%d" % (cfg.L - 1), "ffn_out.%d" % (cfg.L - 1), "logits"):
        v = cap[k]
        print("  %-14s %-10s rms %.4f max %.4f" % (k, list(v.shape), v.pow(2).mean().sqrt().item(), v.abs().max().item()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "testdata", "golden"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    ap_only = os.environ.get("GOLDENS_ONLY")  # e.g. GOLDENS_ONLY=qwen3-next-nano
    for m in MODELS:
        if not ap_only or m[0] == ap_only:
            build(*m, outdir=args.out)
    for m in FAMILY_MODELS:
        if not ap_only or m[0] == ap_only:
            build_family(*m, outdir=args.out)


if __name__ == "__main__":
    main()
