#!/usr/bin/python3
"""Generates the committed fixtures of tests/fixtures/attention-variants/: each case's
inputs under attn's bundle names and what an independent implementation returns, written
here in PyTorch from the primary sources, sharing nothing with attn:

  rope_half_*        HF transformers' Llama: rotate_half, apply_rotary_pos_emb with
                     inv_freq = 1 / theta^(arange(0, R, 2) / R), cos = cat(freqs, freqs)
  rope_every_two_*   GPT-J: rotate_every_two, duplicate_interleave of sin/cos, rotary_dim
  fa_local_*         FlashAttention's tests: construct_local_mask (Tq < Tk, bottom-right)
                     and attention_ref's masked softmax
  alibi_h6, alibi_h8 the ALiBi paper's get_slopes, FlashAttention's -slope*|i + Tk - Tq - j|
  packed_3_docs      three documents packed in one row against three separate causal runs
  sinks_gpt_oss      gpt-oss's reference sdpa: sinks concatenated to the scores, softmax,
                     sink column dropped; GQA and its sliding window

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_attention_variant_fixtures.py

cases.json gives each case's attn options and which stage each expected_<stage> is.
tests/core/test_attention_variants.cpp runs them with both kernels and both paths. The output
is deterministic: rerunning this script must leave `git status` clean.
"""

import json
import math
import os

from fixture_npz import write_npz
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "attention-variants")
DT = torch.float64
CASES = []


def case(name, description, options, inputs, expected):
    arrays = {k: (v.numpy() if torch.is_tensor(v) else v) for k, v in inputs.items()}
    for stage, value in expected.items():
        arrays["expected_" + stage] = value.numpy() if torch.is_tensor(value) else value
    write_npz(os.path.join(ROOT, name + ".npz"), arrays)
    CASES.append({"name": name, "options": options, "stages": sorted(expected), "description": description})


