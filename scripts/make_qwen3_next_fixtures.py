#!/usr/bin/python3
"""A tiny random Qwen3-Next checkpoint (docs/design.md §6.1 row "qwen3_next, qwen3_5") and
what an independent implementation computes from it, written here in PyTorch from Hugging
Face transformers' models/qwen3_next/modeling_qwen3_next.py and configuration_qwen3_next.py
(eager attention, the torch fallback without a cache), in float64, sharing nothing with attn:

  Qwen3NextDecoderLayer  h = x + mixer(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)).
  Qwen3NextRMSNorm       x·rsqrt(mean(x²) + eps)·(1 + w), computed in float32 whatever the
                         dtype (x.float(), self.weight.float()): make_gemma_fixtures.gemma_rms_norm,
                         the same code. The layer norms and q_norm / k_norm.
  layer_types            absent here: Qwen3NextConfig.__post_init__ makes "full_attention" of
                         every full_attention_interval-th layer ((i + 1) % interval == 0), else
                         "linear_attention".
  Qwen3NextAttention     q_proj(x).view(T, H, 2·D).chunk(2, dim=-1): query, gate per head;
                         q_norm / k_norm per head, apply_rotary_pos_emb on the first
                         int(D · partial_rotary_factor) dims (rotate_half), repeat_kv, scaling
                         D^−½, causal, attn_output · sigmoid(gate), o_proj.
  Qwen3NextGatedDeltaNet in_proj_qkvz / in_proj_ba split by fix_query_key_value_ordering,
                         causal depthwise conv1d (padding K − 1, [..., :T]) + SiLU over
                         cat(q, k, v), β = σ(b), g = −exp(A_log)·softplus(a + dt_bias), q/k
                         repeat_interleave'd to the value heads, torch_chunk_gated_delta_rule
                         (use_qk_l2norm_in_kernel, chunk_size 64), checked against
                         torch_recurrent_gated_delta_rule, Qwen3NextRMSNormGated(core, z),
                         out_proj. The delta rule and the gated norm are computed in float64
                         here: transformers casts them to float32 whatever the dtype, and its
                         two forms (chunk, recurrent) round differently there, so no float32
                         rounding of theirs is the one to match (attn computes them in double).
  Qwen3NextSparseMoeBlock  make_block_fixtures.softmax_topk_moe with the shared expert
                         (softmax router, top-k, norm_topk_prob, σ(shared_expert_gate)·shared),
                         on the layers with (i + 1) % decoder_sparse_step == 0 not in
                         mlp_only_layers; Qwen3NextMLP(intermediate_size) elsewhere.

Cases tests/fixtures/checkpoints/qwen3-next-tiny/ (config.json with the keys of the Hub's
Qwen3-Next-80B-A3B config.json, model.safetensors with HF's names under "model."): 4 layers
linear_attention, full_attention, linear_attention, full_attention (full_attention_interval
2); hidden 32, 4 heads over 2 KV heads of head_dim 16 (not hidden / heads), rotary 4 of 16
dims; linear attention with 2 key heads of 8 and 4 value heads of 6 (each key head serves
two value heads), kernel 4; 4 experts top-2 (norm_topk_prob) with a shared expert on layers
0, 1, 3, the dense MLP on layer 2 (mlp_only_layers). qwen3-next-tiny-fused: the same
weights with the experts fused as transformers v5 holds them (gate_up_proj, down_proj),
checked against qwen3-next-tiny's expected.npz. qwen3-5-tiny: see qwen3_5() below;
qwen3-5-moe-tiny (Qwen3.5-MoE, transformers' models/qwen3_5_moe/modular_qwen3_5_moe.py): see
qwen3_5_moe() below, its expected.npz as qwen3-next-tiny's plus wrong_shared_gate_x (x had
the shared expert been added without σ(shared_expert_gate)) and wrong_norm_topk_x (x had the
top-k not been renormalised, as a Qwen2-MoE reading of norm_topk_prob false would do).

expected.npz (A = the attention layers 1 and 3): ids (T,), attention_layers (A,),
hidden_states (L+1, T, E) the stream entering each layer and after the last (before the
final norm), x_layer3 (T, E), x, x_norm (A, T, E), q_proj (A, T, H·D) the query half of
q_proj before q_norm, k_proj (A, T, Hkv·D) before k_norm, q and k as they enter Q·Kᵀ (after
the norm and RoPE), v (A, T, Hkv·D), weights (A, H, T, T), output (A, T, E) after o_proj;
and what wrong conventions give, for the tests to tell apart: wrong_norm_x (x had every
Qwen3NextRMSNorm been x·w, not x·(1 + w)), wrong_gate_output (output without σ(gate)),
wrong_split_q (q had q_proj been split in two halves of the whole width instead of per head);
padded_ids (2, T) and padded_mask (2, T), a batch whose row 1 is ids[2:] after two padding
tokens, and short_weights (A, H, T−2, T−2), short_output (A, T−2, E), the stages of ids[2:]
alone, which row 1's real tokens must give.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_qwen3_next_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import numpy as np
import torch
import torch.nn.functional as F

from fixture_npz import write_npz
from make_block_fixtures import softmax_topk_moe
from make_checkpoint_fixtures import FIX, rand, rotate_half, safetensors_bytes, write, write_json, write_config
from make_gemma_fixtures import gemma_rms_norm
from make_moe_fixtures import shared_expert_mlp_weights

DT = torch.float64
IDS = [1, 3, 4, 5, 6, 7, 8, 9]
MARGIN = 1e-2  # the smallest gap allowed between a token's k-th and (k+1)-th router logit


def layer_types(cfg):
    """config.json's layer_types, else Qwen3NextConfig.__post_init__'s."""
    if cfg.get("layer_types") is not None:
        return cfg["layer_types"]
    return ["linear_attention" if (i + 1) % cfg["full_attention_interval"] else "full_attention"
            for i in range(cfg["num_hidden_layers"])]


def sparse_layers(cfg):
    """Qwen3NextDecoderLayer's choice of the sparse block (Qwen3.5: none)."""
    if "num_experts" not in cfg:
        return [False] * cfg["num_hidden_layers"]
    if cfg["model_type"] == "qwen3_5_moe_text":  # Qwen3_5MoeDecoderLayer: the sparse block on every layer
        return [True] * cfg["num_hidden_layers"]
    return [l not in cfg["mlp_only_layers"] and cfg["num_experts"] > 0 and (l + 1) % cfg["decoder_sparse_step"] == 0
            for l in range(cfg["num_hidden_layers"])]


