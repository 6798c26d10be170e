#!/usr/bin/python3
"""Generates tests/fixtures/torch/llama_decode_step.npz: one decoding step with a KV cache.

Run with Debian's Python (python3-torch and NumPy live there):

    /usr/bin/python3 scripts/make_decoding_fixture.py

The attention is transcribed from transformers' LlamaAttention.forward (eager path,
models/llama/modeling_llama.py) for one new token with a cache of P tokens:

    q, k, v      = the projected new token, (B, H, 1, D) and (B, Hkv, 1, D)
    cos, sin     = LlamaRotaryEmbedding at position_ids = P (the cache length)
    q, k         = apply_rotary_pos_emb(q, k, cos, sin)       (rotate_half)
    k, v         = past_key_value.update(k, v)                 (torch.cat([past, new], dim=2);
                                                                 the cached keys are stored
                                                                 rotated already)
    k, v         = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
    weights      = softmax(q @ kᵀ / sqrt(D))                   (one query sees every key:
                                                                 the causal mask hides none)
    output       = weights @ v

Saved under attn's bundle names: q, k, v (the new token, before RoPE), past_key,
past_value (rotated, as a cache holds them); and what the step computed:
expected_k_proj (the new key before RoPE), expected_k and expected_v (the keys and values
that enter the products: cache + new, (B, Hkv, P + 1, D)), expected_weights (B, H, 1,
P + 1) and expected_output (B, H, 1, D). attn runs it as
`attn compute llama_decode_step.npz --rope half --mask causal --dtype float64`.
The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import numpy as np
import torch
from fixture_npz import write_npz

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "torch")
DT = torch.float64
B, H, HKV, P, D, THETA = 2, 4, 2, 5, 8, 10000.0


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotary(position_ids):
    """LlamaRotaryEmbedding (default rope_type): cos, sin of shape (B, T, D)."""
    inv_freq = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.int64).to(DT) / D))
    inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].to(DT)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def main():
    torch.manual_seed(20240607)
    q = torch.randn(B, H, 1, D, dtype=DT)
    k = torch.randn(B, HKV, 1, D, dtype=DT)
    v = torch.randn(B, HKV, 1, D, dtype=DT)
    past_key = torch.randn(B, HKV, P, D, dtype=DT)  # as a cache stores them: rotated
    past_value = torch.randn(B, HKV, P, D, dtype=DT)

    position_ids = torch.full((B, 1), P, dtype=torch.int64)
    cos, sin = rotary(position_ids)
    q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    key_states = torch.cat([past_key, k_rot], dim=2)  # DynamicCache.update
    value_states = torch.cat([past_value, v], dim=2)
    key_rep = repeat_kv(key_states, H // HKV)
    value_rep = repeat_kv(value_states, H // HKV)
    scores = torch.matmul(q_rot, key_rep.transpose(2, 3)) / D ** 0.5
    weights = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32 if DT == torch.float32 else DT)
    output = torch.matmul(weights, value_rep)

    arrays = {
        "q": q, "k": k, "v": v, "past_key": past_key, "past_value": past_value,
        "expected_k_proj": k, "expected_k": key_states, "expected_v": value_states,
        "expected_weights": weights, "expected_output": output,
    }
    write_npz(os.path.join(ROOT, "llama_decode_step.npz"), {n: t.numpy() for n, t in arrays.items()})


if __name__ == "__main__":
    main()
