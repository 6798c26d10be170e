#!/usr/bin/python3
"""Tiny random checkpoints of the Multi-head Latent Attention families deepseek_v3
(docs/design.md §6.1; DeepSeek-V3/R1, and Kimi K2 read by its architectures) and
glm4_moe_lite (GLM-4.7-Flash, the same attention and router; see its case below), and what an
independent implementation computes from them, written here in PyTorch from Hugging Face
transformers' models/deepseek_v3/modeling_deepseek_v3.py (eager attention), in float64,
sharing nothing with attn:

  DeepseekV3DecoderLayer  pre-norm: RMSNorm input_layernorm, attention, residual, RMSNorm
             post_attention_layernorm, MLP, residual; DeepseekV3MoE on layers ≥
             first_k_dense_replace, DeepseekV3MLP (SiLU-gated, intermediate_size) before.
  DeepseekV3Attention  q = q_b_proj(q_a_layernorm(q_a_proj(x))) (q_proj(x) when q_lora_rank
             is null), view (T, H, qk_head_dim), split [q_pass (qk_nope_head_dim) | q_rot
             (qk_rope_head_dim)]; kv_a_proj_with_mqa(x) split [k_pass (kv_lora_rank) | k_rot
             (qk_rope_head_dim, ONE head)]; kv_b_proj(kv_a_layernorm(k_pass)) view (T, H,
             nope + v_head_dim) split [k_pass | value]; RoPE of q_rot and k_rot by
             apply_rotary_pos_emb_interleave (view(d/2, 2).transpose(-1, -2): evens then
             odds, then rotate_half) when rope_interleave, else apply_rotary_pos_emb; k_rot
             expanded to every head; query = cat(q_pass, q_rot), key = cat(k_pass, k_rot);
             scaling qk_head_dim^−½ × yarn_get_mscale(factor, mscale_all_dim)² when
             rope_scaling has mscale_all_dim; o_proj. The latent norms q_a_layernorm and
             kv_a_layernorm are DeepseekV3RMSNorm(rank) with eps 1e-6, NOT rms_norm_eps.
  DeepseekV3RotaryEmbedding  ROPE_INIT_FUNCTIONS over config.head_dim = qk_rope_head_dim
             (make_rope_scaling_fixtures.py's transcription of modeling_rope_utils.py; yarn
             with mscale / mscale_all_dim: attention_factor = get_mscale(f, mscale) /
             get_mscale(f, mscale_all_dim)), cos/sin times attention_factor.
  DeepseekV3MoE / DeepseekV3TopkRouter  scores = sigmoid(gate(x)); choice = scores +
             e_score_correction_bias; group score = sum of each group's top 2 (n_group
             groups); topk_group groups kept, the other experts' choice set to 0.0; top-k of
             the choice; weights = scores of the chosen (no bias), / (sum + 1e-20) when
             norm_topk_prob, × routed_scaling_factor; Σ weight · expert(x) +
             shared_experts(x) (moe_intermediate_size · n_shared_experts).

Cases (tests/fixtures/checkpoints/<name>/: config.json, model.safetensors with HF's names
under "model.", expected.npz):

  deepseek-v3-tiny  3 layers, 4 heads, q_lora_rank 16, kv_lora_rank 12, qk_nope 8, qk_rope
                    8, v_head_dim 6 (≠ qk_head_dim 16), rope_interleave, yarn factor 4 with
                    mscale 0.707 and mscale_all_dim 1 (attention factor ≠ 1 and scale ×
                    mscale² ≠ 1), rms_norm_eps 1e-5; first_k_dense_replace 1, 8 routed
                    experts in 4 groups, topk_group 2, top-3, a correction bias, 1 shared
                    expert, routed_scaling_factor 2.5. The script asserts that the group
                    limit and the correction bias each change some token's choice.
  kimi-k2-tiny      model_type "kimi_k2" (no family reads it), architectures
                    ["DeepseekV3ForCausalLM"]: 2 layers, q_lora_rank null (q_proj),
                    rope_interleave false, attention_bias true (q… kv_a_proj_with_mqa and
                    o_proj biases), no rope scaling, n_group 1, topk_group 1, top-2 of 4,
                    no correction bias tensor (zeros), first_k_dense_replace 1.
  deepseek-v3-fp8-tiny  deepseek-v3-tiny's weights as DeepSeek-V3 publishes them:
                    quantization_config fp8 (weight_block_size [8, 8] here), every Linear of
                    the layers but the router F8_E4M3 with a float32 weight_scale_inv per
                    block (partial blocks at the edges), the rest BF16; the reference computes
                    with the dequantised weights (codes · scale in float32, as transformers'
                    Fp8Dequantize) and the BF16-rounded others. The F8_E4M3 codes are
                    written from the format's definition, not from torch.
  glm4-moe-lite-tiny  GLM-4.7-Flash (model_type "glm4_moe_lite", transformers'
                    models/glm4_moe_lite: DeepseekV3Attention in Glm4MoeDecoderLayer with
                    Glm4MoeTopkRouter, which fills the experts of the groups not kept with
                    −inf, not 0.0; with one group nothing is filled): 4 layers whose MLP is
                    chosen by mlp_layer_types ["dense", "sparse", "dense", "sparse"] (not
                    first_k_dense_replace, also written as published), q_lora_rank 16,
                    qk_nope 8, qk_rope 6 (= head_dim, its other name), v_head_dim 12,
                    rope_interleave, rope_parameters {"rope_type": "default", "rope_theta":
                    1e6} without a top-level rope_theta, n_group 1, topk_group 1, top-4 of 8
                    with a correction bias (the script asserts it changes some choice),
                    routed_scaling_factor 1.8; weights from their own seed (61).

expected.npz: ids (T,), hidden_states (L+1, T, E), x_layer1 (T, E), x_norm (L, T, E),
weights (L, H, T, T), scores (L, H, T, T: scaled, the masked cells −inf), output (L, T, E),
rollout (T, T), and in the layout attn dumps them, (L, T, H·D): q and k (what enters Q·Kᵀ:
per head [nope | rope after RoPE]), v (H·v_head_dim), q_proj (the q projection before
RoPE) and k_proj (per head [k_nope | k_rot before RoPE], as attn names it).

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_mla_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import json
import math
import os

import torch
import torch.nn.functional as F

from fixture_npz import write_npz
from make_checkpoint_fixtures import (write_config, DATA, DT, FIX, expected, llama_reference, llama_tokenizer, llama_weights, rand,
                                      rms_norm, rope_inv_freq, rotate_half, safetensors_bytes, safetensors_header, with_vocab,
                                      write, write_json)

IDS = [1, 3, 4, 5, 6, 7, 8, 9]
LATENT_EPS = 1e-6  # DeepseekV3RMSNorm's default, which q_a_layernorm and kv_a_layernorm keep


def sparse(cfg, l):
    # Glm4MoeLiteDecoderLayer: mlp_layer_types[l] == "sparse"; DeepseekV3DecoderLayer:
    # layer_idx >= first_k_dense_replace.
    if "mlp_layer_types" in cfg:
        return cfg["mlp_layer_types"][l] == "sparse"
    return l >= cfg["first_k_dense_replace"]


def weights(g, cfg):
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Dn, R, Dv = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    Q, C = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    bias = cfg["attention_bias"]
    w = {"model.embed_tokens.weight": rand(g, V, E, scale=1.0), "model.norm.weight": torch.ones(E)}
    for l in range(L):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        w[p + "input_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
        if Q is None:
            w[a + "q_proj.weight"] = rand(g, H * (Dn + R), E)
        else:
            w[a + "q_a_proj.weight"] = rand(g, Q, E)
            if bias:
                w[a + "q_a_proj.bias"] = rand(g, Q, scale=0.2)
            w[a + "q_a_layernorm.weight"] = 1 + rand(g, Q, scale=0.3)
            w[a + "q_b_proj.weight"] = rand(g, H * (Dn + R), Q, scale=0.5)
        w[a + "kv_a_proj_with_mqa.weight"] = rand(g, C + R, E)
        if bias:
            w[a + "kv_a_proj_with_mqa.bias"] = rand(g, C + R, scale=0.2)
        w[a + "kv_a_layernorm.weight"] = 1 + rand(g, C, scale=0.3)
        w[a + "kv_b_proj.weight"] = rand(g, H * (Dn + Dv), C, scale=0.5)
        w[a + "o_proj.weight"] = rand(g, E, H * Dv)
        if bias:
            w[a + "o_proj.bias"] = rand(g, E, scale=0.2)
        if sparse(cfg, l):
            X, Im = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
            w[p + "mlp.gate.weight"] = rand(g, X, E, scale=1.0)
            if cfg.get("_correction_bias", True):
                w[p + "mlp.gate.e_score_correction_bias"] = rand(g, X, scale=0.3)
            for e in range(X):
                w[p + f"mlp.experts.{e}.gate_proj.weight"] = rand(g, Im, E)
                w[p + f"mlp.experts.{e}.up_proj.weight"] = rand(g, Im, E)
                w[p + f"mlp.experts.{e}.down_proj.weight"] = rand(g, E, Im)
            Is = Im * cfg["n_shared_experts"]
            w[p + "mlp.shared_experts.gate_proj.weight"] = rand(g, Is, E)
            w[p + "mlp.shared_experts.up_proj.weight"] = rand(g, Is, E)
            w[p + "mlp.shared_experts.down_proj.weight"] = rand(g, E, Is)
        else:
            w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
            w[p + "mlp.up_proj.weight"] = rand(g, I, E)
            w[p + "mlp.down_proj.weight"] = rand(g, E, I)
    return w


def mlp(W, p, x):
    # DeepseekV3MLP: down_proj(silu(gate_proj(x)) * up_proj(x))
    lin = lambda t, n: F.linear(t, W[p + n + ".weight"])
    return lin(F.silu(lin(x, "gate_proj")) * lin(x, "up_proj"), "down_proj")


def topk_indices(cfg, scores, bias, grouped=True):
    # DeepseekV3TopkRouter.get_topk_indices
    X, G = cfg["n_routed_experts"], cfg["n_group"]
    choice = scores + bias.unsqueeze(0)
    if grouped:
        group_scores = choice.view(-1, G, X // G).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=cfg["topk_group"], dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores)
        group_mask.scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, G, X // G).reshape(-1, X)
        # DeepseekV3 fills 0.0; Glm4MoeLiteTopkRouter (Glm4MoeTopkRouter) fills -inf.
        choice = choice.masked_fill(~score_mask.bool(), cfg.get("_fill", 0.0))
    return torch.topk(choice, k=cfg["num_experts_per_tok"], dim=-1, sorted=False)[1]


def moe(W, p, cfg, x, routes):
    # DeepseekV3MoE.forward with DeepseekV3TopkRouter.forward
    X = cfg["n_routed_experts"]
    scores = F.linear(x, W[p + "mlp.gate.weight"]).sigmoid()
    bias = W.get(p + "mlp.gate.e_score_correction_bias", torch.zeros(X, dtype=DT))
    idx = topk_indices(cfg, scores, bias)
    routes.append((idx, topk_indices(cfg, scores, bias, grouped=False), topk_indices(cfg, scores, torch.zeros(X, dtype=DT))))
    tw = scores.gather(1, idx)
    if cfg["norm_topk_prob"]:
        tw = tw / (tw.sum(dim=-1, keepdim=True) + 1e-20)
    tw = tw * cfg["routed_scaling_factor"]
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(idx.shape[1]):
            e = int(idx[t, j])
            out[t] += tw[t, j] * mlp(W, p + f"mlp.experts.{e}.", x[t:t + 1])[0]
    return out + mlp(W, p + "mlp.shared_experts.", x)


def yarn_get_mscale(scale=1, mscale=1):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def deinterleave(t):
    # apply_rotary_pos_emb_interleave: view(…, d // 2, 2).transpose(-1, -2).reshape(…, d)
    *lead, d = t.shape
    return t.reshape(*lead, d // 2, 2).transpose(-1, -2).reshape(*lead, d)


def reference(w, cfg, ids, routes):
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Dn, R, Dv = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    Q, C = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    Dk = Dn + R
    T = len(ids)
    rs = cfg.get("rope_scaling")
    if rs:
        inv_freq, factor = rope_inv_freq(cfg, R, T)
    else:
        theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta"))
        inv_freq = 1.0 / (theta ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R))
        factor = 1.0
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * factor, emb.sin() * factor
    scaling = Dk ** -0.5
    if rs is not None and rs.get("mscale_all_dim", 0):
        m = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
        scaling = scaling * m * m
    lin = lambda x, n: F.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    x = W["model.embed_tokens.weight"][ids]
    hs, xn_all, att_all, outs = [x], [], [], []
    extra = {n: [] for n in ("q_proj", "k_proj", "q", "k", "v", "scores")}
    for l in range(L):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        xn = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        if Q is None:
            qs = lin(xn, a + "q_proj")
        else:
            qs = lin(rms_norm(lin(xn, a + "q_a_proj"), W[a + "q_a_layernorm.weight"], LATENT_EPS), a + "q_b_proj")
        qh = qs.view(T, H, Dk).transpose(0, 1)
        q_pass, q_rot = torch.split(qh, [Dn, R], dim=-1)
        ckv = lin(xn, a + "kv_a_proj_with_mqa")
        k_pass, k_rot = torch.split(ckv, [C, R], dim=-1)
        kv = lin(rms_norm(k_pass, W[a + "kv_a_layernorm.weight"], LATENT_EPS), a + "kv_b_proj").view(T, H, Dn + Dv).transpose(0, 1)
        k_pass, v = torch.split(kv, [Dn, Dv], dim=-1)
        k_rot = k_rot.view(1, T, R)
        k_proj = torch.cat((k_pass, k_rot.expand(H, T, R)), dim=-1)
        if cfg["rope_interleave"]:
            q_rot, k_rot = deinterleave(q_rot), deinterleave(k_rot)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        k_rot = k_rot.expand(H, T, R)
        q = torch.cat((q_pass, q_rot), dim=-1)
        k = torch.cat((k_pass, k_rot), dim=-1)
        s = q @ k.transpose(-1, -2) * scaling
        s = torch.where(ki <= qi, s, torch.finfo(DT).min)
        att = torch.softmax(s, dim=-1)
        o = lin((att @ v).transpose(0, 1).reshape(T, H * Dv), a + "o_proj")
        flat = lambda t: t.transpose(0, 1).reshape(T, -1)
        extra["q_proj"].append(qs), extra["k_proj"].append(flat(k_proj))
        extra["q"].append(flat(q)), extra["k"].append(flat(k)), extra["v"].append(flat(v))
        extra["scores"].append(torch.where(ki <= qi, s, -math.inf))
        h = x + o
        n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        x_next = h + (moe(W, p, cfg, n, routes) if sparse(cfg, l) else mlp(W, p + "mlp.", n))
        xn_all.append(xn), att_all.append(att), outs.append(o), hs.append(x_next)
        x = x_next
    return (hs, xn_all, att_all, outs), {n: torch.stack(t).numpy() for n, t in extra.items()}


def write_case(name, cfg, w, check_routes):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, {k: v for k, v in cfg.items() if not k.startswith("_")})
    routes = []
    result, extra = reference(w, cfg, IDS, routes)
    if check_routes:
        # The group limit and the correction bias must each change some token's experts, or
        # the test could not tell them from their absence.
        sets = lambda t: [frozenset(r) for r in t.tolist()]
        for chosen, ungrouped, unbiased in routes:
            assert check_routes == "bias" or sets(chosen) != sets(ungrouped), "the group limit changes no choice"
            assert sets(chosen) != sets(unbiased), "the correction bias changes no choice"
            assert len(set(sets(chosen))) >= 3, "too few distinct routes"
    e = expected(IDS, result)
    e.update(extra)
    write_npz(os.path.join(d, "expected.npz"), e)


# ---------------------------------------------------------------------------- FP8

def e4m3fn_values():
    """The 256 F8_E4M3 (E4M3FN: bias 7, no infinities, 0x7F / 0xFF NaN) values by code, from
    the format's definition (OCP 8-bit floating point spec): subnormals m/8 · 2^−6."""
    vals = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 0xF and m == 0x7:
            vals.append(float("nan"))
        elif e == 0:
            vals.append(sign * m / 8 * 2.0 ** -6)
        else:
            vals.append(sign * (1 + m / 8) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=torch.float64)


