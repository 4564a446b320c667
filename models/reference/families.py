"""families: independent PyTorch references of the Qwen3-Next and DeepSeek-V3 text models.

Written from /work/shared/docs/architecture.md (sections cited inline) and the public
transformers model definitions (read, not copied): Qwen3-Next = Gated DeltaNet (§1.1–1.3) + gated
GQA attention with partial RoPE (§2.5) + softmax top-k MoE with a sigmoid-gated shared expert
(§3.4); DeepSeek-V3 = MLA with decoupled, interleaved RoPE and YaRN (§2.1–2.4, §7.2) + the sigmoid
noaux_tc router with group-limited top-k (§3.2) + dense first layers.  Tensor names are the Hugging
Face checkpoint names (§5.1), experts stored one by one (experts.{e}.{gate,up,down}_proj).

Safetensors I/O, RMSNorm, l2norm, the causal conv and the per-channel delta-rule kernels come from
k3ref.py; everything family-specific is here.  Resolved ambiguities are marked "CHOICE:".
"""
import json
import math

import torch
import torch.nn.functional as F

import k3ref
from k3ref import linear, rms_norm, l2norm, causal_conv_silu


# --------------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------------


def swiglu(x, wg, wu, wd):
    return linear(F.silu(linear(x, wg)) * linear(x, wu), wd)


def rms_norm_zc(x, w, eps):
    """Qwen3-Next's zero-centred RMSNorm: the stored weight w scales by (1 + w) (§9.1 pitfall 1)."""
    return rms_norm(x, 1.0 + w, eps)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def yarn_mscale(s, m=1.0):
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


