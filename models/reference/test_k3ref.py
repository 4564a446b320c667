"""Self-checks of the reference.  Run:
    /usr/bin/python3 -m unittest models/reference/test_k3ref.py      (or run this file directly)
"""
import json
import os
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3ref  # noqa: E402
import make_goldens  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
torch.set_num_threads(2)
D64 = torch.float64


def preset(name, **over):
    with open(os.path.join(ROOT, "models", "presets", name + ".json")) as f:
        c = json.load(f)
    c.update(over)
    return c


def random_model(cfgdict, seed=0):
    cfg = k3ref.Config(cfgdict)
    w = make_goldens.init_weights(cfg, torch.Generator().manual_seed(seed))
    return k3ref.K3Ref(cfg, w, "", D64)


def kda_inputs(T, H, dk, dv, lower_bound, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=D64)
    q = k3ref.l2norm(r(T, H, dk)) * dk ** -0.5
    k = k3ref.l2norm(r(T, H, dk))
    v = r(T, H, dv)
    beta = torch.sigmoid(r(T, H))
    g_raw = r(T, H, dk)
    A_log = torch.log(1 + 15 * torch.rand(H, generator=g, dtype=D64))
    dt = 0.1 * r(H * dk)
    cfg = type("C", (), {"gate_lb": lower_bound})()
    gate = k3ref.kda_gate(g_raw, dt, A_log, cfg)
    S0 = r(H, dk, dv)
    return q, k, v, gate, beta, S0


class TestKDA(unittest.TestCase):
    def test_recurrent_equals_chunked(self):
        H, dk, dv = 2, 8, 6
        for lb in (-5.0, None):  # K3 lower-bounded sigmoid gate, Kimi Linear softplus gate
            for T in (1, 3, 13, 64, 65, 200):
                q, k, v, g, b, S0 = kda_inputs(T, H, dk, dv, lb, seed=T)
                for init in (None, S0):
                    o_r, S_r = k3ref.kda_recurrent(q, k, v, g, b, init)
                    for C in (4, 16, 64):
                        o_c, S_c = k3ref.kda_chunked(q, k, v, g, b, init, chunk=C)
                        msg = "lb=%s T=%d C=%d init=%s" % (lb, T, C, init is not None)
                        self.assertLess((o_r - o_c).abs().max().item(), 1e-12, msg)
                        self.assertLess((S_r - S_c).abs().max().item(), 1e-12, msg)

    def test_strong_decay_no_overflow(self):
        # Very negative log-decays (softplus gate with large A): pairwise differences only, no inf/nan.
        q, k, v, g, b, S0 = kda_inputs(130, 2, 8, 8, None, seed=7)
        g = g * 50
        o_r, S_r = k3ref.kda_recurrent(q, k, v, g, b, S0)
        o_c, S_c = k3ref.kda_chunked(q, k, v, g, b, S0, chunk=64)
        self.assertTrue(torch.isfinite(o_c).all())
        self.assertLess((o_r - o_c).abs().max().item(), 1e-12)
        # fp32 too
        o_c32, _ = k3ref.kda_chunked(*(x.float() for x in (q, k, v, g, b, S0)), chunk=64)
        self.assertTrue(torch.isfinite(o_c32).all())
        self.assertLess((o_r - o_c32.double()).abs().max().item(), 1e-4)

    def test_split_prefill_layer(self):
        # layer level: two pieces with state hand-off (recurrent S + conv history) == one shot
        for name in ("k3-nano", "kimi-linear-nano"):
            m = random_model(preset(name), seed=3)
            x = torch.randn(40, m.cfg.d, generator=torch.Generator().manual_seed(1), dtype=D64)
            full, _ = m.kda(0, x, "chunk", 16)
            a, st = m.kda(0, x[:23], "chunk", 16)
            b, _ = m.kda(0, x[23:], "recurrent", state=st)
            self.assertLess((full - torch.cat([a, b])).abs().max().item(), 1e-12, name)

    def test_conv_tap_order(self):
        x = torch.zeros(5, 1, dtype=D64)
        x[2, 0] = 1.0
        w = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]], dtype=D64)
        y, _ = k3ref.causal_conv_silu(x, w)
        pre = torch.tensor([0, 0, 4, 3, 2], dtype=D64)  # w[K-1] hits the current token
        self.assertTrue(torch.allclose(y[:, 0], torch.nn.functional.silu(pre)))


class TestMLA(unittest.TestCase):
    def test_naive_equals_absorbed(self):
        for name, over in (("k3-nano", {}), ("kimi-linear-nano", {}), ("k3-nano", {"q_lora_rank": None}),
                           ("kimi-linear-nano", {"mla_use_output_gate": True})):
            m = random_model(preset(name, **over), seed=5)
            i = m.cfg.kinds.index("mla")
            x = torch.randn(33, m.cfg.d, generator=torch.Generator().manual_seed(2), dtype=D64)
            a = m.mla(i, x, "naive")
            b = m.mla(i, x, "absorbed")
            self.assertLess((a - b).abs().max().item(), 1e-12, (name, over))

    def test_causal(self):
        m = random_model(preset("k3-nano"), seed=5)
        x = torch.randn(20, m.cfg.d, generator=torch.Generator().manual_seed(2), dtype=D64)
        a = m.mla(3, x)
        b = m.mla(3, x[:11])
        self.assertLess((a[:11] - b).abs().max().item(), 1e-13)


