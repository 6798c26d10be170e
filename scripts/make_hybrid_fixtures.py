#!/usr/bin/python3
"""Tiny random checkpoints of hybrid families, models with layers without softmax attention
(docs/design.md §6.1), and what an independent implementation computes from them,
written here in PyTorch from Hugging Face transformers' modeling code (eager attention,
the slow path without a cache), in float64, sharing nothing with attn:

  LFM2  models/lfm2/modeling_lfm2.py. Lfm2DecoderLayer: h = x + mixer(operator_norm(x));
        out = h + feed_forward(ffn_norm(h)); Lfm2RMSNorm x·rsqrt(mean(x²) + norm_eps)·w.
        The mixer by layer_types:
          "full_attention"  Lfm2Attention: q/k/v_proj (no bias), view (…, head_dim),
                            q_layernorm / k_layernorm (Lfm2RMSNorm(head_dim)) per head,
                            then apply_rotary_pos_emb (rotate_half, rope_theta), GQA
                            (repeat_kv), scaling head_dim^−½, causal, out_proj.
          "conv"            Lfm2ShortConv.slow_forward: BCx = in_proj(n).transpose(-1, -2);
                            B, C, x = BCx.chunk(3, dim=-2); conv_out =
                            conv(B·x)[..., :T] (nn.Conv1d depthwise, groups = hidden,
                            kernel conv_L_cache, padding conv_L_cache − 1, bias conv_bias);
                            out_proj(C·conv_out).
        Lfm2MLP: w2(silu(w1 n) · w3 n), width int(2·intermediate_size/3) → int(multiplier ·
        that) → rounded up to block_multiple_of (block_auto_adjust_ff_dim). embedding_norm
        (the final norm) comes after the last layer; no stage reaches it.

Cases (tests/fixtures/checkpoints/<name>/: config.json with Lfm2Config's key names as the
Hub's LFM2 checkpoints write them, model.safetensors with HF's names under "model.",
expected.npz):

  lfm2-tiny   4 layers conv, full_attention, conv, full_attention; hidden 32, 4 heads,
              2 KV heads (head_dim 8), conv_L_cache 3, intermediate_size 100 with
              block_ffn_dim_multiplier 1.5 and block_multiple_of 16 (w1: 112 rows)
  lfm2-conv-bias-tiny  3 layers full_attention, conv, full_attention; conv_bias (in_proj,
              conv and out_proj biases), conv_L_cache 4, block_auto_adjust_ff_dim false
              (intermediate_size 48 as written), rope_theta 10000

expected.npz (A = the attention layers, in model order):
  ids (T,), attention_layers (A,) their model numbers, hidden_states (L+1, T, E) the
  stream entering each layer and after the last (HF hidden_states, before embedding_norm),
  x_layer3 (T, E) the stream entering layer 3 (lfm2-tiny), x, x_norm (A, T, E), q_proj (A, T, H·D) and
  k_proj (A, T, Hkv·D) before the norm, q and k as they enter Q·Kᵀ (after the norm and
  RoPE), weights (A, H, T, T), output (A, T, E) after out_proj, rollout (T, T) over the
  attention layers, and (lfm2-tiny) two wrong conventions for the tests to tell apart:
  wrong_conv_x (A, T, E), x had the convolution been centred (padding (K − 1)/2 each side,
  not causal), and wrong_norm_q (A, T, H·D), q had the q_layernorm come after RoPE.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_hybrid_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import numpy as np
import torch

from fixture_npz import write_npz
from make_checkpoint_fixtures import (write_config, DATA, FIX, DT, llama_tokenizer, rand, rms_norm, rotate_half, safetensors_bytes,
                                      with_vocab, write, write_json)

IDS = [1, 3, 4, 5, 6, 7, 8, 9]


def ff_width(cfg):
    """Lfm2MLP.__init__'s intermediate_size."""
    width = cfg.get("block_ff_dim", cfg["intermediate_size"])  # Lfm2Config: kwargs.get("block_ff_dim", intermediate_size)
    if cfg.get("block_auto_adjust_ff_dim", True):
        width = int(2 * width / 3)
        if cfg.get("block_ffn_dim_multiplier", 1.0) is not None:
            width = int(cfg.get("block_ffn_dim_multiplier", 1.0) * width)
            of = cfg.get("block_multiple_of", 256)
            width = of * ((width + of - 1) // of)
    return width


def lfm2_weights(g, cfg, prefix):
    E, V, I = cfg["hidden_size"], cfg["vocab_size"], ff_width(cfg)
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D, K = E // H, cfg["conv_L_cache"]
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "embedding_norm.weight": 1 + rand(g, E, scale=0.1)}
    for l, kind in enumerate(cfg["layer_types"]):
        p = f"{prefix}layers.{l}."
        w[p + "operator_norm.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "ffn_norm.weight"] = 1 + rand(g, E, scale=0.1)
        if kind == "full_attention":
            w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
            w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
            w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
            w[p + "self_attn.out_proj.weight"] = rand(g, E, H * D)
            w[p + "self_attn.q_layernorm.weight"] = 1 + rand(g, D, scale=0.5)
            w[p + "self_attn.k_layernorm.weight"] = 1 + rand(g, D, scale=0.5)
        else:
            w[p + "conv.in_proj.weight"] = rand(g, 3 * E, E)
            w[p + "conv.conv.weight"] = rand(g, E, 1, K, scale=0.6)
            w[p + "conv.out_proj.weight"] = rand(g, E, E)
            if cfg.get("conv_bias"):
                w[p + "conv.in_proj.bias"] = rand(g, 3 * E)
                w[p + "conv.conv.bias"] = rand(g, E)
                w[p + "conv.out_proj.bias"] = rand(g, E)
        w[p + "feed_forward.w1.weight"] = rand(g, I, E)
        w[p + "feed_forward.w3.weight"] = rand(g, I, E)
        w[p + "feed_forward.w2.weight"] = rand(g, E, I)
    return w


def short_conv(W, p, cfg, n, causal=True):
    """Lfm2ShortConv.slow_forward (no cache) on n (T, E); with causal False, the wrong
    convention: a centred convolution (padding (K − 1)/2 on each side)."""
    T, K = n.shape[0], cfg["conv_L_cache"]
    lin = lambda x, name: torch.nn.functional.linear(x, W[name + ".weight"], W.get(name + ".bias"))
    BCx = lin(n[None], p + "conv.in_proj").transpose(-1, -2)  # (1, 3E, T)
    B, C, x = BCx.chunk(3, dim=-2)
    Bx = B * x
    weight, bias = W[p + "conv.conv.weight"], W.get(p + "conv.conv.bias")
    groups = weight.shape[0]
    if causal:
        conv_out = torch.nn.functional.conv1d(Bx, weight, bias, padding=K - 1, groups=groups)[..., :T]
    else:
        conv_out = torch.nn.functional.conv1d(Bx, weight, bias, padding=(K - 1) // 2, groups=groups)[..., :T]
    y = (C * conv_out).transpose(-1, -2).contiguous()
    return lin(y, p + "conv.out_proj")[0]


def lfm2_reference(w, cfg, prefix, ids, causal_conv=True, norm_after_rope=False):
    """The stream entering each layer and after the last, and per attention layer x, x_norm,
    q_proj, k_proj, q, k, weights and output (after out_proj)."""
    W = {k: v.to(DT) for k, v in w.items()}
    E, eps, theta = cfg["hidden_size"], cfg["norm_eps"], cfg["rope_theta"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D, T = E // H, len(ids)
    lin = lambda x, name: torch.nn.functional.linear(x, W[name + ".weight"], W.get(name + ".bias"))
    mlp = lambda p, x: lin(torch.nn.functional.silu(lin(x, p + "w1")) * lin(x, p + "w3"), p + "w2")
    # Lfm2RotaryEmbedding, rope_type default: inv_freq over the whole head_dim.
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).to(DT) / D))
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    rope = lambda t: t * cos + rotate_half(t) * sin
    allowed = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    x = W[prefix + "embed_tokens.weight"][ids]
    hs = [x]
    per = {n: [] for n in ("x", "x_norm", "q_proj", "k_proj", "q", "k", "weights", "output")}
    for l, kind in enumerate(cfg["layer_types"]):
        p = f"{prefix}layers.{l}."
        n = rms_norm(x, W[p + "operator_norm.weight"], eps)
        if kind == "full_attention":
            a = p + "self_attn."
            qp, kp, v = lin(n, a + "q_proj"), lin(n, a + "k_proj"), lin(n, a + "v_proj")
            q, k = qp.view(T, H, D), kp.view(T, Hkv, D)
            if not norm_after_rope:
                q, k = rms_norm(q, W[a + "q_layernorm.weight"], eps), rms_norm(k, W[a + "k_layernorm.weight"], eps)
            q, k = rope(q.transpose(0, 1)), rope(k.transpose(0, 1))  # (H, T, D)
            if norm_after_rope:
                q, k = rms_norm(q, W[a + "q_layernorm.weight"], eps), rms_norm(k, W[a + "k_layernorm.weight"], eps)
            vv = v.view(T, Hkv, D).transpose(0, 1)
            kk, vv = k.repeat_interleave(H // Hkv, dim=0), vv.repeat_interleave(H // Hkv, dim=0)
            s = q @ kk.transpose(-1, -2) * D ** -0.5
            s = torch.where(allowed, s, torch.finfo(DT).min)
            att = torch.softmax(s, dim=-1)
            o = lin((att @ vv).transpose(0, 1).reshape(T, H * D), a + "out_proj")
            for name, t in (("x", x), ("x_norm", n), ("q_proj", qp), ("k_proj", kp), ("q", q.transpose(0, 1).reshape(T, H * D)),
                            ("k", k.transpose(0, 1).reshape(T, Hkv * D)), ("weights", att), ("output", o)):
                per[name].append(t)
        else:
            o = short_conv(W, p, cfg, n, causal_conv)
        h = x + o
        x = h + mlp(p + "feed_forward.", rms_norm(h, W[p + "ffn_norm.weight"], eps))
        hs.append(x)
    return hs, {name: torch.stack(t) for name, t in per.items()}


def write_lfm2(name, cfg, w, wrong=True):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    hs, per = lfm2_reference(w, cfg, "model.", IDS)
    # Attention rollout (Abnar & Zuidema 2020) over the attention layers: Â = ½·mean_h(A) + ½·I,
    # rows renormalised, R = Â_last ⋯ Â_first.
    r = None
    for a in per["weights"]:
        a_hat = 0.5 * a.mean(dim=0) + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
        a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)
        r = a_hat if r is None else a_hat @ r
    e = {"ids": np.array(IDS, dtype=np.int64),
         "attention_layers": np.array([l for l, t in enumerate(cfg["layer_types"]) if t == "full_attention"], dtype=np.int64),
         "hidden_states": torch.stack(hs).numpy(), "rollout": r.numpy()}
    if len(hs) > 4:
        e["x_layer3"] = hs[3].numpy()
    e.update({n: t.numpy() for n, t in per.items()})
    if wrong:
        e["wrong_conv_x"] = lfm2_reference(w, cfg, "model.", IDS, causal_conv=False)[1]["x"].numpy()
        e["wrong_norm_q"] = lfm2_reference(w, cfg, "model.", IDS, norm_after_rope=True)[1]["q"].numpy()
    write_npz(os.path.join(d, "expected.npz"), e)


