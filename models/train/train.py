"""Trains k3-micro.  Deterministic by --seed; resumes from WORK/ckpt.pt; logs to WORK/log.jsonl.

  /usr/bin/python3 models/train/train.py --work models/train/work [--smoke]

Each step's batch is a pure function of (seed, step), so a resumed run sees the same data.
Stages (context curriculum, 2,048 tokens per step): 16x128, then 4x512, then 1x2048.
Router bias: Quantile Balancing every --qb-every steps on the unbiased scores of those steps
(no auxiliary loss).  At the end the model is exported to --out (HF layout, F16).
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import data  # noqa: E402
import model as M  # noqa: E402
import k3vision  # noqa: E402

# 2 threads on a quiet 2-core machine; K3_THREADS=1 is far more robust when other jobs share the
# cores (intra-op barriers stall under contention: measured 30 s/step with 2 threads vs 1.4 s with 1).
torch.set_num_threads(int(os.environ.get("K3_THREADS", "2")))
torch.set_flush_denormal(True)


def stages(total, smoke, start=0):
    """[(first_step, batch, seq)]: 80 % of steps at 128, 12 % at 512, 8 % at 2048 (of the steps
    from start, the first step of this phase, to total)."""
    n = total - start
    if smoke:
        return [(start, 4, 128), (total - 4, 1, 512), (total - 2, 1, 2048)]
    return [(start, 16, 128), (start + int(n * 0.80), 4, 512), (start + int(n * 0.92), 1, 2048)]


def stage_at(st, step):
    cur = st[0]
    for s in st:
        if step >= s[0]:
            cur = s
    return cur


class Batcher:
    def __init__(self, tok, vcfg, seed, work, image_frac=0.5, fashion_frac=0.4):
        self.tok, self.vcfg, self.seed = tok, vcfg, seed
        self.image_frac, self.fashion_frac = image_frac, fashion_frac
        cache = os.path.join(work, "text_train.npy")
        if not os.path.exists(cache):
            tr, _ = data.text_splits()
            eot = tok.id("<|endoftext|>")
            ids = []
            for d in tr:
                ids.append(eot)
                ids += tok.encode(d, specials=False)
            np.save(cache, np.asarray(ids, np.int32))
        self.text = np.load(cache)
        self.fx, self.fy = data.load_fashion("train")
        self.pad = tok.id("<|media_pad|>")
        self.im_end = tok.id("<|im_end|>")
        self.prompt_cache = {}

    def prompt_ids(self, prompt, system):
        """system: True/False (Kimi chat with/without the system turn) or "raw": the image markup
        followed by the prompt text, as `tessera run --image X --prompt P` builds it."""
        k = (prompt, system)
        if k not in self.prompt_cache:
            if system == "raw":
                s = "<|media_start|>image<|media_content|><|media_pad|><|media_end|>" + prompt
            else:
                s = data.render_user(prompt, True, system)
            self.prompt_cache[k] = self.tok.encode(s)
        return self.prompt_cache[k]

    def image_doc(self, rng):
        """-> (ids, loss mask, (patches, grid))"""
        u = rng.rand()
        system = True if u < 0.55 else (False if u < 0.8 else "raw")  # 55 % / 25 % / 20 %
        if rng.rand() < self.fashion_frac:
            j = rng.randint(len(self.fx))
            img = np.repeat(self.fx[j][:, :, None], 3, axis=2)
            prompt = data.CAPTION_PROMPTS[rng.randint(len(data.CAPTION_PROMPTS))]
            ans = data.fashion_caption(int(self.fy[j]))
        else:
            img, meta = data.make_scene(rng)
            if rng.rand() < 0.6:
                prompt = data.CAPTION_PROMPTS[rng.randint(len(data.CAPTION_PROMPTS))]
                ans = data.scene_caption(meta)
            else:
                prompt, ans = data.scene_qa(meta, rng)
        px, grid = k3vision.preprocess(img, self.vcfg)
        nm = px.shape[0] // (self.vcfg.mh * self.vcfg.mw)
        pre = k3vision.expand_placeholders(self.prompt_ids(prompt, system), self.pad, [nm])
        a = self.tok.encode((" " + ans) if system == "raw" else ans, specials=False) + [self.im_end]
        return pre + a, [0] * len(pre) + [1] * len(a), (torch.from_numpy(px), grid)

    def row(self, rng, L):
        ids, mask, imgs = [], [], []
        while len(ids) < L + 1:
            rem = L + 1 - len(ids)
            if rng.rand() < self.image_frac:
                d, m, im = self.image_doc(rng)
                if len(d) <= rem:
                    ids += d
                    mask += m
                    imgs.append(im)
                    continue
                n = rem
            else:
                n = min(rem, int(rng.randint(32, max(65, L // 2))))
            o = rng.randint(0, len(self.text) - n)
            ids += self.text[o:o + n].tolist()
            mask += [1] * n
        return ids, mask, imgs

    def batch(self, step, B, L):
        rng = np.random.RandomState([self.seed, step])
        rows = [self.row(rng, L) for _ in range(B)]
        ids = torch.tensor([r[0] for r in rows], dtype=torch.long)
        mask = torch.tensor([r[1] for r in rows], dtype=torch.bool)
        x, y = ids[:, :-1], ids[:, 1:].clone()
        y[~mask[:, 1:]] = -100
        y[y == self.pad] = -100
        imgs = [im for r in rows for im in r[2]]
        # an image doc cut at the end of the inputs cannot happen (docs fit in L+1 tokens; the last
        # token is never a placeholder since docs end with <|im_end|>)
        return x, y, imgs


def lr_at(step, total, peak, warm=100, start=0):
    """Linear warm-up, then cosine from peak to peak/10 over the steps from start to total."""
    step, total = step - start, total - start
    if step < warm:
        return peak * (step + 1) / warm
    t = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def save_ckpt(path, model, opt, step, extra):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "extra": extra}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--config", default=os.path.join(HERE, "k3-micro.json"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "..", "k3-micro", "tokenizer.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "k3-micro"))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--qb-every", type=int, default=2)
    ap.add_argument("--qb-eta", type=float, default=0.5)
    ap.add_argument("--ckpt-every", type=int, default=150)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--stop-after", type=int, default=None, help="checkpoint and exit at this step (resume test)")
    ap.add_argument("--phase-start", type=int, default=0,
                    help="first step of this training phase: the LR schedule and the context curriculum run "
                         "from here to --steps (a continuation phase resumes from WORK/ckpt.pt at this step)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--image-frac", type=float, default=0.5, help="share of row pieces that are image documents")
    ap.add_argument("--fashion-frac", type=float, default=0.4, help="share of image documents from Fashion-MNIST")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.manual_seed(a.seed)
    cfg = json.load(open(a.config))
    tok = bpe.Tokenizer.load(a.tokenizer)
    model = M.K3Micro(cfg, seed=a.seed)
    pc = M.count_params(model)
    print("params", json.dumps(pc), flush=True)
    decay = [p for n, p in model.P.items() if p.dim() >= 2 and "res_proj" not in n]
    nodecay = [p for n, p in model.P.items() if not (p.dim() >= 2 and "res_proj" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    ck = os.path.join(a.work, "ckpt.pt")
    step = 0
    if os.path.exists(ck):
        st = torch.load(ck)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
        print("resumed at step", step, flush=True)
    if step < a.phase_start:
        sys.exit("train.py: --phase-start %d but the checkpoint in %s is at step %d" % (a.phase_start, a.work, step))
    batcher = Batcher(tok, model.vcfg, a.seed, a.work, a.image_frac, a.fashion_frac)
    sts = stages(a.steps, a.smoke, a.phase_start)
    logf = open(os.path.join(a.work, "log.jsonl"), "a")
    if step == a.phase_start:
        logf.write(json.dumps({"event": "start", "params": pc, "stages": sts, "args": vars(a)}) + "\n")
    k, E = model.cfg.topk, model.cfg.E
    qb_buf = {i: [] for i in model.moe_layers}
    t_last = time.time()
    while step < a.steps:
        _, B, L = stage_at(sts, step)
        lr = lr_at(step, a.steps, a.lr, a.warmup, a.phase_start)
        for gparams in opt.param_groups:
            gparams["lr"] = lr
        x, y, imgs = batcher.batch(step, B, L)
        t0 = time.time()
        stats = []
        logits = model(x, imgs, stats)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        # load statistics (this step's routing, with the bias it used) and Quantile Balancing
        bands, maxvio = {}, 0.0
        for (i, s, idx) in stats:
            cnt = torch.bincount(idx.reshape(-1), minlength=E).float()
            tgt = idx.numel() / E
            rel = (cnt / tgt).numpy()
            bands[i] = [float(np.min(rel)), float(np.percentile(rel, 10)), float(np.median(rel)),
                        float(np.percentile(rel, 90)), float(np.max(rel))]
            maxvio = max(maxvio, float(rel.max() - 1))
            qb_buf[i].append(s)
        if (step + 1) % a.qb_every == 0:
            for i in model.moe_layers:
                s = torch.cat(qb_buf[i], 0)
                b = model.router_bias(i)
                b -= a.qb_eta * M.qb_delta(s, b, k)
                b -= b.mean()
                qb_buf[i] = []
        ntok = int((y != -100).sum())
        rec = {"step": step, "B": B, "L": L, "loss": float(loss), "lr": lr, "gnorm": float(gn), "tokens": ntok,
               "images": len(imgs), "sec": time.time() - t0, "maxvio": maxvio, "band": bands}
        logf.write(json.dumps(rec) + "\n")
        if step % 10 == 0:
            logf.flush()
            print("step %d L=%d loss %.3f lr %.2e maxvio %.2f %.2fs/step (wall %.1fs)" % (
                step, L, float(loss), lr, maxvio, rec["sec"], time.time() - t_last), flush=True)
            t_last = time.time()
        step += 1
        if step % a.ckpt_every == 0 or step == a.steps or step == a.stop_after:
            save_ckpt(ck, model, opt, step, {})
        if step == a.stop_after:
            logf.close()
            print("stopped after step", step, flush=True)
            return
    logf.write(json.dumps({"event": "done", "step": step}) + "\n")
    logf.close()
    import export
    export.export(model, a.out, cfg)
    print("exported to", a.out, flush=True)


if __name__ == "__main__":
    main()
