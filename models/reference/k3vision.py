"""k3vision: PyTorch/numpy reference of tessera's image path (architecture.md §6, core/vision,
core/imageio), written from the equations documented in core/vision/doc.go and
core/imageio/preprocess.go:

  * preprocessing: smart resize to multiples of patch·merge (Qwen2-VL rule, round half to even),
    PIL-style antialiased separable resampling (bicubic Keys a=-0.5 or bilinear; horizontal pass
    then vertical, clamp to [0,255] at the end, no uint8 rounding), normalisation
    (v/255 - mean)/std, patches [N, 3·p·p] (c, py, px order) in merge-window order
  * the vision tower: patch embed (+bias) [+ bilinear absolute table for divided_fixed],
    L pre-norm ViT blocks (non-causal MHA with 2D RoPE, MLP with GELU), final norm
  * the projector: patchmerger (LayerNorm pre_norm → concat mh·mw → proj.0 → act → proj.2) or
    patchmergerv2 (concat → proj.0 → act → proj.2 → RMSNorm post_norm)
  * early fusion: placeholder expansion + embedding replacement

Functions work on torch tensors of any float dtype and are differentiable (the trainer uses
them with a leading batch dimension on patches).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------
# vision_config
# --------------------------------------------------------------------------------------------


class VisionConfig:
    def __init__(self, v, text_hidden=None):
        self.raw = v
        self.p = v.get("patch_size", 14)
        self.D = v["vt_hidden_size"]
        self.L = v["vt_num_hidden_layers"]
        self.H = v["vt_num_attention_heads"]
        self.Q = v.get("qkv_hidden_size", self.D)
        self.I = v["vt_intermediate_size"]
        mk = v.get("merge_kernel_size", [2, 2])
        self.mh, self.mw = (mk, mk) if isinstance(mk, int) else tuple(mk)
        self.text_hidden = v.get("text_hidden_size", text_hidden)
        self.norm_type = v.get("norm_type", "rmsnorm")
        if self.norm_type == "rmsnorm":
            self.eps = v.get("vt_norm_eps", float(np.finfo(np.float32).eps))
        else:
            self.eps = v.get("vt_norm_eps", 1e-5)
        self.act = v.get("activation_func", "gelu_pytorch_tanh")
        self.attn_bias = bool(v.get("attn_bias", False))
        self.lin_bias = bool(v.get("linear_bias", False))
        self.patch_bias = bool(v.get("patch_embed_proj_bias", False))
        self.pos = v.get("pos_emb_type", "divided_fixed")
        self.pos_h = v.get("init_pos_emb_height", 64)
        self.pos_w = v.get("init_pos_emb_width", 64)
        self.theta = v.get("rope_theta", 10000.0)
        self.proj = v.get("mm_projector_type", "patchmergerv2")
        self.proj_act = v.get("projector_hidden_act", "gelu")
        self.proj_eps = v.get("projector_ln_eps", 1e-5)
        self.min_pixels = v.get("min_pixels", 56 * 56)
        self.max_pixels = v.get("max_pixels", 28 * 28 * 1280)
        self.mean = v.get("image_mean", [0.5, 0.5, 0.5])
        self.std = v.get("image_std", [0.5, 0.5, 0.5])
        self.resample = v.get("resample", "bicubic")
        self.hd = self.Q // self.H
        self.M = self.D * self.mh * self.mw
        assert self.hd % 4 == 0

    @property
    def factor(self):
        return self.p * max(self.mh, self.mw)


def vision_param_shapes(c):
    """Every vision tensor (full names) in core/vision.Spec order."""
    out = []
    norm = lambda n, d, rms: out.extend([(n + ".weight", [d])] + ([] if rms else [(n + ".bias", [d])]))
    rms = c.norm_type == "rmsnorm"
    out.append(("vision_tower.patch_embed.proj.weight", [c.D, 3, c.p, c.p]))
    if c.patch_bias:
        out.append(("vision_tower.patch_embed.proj.bias", [c.D]))
    if c.pos == "divided_fixed":
        out.append(("vision_tower.patch_embed.pos_emb.weight", [c.pos_h, c.pos_w, c.D]))
    for i in range(c.L):
        b = "vision_tower.encoder.blocks.%d." % i
        norm(b + "norm0", c.D, rms)
        norm(b + "norm1", c.D, rms)
        out.append((b + "wqkv.weight", [3 * c.Q, c.D]))
        if c.attn_bias:
            out.append((b + "wqkv.bias", [3 * c.Q]))
        out.append((b + "wo.weight", [c.D, c.Q]))
        if c.attn_bias:
            out.append((b + "wo.bias", [c.D]))
        out.append((b + "mlp.fc0.weight", [c.I, c.D]))
        if c.lin_bias:
            out.append((b + "mlp.fc0.bias", [c.I]))
        out.append((b + "mlp.fc1.weight", [c.D, c.I]))
        if c.lin_bias:
            out.append((b + "mlp.fc1.bias", [c.D]))
    norm("vision_tower.encoder.final_layernorm", c.D, rms)
    if c.proj == "patchmerger":
        norm("mm_projector.pre_norm", c.D, False)
    out.append(("mm_projector.proj.0.weight", [c.M, c.M]))
    if c.lin_bias:
        out.append(("mm_projector.proj.0.bias", [c.M]))
    out.append(("mm_projector.proj.2.weight", [c.text_hidden, c.M]))
    if c.lin_bias:
        out.append(("mm_projector.proj.2.bias", [c.text_hidden]))
    if c.proj == "patchmergerv2":
        out.append(("mm_projector.post_norm.weight", [c.text_hidden]))
    return out


# --------------------------------------------------------------------------------------------
# preprocessing (core/imageio/preprocess.go)
# --------------------------------------------------------------------------------------------


def _round_half_even(x):
    return int(np.round(x))  # numpy rounds half to even, like Python's round


def smart_resize(h, w, factor, min_pixels, max_pixels):
    F_ = float(factor)
    hb = max(factor, _round_half_even(h / F_) * factor)
    wb = max(factor, _round_half_even(w / F_) * factor)
    if hb * wb > max_pixels:
        beta = math.sqrt(h * w / max_pixels)
        hb = max(factor, int(math.floor(h / beta / F_)) * factor)
        wb = max(factor, int(math.floor(w / beta / F_)) * factor)
    elif hb * wb < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        hb = int(math.ceil(h * beta / F_)) * factor
        wb = int(math.ceil(w * beta / F_)) * factor
    return hb, wb


def _kernel(x, mode):
    x = np.abs(x)
    if mode == "bilinear":
        return np.maximum(0.0, 1 - x)
    a = -0.5
    return np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))


def resample_matrix(n_in, n_out, mode="bicubic"):
    """[n_out, n_in] matrix of normalised PIL-style filter weights (float64)."""
    s = n_in / n_out
    f = max(s, 1.0)
    R = (1.0 if mode == "bilinear" else 2.0) * f
    Wm = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = (i + 0.5) * s
        lo = max(0, int(math.floor(c - R + 0.5)))
        hi = min(n_in, int(math.floor(c + R + 0.5)))
        j = np.arange(lo, hi)
        k = _kernel((j + 0.5 - c) / f, mode)
        sm = k.sum()
        if sm != 0:
            Wm[i, lo:hi] = k / sm
    return Wm


def resize(img, w, h, mode="bicubic", dtype=np.float32):
    """img uint8 [H, W, 3] -> planar float [3, h, w] in [0,255] (clamped at the end).
    dtype float32 mirrors Go's float32 arithmetic (weights rounded to float32); float64 for goldens."""
    Hin, Win = img.shape[:2]
    if (Hin, Win) == (h, w):
        return img.transpose(2, 0, 1).astype(dtype)  # identity resample: every weight is exactly 1
    Wx = resample_matrix(Win, w, mode).astype(dtype)
    Wy = resample_matrix(Hin, h, mode).astype(dtype)
    x = img.astype(dtype).transpose(2, 0, 1)  # [3,H,W]
    tmp = x @ Wx.T  # [3,H,w]
    out = np.einsum("yY,cYx->cyx", Wy, tmp)
    return np.clip(out, 0, 255)


