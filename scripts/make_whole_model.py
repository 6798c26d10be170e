#!/usr/bin/python3
"""A random BF16 checkpoint shaped like Qwen2.5-0.5B, for the whole-model benchmark
(scripts/bench_whole_model.py, docs/design.md §5.4). Never written into the repository:

    /usr/bin/python3 scripts/make_whole_model.py [DIR] [--vocab N]

DIR (default /tmp/attn-whole-model) receives config.json (model_type qwen2, the keys
Qwen/Qwen2.5-0.5B's config.json has) and model.safetensors with Hugging Face's tensor names
(model.embed_tokens.weight, model.layers.{l}.self_attn.{q,k,v}_proj.{weight,bias},
o_proj.weight, mlp.{gate,up,down}_proj.weight, the two RMSNorms, model.norm.weight; the
embedding is tied, so no lm_head.weight). Shape: hidden 896, 24 layers, 14 heads, 2 KV heads
(head_dim 64), MLP 4864, vocab 151936 (494 M parameters, 988 MB; the 24 blocks alone are
716 MB, the embedding 272 MB). --vocab makes the embedding smaller (the benchmark reads only
the T rows its token ids name).

Values: torch.randn in bfloat16 from a fixed seed (deterministic), 0.02 for projections and
the embedding (the config's initializer_range), 1 + 0.02·randn for the norms, 0.02·randn
biases. Streamed tensor by tensor: the whole file is never held in memory.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_checkpoint_fixtures import safetensors_header  # noqa: E402

E, L, H, HKV, I, V = 896, 24, 14, 2, 4864, 151936
D = E // H


def config(vocab):
    """Qwen/Qwen2.5-0.5B's config.json, with vocab_size as given."""
    return {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
            "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": E, "initializer_range": 0.02,
            "intermediate_size": I, "max_position_embeddings": 32768, "max_window_layers": L, "model_type": "qwen2",
            "num_attention_heads": H, "num_hidden_layers": L, "num_key_value_heads": HKV, "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "transformers_version": "4.40.1", "use_cache": True, "use_sliding_window": False, "vocab_size": vocab}


def shapes(vocab):
    s = {"model.embed_tokens.weight": (vocab, E), "model.norm.weight": (E,)}
    for l in range(L):
        p = f"model.layers.{l}."
        s.update({p + "input_layernorm.weight": (E,), p + "post_attention_layernorm.weight": (E,),
                  p + "self_attn.q_proj.weight": (H * D, E), p + "self_attn.q_proj.bias": (H * D,),
                  p + "self_attn.k_proj.weight": (HKV * D, E), p + "self_attn.k_proj.bias": (HKV * D,),
                  p + "self_attn.v_proj.weight": (HKV * D, E), p + "self_attn.v_proj.bias": (HKV * D,),
                  p + "self_attn.o_proj.weight": (E, H * D), p + "mlp.gate_proj.weight": (I, E),
                  p + "mlp.up_proj.weight": (I, E), p + "mlp.down_proj.weight": (E, I)})
    return s


def value(g, name, shape):
    x = torch.randn(*shape, generator=g, dtype=torch.bfloat16) * 0.02
    return x + 1 if name.endswith("norm.weight") else x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", default="/tmp/attn-whole-model")
    ap.add_argument("--vocab", type=int, default=V)
    args = ap.parse_args()
    out = Path(args.dir).resolve()
    repo = Path(__file__).resolve().parent.parent
    if out == repo or repo in out.parents:
        sys.exit(f"make_whole_model: {out} is inside the repository; give a directory outside it")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    s = shapes(args.vocab)
    names = sorted(s)
    entries = [(n, "BF16", s[n], 2 * int(torch.Size(s[n]).numel())) for n in names]
    g = torch.Generator().manual_seed(2024)
    tmp = out / "model.safetensors.part"
    with open(tmp, "wb") as f:
        f.write(safetensors_header(entries))
        for n in names:
            f.write(value(g, n, s[n]).contiguous().view(torch.int16).numpy().tobytes())
    os.replace(tmp, out / "model.safetensors")
    (out / "config.json").write_text(json.dumps(config(args.vocab), indent=2) + "\n")
    size = (out / "model.safetensors").stat().st_size
    print(f"{out}: {sum(e[3] for e in entries) // 2 / 1e6:.0f} M parameters, {size / 1e6:.0f} MB, "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
