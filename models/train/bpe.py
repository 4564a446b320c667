"""Byte-level BPE: trainer, encoder/decoder and Hugging Face tokenizer.json writer.

Pre-tokenisation is the GPT-2 regex applied by a ByteLevel pre-tokenizer with use_regex=true
(what tessera's core/tokenizer implements as PatternGPT2); the Python regex below is the same
pattern with \\p{L} / \\p{N} expressed through Python's Unicode classes (identical on the corpus,
checked by models/train/test_tokenizer.py against `tessera tokenize`).
"""
import collections
import json
import re

GPT2_PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

# Special tokens (Kimi chat markers + media tokens), placed at the top of the vocabulary.
SPECIALS = ["<|endoftext|>", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
            "<|im_middle|>", "<|media_start|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>",
            "[BOS]", "[EOS]", "<|reserved_0|>", "<|reserved_1|>", "<|reserved_2|>", "<|reserved_3|>"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def pretokenize(text):
    return GPT2_PAT.findall(text)


def to_symbols(piece):
    return tuple(B2U[b] for b in piece.encode("utf-8"))


def train(texts, vocab_size, specials=SPECIALS, min_freq=2, log=print):
    """texts: iterable of strings. Returns (vocab dict token->id, merges list of (a, b))."""
    counts = collections.Counter()
    for t in texts:
        counts.update(pretokenize(t))
    words = [list(to_symbols(w)) for w in counts]
    freqs = [counts[w] for w in counts]
    pair_cnt = collections.Counter()
    where = collections.defaultdict(set)
    for wi, (sy, f) in enumerate(zip(words, freqs)):
        for a, b in zip(sy, sy[1:]):
            pair_cnt[(a, b)] += f
            where[(a, b)].add(wi)
    base = [B2U[b] for b in range(256)]
    vocab = {s: i for i, s in enumerate(base)}
    merges = []
    n_merges = vocab_size - len(specials) - 256
    import heapq
    heap = [(-c, p) for p, c in pair_cnt.items()]
    heapq.heapify(heap)
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        c = pair_cnt.get(pair, 0)
        if c != -negc:
            if c > 0:
                heapq.heappush(heap, (-c, pair))
            continue
        if c < min_freq:
            break
        a, b = pair
        new = a + b
        merges.append(pair)
        vocab[new] = len(vocab)
        changed = collections.Counter()
        for wi in list(where[pair]):
            sy, f = words[wi], freqs[wi]
            i, out = 0, []
            touched = False
            while i < len(sy):
                if i + 1 < len(sy) and sy[i] == a and sy[i + 1] == b:
                    out.append(new)
                    i += 2
                    touched = True
                else:
                    out.append(sy[i])
                    i += 1
            if not touched:
                continue
            for x, y in zip(sy, sy[1:]):
                pair_cnt[(x, y)] -= f
                changed[(x, y)] += 0
            for x, y in zip(out, out[1:]):
                pair_cnt[(x, y)] += f
                where[(x, y)].add(wi)
                changed[(x, y)] += 0
            words[wi] = out
        del pair_cnt[pair]
        for p in changed:
            if p != pair and pair_cnt.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_cnt[p], p))
        if log and len(merges) % 500 == 0:
            log("bpe: %d merges (last %r, count %d)" % (len(merges), new, c))
    for s in specials:
        vocab[s] = len(vocab)
    return vocab, merges


class Tokenizer:
    def __init__(self, vocab, merges, specials=SPECIALS):
        self.vocab = vocab
        self.inv = {i: s for s, i in vocab.items()}
        self.ranks = {tuple(m): i for i, m in enumerate(merges)}
        self.merges = [tuple(m) for m in merges]
        self.specials = [s for s in specials if s in vocab]
        self.special_re = re.compile("(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len, reverse=True)) + ")")
        self.cache = {}

    @classmethod
    def load(cls, path):
        with open(path) as f:
            j = json.load(f)
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in j["model"]["merges"]]
        vocab = dict(j["model"]["vocab"])
        for a in j["added_tokens"]:
            vocab[a["content"]] = a["id"]
        return cls(vocab, merges, [a["content"] for a in j["added_tokens"]])

    def id(self, s):
        return self.vocab[s]

    def _bpe(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        sy = list(to_symbols(piece))
        while len(sy) > 1:
            best, bi = None, -1
            for i in range(len(sy) - 1):
                r = self.ranks.get((sy[i], sy[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            a, b = self.merges[best]
            out, i = [], 0
            while i < len(sy):
                if i + 1 < len(sy) and sy[i] == a and sy[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(sy[i])
                    i += 1
            sy = out
        ids = [self.vocab[s] for s in sy]
        if len(self.cache) < 500000:
            self.cache[piece] = ids
        return ids

    def encode(self, text, specials=True):
        out = []
        parts = self.special_re.split(text) if specials and self.specials else [text]
        for part in parts:
            if not part:
                continue
            if specials and part in self.vocab and part in self.specials:
                out.append(self.vocab[part])
                continue
            for p in pretokenize(part):
                out += self._bpe(p)
        return out

    def decode(self, ids):
        bs = bytearray()
        for i in ids:
            s = self.inv[i]
            if s in self.specials:
                bs += s.encode("utf-8")
            else:
                bs += bytes(U2B[ch] for ch in s)
        return bs.decode("utf-8", errors="replace")

    def to_hf_json(self):
        added = [{"id": self.vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True} for s in self.specials]
        vocab = {s: i for s, i in self.vocab.items() if s not in self.specials}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": [a + " " + b for a, b in self.merges]},
        }

    def save(self, path):
        with open(path, "w") as f:
            json.dump(self.to_hf_json(), f, ensure_ascii=False)
