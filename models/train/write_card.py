"""Writes models/k3-micro/MODEL_CARD.md from config.json, the training log and eval/results.json.

  /usr/bin/python3 models/train/write_card.py [--model models/k3-micro] [--work models/train/work]
        [--predictions FILE]

--predictions: the JSONL `tessera eval caption --predictions FILE` writes; the card then breaks the
scene results down by attribute and question kind.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "..", "k3-micro"))
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--predictions")
    a = ap.parse_args()
    import model as M
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    pc = M.count_params(M.K3Micro(cfg))
    t, v = cfg["text_config"], cfg["vision_config"]
    recs, starts, done_at = [], [], set()
    lp = os.path.join(a.work, "log.jsonl")
    if os.path.exists(lp):
        for l in open(lp):
            r = json.loads(l)
            if r.get("event") == "start":
                starts.append(r)
            elif r.get("event") == "done":
                done_at.add(r["step"])
            elif "loss" in r:
                recs.append(r)
    recs = sorted({r["step"]: r for r in recs}.values(), key=lambda r: r["step"])
    # phases: the first start of each --phase-start (a resumed phase logs no new start)
    phases = sorted({s["args"].get("phase_start", 0): s for s in reversed(starts)}.values(),
                    key=lambda s: s["args"].get("phase_start", 0))
    args = phases[0]["args"] if phases else {}
    last_args = phases[-1]["args"] if phases else {}
    steps = last_args.get("steps", 3000)
    done = steps in done_at
    last = recs[-1] if recs else None
    secs = sum(r["sec"] for r in recs)
    res_p = os.path.join(a.model, "eval", "results.json")
    res = json.load(open(res_p)) if os.path.exists(res_p) else None
    tail = recs[-50:]
    mean = lambda xs: sum(xs) / max(1, len(xs))
    M_ = lambda x: "%.2f M" % (x / 1e6)
    out = []
    w = out.append
    w("# k3-micro\n")
    w("A tiny Kimi-K3-class multimodal model trained from scratch on two CPU cores, shipped with tessera as a "
      "demo and as an end-to-end check of the engine (text + vision, HF layout, F16). It captions simple "
      "synthetic scenes and Fashion-MNIST items and continues KJV/fortune-style text; it is not a general "
      "assistant.\n")
    status = "finished (%d steps)" % steps if done else (
        "**in progress / partial**: this card was written at step %d of %d" % (last["step"] + 1 if last else 0, steps))
    w("Training status: %s. Regenerate this card with `/usr/bin/python3 models/train/write_card.py` after "
      "`models/train/evaluate.py`.\n" % status)
    w("## Architecture (`config.json`, `model_type: kimi_k3`)\n")
    w("| part | setting |\n|---|---|")
    w("| text | d=%d, %d layers: KDA at %s, gated NoPE MLA at %s (3:1), vocab %d |" % (
        t["hidden_size"], t["num_hidden_layers"], t["linear_attn_config"]["kda_layers"],
        t["linear_attn_config"]["full_attn_layers"], t["vocab_size"]))
    la = t["linear_attn_config"]
    w("| KDA | %d heads × %d, short conv %d, lower-bounded sigmoid forget gate (%.0f), full-rank output gate |" % (
        la["num_heads"], la["head_dim"], la["short_conv_kernel_size"], la["gate_lower_bound"]))
    w("| MLA | %d heads, q_lora %d, kv_lora %d, nope %d + rope %d (NoPE), v %d, output gate |" % (
        t["num_attention_heads"], t["q_lora_rank"], t["kv_lora_rank"], t["qk_nope_head_dim"], t["qk_rope_head_dim"],
        t["v_head_dim"]))
    w("| FFN | layer 0 dense SiTU-GLU (width %d); layers 1–%d LatentMoE: %d routed experts top-%d (width %d, latent %d, "
      "RMSNorm after combine) + %d shared expert; sigmoid router, selection bias by Quantile Balancing |" % (
        t["intermediate_size"], t["num_hidden_layers"] - 1, t["num_experts"], t["num_experts_per_token"],
        t["moe_intermediate_size"], t["routed_expert_hidden_size"], t["num_shared_experts"]))
    w("| residual | Block AttnRes, block size %d |" % t["attn_res_block_size"])
    w("| vision | ViT: patch %d, %d layers, width %d, %d heads, MLP %d, RMSNorm, GELU-tanh, 2D RoPE (`rope_2d`); "
      "2×2 merge; `patchmerger` projector (LayerNorm → %d → %d); min/max pixels %d/%d (a 112×112 scene = 16 "
      "image tokens, a 28×28 Fashion-MNIST item is upsampled to 56×56 = 4 tokens) |" % (
        v["patch_size"], v["vt_num_hidden_layers"], v["vt_hidden_size"], v["vt_num_attention_heads"],
        v["vt_intermediate_size"], 4 * v["vt_hidden_size"], t["hidden_size"], v["min_pixels"], v["max_pixels"]))
    w("| tokens | byte-level BPE, 4,096 ids (3,824 merges, 16 specials at 4080–4095 incl. Kimi chat markers; "
      "`<|media_pad|>` = %d = `media_placeholder_token_id`; eos `<|im_end|>` = %d) |\n" % (
        cfg["media_placeholder_token_id"], t["eos_token_id"]))
    w("Parameters: **%s total** (text experts %s, embeddings + lm_head %s, vision %s); **%s active per token** "
      "(%s without embeddings). Weights F16 (router bias F32): %.1f MB.\n" % (
        M_(pc["total"]), M_(pc["routed_experts"]), M_(pc["embeddings"]), M_(pc["vision"]), M_(pc["active"]),
        M_(pc["active_non_embedding"]),
        os.path.getsize(os.path.join(a.model, "model.safetensors")) / 1e6))
    w("## Data (all from Debian packages, nothing downloaded)\n")
    w("| source | package | licence | use |\n|---|---|---|---|")
    w("| King James Bible | `bible-kjv` 4.38 | public domain | text; every 20th block of 200 verses held out |")
    w("| fortunes (UTF-8 `.u8` files minus ascii-art) | `fortunes` 1:1.99.1 | BSD (quotations of various origin) | "
      "text; every 20th fortune held out |")
    w("| Fashion-MNIST | `dataset-fashion-mnist` | MIT (Zalando Research) | captions \"a photo of a sneaker\"; "
      "train split for training, t10k only for evaluation |")
    w("| synthetic scenes | `models/train/data.py` | generated (same licence as tessera) | 1–4 identical shapes "
      "(circle/square/triangle/cross), 6 colours, small/large, 112×112; captions (\"three small red triangles\") "
      "and Q&A (count, colour, shape, position); evaluation scenes use a disjoint seed space |\n")
    w("Mix: each packed sequence draws documents at random — an image conversation (probability ½ in the first "
      "phase, 0.7 in the second; Kimi chat format with the default system turn in 55 %, without it in 25 %, raw "
      "image + prompt in 20 %; 40 % Fashion-MNIST in the first phase, 25 % in the second, the rest scenes of which "
      "40 % Q&A; loss on the answer + `<|im_end|>` only), else a random window of the tokenised training text "
      "(loss on every token).\n")
    w("## Training (`scripts/train/train.sh`)\n")
    w("| setting | value |\n|---|---|")
    w("| optimiser | AdamW β=(0.9, 0.95), wd 0.1 on matrices, peak lr %.0e, 100 warm-up steps, cosine to 10 %%, "
      "clip 1.0, fp32 |" % args.get("lr", 3e-3))
    w("| steps | %d × 2,048 tokens; seed %s; batch = f(seed, step) so a resumed run is identical |" % (
        steps, args.get("seed", 1234)))
    for ph in phases:
        pa = ph["args"]
        s0, s1 = pa.get("phase_start", 0), pa.get("steps", 3000)
        n = s1 - s0
        w("| phase from step %d | steps %d–%d: peak lr %.0e, %d warm-up steps, cosine to 10 %%; image documents %.0f %% "
          "of pieces, %.0f %% of them Fashion-MNIST; context 16×128 to step %d, 4×512 to %d, 1×2048 to %d "
          "(the scaled analogue of 8K → 1M) |" % (
              s0, s0, s1 - 1, pa.get("lr", 3e-3), pa.get("warmup", 100), 100 * pa.get("image_frac", 0.5),
              100 * pa.get("fashion_frac", 0.4), s0 + int(n * 0.8) - 1, s0 + int(n * 0.92) - 1, s1 - 1))
    w("| balancing | no auxiliary loss; every %d steps each MoE layer's bias b ← b − %.1f·c (Quantile Balancing, "
      "architecture.md §3.6: c_j = (q+1)-th largest margin of expert j over the steps' tokens, q = round(m·k/n)), "
      "then centred |" % (args.get("qb_every", 2), args.get("qb_eta", 0.5)))
    w("| KDA | factored chunked form (64-token chunks, 16-row sub-chunks), exact vs the recurrent form |")
    w("| compute | PyTorch 1.13 (Debian), %d thread(s), OpenBLAS SkylakeX; measured %.0f min of step time so far |\n" % (
        int(os.environ.get("K3_THREADS", "1")), secs / 60))
    if last:
        w("Last logged step %d: loss %.3f (mean of the last 50 steps %.3f), MaxVio %.2f.\n" % (
            last["step"], last["loss"], mean([r["loss"] for r in tail]), mean([r["maxvio"] for r in tail])))
    w("![loss](loss.png)\n\n![expert load](expert_load.png)\n\n![context stages](context_stages.png)\n")
    w("The expert-load plot shows, per MoE layer, the band of per-expert load divided by the balanced target "
      "(min–max, 10th–90th percentile, median; 25-step means).\n")
    w("## Evaluation (PyTorch reference, F16 weights as shipped; `models/train/evaluate.py`)\n")
    if res:
        c = res["caption"]
        w("| set | items | exact-match accuracy |\n|---|---|---|")
        for k in ("scenes", "fashion", "scenes-qa"):
            if k in c:
                w("| %s | %d | %.1f %% |" % (k, c[k]["total"], c[k]["accuracy"]))
        p = res["ppl"]
        w("\nHeld-out text (`eval/heldout.txt`, %d tokens, %d-token windows): perplexity **%.2f** "
          "(%.3f nats/token, %.3f bits/byte).\n" % (p["tokens"], p["window"], p["ppl"], p["nll_per_token"],
                                                     p["bits_per_byte"]))
    else:
        w("(not run yet)\n")
    if a.predictions:
        attrs, n_sc, qa, qn = {}, 0, {}, {}
        for line in open(a.predictions):
            d = json.loads(line)
            if d["set"] == "scenes":
                n_sc += 1
                want, got = d["answer"].split(), d["output"].split()
                for i, k in enumerate(("count", "size", "colour", "shape")):
                    attrs[k] = attrs.get(k, 0) + int(len(got) == 4 and got[i] == want[i])
            elif d["set"] == "scenes-qa":
                k = {"How": "count", "What color": "colour", "What shape": "shape", "Where": "position"}
                kind = next(v for p, v in k.items() if d["prompt"].startswith(p))
                qn[kind] = qn.get(kind, 0) + 1
                qa[kind] = qa.get(kind, 0) + int(d["correct"])
        w("Where it fails (tessera's answers, `tessera eval caption --predictions`): in scene captions each word "
          "is right this often — %s; scene questions by kind — %s. The shape word is the weak part of captions; "
          "position questions are near chance because the vision tower has only relative 2D RoPE (no absolute "
          "position embedding), so where an image sits is not visible to the model.\n" % (
              ", ".join("%s %.1f %%" % (k, 100 * v / max(1, n_sc)) for k, v in attrs.items()),
              ", ".join("%s %d/%d" % (k, qa[k], qn[k]) for k in qn)))
    w("Protocol (what `tessera eval` must compute to reproduce these numbers):\n")
    w("* `eval caption --data eval/captions.jsonl`: for each line, prompt = `RenderKimi([{user, images: 1, "
      "content: prompt}], addGenerationPrompt=true)` (default system turn included), the one `<|media_pad|>` "
      "expanded to the image's token count, image preprocessed per `vision_config`; greedy decoding; correct iff the "
      "output is exactly `answer` followed by `<|im_end|>`. Accuracy per `set` (scenes, fashion, scenes-qa).")
    w("* `eval ppl --file eval/heldout.txt`: tokenise the whole file (no special tokens), consecutive windows of 512 "
      "tokens each from a fresh state (last window shorter; windows of < 2 tokens dropped), NLL of tokens 2..n of "
      "each window, ppl = exp(total NLL / total predicted tokens).\n")
    w("## Limitations\n")
    w("Trained for about %.1f CPU-hours with the loss on %.1f M tokens: free text is only locally fluent and repeats " % (
        secs / 3600, sum(r.get("tokens", 0) for r in recs) / 1e6) +
      "(use a repetition penalty); the vision side only knows 28×28 clothing items and the synthetic scene "
      "family; any other picture gets a caption from those two worlds.\n")
    w("## Reproduce\n\n    apt-get install -y python3-torch libopenblas0-pthread bible-kjv fortunes "
      "dataset-fashion-mnist python3-matplotlib\n    scripts/train/train.sh          # resumes from "
      "models/train/work/ckpt.pt\n")
    open(os.path.join(a.model, "MODEL_CARD.md"), "w").write("\n".join(out))
    print("wrote", os.path.join(a.model, "MODEL_CARD.md"))


if __name__ == "__main__":
    main()