def main():
    g = torch.Generator().manual_seed(2027)
    lfm2 = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "vocab_size": 64, "hidden_size": 32,
            "intermediate_size": 100, "block_ff_dim": 100, "block_auto_adjust_ff_dim": True,
            "block_ffn_dim_multiplier": 1.5, "block_multiple_of": 16, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128000,
            "norm_eps": 1e-05, "rope_theta": 1000000.0, "conv_L_cache": 3, "conv_bias": False,
            "layer_types": ["conv", "full_attention", "conv", "full_attention"], "initializer_range": 0.02,
            "use_cache": True, "tie_word_embeddings": True, "pad_token_id": 0, "bos_token_id": 1,
            "eos_token_id": 7, "torch_dtype": "float32"}
    w = lfm2_weights(g, lfm2, "model.")
    write_lfm2("lfm2-tiny", lfm2, w)
    # data/lfm2-tiny, the manual's hybrid (docs/checkpoints.md): lfm2-tiny with 512 embedding
    # rows (the first 64 the fixture's) and Llama 3's tokenizer.json cut to them, so that it
    # runs from text. LFM2's own tokenizer is not among the shipped real ones.
    shipped, shipped_cfg = with_vocab(w, lfm2, "model.embed_tokens.weight", 512, 104)
    d = os.path.join(DATA, "lfm2-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(shipped, {"format": "pt"}))
    write_json(os.path.join(d, "config.json"), shipped_cfg)
    write_json(os.path.join(d, "tokenizer.json"), llama_tokenizer(512))
    # conv_bias, an attention layer first, and the feed-forward width as written.
    bias = dict(lfm2, num_hidden_layers=3, layer_types=["full_attention", "conv", "full_attention"], conv_bias=True,
                conv_L_cache=4, block_auto_adjust_ff_dim=False, intermediate_size=48, rope_theta=10000.0)
    del bias["block_ff_dim"]
    write_lfm2("lfm2-conv-bias-tiny", bias, lfm2_weights(g, bias, "model."), wrong=False)


if __name__ == "__main__":
    main()
