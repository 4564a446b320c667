"""PyTorch-eager peer for `tessera bench`: the same checkpoint, the same prompt
length and number of decoded tokens, the same thread count, timed the same way
(medians over repeats after a warm-up).

  /usr/bin/python3 models/reference/bench_torch.py --model DIR [--prompt-len N] [--gen N]
        [--repeats N] [--threads N] [--device cpu|cuda] [--json FILE]

--device cuda runs the same eager code on the GPU (torch.set_default_device, weights
moved once; the argmax read back per token synchronises, as tessera's GPU decode does).

The reference model (k3ref.K3Ref, float32 here) is made incremental by keeping
each KDA layer's state and each MLA layer's latent cache between calls (the
reference's own forward recomputes from scratch); prefill uses the chunked KDA
and naive MLA, decode the recurrent KDA and absorbed MLA, as tessera does.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3ref  # noqa: E402


class Incremental(k3ref.K3Ref):
    """K3Ref with per-sequence state kept across forward calls."""

    def reset(self):
        self.kda_state, self.cache = {}, {}

    def kda(self, i, x, mode="chunk", chunk=64, state=None):
        out, st = super().kda(i, x, mode, chunk, self.kda_state.get(i))
        self.kda_state[i] = st
        return out, st

    def mla(self, i, x, mode="naive"):
        cfg, a = self.cfg, "model.layers.%d.self_attn." % i
        W = lambda n: self.w[a + n]  # noqa: E731
        T = x.shape[0]
        H, dn, dr, dv, r = cfg.H, cfg.dn, cfg.dr, cfg.dv, cfg.r_kv
        if cfg.q_lora is None:
            q = k3ref.linear(x, W("q_proj.weight"))
        else:
            q = k3ref.linear(k3ref.rms_norm(k3ref.linear(x, W("q_a_proj.weight")), W("q_a_layernorm.weight"), cfg.eps),
                             W("q_b_proj.weight"))
        q = q.view(T, H, dn + dr)
        q_n, q_r = q[..., :dn], q[..., dn:]
        kv = k3ref.linear(x, W("kv_a_proj_with_mqa.weight"))
        c_new = k3ref.rms_norm(kv[:, :r], W("kv_a_layernorm.weight"), cfg.eps)
        c_old, kr_old = self.cache.get(i, (c_new[:0], kv[:0, r:]))
        c, k_r = torch.cat([c_old, c_new]), torch.cat([kr_old, kv[:, r:]])
        self.cache[i] = (c, k_r)
        P, S = c_old.shape[0], c.shape[0]
        Wkv = W("kv_b_proj.weight").view(H, dn + dv, r)
        W_UK, W_UV = Wkv[:, :dn], Wkv[:, dn:]
        scale = (dn + dr) ** -0.5
        mask = torch.arange(S)[None, :] <= (P + torch.arange(T))[:, None]  # [T,S]
        rope_part = torch.einsum("thd,sd->hts", q_r, k_r)
        if T > 1:  # prefill: naive (expand the latent per head)
            k_n = torch.einsum("sc,hdc->shd", c, W_UK)
            v = torch.einsum("sc,hdc->shd", c, W_UV)
            s = (torch.einsum("thd,shd->hts", q_n, k_n) + rope_part) * scale
            p = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
            o = torch.einsum("hts,shd->thd", p, v)
        else:  # decode: absorbed (attend in the latent space)
            qt = torch.einsum("thd,hdc->thc", q_n, W_UK)
            s = (torch.einsum("thc,sc->hts", qt, c) + rope_part) * scale
            p = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
            o = torch.einsum("thc,hdc->thd", torch.einsum("hts,sc->thc", p, c), W_UV)
        o = o.reshape(T, H * dv)
        if cfg.mla_gate:
            o = o * torch.sigmoid(k3ref.linear(x, W("g_proj.weight")))
        return k3ref.linear(o, W("o_proj.weight"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m = Incremental.from_dir(a.model, dtype=torch.float32)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench_torch.py: --device cuda but torch.cuda.is_available() is False")
        if not hasattr(torch, "set_default_device"):
            sys.exit("bench_torch.py: --device cuda needs torch >= 2.0 (torch.set_default_device)")
        torch.set_default_device("cuda")  # every tensor the reference creates
        m.w = {k: v.to("cuda") for k, v in m.w.items()}
    V = m.cfg.V if hasattr(m.cfg, "V") else None
    vocab = V or m.w["lm_head.weight"].shape[0]
    prompt = [(i * 7919 + 1) % vocab for i in range(a.prompt_len)]  # as `tessera bench`
    prefill, decode = [], []
    with torch.no_grad():
        for rep in range(a.repeats + 1):
            m.reset()
            t0 = time.perf_counter()
            for s in range(0, len(prompt), a.chunk):
                logits = m.forward(prompt[s:s + a.chunk], kda_mode="chunk", chunk=64)
            tok = int(logits[-1].argmax())
            t1 = time.perf_counter()
            for _ in range(a.gen):
                logits = m.forward([tok], kda_mode="recurrent")
                tok = int(logits[-1].argmax())
            t2 = time.perf_counter()
            if rep:
                prefill.append(a.prompt_len / (t1 - t0))
                decode.append(a.gen / (t2 - t1))
    res = {"model": a.model, "backend": "pytorch-eager-" + a.device, "threads": a.threads, "torch": torch.__version__,
           "prompt_len": a.prompt_len, "gen": a.gen, "repeats": a.repeats,
           "prefill_tok_per_s": statistics.median(prefill), "decode_tok_per_s": statistics.median(decode)}
    print("pytorch eager (%s)  prefill %.1f tok/s, decode %.2f tok/s (%d threads, torch %s)" % (
        a.device, res["prefill_tok_per_s"], res["decode_tok_per_s"], a.threads, torch.__version__))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