def rope_tables(dim, theta, positions, scaling=None, dtype=torch.float64):
    """cos, sin [T, dim] (frequencies duplicated over the two halves, rotate_half convention) and the
    YaRN softmax multiplier.  scaling: a rope_scaling dict of type yarn, or None (§7.1, §7.2)."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    att = 1.0
    if scaling is not None and scaling.get("factor", 1.0) > 1.0:
        s = float(scaling["factor"])
        L0 = scaling.get("original_max_position_embeddings")
        bf, bs = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

        def corr(r):
            return dim * math.log(L0 / (r * 2 * math.pi)) / (2 * math.log(theta))

        lo, hi = corr(bf), corr(bs)
        if scaling.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
        extra = 1 - ramp  # weight of the original (extrapolated) frequency
        inv = (inv / s) * (1 - extra) + inv * extra
        m, mall = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if scaling.get("attention_factor"):
            att = scaling["attention_factor"]
        elif m and mall:
            att = yarn_mscale(s, m) / yarn_mscale(s, mall)
        else:
            att = yarn_mscale(s)
    ang = torch.as_tensor(positions, dtype=torch.float64).unsqueeze(-1) * inv  # [T, dim/2]
    emb = torch.cat([ang, ang], -1)
    return (emb.cos() * att).to(dtype), (emb.sin() * att).to(dtype)


def apply_rope(x, cos, sin, interleave=False):
    """x [T, H, D] with the first cos.shape[-1] channels rotated (partial rotary); the rest pass.
    interleave: DeepSeek's pairs (x0,x1),(x2,x3)… — de-interleaved to [x0,x2,…,x1,x3,…] first, then
    rotated half-wise (transformers apply_rotary_pos_emb_interleave); the output stays
    de-interleaved, which is the same for q and k and so leaves q·k unchanged."""
    rd = cos.shape[-1]
    r, rest = x[..., :rd], x[..., rd:]
    if interleave:
        T, H = r.shape[0], r.shape[1]
        r = r.reshape(T, H, rd // 2, 2).transpose(-1, -2).reshape(T, H, rd)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return torch.cat([r * c + rotate_half(r) * s, rest], -1)


def causal_softmax_attn(q, k, v, scale):
    """q [T,H,D], k [T,H,D], v [T,H,Dv] -> [T,H,Dv], causal."""
    T = q.shape[0]
    s = torch.einsum("thd,shd->hts", q, k) * scale
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.einsum("hts,shd->thd", torch.softmax(s, -1), v)


def gdn_recurrent(q, k, v, g, beta):
    """Gated DeltaNet with one scalar decay per head (§1.3).  q, k [T,H,dk] (normalised, q scaled),
    v [T,H,dv], g, beta [T,H]."""
    T, H, dk = q.shape
    S = q.new_zeros(H, dk, v.shape[-1])
    out = q.new_zeros(T, H, v.shape[-1])
    for t in range(T):
        S = torch.exp(g[t]).view(H, 1, 1) * S
        u = beta[t].unsqueeze(-1) * (v[t] - torch.einsum("hkv,hk->hv", S, k[t]))
        S = S + k[t].unsqueeze(-1) * u.unsqueeze(-2)
        out[t] = torch.einsum("hkv,hk->hv", S, q[t])
    return out


# --------------------------------------------------------------------------------------------
# Qwen3-Next
# --------------------------------------------------------------------------------------------


class Qwen3NextConfig:
    def __init__(self, c):
        self.raw = c
        self.vocab, self.d, self.L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.inter = c.get("intermediate_size")
        self.H, self.Hkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or self.d // self.H
        self.rot = int(self.hd * c.get("partial_rotary_factor", 1.0))
        self.theta = c.get("rope_theta", 10000.0)
        self.Hk, self.Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        self.K = c.get("linear_conv_kernel_dim", 4)
        self.E, self.topk = c.get("num_experts", 0), c.get("num_experts_per_tok", 1)
        self.moe_I, self.shared_I = c.get("moe_intermediate_size"), c.get("shared_expert_intermediate_size", 0)
        self.norm_topk = c.get("norm_topk_prob", True)
        self.step, self.mlp_only = c.get("decoder_sparse_step", 1), c.get("mlp_only_layers", [])
        lt = c.get("layer_types")
        if lt is None:
            n = c.get("full_attention_interval", 4)
            lt = ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(self.L)]
        self.kinds = ["gdn" if t == "linear_attention" else "attn" for t in lt]

    def is_moe(self, i):
        return i not in self.mlp_only and self.E > 0 and (i + 1) % self.step == 0


def qwen3next_shapes(cfg):
    d = cfg.d
    out = [("model.embed_tokens.weight", [cfg.vocab, d])]
    r = cfg.Hv // cfg.Hk
    kd, vd = cfg.Hk * cfg.dk, cfg.Hv * cfg.dv
    for i in range(cfg.L):
        p = "model.layers.%d." % i
        out += [(p + "input_layernorm.weight", [d]), (p + "post_attention_layernorm.weight", [d])]
        if cfg.kinds[i] == "gdn":
            a = p + "linear_attn."
            out += [(a + "in_proj_qkvz.weight", [2 * kd + 2 * vd, d]), (a + "in_proj_ba.weight", [2 * cfg.Hv, d]),
                    (a + "conv1d.weight", [2 * kd + vd, 1, cfg.K]), (a + "dt_bias", [cfg.Hv]),
                    (a + "A_log", [cfg.Hv]), (a + "norm.weight", [cfg.dv]), (a + "out_proj.weight", [d, vd])]
            assert r * cfg.Hk == cfg.Hv
        else:
            a = p + "self_attn."
            out += [(a + "q_proj.weight", [2 * cfg.H * cfg.hd, d]), (a + "k_proj.weight", [cfg.Hkv * cfg.hd, d]),
                    (a + "v_proj.weight", [cfg.Hkv * cfg.hd, d]), (a + "o_proj.weight", [d, cfg.H * cfg.hd]),
                    (a + "q_norm.weight", [cfg.hd]), (a + "k_norm.weight", [cfg.hd])]
        m = p + "mlp."
        if cfg.is_moe(i):
            out.append((m + "gate.weight", [cfg.E, d]))
            for e in range(cfg.E):
                x = m + "experts.%d." % e
                out += [(x + "gate_proj.weight", [cfg.moe_I, d]), (x + "up_proj.weight", [cfg.moe_I, d]),
                        (x + "down_proj.weight", [d, cfg.moe_I])]
            if cfg.shared_I:
                s = m + "shared_expert."
                out += [(s + "gate_proj.weight", [cfg.shared_I, d]), (s + "up_proj.weight", [cfg.shared_I, d]),
                        (s + "down_proj.weight", [d, cfg.shared_I]), (m + "shared_expert_gate.weight", [1, d])]
        else:
            out += [(m + "gate_proj.weight", [cfg.inter, d]), (m + "up_proj.weight", [cfg.inter, d]),
                    (m + "down_proj.weight", [d, cfg.inter])]
    out += [("model.norm.weight", [d]), ("lm_head.weight", [cfg.vocab, d])]
    return out


class Qwen3NextRef:
    def __init__(self, cfg, weights, dtype=torch.float64):
        self.cfg, self.dtype = cfg, dtype
        self.w = {k: v.to(dtype) for k, v in weights.items()}
        for n, shp in qwen3next_shapes(cfg):
            if n not in self.w or list(self.w[n].shape) != shp:
                raise ValueError("tensor %s: want %s" % (n, shp))

    def gdn(self, i, x, mode="recurrent", chunk=64):
        """§1.2: grouped in_proj_qkvz / in_proj_ba, conv+SiLU on [q;k;v], gates, head repeat, L2 norm,
        delta rule, gated RMSNorm (plain weight, × SiLU(z)), out_proj."""
        cfg, a = self.cfg, "model.layers.%d.linear_attn." % i
        W = lambda n: self.w[a + n]
        T, Hk, Hv, dk, dv = x.shape[0], cfg.Hk, cfg.Hv, cfg.dk, cfg.dv
        r = Hv // Hk
        qkvz = linear(x, W("in_proj_qkvz.weight")).view(T, Hk, 2 * dk + 2 * r * dv)
        q, k, v, z = torch.split(qkvz, [dk, dk, r * dv, r * dv], -1)
        ba = linear(x, W("in_proj_ba.weight")).view(T, Hk, 2 * r)
        b, a_ = ba[..., :r].reshape(T, Hv), ba[..., r:].reshape(T, Hv)
        mixed = torch.cat([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], -1)
        mixed, _ = causal_conv_silu(mixed, W("conv1d.weight"))
        q, k, v = torch.split(mixed, [Hk * dk, Hk * dk, Hv * dv], -1)
        q = l2norm(q.view(T, Hk, dk).repeat_interleave(r, dim=1)) * dk ** -0.5
        k = l2norm(k.view(T, Hk, dk).repeat_interleave(r, dim=1))
        v = v.view(T, Hv, dv)
        beta = torch.sigmoid(b)
        g = -torch.exp(W("A_log")) * F.softplus(a_ + W("dt_bias"))  # [T,Hv]
        if mode == "recurrent":
            o = gdn_recurrent(q, k, v, g, beta)
        else:  # the per-channel chunked kernel with the scalar decay broadcast over dk
            o, _ = k3ref.kda_chunked(q, k, v, g.unsqueeze(-1).expand(T, Hv, dk), beta, None, chunk)
        o = rms_norm(o, W("norm.weight"), cfg.eps) * F.silu(z.reshape(T, Hv, dv))
        return linear(o.reshape(T, Hv * dv), W("out_proj.weight"))

    def attn(self, i, x):
        """§2.5: q_proj → per head [query | gate]; zero-centred q/k norms; partial rotate-half RoPE;
        GQA causal softmax (scale hd^-1/2); × σ(gate); o_proj."""
        cfg, a = self.cfg, "model.layers.%d.self_attn." % i
        W = lambda n: self.w[a + n]
        T, H, Hkv, hd = x.shape[0], cfg.H, cfg.Hkv, cfg.hd
        qg = linear(x, W("q_proj.weight")).view(T, H, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, H * hd)
        q = rms_norm_zc(q, W("q_norm.weight"), cfg.eps)
        k = rms_norm_zc(linear(x, W("k_proj.weight")).view(T, Hkv, hd), W("k_norm.weight"), cfg.eps)
        v = linear(x, W("v_proj.weight")).view(T, Hkv, hd)
        cos, sin = rope_tables(cfg.rot, cfg.theta, range(T), dtype=x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = H // Hkv
        o = causal_softmax_attn(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), hd ** -0.5)
        return linear(o.reshape(T, H * hd) * torch.sigmoid(gate), W("o_proj.weight"))

    def ffn(self, i, x, moe_mode="routed"):
        """§3.4: softmax router, top-k, norm_topk_prob; experts SwiGLU; + σ(shared_expert_gate x) · shared."""
        cfg, m = self.cfg, "model.layers.%d.mlp." % i
        W = lambda n: self.w[m + n]
        if not cfg.is_moe(i):
            return swiglu(x, W("gate_proj.weight"), W("up_proj.weight"), W("down_proj.weight"))
        p = torch.softmax(linear(x, W("gate.weight")), -1)
        wts, idx = p.topk(cfg.topk, -1)
        if cfg.norm_topk:
            wts = wts / wts.sum(-1, keepdim=True)
        expert = lambda e, h: swiglu(h, W("experts.%d.gate_proj.weight" % e), W("experts.%d.up_proj.weight" % e),
                                     W("experts.%d.down_proj.weight" % e))
        y = combine(x, idx, wts, expert, cfg.E, moe_mode)
        if cfg.shared_I:
            y = y + torch.sigmoid(linear(x, W("shared_expert_gate.weight"))) * swiglu(
                x, W("shared_expert.gate_proj.weight"), W("shared_expert.up_proj.weight"),
                W("shared_expert.down_proj.weight"))
        return y

    def forward(self, ids, gdn_mode="recurrent", chunk=64, moe_mode="routed", capture=None):
        cfg, w = self.cfg, self.w
        cap = capture if capture is not None else {}
        h = w["model.embed_tokens.weight"][torch.as_tensor(ids, dtype=torch.long)]
        for i in range(cfg.L):
            p = "model.layers.%d." % i
            cap["layer_in.%d" % i] = h
            xn = rms_norm_zc(h, w[p + "input_layernorm.weight"], cfg.eps)
            a = self.gdn(i, xn, gdn_mode, chunk) if cfg.kinds[i] == "gdn" else self.attn(i, xn)
            cap["mixer_out.%d" % i] = a
            h = h + a
            cap["ffn_in.%d" % i] = h
            f = self.ffn(i, rms_norm_zc(h, w[p + "post_attention_layernorm.weight"], cfg.eps), moe_mode)
            cap["ffn_out.%d" % i] = f
            h = h + f
        h = rms_norm_zc(h, w["model.norm.weight"], cfg.eps)
        cap["final_hidden"] = h
        cap["logits"] = linear(h, w["lm_head.weight"])
        return cap["logits"]


def combine(x, idx, wts, expert, E, mode):
    """Σ_k w_k E_{idx_k}(x), by routing tokens to experts or by running every expert (cross-check)."""
    if mode == "routed":
        y = torch.zeros_like(x)
        for e in range(E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel():
                y.index_add_(0, tok, wts[tok, slot].unsqueeze(-1) * expert(e, x[tok]))
        return y
    comb = torch.zeros(x.shape[0], E, dtype=x.dtype).scatter_(1, idx, wts)
    return torch.einsum("te,etd->td", comb, torch.stack([expert(e, x) for e in range(E)], 0))


# --------------------------------------------------------------------------------------------
# DeepSeek-V3
# --------------------------------------------------------------------------------------------


class DeepSeekV3Config:
    def __init__(self, c):
        self.raw = c
        self.vocab, self.d, self.L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.inter = c.get("intermediate_size")
        self.H = c["num_attention_heads"]
        self.q_lora, self.r_kv = c.get("q_lora_rank"), c["kv_lora_rank"]
        self.dn, self.dr, self.dv = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.theta = c.get("rope_theta", 10000.0)
        self.interleave = c.get("rope_interleave", True)
        self.scaling = c.get("rope_scaling")
        self.E, self.topk = c.get("n_routed_experts", 0), c.get("num_experts_per_tok", 1)
        self.n_shared, self.moe_I = c.get("n_shared_experts", 0) or 0, c.get("moe_intermediate_size")
        self.n_group, self.topk_group = c.get("n_group", 1) or 1, c.get("topk_group", 1) or 1
        self.norm_topk, self.rho = c.get("norm_topk_prob", True), c.get("routed_scaling_factor", 1.0)
        self.first_dense, self.freq = c.get("first_k_dense_replace", 0), c.get("moe_layer_freq", 1)

    def is_moe(self, i):
        return self.E > 0 and i >= self.first_dense and i % self.freq == 0


def deepseekv3_shapes(cfg):
    d = cfg.d
    out = [("model.embed_tokens.weight", [cfg.vocab, d])]
    H, dqk = cfg.H, cfg.dn + cfg.dr
    for i in range(cfg.L):
        p = "model.layers.%d." % i
        a = p + "self_attn."
        out += [(p + "input_layernorm.weight", [d]), (p + "post_attention_layernorm.weight", [d])]
        if cfg.q_lora is None:
            out.append((a + "q_proj.weight", [H * dqk, d]))
        else:
            out += [(a + "q_a_proj.weight", [cfg.q_lora, d]), (a + "q_a_layernorm.weight", [cfg.q_lora]),
                    (a + "q_b_proj.weight", [H * dqk, cfg.q_lora])]
        out += [(a + "kv_a_proj_with_mqa.weight", [cfg.r_kv + cfg.dr, d]), (a + "kv_a_layernorm.weight", [cfg.r_kv]),
                (a + "kv_b_proj.weight", [H * (cfg.dn + cfg.dv), cfg.r_kv]), (a + "o_proj.weight", [d, H * cfg.dv])]
        m = p + "mlp."
        if cfg.is_moe(i):
            out += [(m + "gate.weight", [cfg.E, d]), (m + "gate.e_score_correction_bias", [cfg.E])]
            for e in range(cfg.E):
                x = m + "experts.%d." % e
                out += [(x + "gate_proj.weight", [cfg.moe_I, d]), (x + "up_proj.weight", [cfg.moe_I, d]),
                        (x + "down_proj.weight", [d, cfg.moe_I])]
            if cfg.n_shared:
                I = cfg.n_shared * cfg.moe_I
                s = m + "shared_experts."
                out += [(s + "gate_proj.weight", [I, d]), (s + "up_proj.weight", [I, d]), (s + "down_proj.weight", [d, I])]
        else:
            out += [(m + "gate_proj.weight", [cfg.inter, d]), (m + "up_proj.weight", [cfg.inter, d]),
                    (m + "down_proj.weight", [d, cfg.inter])]
    out += [("model.norm.weight", [d]), ("lm_head.weight", [cfg.vocab, d])]
    return out


class DeepSeekV3Ref:
    def __init__(self, cfg, weights, dtype=torch.float64):
        self.cfg, self.dtype = cfg, dtype
        self.w = {k: v.to(dtype) for k, v in weights.items()}
        for n, shp in deepseekv3_shapes(cfg):
            if n not in self.w or list(self.w[n].shape) != shp:
                raise ValueError("tensor %s: want %s" % (n, shp))

    def mla(self, i, x, mode="naive"):
        """§2.2–2.4: q (LoRA) → [q_nope; q_pe]; kv_a → [c_kv; k_pe]; RoPE on q_pe and the single k_pe
        head; scores scale·(q_nope·k_nope + q_pe·k_pe); scale = d_qk^-1/2 · mscale(s, mscale_all_dim)²."""
        cfg, a = self.cfg, "model.layers.%d.self_attn." % i
        W = lambda n: self.w[a + n]
        T, H, dn, dr, dv, r = x.shape[0], cfg.H, cfg.dn, cfg.dr, cfg.dv, cfg.r_kv
        if cfg.q_lora is None:
            q = linear(x, W("q_proj.weight"))
        else:
            q = linear(rms_norm(linear(x, W("q_a_proj.weight")), W("q_a_layernorm.weight"), cfg.eps),
                       W("q_b_proj.weight"))
        q = q.view(T, H, dn + dr)
        kv = linear(x, W("kv_a_proj_with_mqa.weight"))
        c = rms_norm(kv[:, :r], W("kv_a_layernorm.weight"), cfg.eps)
        cos, sin = rope_tables(dr, cfg.theta, range(T), cfg.scaling, x.dtype)
        q_n = q[..., :dn]
        q_r = apply_rope(q[..., dn:], cos, sin, cfg.interleave)
        k_r = apply_rope(kv[:, r:].view(T, 1, dr), cos, sin, cfg.interleave)  # [T,1,dr]
        scale = (dn + dr) ** -0.5
        # CHOICE (transformers DeepseekV3Attention): the YaRN softmax multiplier uses mscale_all_dim only.
        if cfg.scaling and cfg.scaling.get("mscale_all_dim"):
            m = yarn_mscale(cfg.scaling["factor"], cfg.scaling["mscale_all_dim"])
            scale = scale * m * m
        Wkv = W("kv_b_proj.weight").view(H, dn + dv, r)
        W_UK, W_UV = Wkv[:, :dn], Wkv[:, dn:]
        if mode == "naive":
            k = torch.cat([torch.einsum("tc,hdc->thd", c, W_UK), k_r.expand(T, H, dr)], -1)
            v = torch.einsum("tc,hdc->thd", c, W_UV)
            o = causal_softmax_attn(torch.cat([q_n, q_r], -1), k, v, scale)
        else:  # absorbed (§2.3)
            qt = torch.einsum("thd,hdc->thc", q_n, W_UK)
            s = (torch.einsum("thc,sc->hts", qt, c) + torch.einsum("thd,sd->hts", q_r, k_r[:, 0])) * scale
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            o = torch.einsum("thc,hdc->thd", torch.einsum("hts,sc->thc", torch.softmax(s, -1), c), W_UV)
        return linear(o.reshape(T, H * dv), W("o_proj.weight"))

    def route(self, x, m):
        """§3.2 noaux_tc: σ scores; biased scores select (group top-2 sums, topk_group groups, −inf
        elsewhere); weights are the unbiased scores, renormalised (+1e-20), × routed_scaling_factor."""
        cfg = self.cfg
        s = torch.sigmoid(linear(x, self.w[m + "gate.weight"]))
        sel = s + self.w[m + "gate.e_score_correction_bias"]
        T, E, G = s.shape[0], cfg.E, cfg.n_group
        if G > 1:
            gs = sel.view(T, G, E // G).topk(2, -1).values.sum(-1)
            keep = torch.zeros(T, G, dtype=torch.bool).scatter_(1, gs.topk(cfg.topk_group, -1).indices, True)
            sel = sel.masked_fill(~keep.repeat_interleave(E // G, 1), float("-inf"))
        idx = sel.topk(cfg.topk, -1).indices
        w = s.gather(1, idx)
        if cfg.norm_topk:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * cfg.rho

    def ffn(self, i, x, moe_mode="routed"):
        cfg, m = self.cfg, "model.layers.%d.mlp." % i
        W = lambda n: self.w[m + n]
        if not cfg.is_moe(i):
            return swiglu(x, W("gate_proj.weight"), W("up_proj.weight"), W("down_proj.weight"))
        idx, wts = self.route(x, m)
        expert = lambda e, h: swiglu(h, W("experts.%d.gate_proj.weight" % e), W("experts.%d.up_proj.weight" % e),
                                     W("experts.%d.down_proj.weight" % e))
        y = combine(x, idx, wts, expert, cfg.E, moe_mode)
        if cfg.n_shared:
            y = y + swiglu(x, W("shared_experts.gate_proj.weight"), W("shared_experts.up_proj.weight"),
                           W("shared_experts.down_proj.weight"))
        return y

    def forward(self, ids, mla_mode="naive", moe_mode="routed", capture=None):
        cfg, w = self.cfg, self.w
        cap = capture if capture is not None else {}
        h = w["model.embed_tokens.weight"][torch.as_tensor(ids, dtype=torch.long)]
        for i in range(cfg.L):
            p = "model.layers.%d." % i
            cap["layer_in.%d" % i] = h
            a = self.mla(i, rms_norm(h, w[p + "input_layernorm.weight"], cfg.eps), mla_mode)
            cap["mixer_out.%d" % i] = a
            h = h + a
            cap["ffn_in.%d" % i] = h
            f = self.ffn(i, rms_norm(h, w[p + "post_attention_layernorm.weight"], cfg.eps), moe_mode)
            cap["ffn_out.%d" % i] = f
            h = h + f
        h = rms_norm(h, w["model.norm.weight"], cfg.eps)
        cap["final_hidden"] = h
        cap["logits"] = linear(h, w["lm_head.weight"])
        return cap["logits"]


FAMILIES = {
    "qwen3_next": (Qwen3NextConfig, qwen3next_shapes, Qwen3NextRef),
    "deepseek_v3": (DeepSeekV3Config, deepseekv3_shapes, DeepSeekV3Ref),
}


def from_dir(path, dtype=torch.float64):
    with open(path + "/config.json") as f:
        c = json.load(f)
    Cfg, _, Ref = FAMILIES[c["model_type"]]
    w, _, _ = k3ref.load_safetensors(path + "/model.safetensors")
    return Ref(Cfg(c), w, dtype)
