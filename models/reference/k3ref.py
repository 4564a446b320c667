"""k3ref: an independent PyTorch reference of the Kimi-K3-class text model.

Written from /work/shared/docs/architecture.md (sections cited inline).  Pure tensor ops,
no autograd, vectorised over heads/tokens; every function takes the compute dtype of its
inputs (float64 is used for goldens).

Contents
  * hand-written safetensors reader/writer (F32 / F16 / BF16 / F64)
  * Config: parses HF config.json ("kimi_linear" flat, or "kimi_k3" with text_config and the
    `language_model.` tensor prefix)
  * kernels: KDA recurrent + chunked (WY/UT) forms, MLA naive + absorbed, routed + dense MoE,
    Block AttnRes
  * K3Ref: the full causal LM forward with per-layer capture

Resolved ambiguities are marked "CHOICE:" in comments.
"""
import json
import struct

import numpy as np
import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------
# safetensors (written by hand; no safetensors package here)
# --------------------------------------------------------------------------------------------

_NP = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}


def f32_to_bf16_bits(t):
    """float tensor -> numpy uint16 bf16 bit patterns (round to nearest, ties to even)."""
    a = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").view("<u4").astype(np.uint64)
    lsb = (a >> np.uint64(16)) & np.uint64(1)
    r = ((a + np.uint64(0x7FFF) + lsb) >> np.uint64(16)).astype(np.uint16)
    nan = np.isnan(t.detach().to(torch.float32).numpy())
    r[nan] = np.uint16(0x7FC0)
    return r


def bf16_bits_to_f32(bits):
    return torch.from_numpy((bits.astype(np.uint32) << np.uint32(16)).view("<f4").copy())


def bf16_round(t):
    """Round a float tensor to the nearest bf16 value, returned as float32."""
    return bf16_bits_to_f32(f32_to_bf16_bits(t)).reshape(t.shape)


