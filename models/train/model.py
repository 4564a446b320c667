"""Trainable, batched K3-class model (text + vision) for k3-micro.

Same equations as models/reference/k3ref.py + k3vision.py (whose helpers it reuses), batched
over sequences, with a factored chunked KDA kernel (training-notes.md) and expert-grouped MoE.
Parameters carry the Hugging Face tensor names (experts stacked [E, ...] internally, unstacked by
`hf_tensors`).  The router selection bias (`e_score_correction_bias`) is a buffer updated by
Quantile Balancing (`qb_update`), never by gradients.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import k3ref  # noqa: E402
import k3vision  # noqa: E402

PREFIX = "language_model."


def key(n):
    return n.replace(".", "__")


# ------------------------------------------------------------------------------------------
# factored chunked KDA (exact; requires the K3 lower-bounded gate: g >= gate_lower_bound)
# ------------------------------------------------------------------------------------------

def kda_chunk_fast(q, k, v, g, beta, C=64, sub=16):
    """q,k [B,T,H,dk] (normalised, q scaled), v [B,T,H,dv], g [B,T,H,dk] log-decay in [lb, 0],
    beta [B,T,H]. Returns o [B,T,H,dv].  exp(G_i - G_j) = exp(G_i - G_r)·exp(G_r - G_j) with r the
    first row of the query's 16-row sub-chunk (|G_r - G_j| <= 15·|lb| for the j used)."""
    B, T, H, dk = q.shape
    dv = v.shape[-1]
    N = (T + C - 1) // C
    pad = N * C - T

    def prep(x):
        if pad:
            x = F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad)) if x.dim() > 2 else F.pad(x, (0, pad))
        # [B, N*C, H, ...] -> [B*H, N, C, ...]
        x = x.reshape((B, N, C, H) + tuple(x.shape[3:]))
        perm = (0, 3, 1, 2) + tuple(range(4, x.dim()))
        return x.permute(perm).reshape((B * H, N, C) + tuple(x.shape[4:]))

    if pad:
        q, k, v, g = [F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, g)]
        beta = F.pad(beta, (0, 0, 0, pad))
    rs = lambda x: x.reshape((B, N, C, H) + tuple(x.shape[3:])).permute(
        (0, 3, 1, 2) + tuple(range(4, x.dim() + 1))).reshape((B * H, N, C) + tuple(x.shape[3:]))
    Q, K, V, G0, Bt = rs(q), rs(k), rs(v), rs(g), rs(beta)  # [BH,N,C,d], Bt [BH,N,C]
    G = torch.cumsum(G0, dim=2)
    Aqk = q.new_zeros(B * H, N, C, C)
    Akk = q.new_zeros(B * H, N, C, C)
    rows_q, rows_k = [], []
    blocks_qk, blocks_kk = [], []
    for s in range(C // sub):
        a, e = s * sub, (s + 1) * sub
        Gr = G[:, :, a:a + 1]
        dq = torch.exp(G[:, :, a:e] - Gr)
        kc = K[:, :, :e] * torch.exp(Gr - G[:, :, :e])
        blocks_qk.append(((Q[:, :, a:e] * dq) @ kc.transpose(-1, -2), a, e))
        blocks_kk.append(((K[:, :, a:e] * dq) @ kc.transpose(-1, -2), a, e))
    Aqk = torch.cat([F.pad(b, (0, C - e)) for b, a, e in blocks_qk], 2)
    Akk = torch.cat([F.pad(b, (0, C - e)) for b, a, e in blocks_kk], 2)
    incl = torch.ones(C, C, dtype=torch.bool).tril()
    strict = torch.ones(C, C, dtype=torch.bool).tril(-1)
    Aqk = Aqk.masked_fill(~incl, 0.0)
    Lm = (Bt.unsqueeze(-1) * Akk).masked_fill(~strict, 0.0)
    eye = torch.eye(C, dtype=q.dtype)
    Tm = torch.linalg.solve_triangular(eye + Lm, eye.expand_as(Lm), upper=False, unitriangular=True)
    U = Tm @ (Bt.unsqueeze(-1) * V)
    eG = torch.exp(G)
    Wm = Tm @ (Bt.unsqueeze(-1) * eG * K)
    Qg = eG * Q
    Glast = G[:, :, -1]  # [BH,N,dk]
    Kd = torch.exp(Glast.unsqueeze(2) - G) * K  # [BH,N,C,dk]
    eGl = torch.exp(Glast).unsqueeze(-1)  # [BH,N,dk,1]
    S = q.new_zeros(B * H, dk, dv)
    outs = []
    for n in range(N):
        Vn = U[:, n] - Wm[:, n] @ S
        outs.append(Qg[:, n] @ S + Aqk[:, n] @ Vn)
        S = eGl[:, n] * S + Kd[:, n].transpose(-1, -2) @ Vn
    o = torch.stack(outs, 1)  # [BH,N,C,dv]
    o = o.reshape(B, H, N * C, dv).permute(0, 2, 1, 3)[:, :T]
    return o


# ------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------

class K3Micro(nn.Module):
    def __init__(self, config_json, seed=0):
        super().__init__()
        self.raw = config_json
        self.cfg, _ = k3ref.load_config(config_json)
        vc = config_json.get("vision_config")
        self.vcfg = k3vision.VisionConfig(vc, self.cfg.d) if vc else None
        self.placeholder = config_json.get("media_placeholder_token_id")
        self.P = nn.ParameterDict()
        self.moe_layers = [i for i in range(self.cfg.L) if self.cfg.is_moe(i)]
        gen = torch.Generator().manual_seed(seed)
        self._init(gen)

    # names ----------------------------------------------------------------------------
    def _shapes(self):
        c = self.cfg
        out = []
        for n, s in k3ref.param_shapes(c):
            if ".experts." in n:
                if ".experts.0." in n:
                    out.append((PREFIX + n.replace(".experts.0.", ".experts."), [c.E] + s))
                continue
            if n.endswith("e_score_correction_bias"):
                continue
            out.append((PREFIX + n, s))
        if self.vcfg:
            out += k3vision.vision_param_shapes(self.vcfg)
        return out

    def _init(self, gen):
        c = self.cfg
        for n, s in self._shapes():
            t = torch.empty(s)
            if n.endswith("norm.weight") or "layernorm" in n or n.endswith(("norm0.weight", "norm1.weight")) \
                    or n.endswith("o_norm.weight"):
                t.fill_(1.0)
            elif n.endswith(".bias"):
                t.zero_()
            elif n.endswith("res_proj.weight"):
                t.zero_()
            elif n.endswith("A_log"):
                t.zero_()
            elif n.endswith("dt_bias"):
                t.uniform_(-8.0, -2.0, generator=gen)
            elif n.endswith("embed_tokens.weight"):
                t.normal_(0, 1.0, generator=gen)
            elif "conv1d" in n:
                t.normal_(0, s[-1] ** -0.5, generator=gen)
            else:
                fan_in = s[-1] if len(s) != 4 else s[1] * s[2] * s[3]
                std = fan_in ** -0.5
                if n.endswith(("o_proj.weight", "down_proj.weight", "experts.w2.weight", "wo.weight",
                               "fc1.weight", "routed_expert_up_proj.weight")):
                    std *= 0.5
                if n.endswith("lm_head.weight"):
                    std *= 0.5
                t.normal_(0, std, generator=gen)
            self.P[key(n)] = nn.Parameter(t)
        for i in self.moe_layers:
            self.register_buffer("bias%d" % i, torch.zeros(c.E))

    def w(self, n):
        return self.P[key(n)]

    def tw(self, n):
        return self.P[key(PREFIX + n)]

    def router_bias(self, i):
        return getattr(self, "bias%d" % i)

    def hf_tensors(self):
        """name -> tensor (HF layout, experts unstacked)."""
        out = {}
        for k_, p in self.P.items():
            n = k_.replace("__", ".")
            p = p.detach()
            if ".experts.w" in n:
                base, wname = n.split(".experts.")
                for e in range(p.shape[0]):
                    out["%s.experts.%d.%s" % (base, e, wname)] = p[e]
            else:
                out[n] = p
        for i in self.moe_layers:
            out[PREFIX + "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias" % i] = self.router_bias(i).detach()
        return out

    def load_hf(self, tensors):
        with torch.no_grad():
            for k_, p in self.P.items():
                n = k_.replace("__", ".")
                if ".experts.w" in n:
                    base, wname = n.split(".experts.")
                    p.copy_(torch.stack([tensors["%s.experts.%d.%s" % (base, e, wname)] for e in range(p.shape[0])]))
                else:
                    p.copy_(tensors[n].reshape(p.shape))
            for i in self.moe_layers:
                self.router_bias(i).copy_(tensors[PREFIX + "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias" % i])

    # layers -----------------------------------------------------------------------------
    def kda(self, i, x):
        c = self.cfg
        W = lambda n: self.tw("model.layers.%d.self_attn.%s" % (i, n))
        B, T, _ = x.shape
        H, dk, dv, K = c.kH, c.kdk, c.kdv, c.conv_K

        def conv(y, w):  # y [B,T,C], w [C,1,K]
            yp = F.pad(y.transpose(1, 2), (K - 1, 0))
            return F.silu(F.conv1d(yp, w, groups=y.shape[-1])).transpose(1, 2)

        q = conv(x @ W("q_proj.weight").t(), W("q_conv1d.weight"))
        k = conv(x @ W("k_proj.weight").t(), W("k_conv1d.weight"))
        v = conv(x @ W("v_proj.weight").t(), W("v_conv1d.weight"))
        q = k3ref.l2norm(q.view(B, T, H, dk)) * dk ** -0.5
        k = k3ref.l2norm(k.view(B, T, H, dk))
        v = v.view(B, T, H, dv)
        beta = torch.sigmoid(x @ W("b_proj.weight").t())
        g_raw = ((x @ W("f_a_proj.weight").t()) @ W("f_b_proj.weight").t()).view(B, T, H, dk)
        A = torch.exp(W("A_log")).reshape(H, -1)
        g = c.gate_lb * torch.sigmoid(A * (g_raw + W("dt_bias").view(H, dk)))
        o = kda_chunk_fast(q, k, v, g, beta)
        G = x @ W("g_proj.weight").t()
        o = k3ref.rms_norm(o, W("o_norm.weight"), c.eps) * torch.sigmoid(G.view(B, T, H, dv))
        return o.reshape(B, T, H * dv) @ W("o_proj.weight").t()

    def mla(self, i, x):
        c = self.cfg
        W = lambda n: self.tw("model.layers.%d.self_attn.%s" % (i, n))
        B, T, _ = x.shape
        H, dn, dr, dv, r = c.H, c.dn, c.dr, c.dv, c.r_kv
        q = k3ref.rms_norm(x @ W("q_a_proj.weight").t(), W("q_a_layernorm.weight"), c.eps) @ W("q_b_proj.weight").t()
        q = q.view(B, T, H, dn + dr)
        q_n, q_r = q[..., :dn], q[..., dn:]
        kv = x @ W("kv_a_proj_with_mqa.weight").t()
        cc = k3ref.rms_norm(kv[..., :r], W("kv_a_layernorm.weight"), c.eps)
        k_r = kv[..., r:]
        Wkv = W("kv_b_proj.weight").view(H, dn + dv, r)
        k_n = torch.einsum("btc,hdc->bhtd", cc, Wkv[:, :dn])
        vv = torch.einsum("btc,hdc->bhtd", cc, Wkv[:, dn:])
        s = (q_n.transpose(1, 2) @ k_n.transpose(-1, -2) + torch.einsum("bthd,bsd->bhts", q_r, k_r)) * (dn + dr) ** -0.5
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        p = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
        o = (p @ vv).transpose(1, 2).reshape(B, T, H * dv)
        o = o * torch.sigmoid(x @ W("g_proj.weight").t())
        return o @ W("o_proj.weight").t()

    def ffn(self, i, x, stats):
        c = self.cfg
        p = "model.layers.%d." % i
        if not c.is_moe(i):
            return k3ref.glu_mlp(x, self.tw(p + "mlp.gate_proj.weight"), self.tw(p + "mlp.up_proj.weight"),
                                 self.tw(p + "mlp.down_proj.weight"), c)
        m = p + "block_sparse_moe."
        B, T, d = x.shape
        xf = x.reshape(B * T, d)
        logits = xf @ self.tw(m + "gate.weight").t()
        s = torch.sigmoid(logits)
        bias = self.router_bias(i)
        idx = (s.detach() + bias).topk(c.topk, dim=-1).indices
        wts = s.gather(1, idx)
        wts = wts / (wts.sum(-1, keepdim=True) + 1e-20) * c.rho
        stats.append((i, s.detach(), idx))
        z = xf @ self.tw(m + "routed_expert_down_proj.weight").t()
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        tok = order // c.topk
        counts = torch.bincount(flat, minlength=c.E).tolist()
        zs = z.index_select(0, tok)
        w1 = self.tw(m + "experts.w1.weight").unbind(0)
        w3 = self.tw(m + "experts.w3.weight").unbind(0)
        w2 = self.tw(m + "experts.w2.weight").unbind(0)
        outs, st = [], 0
        for e, n in enumerate(counts):
            if n:
                h = zs[st:st + n]
                outs.append(k3ref.glu_act(h @ w1[e].t(), h @ w3[e].t(), c) @ w2[e].t())
                st += n
        Y = torch.cat(outs, 0) * wts.reshape(-1)[order].unsqueeze(-1)
        r = torch.zeros_like(z).index_add(0, tok, Y)
        r = k3ref.rms_norm(r, self.tw(m + "routed_expert_norm.weight"), c.eps)
        r = r @ self.tw(m + "routed_expert_up_proj.weight").t()
        r = r + k3ref.glu_mlp(xf, self.tw(m + "shared_experts.gate_proj.weight"),
                              self.tw(m + "shared_experts.up_proj.weight"),
                              self.tw(m + "shared_experts.down_proj.weight"), c)
        return r.reshape(B, T, d)

    # vision -------------------------------------------------------------------------------
    def vision_weights(self):
        return {k_.replace("__", "."): p for k_, p in self.P.items() if not k_.startswith("language_model")}

    def encode_images(self, images):
        """images: list of (patches tensor [N,3pp], (gh,gw)) in placeholder order -> [sum Nm, d]."""
        if not images:
            return None
        W = self.vision_weights()
        groups = {}
        for j, (pt, grid) in enumerate(images):
            groups.setdefault(grid, []).append(j)
        res = [None] * len(images)
        for grid, js in groups.items():
            pt = torch.stack([images[j][0] for j in js])
            out = k3vision.encode(W, self.vcfg, pt, grid)
            for a, j in enumerate(js):
                res[j] = out[a]
        return torch.cat(res, 0)

    # forward --------------------------------------------------------------------------------
    def forward(self, ids, images=None, stats=None):
        """ids [B,T] long; images: list of (patches, grid) in row-major placeholder order.
        Returns logits [B,T,V]; stats (list) receives (layer, scores, idx) per MoE layer."""
        c = self.cfg
        stats = [] if stats is None else stats
        E = self.tw("model.embed_tokens.weight")
        h = E[ids]
        if images:
            rows = self.encode_images(images)
            mask = (ids == self.placeholder).unsqueeze(-1)
            h = h.masked_scatter(mask, rows.to(h.dtype))
        S, eps = c.attn_res, c.eps
        R, p = [], h
        for i in range(c.L):
            pf = "model.layers.%d." % i
            x = k3ref.attn_res(R + [p], self.tw(pf + "self_attention_res_proj.weight"),
                               self.tw(pf + "self_attention_res_norm.weight"), eps) if R else p
            if i % S == 0:
                R.append(p)
                p = None
            xn = k3ref.rms_norm(x, self.tw(pf + "input_layernorm.weight"), eps)
            a = self.kda(i, xn) if c.kinds[i] == "kda" else self.mla(i, xn)
            p = a if p is None else p + a
            y = k3ref.attn_res(R + [p], self.tw(pf + "mlp_res_proj.weight"), self.tw(pf + "mlp_res_norm.weight"), eps)
            f = self.ffn(i, k3ref.rms_norm(y, self.tw(pf + "post_attention_layernorm.weight"), eps), stats)
            p = p + f
        h = k3ref.attn_res(R + [p], self.tw("model.output_attn_res_proj.weight"),
                           self.tw("model.output_attn_res_norm.weight"), eps)
        h = k3ref.rms_norm(h, self.tw("model.norm.weight"), eps)
        return h @ self.tw("lm_head.weight").t()


@torch.no_grad()
def qb_delta(scores, bias, k):
    """Quantile Balancing (architecture.md §3.6) for one MoE layer: scores [m,n] unbiased router
    scores, bias [n].  Returns c [n]; the update is bias -= eta * c."""
    m, n = scores.shape
    sb = scores.float() + bias
    alpha = sb.topk(k + 1, dim=-1).values[:, k]
    M = sb - alpha.unsqueeze(-1)
    q = int(round(m * k / n))
    q = min(max(q, 0), m - 1)
    return M.topk(q + 1, dim=0).values[q]


def count_params(model):
    c = model.cfg
    tot = sum(p.numel() for p in model.P.values())
    vis = sum(p.numel() for k_, p in model.P.items() if not k_.startswith("language_model"))
    emb = model.tw("model.embed_tokens.weight").numel() + model.tw("lm_head.weight").numel()
    experts = sum(p.numel() for k_, p in model.P.items() if "__experts__" in k_)
    active_experts = experts * c.topk // c.E
    return {"total": tot, "vision": vis, "embeddings": emb, "routed_experts": experts,
            "active": tot - experts + active_experts,
            "active_non_embedding": tot - experts + active_experts - emb}