def patch_positions(gh, gw, mh, mw):
    """(rows, cols) of patch rows in merge-window order (imageio Patches.Pos)."""
    i = np.arange(gh * gw)
    k = mh * mw
    b, r = i // k, i % k
    wc = gw // mw
    return (b // wc) * mh + r // mw, (b % wc) * mw + r % mw


def preprocess(img, c, dtype=np.float32):
    """img uint8 [H,W,3] -> (patches [N, 3·p·p] numpy, (gh, gw))."""
    H, W = img.shape[:2]
    hb, wb = smart_resize(H, W, c.factor, c.min_pixels, c.max_pixels)
    px = resize(img, wb, hb, c.resample, dtype)
    mean = np.asarray(c.mean, dtype=dtype).reshape(3, 1, 1)
    std = np.asarray(c.std, dtype=dtype).reshape(3, 1, 1)
    px = (px / dtype(255) - mean) / std
    p = c.p
    gh, gw = hb // p, wb // p
    # [3, gh, p, gw, p] -> [gh, gw, 3, p, p]
    t = px.reshape(3, gh, p, gw, p).transpose(1, 3, 0, 2, 4).reshape(gh * gw, 3 * p * p)
    rows, cols = patch_positions(gh, gw, c.mh, c.mw)
    return np.ascontiguousarray(t[rows * gw + cols]), (gh, gw)


# --------------------------------------------------------------------------------------------
# tower + projector
# --------------------------------------------------------------------------------------------


def _norm(x, w, b, rms, eps):
    if rms:
        return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + eps) * w
    return y + b if b is not None else y