def softmax_attention(q, k, v, masked, bias=None):
    """(B, H, Tq, D) x (B, H, Tk, D): masked (True = hidden) broadcast to the scores."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(masked, -math.inf)
    w = torch.softmax(scores, dim=-1)
    return w, w @ v


# HF transformers, models/llama/modeling_llama.py
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_rope(q, k, position_ids, theta, rotary_dim):
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=DT) / rotary_dim))
    freqs = position_ids[:, :, None].to(DT) * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # unsqueeze the head axis
    rot = lambda x: torch.cat((x[..., :rotary_dim] * cos + rotate_half(x[..., :rotary_dim]) * sin, x[..., rotary_dim:]), -1)
    return rot(q), rot(k)


# GPT-J, models/gptj/modeling_gptj.py
def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def gptj_rope(q, k, positions, theta, rotary_dim):
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=DT) / rotary_dim))
    sinusoid = positions[:, None].to(DT) * inv_freq[None, :]
    sin = torch.repeat_interleave(torch.sin(sinusoid), 2, dim=-1)  # duplicate_interleave
    cos = torch.repeat_interleave(torch.cos(sinusoid), 2, dim=-1)
    rot = lambda x: torch.cat((x[..., :rotary_dim] * cos + rotate_every_two(x[..., :rotary_dim]) * sin, x[..., rotary_dim:]), -1)
    return rot(q), rot(k)


# FlashAttention, tests/test_flash_attn.py (no padding): True = masked.
def construct_local_mask(seqlen_q, seqlen_k, window_size):
    row_idx = torch.arange(seqlen_q)[:, None]
    col_idx = torch.arange(seqlen_k)
    sk, sq = seqlen_k, seqlen_q
    if window_size[0] < 0:
        return col_idx > row_idx + sk - sq + window_size[1]
    return torch.logical_or(col_idx > torch.minimum(row_idx + sk - sq + window_size[1], torch.tensor(sk)),
                            col_idx < row_idx + sk - sq - window_size[0])


# Press et al. 2022, the paper's code.
def get_slopes(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]


# gpt-oss, gpt_oss/torch/model.py: sdpa with sinks (n_tokens, n_heads, q_mult, d_head).
def gpt_oss_sdpa(Q, K, V, S, sm_scale, sliding_window=0):
    n_tokens, n_heads, q_mult, d_head = Q.shape
    K = K[:, :, None, :].expand(-1, -1, q_mult, -1)
    V = V[:, :, None, :].expand(-1, -1, q_mult, -1)
    S = S.reshape(n_heads, q_mult, 1, 1).expand(-1, -1, n_tokens, -1)
    mask = torch.triu(Q.new_full((n_tokens, n_tokens), -float("inf")), diagonal=1)
    if sliding_window > 0:
        mask += torch.tril(mask.new_full((n_tokens, n_tokens), -float("inf")), diagonal=-sliding_window)
    QK = torch.einsum("qhmd,khmd->hmqk", Q, K) * sm_scale
    QK += mask[None, None, :, :]
    QK = torch.cat([QK, S], dim=-1)
    W = torch.softmax(QK, dim=-1)[..., :-1]
    attn = torch.einsum("hmqk,khmd->qhmd", W, V)
    return W, attn


def main():
    os.makedirs(ROOT, exist_ok=True)
    torch.manual_seed(20261124)
    B, H, T, D = 2, 2, 6, 8
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)

    for theta, R in ((10000.0, 8), (500.0, 4)):
        q, k, v = (torch.randn(B, H, T, D, dtype=DT) for _ in range(3))
        pos = torch.arange(T)[None, :].expand(B, -1)
        qr, kr = hf_rope(q, k, pos, theta, R)
        w, out = softmax_attention(qr, kr, v, causal)
        case(f"rope_half_r{R}", f"HF rotate_half, theta {theta}, rotary_dim {R} of {D}, causal",
             ["--rope", "half", "--rope-theta", repr(theta), "--rotary-dim", str(R), "--mask", "causal"],
             {"q": q, "k": k, "v": v}, {"q": qr, "k": kr, "weights": w, "output": out})
        qg, kg = gptj_rope(q, k, torch.arange(T), theta, R)
        w, out = softmax_attention(qg, kg, v, causal)
        case(f"rope_every_two_r{R}", f"GPT-J rotate_every_two, theta {theta}, rotary_dim {R} of {D}, causal",
             ["--rope", "interleaved", "--rope-theta", repr(theta), "--rotary-dim", str(R), "--mask", "causal"],
             {"q": q, "k": k, "v": v}, {"q": qg, "k": kg, "weights": w, "output": out})

    Tq, Tk = 5, 9
    for window, is_causal in (((2, 1), False), ((3, 0), True), ((-1, 2), False)):
        q = torch.randn(B, H, Tq, D, dtype=DT)
        k, v = torch.randn(B, H, Tk, D, dtype=DT), torch.randn(B, H, Tk, D, dtype=DT)
        masked = construct_local_mask(Tq, Tk, window)
        w, out = softmax_attention(q, k, v, masked)
        opts = ["--window", f"{window[0]},{window[1]}", "--causal-align", "bottom-right"]
        if is_causal:
            opts = ["--window", str(window[0]), "--mask", "causal", "--causal-align", "bottom-right"]
        case(f"fa_local_{window[0]}_{window[1]}".replace("-", "m"),
             f"FlashAttention construct_local_mask, window_size={window}, Tq={Tq} < Tk={Tk}, bottom-right"
             + (", causal" if is_causal else ""), opts, {"q": q, "k": k, "v": v}, {"weights": w, "output": out})

    for heads in (6, 8):
        q, k, v = (torch.randn(1, heads, T, 4, dtype=DT) for _ in range(3))
        slopes = torch.tensor(get_slopes(heads), dtype=DT)
        rel = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs().to(DT)
        bias = -slopes[:, None, None] * rel
        w, out = softmax_attention(q, k, v, causal, bias)
        case(f"alibi_h{heads}", f"ALiBi with the paper's get_slopes({heads}), causal",
             ["--alibi", "--mask", "causal"], {"q": q, "k": k, "v": v}, {"weights": w, "output": out})

    lengths = (3, 4, 2)
    Tp = sum(lengths)
    q, k, v = (torch.randn(1, H, Tp, D, dtype=DT) for _ in range(3))
    outs, start = [], 0
    for n in lengths:
        sl = slice(start, start + n)
        _, o = softmax_attention(q[:, :, sl], k[:, :, sl], v[:, :, sl], torch.triu(torch.ones(n, n, dtype=torch.bool), 1))
        outs.append(o)
        start += n
    case("packed_3_docs", "three documents packed in one row (cu_seqlens 0,3,7,9) against three separate causal runs",
         ["--cu-seqlens", "0,3,7,9", "--mask", "causal"], {"q": q, "k": k, "v": v}, {"output": torch.cat(outs, dim=2)})

    Hkv, q_mult, Tn = 2, 2, 7
    Q = torch.randn(Tn, Hkv, q_mult, D, dtype=DT)
    K, V = torch.randn(Tn, Hkv, D, dtype=DT), torch.randn(Tn, Hkv, D, dtype=DT)
    S = torch.randn(Hkv * q_mult, dtype=DT)
    for window in (0, 3):
        W, attn = gpt_oss_sdpa(Q, K, V, S, 1 / math.sqrt(D), sliding_window=window)
        # attn's layout: q (1, Hq, T, D) with query head h = kv head h // q_mult (GQA).
        q4 = Q.reshape(Tn, Hkv * q_mult, D).permute(1, 0, 2)[None]
        k4, v4 = K.permute(1, 0, 2)[None], V.permute(1, 0, 2)[None]
        opts = ["--mask", "causal"] + (["--window", str(window - 1)] if window else [])
        case(f"sinks_gpt_oss_w{window}", f"gpt-oss sdpa with sinks, GQA {Hkv * q_mult}/{Hkv}, sliding_window {window}",
             opts, {"q": q4, "k": k4, "v": v4, "sinks": S},
             {"weights": W.reshape(Hkv * q_mult, Tn, Tn)[None], "output": attn.reshape(Tn, Hkv * q_mult, D).permute(1, 0, 2)[None]})

    with open(os.path.join(ROOT, "cases.json"), "w") as f:
        f.write('{"generator": "scripts/make_attention_variant_fixtures.py", "torch": %s,\n "cases": [\n' % json.dumps(torch.__version__))
        f.write(",\n".join("  " + json.dumps(c) for c in CASES))
        f.write("\n ]}\n")


if __name__ == "__main__":
    main()
