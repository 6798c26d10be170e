#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/conformance/t5-tiny/tokenizer.json: a T5-style tokenizer
(SentencePiece Unigram with SentencePiece's own `nmt_nfkc` normalization, whose model carries
the precompiled charsmap), as transformers' convert_slow_tokenizer.py converts T5's and
XLM-R's sentencepiece models: normalizer Sequence [Precompiled(charsmap), Strip(right),
Replace(" {2,}" -> "▁")], pre-tokenizer Metaspace("▁", prepend_scheme "always"), Unigram model
over the model's pieces and scores, post-processor "$A </s>" (T5), decoder Metaspace.

No npm package ships a T5/XLM-R tokenizer.json, so the model is trained here, tiny (1,500
pieces), with Debian's python3-sentencepiece, on the repository's own prose (README.md and docs/*.md at PROSE_COMMIT) and the
conformance corpus (deterministic: one thread, a fixed seed order). The output is committed;
scripts/make_tokenizer_references.sh then runs HF tokenizers over it (models.json: t5-tiny).

    /usr/bin/python3 scripts/make_tokenizer_unigram_precompiled.py
"""
import base64
import io
import json
import os
import subprocess

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DST = os.path.join(ROOT, "tests", "fixtures", "tokenizer", "conformance", "t5-tiny", "tokenizer.json")


# The prose is README.md and docs/*.md as they were when the committed fixture was made
# (the last commit to change them before it; regenerating from it gives the same bytes),
# read from git, so that rewriting the pages does not change what this writes.
PROSE_COMMIT = "6f349e9760c0c198138c3b94e94895ffe50148cb"


def git_show(path):
    return subprocess.run(["git", "-C", ROOT, "show", PROSE_COMMIT + ":" + path], check=True,
                          capture_output=True).stdout.decode("utf-8")


def prose_pages():
    listing = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", PROSE_COMMIT, "docs/"],
                             check=True, capture_output=True).stdout.decode("utf-8").split()
    return ["README.md"] + sorted(p for p in listing if p.endswith(".md"))


def training_lines():
    lines = []
    for path in prose_pages():
        lines += [line.strip() for line in git_show(path).splitlines(keepends=True) if len(line.strip()) >= 20]
    with open(os.path.join(ROOT, "tests", "fixtures", "tokenizer", "conformance", "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                text = json.loads(line).replace("\n", " ").strip()
                if text and len(text) < 2000:
                    lines.append(text)
    return lines


def main():
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_lines()), model_writer=model, model_type="unigram", vocab_size=1500,
        normalization_rule_name="nmt_nfkc", character_coverage=0.99, num_threads=1, pad_id=0, eos_id=1, unk_id=2,
        bos_id=-1, pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>", shuffle_input_sentence=False,
        minloglevel=2)
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.getvalue())
    charsmap = proto.normalizer_spec.precompiled_charsmap
    assert charsmap, "nmt_nfkc carries no precompiled_charsmap"
    vocab = [[p.piece, p.score] for p in proto.pieces]
    unk_id = proto.trainer_spec.unk_id
    eos = proto.pieces[proto.trainer_spec.eos_id].piece
    eos_id = proto.trainer_spec.eos_id
    special = lambda i, t: {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [special(0, "<pad>"), special(1, "</s>"), special(2, "<unk>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
            "special_tokens": {eos: {"id": eos, "ids": [eos_id], "tokens": [eos]}},
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": unk_id, "vocab": vocab, "byte_fallback": False},
    }
    os.makedirs(os.path.dirname(DST), exist_ok=True)
    with open(DST, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{DST}: {len(vocab)} pieces, charsmap {len(charsmap)} bytes")


if __name__ == "__main__":
    main()