def weights(g, cfg, prefix="model.", split=False):
    E, V, H, Hkv, D = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    Hk, Hv, dk, dv, K = (cfg["linear_num_key_heads"], cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                         cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"])
    X, I, Im, Is = (cfg.get("num_experts", 0), cfg.get("intermediate_size"), cfg.get("moe_intermediate_size"),
                    cfg.get("shared_expert_intermediate_size"))
    # Qwen3NextRMSNorm weights are zero-centred (1 + w): small values around 0.
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "norm.weight": rand(g, E, scale=0.1)}
    sparse = sparse_layers(cfg)
    for l, kind in enumerate(layer_types(cfg)):
        p = f"{prefix}layers.{l}."
        w[p + "input_layernorm.weight"] = rand(g, E, scale=0.3)
        w[p + "post_attention_layernorm.weight"] = rand(g, E, scale=0.3)
        if kind == "full_attention":
            a = p + "self_attn."
            w[a + "q_proj.weight"] = rand(g, 2 * H * D, E, scale=0.4)
            w[a + "k_proj.weight"] = rand(g, Hkv * D, E, scale=0.4)
            w[a + "v_proj.weight"] = rand(g, Hkv * D, E)
            w[a + "o_proj.weight"] = rand(g, E, H * D)
            w[a + "q_norm.weight"] = rand(g, D, scale=0.3)
            w[a + "k_norm.weight"] = rand(g, D, scale=0.3)
        else:
            a = p + "linear_attn."
            if split:  # Qwen3_5GatedDeltaNet
                w[a + "in_proj_qkv.weight"] = rand(g, 2 * Hk * dk + Hv * dv, E)
                w[a + "in_proj_z.weight"] = rand(g, Hv * dv, E)
                w[a + "in_proj_b.weight"] = rand(g, Hv, E)
                w[a + "in_proj_a.weight"] = rand(g, Hv, E)
            else:
                w[a + "in_proj_qkvz.weight"] = rand(g, 2 * Hk * dk + 2 * Hv * dv, E)
                w[a + "in_proj_ba.weight"] = rand(g, 2 * Hv, E)
            w[a + "conv1d.weight"] = rand(g, 2 * Hk * dk + Hv * dv, 1, K, scale=0.5)
            w[a + "A_log"] = torch.log(0.5 + 4 * torch.rand(Hv, generator=g))  # log(A), A in (0.5, 4.5)
            w[a + "dt_bias"] = 1 + rand(g, Hv, scale=0.3)
            w[a + "norm.weight"] = 1 + rand(g, dv, scale=0.2)  # Qwen3NextRMSNormGated: ones-centred, ·w
            w[a + "out_proj.weight"] = rand(g, E, Hv * dv)
        shared_expert_mlp_weights(g, w, p + "mlp.", sparse[l], E, X, I, Im, Is, router_scale=0.5)
    return w


