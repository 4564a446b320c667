"""Training data for k3-micro (nothing is downloaded; Debian packages only):

  text   KJV Bible (`bible-kjv`, public domain) and fortunes (`fortunes`, BSD; UTF-8 `.u8` files,
         minus the ascii-art ones).  Held out: every 20th block of 200 KJV verses and every 20th
         fortune (`heldout_text`).
  images Fashion-MNIST (`dataset-fashion-mnist`, MIT): train split for training, t10k for
         evaluation only.  Synthetic scenes (this file): 1-4 identical shapes (circle, square,
         triangle, cross) of one of 6 colours, small or large, on a light background, with a
         caption ("three small red triangles") and simple Q&A.  Training scenes come from seeds
         (seed, step, i); evaluation scenes from a disjoint seed space (`eval_scenes`).
"""
import glob
import gzip
import os
import subprocess

import numpy as np

FASHION_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_CLASSES = ["t-shirt", "pair of trousers", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
                   "bag", "ankle boot"]
COLORS = {"red": (220, 30, 30), "green": (30, 160, 40), "blue": (30, 60, 220), "yellow": (235, 200, 20),
          "purple": (140, 40, 170), "orange": (245, 130, 20)}
SHAPES = ["circle", "square", "triangle", "cross"]
PLURAL = {"circle": "circles", "square": "squares", "triangle": "triangles", "cross": "crosses"}
NUMBERS = ["zero", "one", "two", "three", "four"]
SCENE = 112  # scene side in pixels (= one 8x8 patch grid of 14 px, 16 merged tokens)
SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."
CAPTION_PROMPTS = ["Describe the image.", "What is in this picture?", "Caption this image.", "What do you see?"]
EVAL_PROMPT = "Describe the image."


# ------------------------------------------------------------------------------------------
# text
# ------------------------------------------------------------------------------------------

def kjv_verses():
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    verses = []
    for line in out.splitlines():
        line = line.strip()
        if not line:
            continue
        ref, _, txt = line.partition(" ")
        verses.append(txt.strip())
    return verses


def fortunes():
    items = []
    for f in sorted(glob.glob("/usr/share/games/fortunes/*.u8")):
        if os.path.basename(f) in ("art.u8", "ascii-art.u8", "translate-me.u8"):
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for it in fh.read().split("\n%\n"):
                it = it.strip("%\n ")
                if it:
                    items.append(it)
    return items