def save_safetensors(path, tensors, metadata=None, dtypes=None, default_dtype="F32"):
    """tensors: name -> torch tensor. dtypes: optional name -> "F32"/"F16"/"BF16"/"F64"."""
    dtypes = dtypes or {}
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().cpu()
        dt = dtypes.get(name, default_dtype)
        if dt == "BF16":
            raw = f32_to_bf16_bits(t.reshape(-1)).astype("<u2").tobytes()
        elif dt in ("F32", "F16", "F64"):
            raw = t.to(torch.float64).reshape(-1).numpy().astype(_NP[dt]).tobytes()
        else:
            raise ValueError("unsupported dtype " + dt)
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Returns (tensors name->float tensor, metadata dict, dtypes name->str).
    F32/F16/BF16 are returned as float32 (exact), F64 as float64."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", {}) or {}
    out, dts = {}, {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        dt = info["dtype"]
        if dt == "BF16":
            t = bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2"))
        elif dt in ("F32", "F16", "F64"):
            arr = np.frombuffer(raw, dtype=_NP[dt])
            t = torch.from_numpy(arr.astype("<f8" if dt == "F64" else "<f4"))
        else:
            raise ValueError("unsupported dtype " + dt)
        out[name] = t.reshape(info["shape"])
        dts[name] = dt
    return out, meta, dts


# --------------------------------------------------------------------------------------------
# config (§5, §5.1)
# --------------------------------------------------------------------------------------------


class Config:
    def __init__(self, c):
        self.raw = c
        self.vocab = c["vocab_size"]
        self.d = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.inter = c["intermediate_size"]
        # MLA
        self.H = c["num_attention_heads"]
        self.q_lora = c.get("q_lora_rank")
        self.r_kv = c["kv_lora_rank"]
        self.dn = c["qk_nope_head_dim"]
        self.dr = c["qk_rope_head_dim"]
        self.dv = c["v_head_dim"]
        self.mla_gate = bool(c.get("mla_use_output_gate", False))
        if not c.get("mla_use_nope", True):
            # CHOICE: only NoPE MLA is implemented (all K3/Kimi Linear configs use it).
            raise NotImplementedError("RoPE MLA not implemented; mla_use_nope must be true")
        # KDA
        la = c.get("linear_attn_config") or {}
        self.kda_layers = sorted(la.get("kda_layers", []))
        self.full_layers = sorted(la.get("full_attn_layers", []))
        self.kH = la.get("num_heads", self.H)
        self.kdk = la.get("head_dim", 128)
        self.kdv = self.kdk  # CHOICE: dk = dv = linear_attn_config.head_dim (as in all Kimi configs)
        self.conv_K = la.get("short_conv_kernel_size", 4)
        # CHOICE: the two switches are read independently: the lower-bounded sigmoid forget gate is
        # used iff gate_lower_bound is present and not null; the full-rank output gate (g_proj)
        # iff use_full_rank_gate is true.  K3 sets both, Kimi Linear neither.
        self.full_rank_gate = bool(la.get("use_full_rank_gate", False))
        self.gate_lb = la.get("gate_lower_bound")
        # MoE
        self.E = c.get("num_experts", 0) or 0
        self.topk = c.get("num_experts_per_token", c.get("num_experts_per_tok", 1))
        self.n_shared = c.get("num_shared_experts", 0) or 0
        self.moe_I = c.get("moe_intermediate_size")
        self.latent = c.get("routed_expert_hidden_size")
        self.latent_norm = bool(c.get("latent_moe_use_norm", False))
        self.router_act = c.get("moe_router_activation_func", "sigmoid")
        self.renorm = bool(c.get("moe_renormalize", True))
        self.rho = float(c.get("routed_scaling_factor", 1.0))
        self.n_group = c.get("num_expert_group", 1) or 1
        self.topk_group = c.get("topk_group", 1) or 1
        self.first_dense = c.get("first_k_dense_replace", 0) or 0
        self.moe_freq = c.get("moe_layer_freq", 1) or 1
        # activation
        self.act = c.get("hidden_act", "silu")
        self.situ_beta = c.get("activation_situ_beta", 4.0)
        self.situ_beta_lin = c.get("activation_situ_linear_beta")
        # residual
        self.attn_res = c.get("attn_res_block_size")
        # layer kinds
        self.kinds = []
        for i in range(self.L):
            if (i + 1) in self.kda_layers:
                self.kinds.append("kda")
            elif (i + 1) in self.full_layers or not self.kda_layers:
                # CHOICE: a layer in neither list is MLA only when no KDA list exists at all.
                self.kinds.append("mla")
            else:
                raise ValueError("layer %d is in neither kda_layers nor full_attn_layers" % (i + 1))

    def is_moe(self, i):
        return self.E > 0 and i >= self.first_dense and i % self.moe_freq == 0


def load_config(path_or_dict):
    """Returns (Config, tensor-name prefix)."""
    if isinstance(path_or_dict, dict):
        c = path_or_dict
    else:
        with open(path_or_dict) as f:
            c = json.load(f)
    if c.get("model_type") == "kimi_k3" or "text_config" in c:
        return Config(c["text_config"]), "language_model."
    return Config(c), ""


def param_shapes(cfg):
    """Ordered list of (name, shape) of every text-model tensor (names without prefix)."""
    d, out = cfg.d, []
    out.append(("model.embed_tokens.weight", [cfg.vocab, d]))
    for i in range(cfg.L):
        p = "model.layers.%d." % i
        out.append((p + "input_layernorm.weight", [d]))
        out.append((p + "post_attention_layernorm.weight", [d]))
        if cfg.attn_res:
            out += [(p + "self_attention_res_proj.weight", [1, d]), (p + "self_attention_res_norm.weight", [d]),
                    (p + "mlp_res_proj.weight", [1, d]), (p + "mlp_res_norm.weight", [d])]
        a = p + "self_attn."
        if cfg.kinds[i] == "kda":
            H, dk, dv, K = cfg.kH, cfg.kdk, cfg.kdv, cfg.conv_K
            out += [(a + "q_proj.weight", [H * dk, d]), (a + "k_proj.weight", [H * dk, d]),
                    (a + "v_proj.weight", [H * dv, d]),
                    (a + "q_conv1d.weight", [H * dk, 1, K]), (a + "k_conv1d.weight", [H * dk, 1, K]),
                    (a + "v_conv1d.weight", [H * dv, 1, K]),
                    (a + "f_a_proj.weight", [dk, d]), (a + "f_b_proj.weight", [H * dk, dk]),
                    (a + "dt_bias", [H * dk]), (a + "A_log", [H]), (a + "b_proj.weight", [H, d])]
            if cfg.full_rank_gate:
                out.append((a + "g_proj.weight", [H * dv, d]))
            else:
                out += [(a + "g_a_proj.weight", [dv, d]), (a + "g_b_proj.weight", [H * dv, dv])]
            out += [(a + "o_norm.weight", [dv]), (a + "o_proj.weight", [d, H * dv])]
        else:
            H, dqk = cfg.H, cfg.dn + cfg.dr
            if cfg.q_lora is None:
                out.append((a + "q_proj.weight", [H * dqk, d]))
            else:
                out += [(a + "q_a_proj.weight", [cfg.q_lora, d]), (a + "q_a_layernorm.weight", [cfg.q_lora]),
                        (a + "q_b_proj.weight", [H * dqk, cfg.q_lora])]
            out += [(a + "kv_a_proj_with_mqa.weight", [cfg.r_kv + cfg.dr, d]),
                    (a + "kv_a_layernorm.weight", [cfg.r_kv]),
                    (a + "kv_b_proj.weight", [H * (cfg.dn + cfg.dv), cfg.r_kv])]
            if cfg.mla_gate:
                out.append((a + "g_proj.weight", [H * cfg.dv, d]))
            out.append((a + "o_proj.weight", [d, H * cfg.dv]))
        if cfg.is_moe(i):
            m = p + "block_sparse_moe."
            din = cfg.latent or d
            out += [(m + "gate.weight", [cfg.E, d]), (m + "gate.e_score_correction_bias", [cfg.E])]
            for e in range(cfg.E):
                out += [(m + "experts.%d.w1.weight" % e, [cfg.moe_I, din]),
                        (m + "experts.%d.w3.weight" % e, [cfg.moe_I, din]),
                        (m + "experts.%d.w2.weight" % e, [din, cfg.moe_I])]
            if cfg.n_shared:
                Is = cfg.n_shared * cfg.moe_I
                out += [(m + "shared_experts.gate_proj.weight", [Is, d]),
                        (m + "shared_experts.up_proj.weight", [Is, d]),
                        (m + "shared_experts.down_proj.weight", [d, Is])]
            if cfg.latent:
                out.append((m + "routed_expert_down_proj.weight", [cfg.latent, d]))
                if cfg.latent_norm:
                    out.append((m + "routed_expert_norm.weight", [cfg.latent]))
                out.append((m + "routed_expert_up_proj.weight", [d, cfg.latent]))
        else:
            out += [(p + "mlp.gate_proj.weight", [cfg.inter, d]), (p + "mlp.up_proj.weight", [cfg.inter, d]),
                    (p + "mlp.down_proj.weight", [d, cfg.inter])]
    out.append(("model.norm.weight", [d]))
    if cfg.attn_res:
        out += [("model.output_attn_res_proj.weight", [1, d]), ("model.output_attn_res_norm.weight", [d])]
    out.append(("lm_head.weight", [cfg.vocab, d]))
    return out


# --------------------------------------------------------------------------------------------
# basic ops (§0.1)
# --------------------------------------------------------------------------------------------


def linear(x, w):
    return x @ w.t()


def rms_norm(x, w, eps):
    # CHOICE: computed entirely in the compute dtype (float64 for goldens); HF's
    # "round-before-gamma" cast is a no-op at that precision.
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def l2norm(x, eps=1e-6):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def glu_act(gate, up, cfg):
    """§3.1: SiTU-GLU (hidden_act "situ") or SwiGLU ("silu")."""
    if cfg.act == "situ":
        b = cfg.situ_beta
        g = b * torch.tanh(gate / b) * torch.sigmoid(gate)
        bl = cfg.situ_beta_lin
        u = up if bl is None else bl * torch.tanh(up / bl)
        return g * u
    if cfg.act == "silu":
        return F.silu(gate) * up
    raise NotImplementedError("hidden_act " + str(cfg.act))


def glu_mlp(x, w_gate, w_up, w_down, cfg):
    return linear(glu_act(linear(x, w_gate), linear(x, w_up), cfg), w_down)


def causal_conv_silu(x, w, state=None):
    """Depthwise causal conv + SiLU.  x [T,C], w [C,1,K]; w[...,K-1] multiplies the current token.
    state: optional [K-1, C] previous inputs (zeros at sequence start). Returns (y, new_state)."""
    T, C = x.shape
    K = w.shape[-1]
    hist = x.new_zeros(K - 1, C) if state is None else state
    xp = torch.cat([hist, x], 0)  # [T+K-1, C]
    y = F.conv1d(xp.t().unsqueeze(0), w, groups=C)[0].t()  # cross-correlation == tap order above
    return F.silu(y), xp[xp.shape[0] - (K - 1):]


# --------------------------------------------------------------------------------------------
# KDA kernels (§1.3, §1.4, §1.6).  Inputs are per token, per head:
#   q, k [T,H,dk] (already L2-normalised, q already scaled), v [T,H,dv], g [T,H,dk] (log-decay <= 0),
#   beta [T,H], S0 [H,dk,dv] or None.  Return o [T,H,dv], S [H,dk,dv].
# --------------------------------------------------------------------------------------------


def kda_recurrent(q, k, v, g, beta, S0=None):
    T, H, dk = q.shape
    dv = v.shape[-1]
    S = q.new_zeros(H, dk, dv) if S0 is None else S0.clone()
    out = q.new_zeros(T, H, dv)
    for t in range(T):
        S = torch.exp(g[t]).unsqueeze(-1) * S  # row d (key channel) times exp(g_t[d])
        pred = torch.einsum("hkv,hk->hv", S, k[t])
        u = beta[t].unsqueeze(-1) * (v[t] - pred)
        S = S + k[t].unsqueeze(-1) * u.unsqueeze(-2)
        out[t] = torch.einsum("hkv,hk->hv", S, q[t])
    return out, S


def kda_chunked(q, k, v, g, beta, S0=None, chunk=64):
    """Chunked WY/UT form (§1.6).  Padding positions have q=k=v=g=beta=0 and leave S unchanged.
    Decays inside a chunk are always exp of pairwise differences G_i - G_j (j <= i) or of
    G_last - G_i, both <= 0; exp(-G) is never formed."""
    T, H, dk = q.shape
    dv = v.shape[-1]
    C = chunk
    N = (T + C - 1) // C
    pad = N * C - T

    def prep(x):
        if pad:
            x = torch.cat([x, x.new_zeros((pad,) + tuple(x.shape[1:]))], 0)
        return x.reshape((N, C) + tuple(x.shape[1:])).transpose(1, 2)  # [N,H,C,...]

    Q, K, V, G_, B = prep(q), prep(k), prep(v), prep(g), prep(beta)
    S = q.new_zeros(H, dk, dv) if S0 is None else S0.clone()
    incl = torch.ones(C, C, dtype=torch.bool).tril()  # j <= i
    strict = torch.ones(C, C, dtype=torch.bool).tril(-1)  # j < i
    eye = torch.eye(C, dtype=q.dtype)
    outs = []
    for n in range(N):
        Qc, Kc, Vc, b = Q[n], K[n], V[n], B[n]  # [H,C,dk], [H,C,dk], [H,C,dv], [H,C]
        G = torch.cumsum(G_[n], dim=1)  # [H,C,dk] inclusive
        diff = G.unsqueeze(2) - G.unsqueeze(1)  # [H,i,j,dk] = G_i - G_j
        diff = diff.masked_fill(~incl.view(1, C, C, 1), float("-inf"))
        D = torch.exp(diff)  # 0 for j > i
        Akk = torch.einsum("hid,hjd,hijd->hij", Kc, Kc, D)
        Aqk = torch.einsum("hid,hjd,hijd->hij", Qc, Kc, D)  # lower incl. diagonal (D=0 above)
        Lm = (b.unsqueeze(-1) * Akk) * strict
        Tm = torch.linalg.solve_triangular(eye + Lm, eye.expand(H, C, C), upper=False, unitriangular=True)
        U = Tm @ (b.unsqueeze(-1) * Vc)
        eG = torch.exp(G)
        W = Tm @ (b.unsqueeze(-1) * eG * Kc)
        Vnew = U - W @ S
        O = (eG * Qc) @ S + Aqk @ Vnew
        Glast = G[:, -1, :]  # [H,dk]
        S = torch.exp(Glast).unsqueeze(-1) * S + (torch.exp(Glast.unsqueeze(1) - G) * Kc).transpose(1, 2) @ Vnew
        outs.append(O)
    o = torch.stack(outs, 0).transpose(1, 2).reshape(N * C, H, dv)[:T]
    return o, S


def kda_gate(g_raw, dt_bias, A_log, cfg):
    """g_raw [T,H,dk], dt_bias [H*dk], A_log [H] -> log-decay g [T,H,dk] (§1.6)."""
    H, dk = g_raw.shape[1], g_raw.shape[2]
    x = g_raw + dt_bias.view(H, dk)
    # CHOICE: A_log is per head ([H]) broadcast over dk; a per-channel [H*dk] tensor is also accepted.
    A = torch.exp(A_log).reshape(H, -1)
    if cfg.gate_lb is not None:
        return cfg.gate_lb * torch.sigmoid(A * x)
    return -A * F.softplus(x)


# --------------------------------------------------------------------------------------------
# MoE router (§3.2, §3.3)
# --------------------------------------------------------------------------------------------


def route(x, w_gate, bias, cfg):
    """Returns (idx [T,k] long, weights [T,k])."""
    logits = linear(x, w_gate)
    if cfg.router_act == "sigmoid":
        s = torch.sigmoid(logits)
    elif cfg.router_act == "softmax":
        s = torch.softmax(logits, -1)
    else:
        raise NotImplementedError(cfg.router_act)
    sel = s + bias if bias is not None else s.clone()
    if cfg.n_group > 1 and cfg.n_group > cfg.topk_group:
        T, E = sel.shape
        gs = sel.view(T, cfg.n_group, E // cfg.n_group).topk(2, dim=-1).values.sum(-1)  # [T,G]
        keep = gs.topk(cfg.topk_group, dim=-1).indices
        gmask = torch.zeros_like(gs, dtype=torch.bool).scatter_(1, keep, True)
        emask = gmask.unsqueeze(-1).expand(T, cfg.n_group, E // cfg.n_group).reshape(T, E)
        sel = sel.masked_fill(~emask, float("-inf"))
    idx = sel.topk(cfg.topk, dim=-1).indices
    w = s.gather(1, idx)
    if cfg.topk > 1 and cfg.renorm:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * cfg.rho


# --------------------------------------------------------------------------------------------
# AttnRes (§4.3)
# --------------------------------------------------------------------------------------------


def attn_res(sources, w_proj, norm_w, eps):
    """sources: list of [T,d]; w_proj [1,d] pseudo-query; norm_w [d] key-norm weight (folded
    into the query); returns softmax-over-sources weighted sum of the UNNORMALISED sources."""
    V = torch.stack(sources, 0)  # [N,T,d]
    kn = V / torch.sqrt((V * V).mean(-1, keepdim=True) + eps)
    score = (kn * (norm_w * w_proj.reshape(-1))).sum(-1)  # [N,T]
    p = torch.softmax(score, dim=0)
    return (p.unsqueeze(-1) * V).sum(0)


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------


class K3Ref:
    def __init__(self, cfg, weights, prefix="", dtype=torch.float64):
        self.cfg = cfg
        self.dtype = dtype
        self.w = {}
        for k, v in weights.items():
            if k.startswith(prefix):
                self.w[k[len(prefix):]] = v.to(dtype)
        missing = [n for n, _ in param_shapes(cfg) if n not in self.w]
        if missing:
            raise KeyError("missing tensors: %s" % missing[:8])
        for n, shp in param_shapes(cfg):
            if list(self.w[n].shape) != list(shp):
                if not (n.endswith("A_log") and self.w[n].numel() in (shp[0], shp[0] * cfg.kdk)):
                    raise ValueError("%s has shape %s, expected %s" % (n, list(self.w[n].shape), shp))

    @classmethod
    def from_dir(cls, path, dtype=torch.float64, weights_file="model.safetensors"):
        cfg, prefix = load_config(path + "/config.json")
        w, _, _ = load_safetensors(path + "/" + weights_file)
        return cls(cfg, w, prefix, dtype)

    # ---- KDA layer (§1.6) ----
    def kda(self, i, x, mode="chunk", chunk=64, state=None):
        """x [T,d] (already input_layernorm-ed).  state: optional dict with 'S', 'conv_q/k/v'.
        Returns (out [T,d], new_state)."""
        cfg, a = self.cfg, "model.layers.%d.self_attn." % i
        W = lambda n: self.w[a + n]
        T = x.shape[0]
        H, dk, dv = cfg.kH, cfg.kdk, cfg.kdv
        st = state or {}
        q, cq = causal_conv_silu(linear(x, W("q_proj.weight")), W("q_conv1d.weight"), st.get("conv_q"))
        k, ck = causal_conv_silu(linear(x, W("k_proj.weight")), W("k_conv1d.weight"), st.get("conv_k"))
        v, cv = causal_conv_silu(linear(x, W("v_proj.weight")), W("v_conv1d.weight"), st.get("conv_v"))
        q = l2norm(q.view(T, H, dk)) * dk ** -0.5
        k = l2norm(k.view(T, H, dk))
        v = v.view(T, H, dv)
        beta = torch.sigmoid(linear(x, W("b_proj.weight")))  # [T,H]
        g_raw = linear(linear(x, W("f_a_proj.weight")), W("f_b_proj.weight")).view(T, H, dk)
        g = kda_gate(g_raw, W("dt_bias"), W("A_log"), cfg)
        if mode == "chunk":
            o, S = kda_chunked(q, k, v, g, beta, st.get("S"), chunk)
        elif mode == "recurrent":
            o, S = kda_recurrent(q, k, v, g, beta, st.get("S"))
        else:
            raise ValueError(mode)
        if cfg.full_rank_gate:
            G = linear(x, W("g_proj.weight"))
        else:
            G = linear(linear(x, W("g_a_proj.weight")), W("g_b_proj.weight"))
        o = rms_norm(o, W("o_norm.weight"), cfg.eps) * torch.sigmoid(G.view(T, H, dv))
        out = linear(o.reshape(T, H * dv), W("o_proj.weight"))
        return out, {"S": S, "conv_q": cq, "conv_k": ck, "conv_v": cv}

    # ---- MLA layer (§2.1–2.6, NoPE, output gate) ----
    def mla(self, i, x, mode="naive"):
        cfg, a = self.cfg, "model.layers.%d.self_attn." % i
        W = lambda n: self.w[a + n]
        T = x.shape[0]
        H, dn, dr, dv, r = cfg.H, cfg.dn, cfg.dr, cfg.dv, cfg.r_kv
        if cfg.q_lora is None:
            q = linear(x, W("q_proj.weight"))
        else:
            q = linear(rms_norm(linear(x, W("q_a_proj.weight")), W("q_a_layernorm.weight"), cfg.eps),
                       W("q_b_proj.weight"))
        q = q.view(T, H, dn + dr)
        q_n, q_r = q[..., :dn], q[..., dn:]
        kv = linear(x, W("kv_a_proj_with_mqa.weight"))
        c = rms_norm(kv[:, :r], W("kv_a_layernorm.weight"), cfg.eps)  # [T,r]
        k_r = kv[:, r:]  # [T,dr], NoPE: never rotated, shared by all heads
        Wkv = W("kv_b_proj.weight").view(H, dn + dv, r)
        W_UK, W_UV = Wkv[:, :dn], Wkv[:, dn:]
        scale = (dn + dr) ** -0.5
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        rope_part = torch.einsum("thd,sd->hts", q_r, k_r)
        if mode == "naive":
            k_n = torch.einsum("tc,hdc->thd", c, W_UK)
            v = torch.einsum("tc,hdc->thd", c, W_UV)
            s = (torch.einsum("thd,shd->hts", q_n, k_n) + rope_part) * scale
            p = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
            o = torch.einsum("hts,shd->thd", p, v)
        elif mode == "absorbed":
            qt = torch.einsum("thd,hdc->thc", q_n, W_UK)
            s = (torch.einsum("thc,sc->hts", qt, c) + rope_part) * scale
            p = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
            ot = torch.einsum("hts,sc->thc", p, c)
            o = torch.einsum("thc,hdc->thd", ot, W_UV)
        else:
            raise ValueError(mode)
        o = o.reshape(T, H * dv)
        if cfg.mla_gate:
            o = o * torch.sigmoid(linear(x, W("g_proj.weight")))
        return linear(o, W("o_proj.weight"))

    # ---- FFN: dense MLP or (Latent)MoE (§3) ----
    def ffn(self, i, x, moe_mode="routed"):
        cfg, p = self.cfg, "model.layers.%d." % i
        if not cfg.is_moe(i):
            return glu_mlp(x, self.w[p + "mlp.gate_proj.weight"], self.w[p + "mlp.up_proj.weight"],
                           self.w[p + "mlp.down_proj.weight"], cfg)
        m = p + "block_sparse_moe."
        W = lambda n: self.w[m + n]
        idx, wts = route(x, W("gate.weight"), self.w.get(m + "gate.e_score_correction_bias"), cfg)
        z = linear(x, W("routed_expert_down_proj.weight")) if cfg.latent else x
        expert = lambda e, h: glu_mlp(h, W("experts.%d.w1.weight" % e), W("experts.%d.w3.weight" % e),
                                      W("experts.%d.w2.weight" % e), cfg)
        if moe_mode == "routed":
            r = torch.zeros_like(z)
            for e in range(cfg.E):
                tok, slot = (idx == e).nonzero(as_tuple=True)
                if tok.numel():
                    r.index_add_(0, tok, wts[tok, slot].unsqueeze(-1) * expert(e, z[tok]))
        elif moe_mode == "dense":
            comb = torch.zeros(x.shape[0], cfg.E, dtype=x.dtype).scatter_(1, idx, wts)  # [T,E]
            Y = torch.stack([expert(e, z) for e in range(cfg.E)], 0)  # [E,T,din]
            r = torch.einsum("te,etd->td", comb, Y)
        else:
            raise ValueError(moe_mode)
        if cfg.latent:
            if cfg.latent_norm:
                r = rms_norm(r, W("routed_expert_norm.weight"), cfg.eps)
            r = linear(r, W("routed_expert_up_proj.weight"))
        if cfg.n_shared:
            r = r + glu_mlp(x, W("shared_experts.gate_proj.weight"), W("shared_experts.up_proj.weight"),
                            W("shared_experts.down_proj.weight"), cfg)
        return r

    def mixer(self, i, x, kda_mode, chunk, mla_mode):
        if self.cfg.kinds[i] == "kda":
            return self.kda(i, x, kda_mode, chunk)[0]
        return self.mla(i, x, mla_mode)

    # ---- full forward (§4.3 / §5.1) ----
    def forward(self, input_ids, kda_mode="chunk", chunk=64, mla_mode="naive", moe_mode="routed", capture=None,
                embeds=None):
        """input_ids: list/1-D tensor of length T (batch 1).  Returns logits [T,V].
        embeds: optional [T,d] input embeddings used instead of embedding input_ids (early fusion,
        see k3vision.fuse).  capture (dict) receives layer_in.i, mixer_out.i, ffn_in.i, ffn_out.i,
        final_hidden, logits."""
        cfg, w = self.cfg, self.w
        cap = capture if capture is not None else {}
        if embeds is not None:
            h = embeds.to(self.dtype)
        else:
            ids = torch.as_tensor(input_ids, dtype=torch.long)
            h = w["model.embed_tokens.weight"][ids]
        if cfg.attn_res:
            h = self._forward_attn_res(h, kda_mode, chunk, mla_mode, moe_mode, cap)
        else:
            for i in range(cfg.L):  # standard pre-norm block (§5.1)
                p = "model.layers.%d." % i
                cap["layer_in.%d" % i] = h
                a = self.mixer(i, rms_norm(h, w[p + "input_layernorm.weight"], cfg.eps), kda_mode, chunk, mla_mode)
                cap["mixer_out.%d" % i] = a
                h = h + a
                cap["ffn_in.%d" % i] = h
                f = self.ffn(i, rms_norm(h, w[p + "post_attention_layernorm.weight"], cfg.eps), moe_mode)
                cap["ffn_out.%d" % i] = f
                h = h + f
        h = rms_norm(h, w["model.norm.weight"], cfg.eps)
        cap["final_hidden"] = h
        logits = linear(h, w["lm_head.weight"])
        cap["logits"] = logits
        return logits

    def _forward_attn_res(self, emb, kda_mode, chunk, mla_mode, moe_mode, cap):
        """Block AttnRes exactly as §4.3.  R = completed block summaries, p = running partial sum
        of the current block.  layer_in.i = x (AttnRes output entering input_layernorm);
        ffn_in.i = y (AttnRes output entering post_attention_layernorm)."""
        cfg, w, S, eps = self.cfg, self.w, self.cfg.attn_res, self.cfg.eps
        R, p = [], emb
        for i in range(cfg.L):
            pf = "model.layers.%d." % i
            x = attn_res(R + [p], w[pf + "self_attention_res_proj.weight"],
                         w[pf + "self_attention_res_norm.weight"], eps) if R else p
            if i % S == 0:
                R.append(p)
                p = None
            cap["layer_in.%d" % i] = x
            a = self.mixer(i, rms_norm(x, w[pf + "input_layernorm.weight"], eps), kda_mode, chunk, mla_mode)
            cap["mixer_out.%d" % i] = a
            p = a if p is None else p + a
            y = attn_res(R + [p], w[pf + "mlp_res_proj.weight"], w[pf + "mlp_res_norm.weight"], eps)
            cap["ffn_in.%d" % i] = y
            f = self.ffn(i, rms_norm(y, w[pf + "post_attention_layernorm.weight"], eps), moe_mode)
            cap["ffn_out.%d" % i] = f
            p = p + f
        return attn_res(R + [p], w["model.output_attn_res_proj.weight"], w["model.output_attn_res_norm.weight"], eps)
