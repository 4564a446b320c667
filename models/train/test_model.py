"""Checks the trainable model against the reference (float64): KDA factored kernel vs recurrent,
full multimodal forward vs k3ref.K3Ref + k3vision.  Run: /usr/bin/python3 -m unittest test_model.py"""
import json
import os
import sys
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as M  # noqa: E402
import k3ref  # noqa: E402
import k3vision  # noqa: E402


def small_cfg():
    c = json.load(open(os.path.join(HERE, "k3-micro.json")))
    t = c["text_config"]
    t.update(vocab_size=300, hidden_size=64, intermediate_size=96, q_lora_rank=32, kv_lora_rank=16,
             num_experts=8, moe_intermediate_size=32, routed_expert_hidden_size=32, bos_token_id=1, eos_token_id=2)
    t["linear_attn_config"]["head_dim"] = 16
    v = c["vision_config"]
    v.update(vt_hidden_size=32, vt_intermediate_size=64, text_hidden_size=64)
    c["media_placeholder_token_id"] = 299
    return c


class T(unittest.TestCase):
    def test_kda(self):
        torch.manual_seed(0)
        B, T_, H, dk = 2, 150, 3, 8
        q = k3ref.l2norm(torch.randn(B, T_, H, dk, dtype=torch.float64)) * dk ** -0.5
        k = k3ref.l2norm(torch.randn(B, T_, H, dk, dtype=torch.float64))
        v = torch.randn(B, T_, H, dk, dtype=torch.float64)
        g = -5 * torch.sigmoid(torch.randn(B, T_, H, dk, dtype=torch.float64) * 3)
        beta = torch.sigmoid(torch.randn(B, T_, H, dtype=torch.float64))
        o = M.kda_chunk_fast(q, k, v, g, beta)
        for b in range(B):
            r, _ = k3ref.kda_recurrent(q[b], k[b], v[b], g[b], beta[b])
            self.assertLess((o[b] - r).abs().max().item(), 1e-10)

    def test_forward_matches_reference(self):
        c = small_cfg()
        m = M.K3Micro(c, seed=1).double()
        with torch.no_grad():
            for p in m.P.values():  # perturb zero-initialised tensors so every path is exercised
                p.add_(0.05 * torch.randn_like(p))
            for i in m.moe_layers:
                m.router_bias(i).copy_(0.1 * torch.randn(8))
        vc = m.vcfg
        rng = np.random.RandomState(0)
        img = rng.randint(0, 256, size=(40, 60, 3)).astype(np.uint8)
        px, grid = k3vision.preprocess(img, vc, np.float64)
        nm = px.shape[0] // 4
        ids = [5, 6, 7, 299, 8, 9] + list(range(10, 80))
        ids = k3vision.expand_placeholders(ids, 299, [nm])
        with torch.no_grad():
            logits = m(torch.tensor([ids]), [(torch.tensor(px), grid)])[0]
        W = {n: t.double() for n, t in m.hf_tensors().items()}
        cfg, pre = k3ref.load_config(c)
        ref = k3ref.K3Ref(cfg, W, pre)
        img_tok = k3vision.encode(W, vc, torch.tensor(px), grid)
        E = k3vision.fuse(ids, 299, ref.w["model.embed_tokens.weight"], [img_tok])
        rl = ref.forward(ids, embeds=E)
        self.assertLess((logits - rl).abs().max().item() / rl.abs().max().item(), 1e-10)


if __name__ == "__main__":
    unittest.main()