def l2norm(x, eps=1e-6):
    """modeling_qwen3_next.l2norm."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64):
    """torch_chunk_gated_delta_rule (no initial state, use_qk_l2norm_in_kernel), in float64:
    inputs (B, T, H, ·), output (B, T, H, dv)."""
    query, key = l2norm(query), l2norm(key)
    query, key, value, beta, g = [t.transpose(1, 2).contiguous() for t in (query, key, value, beta, g)]
    B, H, T, dk = key.shape
    dv = value.shape[-1]
    pad = (chunk_size - T % chunk_size) % chunk_size
    query, key, value = (F.pad(t, (0, 0, 0, pad)) for t in (query, key, value))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    total = T + pad
    query = query * dk ** -0.5
    v_beta, k_beta = value * beta.unsqueeze(-1), key * beta.unsqueeze(-1)
    query, key, value, k_beta, v_beta = [t.reshape(B, H, -1, chunk_size, t.shape[-1]) for t in (query, key, value, k_beta, v_beta)]
    g = g.reshape(B, H, -1, chunk_size)
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool), diagonal=0)
    g = g.cumsum(dim=-1)
    decay_mask = (g.unsqueeze(-1) - g.unsqueeze(-2)).tril().exp().tril()
    attn = -((k_beta @ key.transpose(-1, -2)) * decay_mask).masked_fill(mask, 0)
    for i in range(1, chunk_size):
        row, sub = attn[..., i, :i].clone(), attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    attn = attn + torch.eye(chunk_size, dtype=attn.dtype)
    value = attn @ v_beta
    k_cumdecay = attn @ (k_beta * g.exp().unsqueeze(-1))
    state = torch.zeros(B, H, dk, dv, dtype=value.dtype)
    out = torch.zeros_like(value)
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool), diagonal=1)
    for i in range(total // chunk_size):
        q_i, k_i, v_i = query[:, :, i], key[:, :, i], value[:, :, i]
        attn = (q_i @ k_i.transpose(-1, -2) * decay_mask[:, :, i]).masked_fill_(mask, 0)
        v_new = v_i - k_cumdecay[:, :, i] @ state
        out[:, :, i] = (q_i * g[:, :, i, :, None].exp()) @ state + attn @ v_new
        state = state * g[:, :, i, -1, None, None].exp() + (k_i * (g[:, :, i, -1, None] - g[:, :, i]).exp()[..., None]).transpose(-1, -2) @ v_new
    out = out.reshape(B, H, -1, dv)[:, :, :T]
    return out.transpose(1, 2).contiguous()


def recurrent_gated_delta_rule(query, key, value, g, beta):
    """torch_recurrent_gated_delta_rule (no initial state, use_qk_l2norm_in_kernel), in float64."""
    query, key = l2norm(query), l2norm(key)
    query, key, value, beta, g = [t.transpose(1, 2).contiguous() for t in (query, key, value, beta, g)]
    B, H, T, dk = key.shape
    query = query * dk ** -0.5
    out = torch.zeros(B, H, T, value.shape[-1], dtype=value.dtype)
    state = torch.zeros(B, H, dk, value.shape[-1], dtype=value.dtype)
    for i in range(T):
        state = state * g[:, :, i].exp()[..., None, None]
        kv_mem = (state * key[:, :, i].unsqueeze(-1)).sum(dim=-2)
        delta = (value[:, :, i] - kv_mem) * beta[:, :, i].unsqueeze(-1)
        state = state + key[:, :, i].unsqueeze(-1) * delta.unsqueeze(-2)
        out[:, :, i] = (state * query[:, :, i].unsqueeze(-1)).sum(dim=-2)
    return out.transpose(1, 2).contiguous()


def gated_delta_net(W, a, cfg, n):
    """Qwen3NextGatedDeltaNet.forward (no cache, torch fallback) on n (T, E)."""
    Hk, Hv, dk, dv, K = (cfg["linear_num_key_heads"], cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                         cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"])
    r = Hv // Hk
    x = n[None]  # (1, T, E)
    T = x.shape[1]
    if a + "in_proj_qkv.weight" in W:
        # Qwen3_5GatedDeltaNet.forward: mixed_qkv = in_proj_qkv(x), z, b, a their own projections.
        mixed = F.linear(x, W[a + "in_proj_qkv.weight"]).transpose(1, 2)
        z = F.linear(x, W[a + "in_proj_z.weight"]).reshape(1, T, -1, dv)
        b, av = F.linear(x, W[a + "in_proj_b.weight"]), F.linear(x, W[a + "in_proj_a.weight"])
    else:
        qkvz = F.linear(x, W[a + "in_proj_qkvz.weight"]).view(1, T, Hk, 2 * dk + 2 * r * dv)
        ba = F.linear(x, W[a + "in_proj_ba.weight"]).view(1, T, Hk, 2 * r)
        query, key, value, z = torch.split(qkvz, [dk, dk, r * dv, r * dv], dim=3)
        b, av = torch.split(ba, [r, r], dim=3)
        value, z = value.reshape(1, T, -1, dv), z.reshape(1, T, -1, dv)
        b, av = b.reshape(1, T, Hv), av.reshape(1, T, Hv)
        query, key, value = (t.reshape(1, T, -1) for t in (query, key, value))
        mixed = torch.cat((query, key, value), dim=-1).transpose(1, 2)
    conv = W[a + "conv1d.weight"]
    mixed = F.silu(F.conv1d(mixed, conv, None, padding=K - 1, groups=conv.shape[0])[:, :, :T]).transpose(1, 2)
    query, key, value = torch.split(mixed, [Hk * dk, Hk * dk, Hv * dv], dim=-1)
    query, key, value = query.reshape(1, T, -1, dk), key.reshape(1, T, -1, dk), value.reshape(1, T, -1, dv)
    beta = b.sigmoid()
    g = -W[a + "A_log"].exp() * F.softplus(av + W[a + "dt_bias"])
    if r > 1:
        query, key = query.repeat_interleave(r, dim=2), key.repeat_interleave(r, dim=2)
    core = chunk_gated_delta_rule(query, key, value, g, beta)
    assert torch.allclose(core, recurrent_gated_delta_rule(query, key, value, g, beta), rtol=0, atol=1e-12), "chunk ≠ recurrent"
    # Qwen3NextRMSNormGated(core, z): norm before the gate, ·w, ·silu(z).
    core, zz = core.reshape(-1, dv), z.reshape(-1, dv)
    core = core * torch.rsqrt(core.pow(2).mean(-1, keepdim=True) + cfg["rms_norm_eps"])
    core = W[a + "norm.weight"] * core * F.silu(zz)
    return F.linear(core.reshape(1, T, -1), W[a + "out_proj.weight"])[0]


def reference(w, cfg, ids, one_plus_w=True, gate=True, split_per_head=True, prefix="model.", shared_gate=True,
              margins=None):
    """The stream entering each layer and after the last, and per attention layer x, x_norm,
    q_proj (query half), k_proj, q, k, v, weights and output (after o_proj). shared_gate
    False drops σ(shared_expert_gate) (a wrong convention); `margins`, a list, receives each
    sparse layer's smallest gap between the k-th and the (k+1)-th router logit of a token."""
    W = {k: v.to(DT) for k, v in w.items()}
    E, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    T = len(ids)
    norm = (lambda x, wt: gemma_rms_norm(x, wt, eps)) if one_plus_w else (lambda x, wt: gemma_rms_norm(x, wt - 1.0, eps))
    lin = lambda x, name: F.linear(x, W[name])
    # Qwen3NextRotaryEmbedding, default rope: inv_freq over int(D · partial_rotary_factor) dims.
    rp = cfg.get("rope_parameters") or {}
    R = int(D * cfg.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.25)))
    inv_freq = 1.0 / (cfg.get("rope_theta", rp.get("rope_theta")) ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R))
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rope(t):  # (heads, T, D): rotate the first R dims, pass the rest
        rot, rest = t[..., :R], t[..., R:]
        return torch.cat((rot * cos + rotate_half(rot) * sin, rest), dim=-1)

    sparse = sparse_layers(cfg)
    allowed = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    x = W[prefix + "embed_tokens.weight"][ids]
    hs = [x]
    per = {n: [] for n in ("x", "x_norm", "q_proj", "k_proj", "q", "k", "v", "weights", "output")}
    for l, kind in enumerate(layer_types(cfg)):
        p = f"{prefix}layers.{l}."
        n = norm(x, W[p + "input_layernorm.weight"])
        if kind == "full_attention":
            a = p + "self_attn."
            qg = lin(n, a + "q_proj.weight")
            if split_per_head:
                query, gt = torch.chunk(qg.view(T, H, 2 * D), 2, dim=-1)
            else:
                query, gt = (t.reshape(T, H, D) for t in torch.chunk(qg, 2, dim=-1))
            gt = gt.reshape(T, H * D)
            qp, kp, v = query.reshape(T, H * D), lin(n, a + "k_proj.weight"), lin(n, a + "v_proj.weight")
            q = norm(query, W[a + "q_norm.weight"]).transpose(0, 1)
            k = norm(kp.view(T, Hkv, D), W[a + "k_norm.weight"]).transpose(0, 1)
            q, k = rope(q), rope(k)
            vv = v.view(T, Hkv, D).transpose(0, 1)
            kk, vv = k.repeat_interleave(H // Hkv, dim=0), vv.repeat_interleave(H // Hkv, dim=0)
            s = q @ kk.transpose(-1, -2) * D ** -0.5
            s = torch.where(allowed, s, torch.finfo(DT).min)
            att = torch.softmax(s, dim=-1)
            o = (att @ vv).transpose(0, 1).reshape(T, H * D)
            if gate:
                o = o * torch.sigmoid(gt)
            o = lin(o, a + "o_proj.weight")
            for name, t in (("x", x), ("x_norm", n), ("q_proj", qp), ("k_proj", kp), ("q", q.transpose(0, 1).reshape(T, H * D)),
                            ("k", k.transpose(0, 1).reshape(T, Hkv * D)), ("v", v), ("weights", att), ("output", o)):
                per[name].append(t)
        else:
            o = gated_delta_net(W, p + "linear_attn.", cfg, n)
        h = x + o
        m = norm(h, W[p + "post_attention_layernorm.weight"])
        mp = p + "mlp."
        if sparse[l]:
            X = cfg["num_experts"]
            stack = lambda part: torch.stack([W[mp + f"experts.{e}.{part}.weight"] for e in range(X)])
            sgate = W[mp + "shared_expert_gate.weight"] if shared_gate else None
            shared = (W[mp + "shared_expert.gate_proj.weight"], W[mp + "shared_expert.up_proj.weight"],
                      W[mp + "shared_expert.down_proj.weight"], sgate)
            # Qwen3_5MoeTopKRouter renormalises always (no norm_topk_prob key).
            y, logits, _, _ = softmax_topk_moe(m, W[mp + "gate.weight"], stack("gate_proj"), stack("up_proj"),
                                               stack("down_proj"), cfg["num_experts_per_tok"],
                                               cfg.get("norm_topk_prob", True), shared if shared_gate else None)
            if not shared_gate:  # the shared expert added without its σ gate
                sg, su, sd, _ = shared
                y = y + F.linear(F.silu(F.linear(m, sg)) * F.linear(m, su), sd)
            if margins is not None:
                top = logits.sort(dim=-1, descending=True).values
                k = cfg["num_experts_per_tok"]
                margins.append((top[:, k - 1] - top[:, k]).min().item())
        else:
            y = F.linear(F.silu(lin(m, mp + "gate_proj.weight")) * lin(m, mp + "up_proj.weight"), W[mp + "down_proj.weight"])
        x = h + y
        hs.append(x)
    return hs, {name: torch.stack(t) for name, t in per.items()}


def main():
    g = torch.Generator().manual_seed(2028)
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": 0, "decoder_sparse_step": 1, "eos_token_id": 2, "full_attention_interval": 2,
           "head_dim": 16, "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02,
           "intermediate_size": 24, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 8,
           "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_value_head_dim": 6,
           "max_position_embeddings": 4096, "mlp_only_layers": [2], "model_type": "qwen3_next",
           "moe_intermediate_size": 8, "norm_topk_prob": True, "num_attention_heads": 4, "num_experts": 4,
           "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_key_value_heads": 2,
           "output_router_logits": False, "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06,
           "rope_scaling": None, "rope_theta": 10000.0, "router_aux_loss_coef": 0.001,
           "shared_expert_intermediate_size": 12, "tie_word_embeddings": False, "torch_dtype": "float32",
           "use_cache": True, "vocab_size": 64}
    assert layer_types(cfg) == ["linear_attention", "full_attention", "linear_attention", "full_attention"]
    assert sparse_layers(cfg) == [True, True, False, True]
    w = weights(g, cfg)
    d = os.path.join(FIX, "qwen3-next-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    hs, per = reference(w, cfg, IDS)
    e = {"ids": np.array(IDS, dtype=np.int64), "attention_layers": np.array([1, 3], dtype=np.int64),
         "hidden_states": torch.stack(hs).numpy(), "x_layer3": hs[3].numpy()}
    e.update({n: t.numpy() for n, t in per.items()})
    e["wrong_norm_x"] = reference(w, cfg, IDS, one_plus_w=False)[1]["x"].numpy()
    e["wrong_gate_output"] = reference(w, cfg, IDS, gate=False)[1]["output"].numpy()
    e["wrong_split_q"] = reference(w, cfg, IDS, split_per_head=False)[1]["q"].numpy()
    # A left-padded batch: row 1 is IDS[2:] after two padding tokens (attention_mask 0). Its
    # real tokens' weights and outputs are those of IDS[2:] alone (RoPE scores depend on
    # relative positions only), because the padded tokens reach neither the attention (keys
    # masked) nor the Gated DeltaNet (apply_mask_to_padding_states zeroes their input).
    e["padded_ids"] = np.array([IDS, [0, 0] + IDS[2:]], dtype=np.int64)
    e["padded_mask"] = np.array([[1] * len(IDS), [0, 0] + [1] * (len(IDS) - 2)], dtype=np.int64)
    short = reference(w, cfg, IDS[2:])[1]
    e["short_weights"], e["short_output"] = short["weights"].numpy(), short["output"].numpy()
    write_npz(os.path.join(d, "expected.npz"), e)
    # The same weights as transformers v5 holds them (conversion_mapping: "qwen3_next" is
    # qwen2_moe's, MergeModulelist then Concatenate(dim=1)): mlp.experts.gate_up_proj
    # (E, 2I, E) = cat(gate, up) per expert, mlp.experts.down_proj (E, E, I); no expected.npz
    # of its own (qwen3-next-tiny's).
    fused = {}
    for name, t in w.items():
        if ".mlp.experts." not in name:
            fused[name] = t
    for l, sp in enumerate(sparse_layers(cfg)):
        if sp:
            p = f"model.layers.{l}.mlp.experts."
            X = cfg["num_experts"]
            fused[p + "gate_up_proj"] = torch.stack([torch.cat((w[p + f"{x}.gate_proj.weight"], w[p + f"{x}.up_proj.weight"]))
                                                     for x in range(X)])
            fused[p + "down_proj"] = torch.stack([w[p + f"{x}.down_proj.weight"] for x in range(X)])
    d = os.path.join(FIX, "qwen3-next-tiny-fused")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(fused, {"format": "pt"}))
    write_config(d, cfg)
    qwen3_5(g)


