"""Writes testdata/golden/k3-nano-vision/: a multimodal Go-vs-PyTorch golden.

  /usr/bin/python3 models/reference/make_vision_golden.py      (deterministic, a few seconds)

Files
  config.json        kimi_k3: text_config = k3-nano's, a small vision_config (rope_2d, patchmerger,
                     rmsnorm, GELU-tanh, all biases on), media_placeholder_token_id 511
  model.safetensors  F32: k3-nano's text weights (language_model.*) + random vision_tower.* / mm_projector.*
  image.png          50×38 RGB (smart-resized to 84×56 → 6×4 patches → 6 image tokens; bicubic upsampling)
  golden.safetensors F32 tensors, all computed in float64 from the PNG's pixels:
    patches [24, 588]            preprocessed patches, merge-window order (imageio.Preprocess)
    vision_block.{i} [24, 32]    residual stream after ViT block i
    vision_tower_out [24, 32]    after the final norm
    projector_out [6, 64]        mm_projector output (= Tower.Encode result)
    fused_embeds [T, 64]         input embeddings after placeholder replacement (vision.Fuse)
    layer_in.{i}, mixer_out.{i}, ffn_in.{i}, ffn_out.{i}, final_hidden, logits   (as k3-nano's golden)
  __metadata__: prompt_ids (one placeholder 511), input_ids (expanded, T = 75), grid ("4,6" rows,cols),
                image ("image.png"), kda_chunk ("64"), note.
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3ref  # noqa: E402
import k3vision  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "testdata", "golden", "k3-nano-vision")
NANO = os.path.join(ROOT, "testdata", "golden", "k3-nano")
PH = 511

VISION = {
    "patch_size": 14, "vt_hidden_size": 32, "vt_num_hidden_layers": 2, "vt_num_attention_heads": 4,
    "vt_intermediate_size": 64, "merge_kernel_size": [2, 2], "norm_type": "rmsnorm", "vt_norm_eps": 1e-6,
    "activation_func": "gelu_pytorch_tanh", "attn_bias": True, "linear_bias": True, "patch_embed_proj_bias": True,
    "pos_emb_type": "rope_2d", "rope_theta": 10000.0, "mm_projector_type": "patchmerger",
    "projector_hidden_act": "gelu_pytorch_tanh", "projector_ln_eps": 1e-5, "text_hidden_size": 64,
    "image_mean": [0.48, 0.46, 0.41], "image_std": [0.27, 0.26, 0.28], "min_pixels": 3136, "max_pixels": 12544,
    "resample": "bicubic",
}


def make_image():
    h, w = 38, 50
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.zeros((h, w, 3))
    img[..., 0] = 255 * xx / (w - 1)
    img[..., 1] = 255 * yy / (h - 1)
    img[..., 2] = 128 + 100 * np.sin(xx / 4.0) * np.cos(yy / 5.0)
    img[(xx - 30) ** 2 + (yy - 15) ** 2 < 64] = (250, 20, 20)
    img[5:12, 5:20] = (10, 10, 240)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def main():
    from PIL import Image
    os.makedirs(OUT, exist_ok=True)
    ncfg = json.load(open(os.path.join(NANO, "config.json")))
    cfg = {"model_type": "kimi_k3", "text_config": ncfg["text_config"], "vision_config": VISION,
           "media_placeholder_token_id": PH}
    json.dump(cfg, open(os.path.join(OUT, "config.json"), "w"), indent=2)
    text_w, _, _ = k3ref.load_safetensors(os.path.join(NANO, "model.safetensors"))
    vc = k3vision.VisionConfig(VISION, 64)
    g = torch.Generator().manual_seed(20240607)
    vw = {}
    for n, s in k3vision.vision_param_shapes(vc):
        if n.endswith(".bias"):
            t = 0.1 * torch.randn(s, generator=g, dtype=torch.float64)
        elif "norm" in n:
            t = 1 + 0.1 * torch.randn(s, generator=g, dtype=torch.float64)
        else:
            fan_in = int(np.prod(s[1:]))
            t = torch.randn(s, generator=g, dtype=torch.float64) / np.sqrt(fan_in)
        vw[n] = t.float()
    allw = dict(text_w)
    allw.update(vw)
    k3ref.save_safetensors(os.path.join(OUT, "model.safetensors"), allw, metadata={"format": "pt"})
    img = make_image()
    Image.fromarray(img).save(os.path.join(OUT, "image.png"))
    img2 = np.asarray(Image.open(os.path.join(OUT, "image.png")).convert("RGB"))
    assert (img2 == img).all()

    # everything below in float64 from the weights as read back
    W, _, _ = k3ref.load_safetensors(os.path.join(OUT, "model.safetensors"))
    W = {k: v.double() for k, v in W.items()}
    cap = {}
    px, grid = k3vision.preprocess(img, vc, np.float64)
    pt = torch.tensor(px)
    tok = k3vision.encode(W, vc, pt, grid, capture=cap)
    nm = tok.shape[0]
    prompt = [1, 17, 42, 300, 7] + [PH] + list(range(100, 164))
    ids = k3vision.expand_placeholders(prompt, PH, [nm])
    tcfg, pre = k3ref.load_config(cfg)
    ref = k3ref.K3Ref(tcfg, W, pre)
    E = k3vision.fuse(ids, PH, ref.w["model.embed_tokens.weight"], [tok])
    cap["fused_embeds"] = E
    cap["patches"] = pt
    logits = ref.forward(ids, embeds=E, capture=cap)
    # self-check: chunk size / recurrent KDA agree
    l2 = ref.forward(ids, embeds=E, kda_mode="recurrent")
    assert (logits - l2).abs().max() < 1e-10
    meta = {"prompt_ids": ",".join(map(str, prompt)), "input_ids": ",".join(map(str, ids)),
            "grid": "%d,%d" % grid, "image": "image.png", "kda_chunk": "64",
            "note": "float64 reference (models/reference/make_vision_golden.py); F32 storage"}
    k3ref.save_safetensors(os.path.join(OUT, "golden.safetensors"), {k: v.float() for k, v in cap.items()},
                           metadata=meta)
    print("wrote", OUT, "T =", len(ids), "grid", grid, "image tokens", nm)


if __name__ == "__main__":
    main()