def text_splits():
    """Returns (train_docs, heldout_docs) as lists of strings."""
    v = kjv_verses()
    tr, ho = [], []
    for b in range(0, len(v), 200):
        doc = " ".join(v[b:b + 200])
        (ho if (b // 200) % 20 == 19 else tr).append(doc)
    for i, f in enumerate(fortunes()):
        (ho if i % 20 == 19 else tr).append(f)
    return tr, ho


# ------------------------------------------------------------------------------------------
# Fashion-MNIST
# ------------------------------------------------------------------------------------------

def load_fashion(split):
    """split 'train' or 't10k' -> (images uint8 [n,28,28], labels [n])."""
    with gzip.open("%s/%s-images-idx3-ubyte.gz" % (FASHION_DIR, split)) as f:
        im = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open("%s/%s-labels-idx1-ubyte.gz" % (FASHION_DIR, split)) as f:
        lb = np.frombuffer(f.read(), np.uint8, offset=8)
    return im, lb


def fashion_caption(label):
    return "a photo of a " + FASHION_CLASSES[label]


# ------------------------------------------------------------------------------------------
# synthetic scenes
# ------------------------------------------------------------------------------------------

def _shape_mask(shape, cx, cy, r, yy, xx):
    if shape == "circle":
        return (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
    if shape == "square":
        return (np.abs(xx - cx) <= r * 0.85) & (np.abs(yy - cy) <= r * 0.85)
    if shape == "triangle":  # apex up
        top, bot = cy - r, cy + r * 0.8
        t = (yy - top) / (bot - top)
        return (yy >= top) & (yy <= bot) & (np.abs(xx - cx) <= t * r)
    if shape == "cross":
        w = r * 0.35
        return ((np.abs(xx - cx) <= w) & (np.abs(yy - cy) <= r)) | ((np.abs(yy - cy) <= w) & (np.abs(xx - cx) <= r))
    raise ValueError(shape)


def where_word(cx, cy, n=SCENE):
    v = "top" if cy < n / 3 else ("bottom" if cy > 2 * n / 3 else "middle")
    h = "left" if cx < n / 3 else ("right" if cx > 2 * n / 3 else "center")
    if v == "middle" and h == "center":
        return "in the center"
    if v == "middle":
        return "on the " + h
    if h == "center":
        return "at the " + v
    return "in the %s %s" % (v, h)


def make_scene(rng):
    """Returns (img uint8 [112,112,3], meta dict)."""
    n = SCENE
    color = list(COLORS)[rng.randint(len(COLORS))]
    shape = SHAPES[rng.randint(len(SHAPES))]
    count = 1 + rng.randint(4)
    size = "small" if rng.rand() < 0.5 else "large"
    r = (7 + rng.rand() * 3) if size == "small" else (15 + rng.rand() * 4)
    bg = 235 + rng.randint(21)
    img = np.full((n, n, 3), bg, np.float32)
    img += rng.randn(n, n, 1).astype(np.float32) * 4
    yy, xx = np.mgrid[0:n, 0:n].astype(np.float32)
    centres = []
    for _ in range(count):
        for _try in range(200):
            cx, cy = rng.uniform(r + 2, n - r - 2, size=2)
            if all((cx - a) ** 2 + (cy - b) ** 2 > (2.2 * r) ** 2 for a, b in centres):
                break
        centres.append((cx, cy))
        m = _shape_mask(shape, cx, cy, r, yy, xx)
        col = np.array(COLORS[color], np.float32) + rng.randint(-15, 16, size=3)
        img[m] = col
    img = np.clip(img, 0, 255).astype(np.uint8)
    return img, {"color": color, "shape": shape, "count": count, "size": size, "centres": centres}


def scene_caption(m):
    c = m["count"]
    noun = m["shape"] if c == 1 else PLURAL[m["shape"]]
    num = "a" if c == 1 else NUMBERS[c]
    return "%s %s %s %s" % (num, m["size"], m["color"], noun)


def scene_qa(m, rng):
    """One (question, answer) about the scene."""
    c = m["count"]
    kind = rng.randint(4 if c == 1 else 3)
    if kind == 0:
        return "How many shapes are there?", NUMBERS[c]
    if kind == 1:
        return "What color are the shapes?" if c > 1 else "What color is the shape?", m["color"]
    if kind == 2:
        return "What shape is it?" if c == 1 else "What shape are they?", m["shape"] if c == 1 else PLURAL[m["shape"]]
    cx, cy = m["centres"][0]
    return "Where is the %s?" % m["shape"], where_word(cx, cy)


def eval_scenes(n, seed=987654321):
    """Held-out scenes: a seed space disjoint from training (training uses seeds < 2**31 - 1 drawn
    as (seed*1000003 + step) etc.; evaluation uses RandomState((seed, i)) with a 2-word key)."""
    out = []
    for i in range(n):
        rng = np.random.RandomState([seed, i, 7])
        out.append(make_scene(rng))
    return out


# ------------------------------------------------------------------------------------------
# chat rendering (tokenizer.RenderKimi with one user turn)
# ------------------------------------------------------------------------------------------

def render_user(prompt, image=True, system=True):
    s = ""
    if system:
        s += "<|im_system|>system<|im_middle|>" + SYSTEM + "<|im_end|>"
    s += "<|im_user|>user<|im_middle|>"
    if image:
        s += "<|media_start|>image<|media_content|><|media_pad|><|media_end|>"
    s += prompt + "<|im_end|><|im_assistant|>assistant<|im_middle|>"
    return s
