#!/usr/bin/env node
// The tokenizer's reference: HF `tokenizers` itself (Rust, through the native node binding
// @anush008/tokenizers that setup.sh installs into build-tokenizers/ with
// ATTN_SETUP_TOKENIZERS=1). For every line of CORPUS (one JSON string per line) prints
// one JSON line: the text and its encodings with and without special tokens — ids,
// tokens, offsets in code points (as tokenizers reports them), the same offsets in bytes
// of the UTF-8 text, word ids (null for post-processor tokens), special tokens mask —
// and, with special tokens, every token's label (the decoder run on that token alone).
//
//   node scripts/tokenizer_reference.js TOKENIZER_JSON CORPUS > expected.jsonl
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const { Tokenizer } = require(path.join(root, 'build-tokenizers/node_modules/@anush008/tokenizers'));

// Code-point offset -> byte offset in the UTF-8 encoding of text.
function byteOffsets(text) {
  const table = [0];
  let bytes = 0;
  for (const ch of text) {  // iterates code points
    bytes += Buffer.byteLength(ch, 'utf8');
    table.push(bytes);
  }
  return table;
}

async function main() {
  const [tokenizerPath, corpusPath] = process.argv.slice(2);
  if (!tokenizerPath || !corpusPath) {
    process.stderr.write('usage: tokenizer_reference.js TOKENIZER_JSON CORPUS\n');
    process.exit(2);
  }
  const tok = Tokenizer.fromFile(tokenizerPath);
  const lines = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length > 0);
  for (const line of lines) {
    const text = JSON.parse(line);
    const table = byteOffsets(text);
    const out = { text };
    for (const [key, special] of [['with_special', true], ['without_special', false]]) {
      const e = await tok.encode(text, null, { addSpecialTokens: special });
      const offsets = e.getOffsets();
      out[key] = {
        ids: e.getIds(),
        tokens: e.getTokens(),
        offsets,
        byte_offsets: offsets.map(([a, b]) => [table[a], table[b]]),
        word_ids: e.getWordIds().map((w) => (w === undefined ? null : w)),
        special_tokens_mask: e.getSpecialTokensMask(),
      };
      // Token labels: each token decoded alone, as decode([id], skip_special_tokens=false).
      if (special) {
        out[key].labels = [];
        for (const id of out[key].ids) out[key].labels.push(await tok.decode([id], false));
      }
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