def _act(x, name):
    if name in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        return F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu(x)
    raise NotImplementedError(name)


def rope2d_tables(rows, cols, hd, theta, dtype):
    """cos, sin [N, hd/2]: pair 2i rotates by col·ω_i, pair 2i+1 by row·ω_i, ω_i = θ^(-4i/hd)."""
    i = np.arange(hd // 4)
    om = theta ** (-4.0 * i / hd)  # [hd/4]
    ang = np.zeros((len(rows), hd // 2))
    ang[:, 0::2] = np.asarray(cols)[:, None] * om[None]
    ang[:, 1::2] = np.asarray(rows)[:, None] * om[None]
    return torch.tensor(np.cos(ang), dtype=dtype), torch.tensor(np.sin(ang), dtype=dtype)


def apply_rope(x, cos, sin):
    """x [..., N, H, hd]; pairs (2k, 2k+1) as complex numbers rotated by θ_k."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)  # [N,1,hd/2]
    return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)


def interp_pos_emb(tab, h, w):
    """[h0,w0,D] -> [h*w, D], bilinear, align_corners=False (as core/vision.InterpPosEmb)."""
    h0, w0, D = tab.shape
    if (h0, w0) == (h, w):
        return tab.reshape(h * w, D)
    x = F.interpolate(tab.permute(2, 0, 1).unsqueeze(0), size=(h, w), mode="bilinear", align_corners=False)
    return x[0].permute(1, 2, 0).reshape(h * w, D)


def vision_tower(W, c, patches, grid, capture=None):
    """W: name -> tensor. patches [..., N, 3pp] in merge-window order, grid (gh, gw).
    Returns tower output after final norm [..., N, D]."""
    gh, gw = grid
    dt = patches.dtype
    rms = c.norm_type == "rmsnorm"
    g = lambda n: W.get(n)
    x = patches @ W["vision_tower.patch_embed.proj.weight"].reshape(c.D, -1).t()
    if c.patch_bias:
        x = x + W["vision_tower.patch_embed.proj.bias"]
    rows, cols = patch_positions(gh, gw, c.mh, c.mw)
    if c.pos == "divided_fixed":
        pe = interp_pos_emb(W["vision_tower.patch_embed.pos_emb.weight"], gh, gw)
        x = x + pe[torch.as_tensor(rows * gw + cols)]
    cos, sin = rope2d_tables(rows, cols, c.hd, c.theta, dt)
    N = x.shape[-2]
    lead = x.shape[:-2]
    for i in range(c.L):
        b = "vision_tower.encoder.blocks.%d." % i
        xn = _norm(x, W[b + "norm0.weight"], g(b + "norm0.bias"), rms, c.eps)
        qkv = xn @ W[b + "wqkv.weight"].t()
        if c.attn_bias:
            qkv = qkv + W[b + "wqkv.bias"]
        q, k, v = qkv.split(c.Q, -1)
        q = apply_rope(q.reshape(lead + (N, c.H, c.hd)), cos, sin)
        k = apply_rope(k.reshape(lead + (N, c.H, c.hd)), cos, sin)
        v = v.reshape(lead + (N, c.H, c.hd))
        s = torch.einsum("...nhd,...mhd->...hnm", q, k) / math.sqrt(c.hd)
        p = torch.softmax(s, -1)
        o = torch.einsum("...hnm,...mhd->...nhd", p, v).reshape(lead + (N, c.Q))
        o = o @ W[b + "wo.weight"].t()
        if c.attn_bias:
            o = o + W[b + "wo.bias"]
        x = x + o
        xn = _norm(x, W[b + "norm1.weight"], g(b + "norm1.bias"), rms, c.eps)
        hdn = xn @ W[b + "mlp.fc0.weight"].t()
        if c.lin_bias:
            hdn = hdn + W[b + "mlp.fc0.bias"]
        hdn = _act(hdn, c.act) @ W[b + "mlp.fc1.weight"].t()
        if c.lin_bias:
            hdn = hdn + W[b + "mlp.fc1.bias"]
        x = x + hdn
        if capture is not None:
            capture["vision_block.%d" % i] = x
    n = "vision_tower.encoder.final_layernorm"
    return _norm(x, W[n + ".weight"], g(n + ".bias"), rms, c.eps)


def project(W, c, x):
    """x [..., N, D] in merge-window order -> [..., N/(mh·mw), text_hidden]."""
    if c.proj == "patchmerger":
        x = _norm(x, W["mm_projector.pre_norm.weight"], W["mm_projector.pre_norm.bias"], False, c.proj_eps)
    k = c.mh * c.mw
    x = x.reshape(x.shape[:-2] + (x.shape[-2] // k, c.M))
    h = x @ W["mm_projector.proj.0.weight"].t()
    if c.lin_bias:
        h = h + W["mm_projector.proj.0.bias"]
    h = _act(h, c.proj_act) @ W["mm_projector.proj.2.weight"].t()
    if c.lin_bias:
        h = h + W["mm_projector.proj.2.bias"]
    if c.proj == "patchmergerv2":
        w = W["mm_projector.post_norm.weight"]
        h = w * (h / torch.sqrt((h * h).mean(-1, keepdim=True) + c.proj_eps))
    return h


def encode(W, c, patches, grid, capture=None):
    t = vision_tower(W, c, patches, grid, capture)
    if capture is not None:
        capture["vision_tower_out"] = t
    out = project(W, c, t)
    if capture is not None:
        capture["projector_out"] = out
    return out


# --------------------------------------------------------------------------------------------
# fusion (core/vision/fuse.go)
# --------------------------------------------------------------------------------------------


def expand_placeholders(ids, placeholder, counts):
    out, i = [], 0
    assert sum(1 for t in ids if t == placeholder) == len(counts)
    for t in ids:
        if t == placeholder:
            out += [placeholder] * counts[i]
            i += 1
        else:
            out.append(t)
    return out


def fuse(ids, placeholder, embed, images):
    """ids list (expanded), embed [V,d], images list of [N_i, d] -> [T, d]."""
    ids_t = torch.as_tensor(ids, dtype=torch.long)
    mask = ids_t == placeholder
    E = embed[ids_t.clamp(0, embed.shape[0] - 1)].clone()
    if images:
        rows = torch.cat(images, 0)
        assert rows.shape[0] == int(mask.sum()), "placeholder count != image tokens"
        E[mask] = rows.to(E.dtype)
    return E