def qwen3_5(g):
    """qwen3-5-tiny: Qwen3_5ForConditionalGeneration's config.json (text_config nested, a
    vision_config beside it) and tensors under model.language_model. (and one of
    model.visual., which the text model ignores); layer_types written: linear_attention,
    linear_attention, full_attention; a dense MLP on every layer; RoPE from rope_parameters
    with mrope_section (the text positions on all three axes: plain partial RoPE)."""
    text = {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None, "eos_token_id": 2,
            "full_attention_interval": 3, "head_dim": 16, "hidden_act": "silu", "hidden_size": 32,
            "initializer_range": 0.02, "intermediate_size": 40, "layer_types":
            ["linear_attention", "linear_attention", "full_attention"], "linear_conv_kernel_dim": 3,
            "linear_key_head_dim": 4, "linear_num_key_heads": 2, "linear_num_value_heads": 6,
            "linear_value_head_dim": 4, "max_position_embeddings": 4096, "model_type": "qwen3_5_text",
            "num_attention_heads": 2, "num_hidden_layers": 3, "num_key_value_heads": 1,
            "rms_norm_eps": 1e-06, "rope_parameters": {"mrope_interleaved": True, "mrope_section": [1, 1, 2],
            "partial_rotary_factor": 0.5, "rope_theta": 10000000, "rope_type": "default"},
            "tie_word_embeddings": False, "use_cache": True, "vocab_size": 64}
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 60, "model_type": "qwen3_5",
           "text_config": text, "tie_word_embeddings": False, "video_token_id": 61, "vision_end_token_id": 62,
           "vision_start_token_id": 63, "vision_config": {"depth": 1, "hidden_size": 16, "model_type": "qwen3_5",
           "out_hidden_size": 32, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}}
    w = weights(g, text, prefix="model.language_model.", split=True)
    w["model.visual.patch_embed.proj.weight"] = rand(g, 16, 3, 2, 4, 4)
    d = os.path.join(FIX, "qwen3-5-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    hs, per = reference(w, text, IDS, prefix="model.language_model.")
    e = {"ids": np.array(IDS, dtype=np.int64), "attention_layers": np.array([2], dtype=np.int64),
         "hidden_states": torch.stack(hs).numpy()}
    e.update({n: t.numpy() for n, t in per.items()})
    write_npz(os.path.join(d, "expected.npz"), e)
    qwen3_5_moe()


def qwen3_5_moe():
    """qwen3-5-moe-tiny: Qwen3_5MoeForConditionalGeneration's config.json (text_config nested,
    model_type qwen3_5_moe_text, no intermediate_size / decoder_sparse_step / norm_topk_prob /
    mlp_only_layers, which Qwen3_5MoeTextConfig deletes), tensors under model.language_model.
    beside one of model.visual. and two of mtp. (both unread by the text model); layer_types
    linear_attention, full_attention, linear_attention, full_attention; the sparse block on
    every layer (Qwen3_5MoeSparseMoeBlock: 4 experts top-2, always renormalised, a shared
    expert under σ(shared_expert_gate)), the experts fused as Qwen3_5MoeExperts holds them
    (mlp.experts.gate_up_proj (E, 2I, hidden) = [gate | up] per expert, down_proj (E, hidden, I)).
    Every token's top-2 is at least MARGIN (in router logits) from the third expert."""
    g = torch.Generator().manual_seed(2035)
    text = {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None, "eos_token_id": 2,
            "full_attention_interval": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 32,
            "initializer_range": 0.02, "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 4, "linear_num_key_heads": 2,
            "linear_num_value_heads": 4, "linear_value_head_dim": 6, "max_position_embeddings": 4096,
            "model_type": "qwen3_5_moe_text", "moe_intermediate_size": 8, "num_attention_heads": 4,
            "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_key_value_heads": 2,
            "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_parameters": {"mrope_interleaved": True,
            "mrope_section": [1, 1, 0], "partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_type": "default"},
            "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 12, "tie_word_embeddings": False,
            "use_cache": True, "vocab_size": 64}
    cfg = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "image_token_id": 60, "model_type": "qwen3_5_moe",
           "text_config": text, "tie_word_embeddings": False, "video_token_id": 61, "vision_end_token_id": 62,
           "vision_start_token_id": 63, "vision_config": {"depth": 1, "hidden_size": 16, "model_type": "qwen3_5_moe",
           "out_hidden_size": 32, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}}
    prefix = "model.language_model."
    w = weights(g, text, prefix=prefix, split=True)
    margins = []
    hs, per = reference(w, text, IDS, prefix=prefix, margins=margins)
    assert len(margins) == 4 and min(margins) > MARGIN, f"a top-k decision near a tie: {margins}"
    e = {"ids": np.array(IDS, dtype=np.int64), "attention_layers": np.array([1, 3], dtype=np.int64),
         "hidden_states": torch.stack(hs).numpy(), "x_layer3": hs[3].numpy()}
    e.update({n: t.numpy() for n, t in per.items()})
    e["wrong_shared_gate_x"] = reference(w, text, IDS, prefix=prefix, shared_gate=False)[1]["x"].numpy()
    e["wrong_norm_topk_x"] = reference(w, dict(text, norm_topk_prob=False), IDS, prefix=prefix)[1]["x"].numpy()
    stored = {}
    for name, t in w.items():
        if ".mlp.experts." not in name:
            stored[name] = t
    for l in range(text["num_hidden_layers"]):
        p = f"{prefix}layers.{l}.mlp.experts."
        X = range(text["num_experts"])
        stored[p + "gate_up_proj"] = torch.stack([torch.cat((w[p + f"{x}.gate_proj.weight"], w[p + f"{x}.up_proj.weight"])) for x in X])
        stored[p + "down_proj"] = torch.stack([w[p + f"{x}.down_proj.weight"] for x in X])
    stored["model.visual.patch_embed.proj.weight"] = rand(g, 16, 3, 2, 4, 4)
    stored["mtp.fc.weight"] = rand(g, 32, 64)
    stored["mtp.norm.weight"] = rand(g, 32, scale=0.1)
    d = os.path.join(FIX, "qwen3-5-moe-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(stored, {"format": "pt"}))
    write_config(d, cfg)
    write_npz(os.path.join(d, "expected.npz"), e)


if __name__ == "__main__":
    main()
