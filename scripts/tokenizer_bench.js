#!/usr/bin/env node
// The reference side of scripts/bench_tokenizer: HF tokenizers itself (@anush008/tokenizers,
// installed by ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh) encodes every line of TEXT_FILE,
// one `encode(line)` at a time, each awaited before the next (single-threaded encode, with
// its default add_special_tokens=true), ROUNDS times. Writes the ids of the last round to
// IDS_OUT (one line per text, space-separated, as `attn tokenize --format ids`) and prints
// one JSON line: load seconds, the encode seconds of each round (CPU time of the whole
// process, all threads: on a loaded machine wall time measures the other processes), the
// same in wall time, tokens, bytes; and the wall seconds of each round of one
// `encodeBatch(lines)` (HF's parallel encode, on every core), whose ids must be the same.
//
//   node scripts/tokenizer_bench.js TOKENIZER_JSON TEXT_FILE IDS_OUT ROUNDS
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const { Tokenizer } = require(path.join(root, 'build-tokenizers/node_modules/@anush008/tokenizers'));

async function main() {
  const [tokenizerPath, textPath, idsOut, roundsArg] = process.argv.slice(2);
  const rounds = Number(roundsArg || 1);
  const text = fs.readFileSync(textPath, 'utf8');
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  let t = process.hrtime.bigint();
  const tok = Tokenizer.fromFile(tokenizerPath);
  const load = Number(process.hrtime.bigint() - t) / 1e9;
  const encode = [], wall = [];
  let ids = [];
  for (let r = 0; r < rounds; ++r) {
    ids = [];
    t = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    for (const line of lines) ids.push((await tok.encode(line)).getIds());
    const used = process.cpuUsage(cpu);
    wall.push(Number(process.hrtime.bigint() - t) / 1e9);
    encode.push((used.user + used.system) / 1e6);
  }
  const batch = [];
  let batchSame = true;
  for (let r = 0; r < rounds; ++r) {
    t = process.hrtime.bigint();
    const encodings = await tok.encodeBatch(lines);
    batch.push(Number(process.hrtime.bigint() - t) / 1e9);
    if (r === 0) batchSame = encodings.every((e, i) => e.getIds().join(' ') === ids[i].join(' '));
  }
  fs.writeFileSync(idsOut, ids.map((x) => x.join(' ')).join('\n') + (ids.length ? '\n' : ''));
  const tokens = ids.reduce((n, x) => n + x.length, 0);
  process.stdout.write(JSON.stringify({ load, encode, wall, batch, batch_same: batchSame, tokens, bytes: Buffer.byteLength(text, 'utf8'), texts: lines.length }) + '\n');
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
