#!/usr/bin/env bash
# Runs HF tokenizers itself (scripts/tokenizer_reference.js) over the tokenizer fixtures
# and writes the expected encodings the tests compare attn's with:
#   tests/fixtures/tokenizer/<name>.expected.jsonl               (small hand-made tokenizers)
#   tests/fixtures/tokenizer/conformance/<model>.expected.jsonl  (real tokenizer.json files)
# Needs ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh (build-tokenizers/) and
# /usr/bin/python3 scripts/make_tokenizer_fixtures.py first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fx="$root/tests/fixtures/tokenizer"
/usr/bin/python3 "$root/scripts/make_gpt2_tokenizer_json.py"
for name in $(cat "$fx/small_tokenizers.txt"); do
  node "$root/scripts/tokenizer_reference.js" "$fx/$name.tokenizer.json" "$fx/small_corpus.jsonl" > "$fx/$name.expected.jsonl"
done
for model in $(cd "$root/scripts" && /usr/bin/python3 -c 'import json; print(" ".join(json.load(open("../tests/fixtures/tokenizer/conformance/models.json"))))'); do
  path=$(/usr/bin/python3 -c "import json,sys; print(json.load(open('$fx/conformance/models.json'))['$model'])")
  node "$root/scripts/tokenizer_reference.js" "$root/$path" "$fx/conformance/corpus.jsonl" > "$fx/conformance/$model.expected.jsonl"
done