E4M3 = e4m3fn_values()
FINITE = torch.nonzero(~torch.isnan(E4M3)).flatten()


def fp8_quantize(w, bm, bn):
    """A weight (R, C) as DeepSeek-V3 stores it: per bm × bn block (the bottom and right ones
    partial) scale = amax / 448, codes = the nearest F8_E4M3 value of w / scale; returns the
    codes (uint8), weight_scale_inv (float32, (⌈R/bm⌉, ⌈C/bn⌉)) and the dequantised weight
    as transformers' Fp8Dequantize computes it: codes.to(float32) * scale in float32."""
    R, C = w.shape
    SR, SC = -(-R // bm), -(-C // bn)
    scale = torch.zeros(SR, SC, dtype=torch.float32)
    for i in range(SR):
        for j in range(SC):
            blk = w[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn]
            scale[i, j] = blk.abs().max() / 448.0
    full = scale.repeat_interleave(bm, 0)[:R].repeat_interleave(bn, 1)[:, :C]
    target = (w / full).to(torch.float64)
    grid = E4M3[FINITE]
    codes = FINITE[(target.reshape(-1, 1) - grid.reshape(1, -1)).abs().argmin(dim=1)].reshape(R, C).to(torch.uint8)
    deq = E4M3[codes.long()].to(torch.float32) * full
    return codes, scale, deq


def fp8_tensors(w, bm, bn):
    """The published FP8 layout of a float32 checkpoint: every Linear weight of the layers but
    the router (mlp.gate) F8_E4M3 with its weight_scale_inv, the rest BF16 (the router and the
    correction bias float32). Returns the stored tensors (uint8 codes tagged F8_E4M3) and the
    values the reference computes with."""
    stored, values = {}, {}
    for name, t in w.items():
        linear = ".layers." in name and name.endswith("proj.weight")
        if linear:
            codes, scale, deq = fp8_quantize(t, bm, bn)
            stored[name] = ("F8_E4M3", codes)
            stored[name + "_scale_inv"] = scale
            values[name] = deq
        elif name.endswith("mlp.gate.weight") or name.endswith("e_score_correction_bias"):
            stored[name], values[name] = t, t
        else:
            b = t.to(torch.bfloat16)
            stored[name], values[name] = b, b.to(torch.float32)
    return stored, values


def fp8_safetensors_bytes(tensors):
    """safetensors_bytes, with ("F8_E4M3", uint8 codes) entries written as 1-byte F8_E4M3."""
    plain = {n: t for n, t in tensors.items() if not isinstance(t, tuple)}
    entries, blobs = [], []
    for name in sorted(tensors):
        t = tensors[name]
        if isinstance(t, tuple):
            raw = t[1].contiguous().numpy().tobytes()
            entries.append((name, "F8_E4M3", t[1].shape, len(raw)))
        else:
            one = safetensors_bytes({name: plain[name]})
            n = int.from_bytes(one[:8], "little")
            header = json.loads(one[8:8 + n])
            raw = one[8 + n:]
            entries.append((name, header[name]["dtype"], t.shape, len(raw)))
        blobs.append(raw)
    return safetensors_header(entries, {"format": "pt"}) + b"".join(blobs)


def main():
    g = torch.Generator().manual_seed(53)
    base = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 32, "intermediate_size": 48, "vocab_size": 64,
            "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_act": "silu", "rms_norm_eps": 1e-5,
            "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 6,
            "moe_intermediate_size": 8, "n_shared_experts": 1, "norm_topk_prob": True, "rope_theta": 10000.0,
            "attention_dropout": 0.0, "tie_word_embeddings": False, "initializer_range": 0.02, "torch_dtype": "float32"}
    ds = dict(base, model_type="deepseek_v3", num_hidden_layers=3, q_lora_rank=16, rope_interleave=True,
              attention_bias=False, max_position_embeddings=256,
              rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32,
                            "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 1.0},
              first_k_dense_replace=1, n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=3,
              routed_scaling_factor=2.5, scoring_func="sigmoid", topk_method="noaux_tc")
    w = weights(g, ds)
    write_case("deepseek-v3-tiny", ds, w, True)
    # data/deepseek-v3-tiny, the manual's MLA model (docs/checkpoints.md): deepseek-v3-tiny
    # with 512 embedding rows (the first 64 the fixture's) and Llama 3's tokenizer.json cut
    # to them, so that it runs from text (DeepSeek-V3's own tokenizer is not shipped here).
    shipped, shipped_cfg = with_vocab(w, ds, "model.embed_tokens.weight", 512, 105)
    d = os.path.join(DATA, "deepseek-v3-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(shipped, {"format": "pt"}))
    write_json(os.path.join(d, "config.json"), {k: v for k, v in shipped_cfg.items() if not k.startswith("_")})
    write_json(os.path.join(d, "tokenizer.json"), llama_tokenizer(512))

    # The same model as published: FP8 block-scaled (8 × 8 blocks here, partial ones at the
    # edges of kv_a_proj_with_mqa (20 rows) and kv_b_proj (12 columns)), BF16 elsewhere.
    fp8 = dict(ds, torch_dtype="bfloat16",
               quantization_config={"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [8, 8]})
    stored, values = fp8_tensors(w, 8, 8)
    d = os.path.join(FIX, "deepseek-v3-fp8-tiny")
    write(os.path.join(d, "model.safetensors"), fp8_safetensors_bytes(stored))
    write_config(d, fp8)
    result, extra = reference(values, fp8, IDS, [])
    e = expected(IDS, result)
    e.update(extra)
    write_npz(os.path.join(d, "expected.npz"), e)

    kimi = dict(base, model_type="kimi_k2", num_hidden_layers=2, q_lora_rank=None, rope_interleave=False,
                attention_bias=True, max_position_embeddings=64, rope_scaling=None, first_k_dense_replace=1,
                n_routed_experts=4, n_group=1, topk_group=1, num_experts_per_tok=2, routed_scaling_factor=2.827,
                _correction_bias=False)
    write_case("kimi-k2-tiny", kimi, weights(g, kimi), False)

    # GLM-4.7-Flash (glm4_moe_lite): its own generator, so that the cases above keep their weights.
    g = torch.Generator().manual_seed(61)
    glm = dict(base, architectures=["Glm4MoeLiteForCausalLM"], model_type="glm4_moe_lite", num_hidden_layers=4,
               qk_nope_head_dim=8, qk_rope_head_dim=6, head_dim=6, v_head_dim=12, q_lora_rank=16, rope_interleave=True,
               attention_bias=False, max_position_embeddings=512, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
               first_k_dense_replace=1, mlp_layer_types=["dense", "sparse", "dense", "sparse"], n_routed_experts=8, n_group=1,
               topk_group=1, num_experts_per_tok=4, routed_scaling_factor=1.8, topk_method="noaux_tc", _fill=-math.inf)
    del glm["rope_theta"]
    write_case("glm4-moe-lite-tiny", glm, weights(g, glm), "bias")

    # FP8 block scales for a family that is not DeepSeek's (docs/design.md §6.1: every
    # family): Llama's layout, its projections and MLP F8_E4M3 with [16, 24] blocks (partial
    # ones on the 32 and 64 columns), the rest BF16, as fine-grained FP8 checkpoints of the
    # Llama and Qwen families are published; the reference computes with the dequantised
    # values, in llama_reference (make_checkpoint_fixtures.py).
    g = torch.Generator().manual_seed(67)
    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32, "num_attention_heads": 4,
             "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 64,
             "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 500.0, "hidden_act": "silu",
             "torch_dtype": "bfloat16",
             "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [16, 24]}}
    w = llama_weights(g, llama, "model.")
    stored, values = fp8_tensors(w, 16, 24)
    d = os.path.join(FIX, "llama-fp8-tiny")
    write(os.path.join(d, "model.safetensors"), fp8_safetensors_bytes(stored))
    write_config(d, llama)
    write_npz(os.path.join(d, "expected.npz"), expected(IDS, llama_reference(values, llama, "model.", IDS)))
    # The same with the embedding table FP8 as well (published checkpoints keep it BF16; a
    # repackaging need not), read row by row for the ids.
    codes, scale, deq = fp8_quantize(w["model.embed_tokens.weight"], 16, 24)
    stored = dict(stored, **{"model.embed_tokens.weight": ("F8_E4M3", codes), "model.embed_tokens.weight_scale_inv": scale})
    values = dict(values, **{"model.embed_tokens.weight": deq})
    d = os.path.join(FIX, "llama-fp8-embedding-tiny")
    write(os.path.join(d, "model.safetensors"), fp8_safetensors_bytes(stored))
    write_config(d, llama)
    write_npz(os.path.join(d, "expected.npz"), expected(IDS, llama_reference(values, llama, "model.", IDS)))


if __name__ == "__main__":
    main()
