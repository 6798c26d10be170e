#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (committed; re-run only to change them).

Seeds are small valid inputs that reach deep into each reader: .npy files of several
dtypes, byte orders and layouts and .npz archives (copied from tests/fixtures/io/ and
data/), JSON inputs, the config.json of every shipped checkpoint, and for the CLI target argv lines plus an input file (the format is
described in fuzz_cli.cpp). Pure Python: no NumPy needed. Only seed-* files are
rewritten: inputs that once crashed a target (crash-*) stay in the corpus for good, and CI
replays them (fuzz/CMakeLists.txt).
"""
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
FIX = ROOT / "tests" / "fixtures" / "io"
# made by scripts/make_safetensors_fixtures.py: valid checkpoints, every broken header, an index
SAFETENSORS = ROOT / "tests" / "fixtures" / "safetensors"

NPY = ["b1_na_C_3x4", "f2_be_C_2x3x4", "f2_le_C_7", "f4_le_C_3x4", "f4_be_F_2x1x3x2", "f8_le_C_7",
       "f8_le_C_0d", "i1_na_F_3x4", "i8_be_C_0x3", "u2_le_C_2x3x4", "u8_le_F_2x3x4", "v2_f4_le_C_2x3",
       "v3_i2_be_F_3x4"]
NPZ = ["savez", "savez_compressed", "positional", "bad_member", "huge_declared"]


def rows(n, m, seed):
    return [[round(((i * 7 + j * 3 + seed) % 11 - 5) / 4, 3) for j in range(m)] for i in range(n)]


JSON = {
    "list_2d": rows(3, 4, 1),
    "list_3d": [rows(2, 4, 2), rows(2, 4, 3)],
    "qkv_tokens": {"tokens": "my name is", "q": rows(3, 2, 1), "k": rows(3, 2, 2), "v": rows(3, 2, 3)},
    "nonfinite": {"X": [[1, "NaN"], ["Infinity", "-Infinity"]], "note": "ignored", "Lengths": [2]},
    "masks": {"q": rows(2, 2, 4), "k": rows(3, 2, 5), "v": rows(3, 2, 6),
              "attn_mask": [[True, False, True], [True, True, False]],
              "key_padding_mask": [[False, False, True]], "token_ids": [[5, 0, 7]]},
    "projection": {"x": [rows(2, 4, 1)], "w_q": rows(4, 4, 2), "w_k": rows(4, 4, 3), "w_v": rows(4, 4, 4),
                   "b_q": [0, 1, 0, 1], "b_k": [1, 0, 1, 0], "b_v": [0.5] * 4, "w_o": rows(4, 4, 5), "b_o": [0] * 4},
    "in_proj": {"x": rows(2, 2, 1), "in_proj_weight": rows(6, 2, 2), "in_proj_bias": [0, 1, 2, 3, 4, 5]},
    "cache": {"q": [[rows(1, 2, 1)]], "k": [[rows(1, 2, 2)]], "v": [[rows(1, 2, 3)]],
              "past_key": [[rows(2, 2, 4)]], "past_value": [[rows(2, 2, 5)]]},
    "gqa": {"q": [[rows(2, 2, h) for h in range(4)]], "k": [[rows(3, 2, h) for h in range(2)]],
            "v": [[rows(3, 2, h + 5) for h in range(2)]]},
    "empty": {"x": [[]]},
    "scalar": 3,
}

# (name, argv lines, input file or None). Input files are paths relative to ROOT, or JSON seeds.
CLI = [
    ("causal_x", ["--mask", "causal", "in"], "data/x.npy"),
    ("notebook_table", ["in", "--tokens", "my name is Aj", "--dump", "weights", "--format", "table"], "data/notebook.npz"),
    ("notebook_json", ["in", "--mask", "causal", "--softcap", "30", "--mask-fill", "-1e9", "--dump",
                       "q,k,v,qk,scaled,scores,weights,output,lse,present_key,present_value"], "data/notebook.json"),
    ("members", ["--q", "in:q", "--k", "in:k", "--v", "in:v", "--mask", "causal,padding", "--lengths", "3",
                 "-o", "out.npz"], "data/notebook.npz"),
    ("heads_csv", ["--heads", "2", "--format", "csv", "in", "--average-heads"], "json:list_3d"),
    ("masks", ["in", "--pad-id", "0", "--mask", "padding", "--masked-rows", "nan", "--format", "npz", "-o", "o"],
     "json:masks"),
    ("projection", ["in", "--weight-layout", "in-out", "--dtype", "float32", "--precision", "3", "--compact"],
     "json:projection"),
    ("in_proj", ["--x", "in:x", "--in-proj-weight", "in:in_proj_weight", "--in-proj-bias", "in:in_proj_bias",
                 "--scale", "0.5"], "json:in_proj"),
    ("cache", ["in", "--causal", "--causal-align", "bottom-right", "--dump", "present_key,present_value,weights",
               "--format", "jsonl"], "json:cache"),
    ("gqa", ["in", "--heads", "4", "--kv-heads", "2", "-j", "2", "--format", "npy", "--dump", "weights"], "json:gqa"),
    ("batch", ["in", "in", "--format", "jsonl"], "data/x.npy"),
    ("max_bytes", ["in", "--max-bytes", "1K"], "data/notebook.npz"),
    ("safetensors_bundle", ["in", "--mask", "causal", "--dump", "weights,output"], "tests/fixtures/safetensors/qkv.safetensors"),
    ("safetensors_members", ["--q", "in:layers.0.attn.q", "--k", "in:layers.0.attn.k", "--v", "in:layers.0.attn.v",
                             "--max-bytes", "1K"], "tests/fixtures/safetensors/qkv.safetensors"),
    ("no_input", ["--mask", "causal"], None),
    ("help", ["--help"], None),
]

# Manifests (JSON Lines): jobs with every kind of value, and the lines a manifest refuses.
MANIFEST = {
    "jobs": [{"input": "x.npy", "mask": "causal", "dump": "weights"},
             {"input": "in.npz", "lengths": [2, 3], "dump": ["weights", "output"], "output": "own.npy"},
             {"input": "in.npz", "q": "in.npz:k", "causal_align": "bottom-right", "compact": True, "scale": 0.5},
             {"input": "-", "heads": 2, "kv_heads": 1, "mask_fill": -1e9, "full": False}],
    "refused": [{"input": "x.npy", "mask_fill": None}, {"q": "a.npy", "k": "a.npy", "v": "a.npy", "mask": "causal"},
                {"input": 3}, {"input": "x.npy", "output": ["a"]}, {"input": "x.npy", "jobs": 2},
                {"input": "x.npy", "bogus": 1}, {"input": "x.npy", "heads": 1e30}, [1, 2],
                {"input": "x.npy", "mask": {"causal": True}}, {"input": "x.npy", "lengths": [[1]]}],
    "hostile": [{"input": "a\nattn: error: forged\u001b[2J", "mask": "\u009b31m\u202e"},
                {"input": "x.npy", "mask": "causal" * 60}],
}


# tokenizer.json seeds: the three decodings of the families (byte-level BPE, SentencePiece
# with byte fallback, WordPiece), added tokens, and the data/*-tiny tokenizers.
TOKENIZERS = {
    "byte_level": {"added_tokens": [{"id": 4, "content": "<|endoftext|>", "special": True}],
                   "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
                   "decoder": {"type": "ByteLevel"},
                   "model": {"type": "BPE", "vocab": {"the": 0, "\u0120cat": 1, "\u010a": 2, "\u0120\u00c3\u00a9": 3},
                             "merges": ["t h", "th e"]}},
    "metaspace": {"added_tokens": [{"id": 0, "content": "<s>"}],
                  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581"},
                  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                                 "content": " "}, {"type": "ByteFallback"}]},
                  "model": {"type": "BPE", "byte_fallback": True,
                            "vocab": {"<s>": 0, "\u2581The": 1, "<0x0A>": 2, "<0xZZ>": 3, "\u2581dog": 4}}},
    "wordpiece": {"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "cat": 1, "##s": 2, "[SEP]": 3}},
                  "decoder": {"type": "WordPiece", "prefix": "##"}},
}


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def main():
    for d in ("npy", "npz", "json", "cli", "safetensors", "config", "tokenizer", "manifest"):
        for f in (CORPUS / d).glob("seed-*"):
            f.unlink()
    for name in NPY:
        shutil.copy(FIX / "npy" / (name + ".npy"), CORPUS / "npy" / ("seed-" + name + ".npy"))
    shutil.copy(ROOT / "data" / "x.npy", CORPUS / "npy" / "seed-x.npy")
    for name in NPZ:
        shutil.copy(FIX / "npz" / (name + ".npz"), CORPUS / "npz" / ("seed-" + name + ".npz"))
    shutil.copy(ROOT / "data" / "notebook.npz", CORPUS / "npz" / "seed-notebook.npz")
    for name, doc in JSON.items():
        write(CORPUS / "json" / ("seed-" + name + ".json"), json.dumps(doc).encode())
    shutil.copy(ROOT / "data" / "notebook.json", CORPUS / "json" / "seed-notebook.json")
    for f in sorted(SAFETENSORS.rglob("*")):
        if f.is_file() and (f.suffix == ".safetensors" or f.name.endswith(".index.json")) and f.stat().st_size <= 8192:
            rel = f.relative_to(SAFETENSORS).as_posix().replace("/", "-")
            shutil.copy(f, CORPUS / "safetensors" / ("seed-" + rel))
    # config.json of every shipped checkpoint (data/ and tests/fixtures/checkpoints/), once each.
    seen = set()
    for f in sorted(ROOT.glob("data/*/config.json")) + sorted((ROOT / "tests" / "fixtures" / "checkpoints").glob("*/config.json")):
        if f.read_bytes() not in seen:
            seen.add(f.read_bytes())
            write(CORPUS / "config" / ("seed-" + f.parent.name + ".json"), f.read_bytes())
    for name, doc in TOKENIZERS.items():
        write(CORPUS / "tokenizer" / ("seed-" + name + ".json"), json.dumps(doc).encode())
    for model in ("gpt2", "llama", "bert"):
        shutil.copy(ROOT / "data" / (model + "-tiny") / "tokenizer.json", CORPUS / "tokenizer" / ("seed-" + model + "-tiny.json"))
    for name, argv, src in CLI:
        data = "\n".join(argv).encode()
        if src is not None:
            body = json.dumps(JSON[src[5:]]).encode() if src.startswith("json:") else (ROOT / src).read_bytes()
            data += b"\0" + body
        write(CORPUS / "cli" / ("seed-" + name), data)
    for name, lines in MANIFEST.items():
        write(CORPUS / "manifest" / ("seed-" + name + ".jsonl"), "".join(json.dumps(j) + "\n" for j in lines).encode())
    write(CORPUS / "manifest" / "seed-broken.jsonl", b'{"input": "x.npy"\n\n  \r\nnot json\n{"input": "x.npy", "scale": 1e999}')


if __name__ == "__main__":
    main()