class TestMoE(unittest.TestCase):
    def test_routed_equals_dense(self):
        for name in ("k3-nano", "kimi-linear-nano"):
            for over in ({}, {"num_experts_per_token": 1}, {"num_expert_group": 4, "topk_group": 2}):
                m = random_model(preset(name, **over), seed=9)
                x = torch.randn(50, m.cfg.d, generator=torch.Generator().manual_seed(4), dtype=D64)
                a = m.ffn(1, x, "routed")
                b = m.ffn(1, x, "dense")
                self.assertLess((a - b).abs().max().item(), 1e-12, (name, over))

    def test_router_semantics(self):
        cfg = k3ref.Config(preset("kimi-linear-nano"))
        g = torch.Generator().manual_seed(0)
        x = torch.randn(200, cfg.d, generator=g, dtype=D64)
        W = torch.randn(cfg.E, cfg.d, generator=g, dtype=D64) / 8
        bias = torch.randn(cfg.E, generator=g, dtype=D64)
        idx, w = k3ref.route(x, W, bias, cfg)
        s = torch.sigmoid(x @ W.t())
        # selection by biased score, weights from unbiased score, renormalised, scaled
        self.assertTrue(torch.equal(idx, (s + bias).topk(cfg.topk, -1).indices))
        self.assertTrue(torch.allclose(w.sum(-1), torch.full((200,), cfg.rho, dtype=D64)))
        ws = s.gather(1, idx)
        self.assertTrue(torch.allclose(w, cfg.rho * ws / ws.sum(-1, keepdim=True)))
        self.assertFalse(torch.equal(idx, s.topk(cfg.topk, -1).indices))  # bias matters
        # top-1: no renormalisation
        cfg1 = k3ref.Config(preset("kimi-linear-nano", num_experts_per_token=1))
        idx1, w1 = k3ref.route(x, W, bias, cfg1)
        self.assertTrue(torch.allclose(w1, cfg1.rho * s.gather(1, idx1)))
        # group-limited: experts outside the kept groups are never chosen (-inf masking)
        cfgg = k3ref.Config(preset("kimi-linear-nano", num_expert_group=4, topk_group=1))
        idxg, _ = k3ref.route(x, W, bias - 5.0, cfgg)  # all biased scores negative
        self.assertTrue(((idxg // 2)[:, 0] == (idxg // 2)[:, 1]).all())

    def test_situ(self):
        cfg = k3ref.Config(preset("k3-nano"))
        gate = torch.linspace(-30, 30, 101, dtype=D64)
        up = torch.linspace(-60, 60, 101, dtype=D64)
        h = k3ref.glu_act(gate, up, cfg)
        ref = 4.0 * torch.tanh(gate / 4.0) * torch.sigmoid(gate) * 25.0 * torch.tanh(up / 25.0)
        self.assertTrue(torch.allclose(h, ref))


class TestAttnRes(unittest.TestCase):
    def test_zero_query_is_uniform_mean(self):
        g = torch.Generator().manual_seed(0)
        src = [torch.randn(7, 16, generator=g, dtype=D64) * (i + 1) for i in range(4)]
        out = k3ref.attn_res(src, torch.zeros(1, 16, dtype=D64), torch.randn(16, generator=g, dtype=D64), 1e-5)
        self.assertLess((out - torch.stack(src).mean(0)).abs().max().item(), 1e-14)

    def test_model_zero_queries(self):
        # Whole model with zero pseudo-queries: each AttnRes is the plain mean of its sources.
        m = random_model(preset("k3-nano"), seed=11)
        for k in list(m.w):
            if k.endswith("_res_proj.weight"):
                m.w[k] = torch.zeros_like(m.w[k])
        cap = {}
        ids = list(range(0, 200, 10))
        m.forward(ids, capture=cap)
        emb = m.w["model.embed_tokens.weight"][torch.tensor(ids)]
        S = m.cfg.attn_res
        # layer 0: x = embedding; y = mean(emb, a0)
        self.assertTrue(torch.allclose(cap["layer_in.0"], emb))
        self.assertTrue(torch.allclose(cap["ffn_in.0"], (emb + cap["mixer_out.0"]) / 2))
        # layer 1 (same block): x = mean(emb, a0 + f0)
        blk = cap["mixer_out.0"] + cap["ffn_out.0"]
        self.assertTrue(torch.allclose(cap["layer_in.1"], (emb + blk) / 2))
        if S == 2:
            blk1 = blk + cap["mixer_out.1"] + cap["ffn_out.1"]
            # layer 2 opens a new block: x = mean(emb, block0 partial); then R = [emb, block0]
            self.assertTrue(torch.allclose(cap["layer_in.2"], (emb + blk1) / 2))
            self.assertTrue(torch.allclose(cap["ffn_in.2"], (emb + blk1 + cap["mixer_out.2"]) / 3))


class TestSafetensors(unittest.TestCase):
    def test_roundtrip_and_bf16(self):
        g = torch.Generator().manual_seed(0)
        t = {"a": torch.randn(3, 5, generator=g), "b": torch.randn(7, generator=g), "c": torch.randn(2, 2, 2)}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.safetensors")
            k3ref.save_safetensors(p, t, {"k": "v"}, dtypes={"b": "BF16", "c": "F16"})
            with open(p, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
            self.assertEqual(n % 8, 0)
            r, meta, dts = k3ref.load_safetensors(p)
        self.assertEqual(meta, {"k": "v"})
        self.assertEqual(dts, {"a": "F32", "b": "BF16", "c": "F16"})
        self.assertTrue(torch.equal(r["a"], t["a"]))
        self.assertTrue(torch.equal(r["b"], t["b"].to(torch.bfloat16).float()))  # torch RNE agrees
        self.assertTrue(torch.equal(r["c"], t["c"].half().float()))
        # ties to even: 1 + 2^-8 (exact tie) rounds down to 1, 1 + 3*2^-8 rounds up to 1 + 2^-6
        x = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)], dtype=torch.float32)
        self.assertEqual(k3ref.bf16_round(x).tolist(), [1.0, 1 + 2 ** -6, -1.0])


class TestGoldens(unittest.TestCase):
    def test_committed_goldens_reproduce(self):
        for name in ("k3-nano", "kimi-linear-nano"):
            d = os.path.join(ROOT, "testdata", "golden", name)
            if not os.path.exists(os.path.join(d, "golden.safetensors")):
                self.skipTest("goldens not generated")
            gold, meta, _ = k3ref.load_safetensors(os.path.join(d, "golden.safetensors"))
            m = k3ref.K3Ref.from_dir(d)
            ids = [int(s) for s in meta["input_ids"].split(",")]
            cap = {}
            m.forward(ids, chunk=int(meta["kda_chunk"]), capture=cap)
            self.assertEqual(set(cap), set(gold))
            for k in gold:
                self.assertEqual(list(cap[k].shape), list(gold[k].shape), k)
                err = (cap[k].float() - gold[k]).abs().max().item()
                self.assertLess(err, 1e-5 * max(1.0, gold[k].abs().max().item()), (name, k))


if __name__ == "__main__":
    unittest.main()


class VisionTests(unittest.TestCase):
    """k3vision: preprocessing invariants and the committed multimodal golden."""

    def test_resize_identity_and_grid(self):
        import numpy as np
        import k3vision
        c = k3vision.VisionConfig({"vt_hidden_size": 32, "vt_num_hidden_layers": 1, "vt_num_attention_heads": 4,
                                   "vt_intermediate_size": 64, "min_pixels": 3136, "max_pixels": 12544}, 64)
        self.assertEqual(k3vision.smart_resize(112, 112, 28, 3136, 12544), (112, 112))
        self.assertEqual(k3vision.smart_resize(28, 28, 28, 3136, 12544), (56, 56))
        self.assertEqual(k3vision.smart_resize(38, 50, 28, 3136, 12544), (56, 84))
        img = np.random.RandomState(0).randint(0, 256, size=(56, 56, 3)).astype(np.uint8)
        px, grid = k3vision.preprocess(img, c, np.float64)
        self.assertEqual(grid, (4, 4))
        # patch 1 in merge-window order is (row 0, col 1)
        want = (img[0:14, 14:28].transpose(2, 0, 1).reshape(-1) / 255.0 - 0.5) / 0.5
        self.assertLess(abs(px[1] - want).max(), 1e-12)
        Wm = k3vision.resample_matrix(28, 56)
        self.assertLess(abs(Wm.sum(1) - 1).max(), 1e-12)

    def test_vision_golden(self):
        import os
        import numpy as np
        import k3vision
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "golden", "k3-nano-vision")
        if not os.path.exists(os.path.join(d, "golden.safetensors")):
            self.skipTest("no golden")
        import json
        from PIL import Image
        cfg = json.load(open(os.path.join(d, "config.json")))
        vc = k3vision.VisionConfig(cfg["vision_config"], 64)
        W, _, _ = k3ref.load_safetensors(os.path.join(d, "model.safetensors"))
        W = {k: v.double() for k, v in W.items()}
        G, meta, _ = k3ref.load_safetensors(os.path.join(d, "golden.safetensors"))
        img = np.asarray(Image.open(os.path.join(d, "image.png")).convert("RGB"))
        px, grid = k3vision.preprocess(img, vc, np.float64)
        self.assertEqual("%d,%d" % grid, meta["grid"])
        out = k3vision.encode(W, vc, torch.tensor(px), grid)
        self.assertLess((out.float() - G["projector_out"]).abs().max().item(), 1e-5)
