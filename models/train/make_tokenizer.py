"""Trains the k3-micro byte-level BPE (vocab 4096 incl. 16 specials) on the training split and
writes tokenizer.json (HF format) to the given directory.  Deterministic."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import data  # noqa: E402


def corpus():
    tr, _ = data.text_splits()
    extra = []
    rng = np.random.RandomState(0)
    for i in range(3000):
        img, m = data.make_scene(rng) if i % 50 == 0 else (None, None)
    for c in range(10):
        extra += [data.fashion_caption(c)] * 200
    for color in data.COLORS:
        for shape in data.SHAPES:
            for cnt in range(1, 5):
                for size in ("small", "large"):
                    extra += [data.scene_caption({"count": cnt, "shape": shape, "color": color, "size": size})] * 3
    for p in data.CAPTION_PROMPTS + ["How many shapes are there?", "What color are the shapes?",
                                     "What color is the shape?", "What shape is it?", "What shape are they?",
                                     "Where is the circle?", "in the top left", "on the right", "at the bottom",
                                     "in the center", data.SYSTEM]:
        extra += [p] * 200
    return tr + extra


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    vocab, merges = bpe.train(corpus(), 4096)
    tok = bpe.Tokenizer(vocab, merges)
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    print("vocab", len(vocab), "merges", len(merges))
