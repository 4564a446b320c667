"""Evaluation of k3-micro in PyTorch (the numbers `tessera eval` must reproduce) + plots.

  /usr/bin/python3 models/train/evaluate.py --model models/k3-micro [--work models/train/work]

Writes (deterministic) the held-out evaluation set, if absent, to MODEL/eval/:
  captions.jsonl   {"image": "scenes/000.png", "prompt": "Describe the image.", "answer": "...", "set": "scenes"}
                   200 held-out synthetic scenes (seed space disjoint from training) + 200 Fashion-MNIST
                   t10k items (never used in training); plus "qa" lines (scene questions, set "scenes-qa")
  heldout.txt      held-out text (KJV blocks + fortunes training never sees), ~100 KB
and evaluates:
  caption accuracy  prompt = Kimi chat with the default system turn, one user turn = one image + prompt,
                    generation prompt; correct iff greedy decoding yields exactly answer + <|im_end|>
                    (computed teacher-forced: argmax at every answer position equals the reference)
  perplexity        heldout.txt tokenised whole (no special tokens), cut into consecutive 512-token
                    windows, each scored from a fresh state; ppl = exp(sum NLL / number of predicted
                    tokens) where each window predicts its tokens 2..n (windows of < 2 tokens dropped)
Results go to MODEL/eval/results.json; plots (from WORK/log.jsonl) to MODEL/*.png.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import data  # noqa: E402
import export  # noqa: E402
import k3vision  # noqa: E402

torch.set_num_threads(int(os.environ.get("K3_THREADS", "1")))
N_SCENES, N_FASHION, PPL_WINDOW = 200, 200, 512


def build_eval_set(d):
    from PIL import Image
    if os.path.exists(os.path.join(d, "captions.jsonl")):
        return
    os.makedirs(os.path.join(d, "scenes"), exist_ok=True)
    os.makedirs(os.path.join(d, "fashion"), exist_ok=True)
    lines = []
    rng = np.random.RandomState([4242, 1])
    for i, (img, m) in enumerate(data.eval_scenes(N_SCENES)):
        p = "scenes/%03d.png" % i
        Image.fromarray(img).save(os.path.join(d, p), optimize=True)
        lines.append({"image": p, "prompt": data.EVAL_PROMPT, "answer": data.scene_caption(m), "set": "scenes"})
        q, a = data.scene_qa(m, rng)
        lines.append({"image": p, "prompt": q, "answer": a, "set": "scenes-qa"})
    fx, fy = data.load_fashion("t10k")
    idx = np.random.RandomState(5).choice(len(fx), N_FASHION, replace=False)
    for j, i in enumerate(sorted(idx)):
        p = "fashion/%03d.png" % j
        Image.fromarray(fx[i]).save(os.path.join(d, p), optimize=True)
        lines.append({"image": p, "prompt": data.EVAL_PROMPT, "answer": data.fashion_caption(int(fy[i])),
                      "set": "fashion"})
    with open(os.path.join(d, "captions.jsonl"), "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
    _, ho = data.text_splits()
    txt, n = [], 0
    kjv = [h for h in ho if len(h) > 2000][:8]
    fort = [h for h in ho if len(h) <= 2000][:150]
    for h in kjv[:3] + fort:
        txt.append(h)
    with open(os.path.join(d, "heldout.txt"), "w") as f:
        f.write("\n\n".join(txt) + "\n")


def load_rgb(path):
    from PIL import Image
    return np.asarray(Image.open(path).convert("RGB"))


@torch.no_grad()
def caption_eval(m, tok, d, limit=None):
    pad = tok.id("<|media_pad|>")
    end = tok.id("<|im_end|>")
    res = {}
    examples = []
    for line in open(os.path.join(d, "captions.jsonl")):
        ex = json.loads(line)
        if limit and sum(1 for e in examples if e["set"] == ex["set"]) >= limit:
            continue
        img = load_rgb(os.path.join(d, ex["image"]))
        px, grid = k3vision.preprocess(img, m.vcfg)
        nm = px.shape[0] // 4
        pre = k3vision.expand_placeholders(tok.encode(data.render_user(ex["prompt"], True, True)), pad, [nm])
        ans = tok.encode(ex["answer"], specials=False) + [end]
        ids = torch.tensor([pre + ans[:-1]])
        lg = m(ids, [(torch.from_numpy(px), grid)])[0]
        pred = lg[len(pre) - 1:].argmax(-1).tolist()
        ok = pred == ans
        # greedy text (up to the first mismatch, then the predicted token) for the examples table
        ex["ok"] = ok
        ex["greedy_prefix"] = tok.decode([p for p in pred if p != end])
        examples.append(ex)
        r = res.setdefault(ex["set"], [0, 0])
        r[0] += int(ok)
        r[1] += 1
    return {k: {"correct": v[0], "total": v[1], "accuracy": 100.0 * v[0] / v[1]} for k, v in res.items()}, examples


@torch.no_grad()
def ppl_eval(m, tok, path):
    ids = tok.encode(open(path, encoding="utf-8").read(), specials=False)
    nll, n = 0.0, 0
    for s in range(0, len(ids), PPL_WINDOW):
        w = ids[s:s + PPL_WINDOW]
        if len(w) < 2:
            continue
        lg = m(torch.tensor([w]))[0].double()
        lp = torch.log_softmax(lg[:-1], -1)
        nll -= lp.gather(1, torch.tensor(w[1:]).unsqueeze(1)).sum().item()
        n += len(w) - 1
    text_bytes = len(open(path, "rb").read())
    return {"tokens": len(ids), "predicted": n, "nll_per_token": nll / n, "ppl": math.exp(nll / n),
            "bits_per_byte": nll / math.log(2) / text_bytes, "window": PPL_WINDOW}


def plots(work, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recs = [json.loads(l) for l in open(os.path.join(work, "log.jsonl")) if '"step"' in l and '"loss"' in l]
    if not recs:
        return
    recs = list({r["step"]: r for r in recs}.values())  # a resumed run may repeat steps
    recs.sort(key=lambda r: r["step"])
    st = np.array([r["step"] for r in recs])
    loss = np.array([r["loss"] for r in recs])
    L = np.array([r["L"] for r in recs])
    k = 25
    sm = np.convolve(loss, np.ones(k) / k, mode="valid") if len(loss) > k else loss
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(st, loss, alpha=0.3, lw=0.7, label="loss")
    ax.plot(st[len(st) - len(sm):], sm, lw=1.5, label="loss (25-step mean)")
    for s in np.nonzero(np.diff(L))[0]:
        ax.axvline(st[s + 1], color="k", ls=":", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("k3-micro training loss (dotted: context stage changes)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=90)
    plt.close(fig)
    layers = sorted(recs[0]["band"].keys(), key=int)
    fig, axs = plt.subplots(1, len(layers), figsize=(4 * len(layers), 3.5), sharey=True)
    for ax, ly in zip(np.atleast_1d(axs), layers):
        b = np.array([r["band"][ly] for r in recs])  # min p10 median p90 max of load/target
        ks = min(k, len(b))
        f = lambda x: np.convolve(x, np.ones(ks) / ks, mode="valid")
        xs = st[len(st) - len(f(b[:, 0])):]
        ax.fill_between(xs, f(b[:, 0]), f(b[:, 4]), alpha=0.2, label="min–max")
        ax.fill_between(xs, f(b[:, 1]), f(b[:, 3]), alpha=0.4, label="p10–p90")
        ax.plot(xs, f(b[:, 2]), lw=1, label="median")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_title("layer %s expert load / target" % ly)
        ax.set_xlabel("step")
        ax.set_ylim(0, None)
    np.atleast_1d(axs)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "expert_load.png"), dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 2.5))
    ax.step(st, L, where="post")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("step")
    ax.set_ylabel("sequence length")
    ax.set_title("context curriculum (2,048 tokens per step)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "context_stages.png"), dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "..", "k3-micro"))
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--limit", type=int, default=None, help="items per set (quick check)")
    a = ap.parse_args()
    d = os.path.join(a.model, "eval")
    build_eval_set(d)
    tok = bpe.Tokenizer.load(os.path.join(a.model, "tokenizer.json"))
    m = export.load_exported(a.model)
    m.eval()
    cap, examples = caption_eval(m, tok, d, a.limit)
    ppl = ppl_eval(m, tok, os.path.join(d, "heldout.txt"))
    res = {"caption": cap, "ppl": ppl}
    print(json.dumps(res, indent=1))
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(d, "examples.jsonl"), "w") as f:
        for e in examples[:40]:
            f.write(json.dumps(e) + "\n")
    if os.path.exists(os.path.join(a.work, "log.jsonl")):
        plots(a.work, a.model)


if __name__ == "__main__":
    main()
