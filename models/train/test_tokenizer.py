"""The Python BPE encoder and `tessera tokenize` agree on held-out text (and on chat markup).
Needs bin/tessera (go build -o bin/tessera ./cmd/tessera) or $TESSERA; skips without it.
Run: /usr/bin/python3 -m unittest models/train/test_tokenizer.py"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import data  # noqa: E402

TOK = os.path.join(ROOT, "models", "k3-micro", "tokenizer.json")
BIN = os.environ.get("TESSERA", os.path.join(ROOT, "bin", "tessera"))


class T(unittest.TestCase):
    def test_matches_tessera(self):
        if not os.path.exists(BIN):
            self.skipTest("no tessera binary")
        tok = bpe.Tokenizer.load(TOK)
        _, ho = data.text_splits()
        texts = ho[:40] + ho[-40:] + [
            data.render_user("Describe the image.") + "three small red triangles<|im_end|>",
            "Ünïcödé “quotes” — dash… 1234 __init__ x_y  \n\n  tabs\tand   spaces  "]
        for t in texts:
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
                f.write(t)
            out = subprocess.run([BIN, "tokenize", "--tokenizer", os.path.dirname(TOK), "--file", f.name, "--json"],
                                 capture_output=True, text=True, check=True).stdout
            os.unlink(f.name)
            self.assertEqual(json.loads(out), tok.encode(t), t[:80])
            self.assertEqual(tok.decode(tok.encode(t)), t)


if __name__ == "__main__":
    unittest.main()
