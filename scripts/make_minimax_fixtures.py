#!/usr/bin/python3
"""Tiny random checkpoints of the minimax_m2 family (MiniMax-M2, docs/design.md §6.1) and
what an independent implementation computes from them, written here in PyTorch from Hugging
Face transformers' modeling code (models/minimax_m2/modeling_minimax_m2.py, eager
attention), in float64, sharing nothing with attn:

  MiniMaxM2Model        embed_tokens[ids]; per layer x = h + mlp(post_attention_layernorm(h)),
                        h = x + attn(input_layernorm(x)) (MiniMaxM2DecoderLayer)
  MiniMaxM2Attention    q/k/v/o_proj without biases; q_norm = MiniMaxM2RMSNorm(H·D) on
                        q_proj(x) and k_norm = MiniMaxM2RMSNorm(Hkv·D) on k_proj(x), the
                        whole projection normalised as one vector, before view(…, head_dim);
                        apply_rotary_pos_emb on the first rotary_dim dims of each head
                        (MiniMaxM2RotaryEmbedding = Glm4MoeRotaryEmbedding, default RoPE of
                        dim int(head_dim · partial_rotary_factor), partial_rotary_factor =
                        rotary_dim / head_dim as MiniMaxM2Config.convert_rope_params_to_dict
                        sets it), repeat_kv, softmax(q·kᵀ·head_dim^−½ + causal mask)
  MiniMaxM2TopKRouter   s = σ(x·gateᵀ); top-k of s + e_score_correction_bias (the bias picks,
                        it does not weigh); weights s[top] / Σ s[top] (no epsilon, no scaling)
  MiniMaxM2Experts      MixtralExperts over gate_up_proj = [w1 | w3] (conversion_mapping.py
                        "minimax_m2": mixtral's MergeModulelist + Concatenate(dim=1)) and
                        down_proj = w2: Σ_k weight · down(silu(gate) · up)

Cases (tests/fixtures/checkpoints/<name>/: config.json as the Hub's MiniMax-M2 config.json
writes it, with its key names — rotary_dim, qk_norm_type, scoring_func, use_routing_bias,
attn_type_list, … — model.safetensors with the Hub checkpoint's tensor names, expected.npz):

  minimax-m2-tiny       3 layers, hidden 32, 4 heads over 2 KV heads, head_dim 16 (q_proj
                        64 wide), rotary_dim 12 (not the default head_dim / 2), rope_theta
                        5e6, 6 experts of intermediate_size 12, top-2, a correction bias that
                        changes some tokens' choice (asserted), model.layers.N.
                        block_sparse_moe.{gate.weight, e_score_correction_bias,
                        experts.E.w1/w2/w3.weight} as published. use_mtp and num_mtp_modules
                        are written as the Hub writes them; the MTP modules are not stored
                        (transformers' MiniMaxM2 has none).
  minimax-m2-tiny-fused the same weights as transformers v5 holds them after its
                        conversion_mapping: mlp.gate.weight, mlp.e_score_correction_bias,
                        mlp.experts.gate_up_proj (E, 2I, hidden), mlp.experts.down_proj
                        (E, hidden, I); no expected.npz (minimax-m2-tiny's holds)
  minimax-m2-fp8-tiny   the same model as MiniMax publishes it: quantization_config fp8
                        (fmt "float8_e4m3fn", weight_block_size [8, 8] here: the experts' 12
                        rows / columns leave partial blocks), every Linear of the layers but
                        the router F8_E4M3 with a float32 weight_scale_inv, the router and
                        the correction bias float32, the rest BF16; the reference computes
                        with the dequantised weights (make_mla_fixtures.fp8_quantize:
                        codes · scale in float32, as transformers' Fp8Dequantize).

expected.npz: ids (T,), hidden_states (L+1, T, E), x_layer1 (T, E), x_norm (L, T, E),
weights (L, H, T, T), scores (L, H, T, T: scaled, the masked cells −inf), output (L, T, E)
(after o_proj), rollout (T, T), q and k as they enter Q·Kᵀ (L, T, H·D) and (L, T, Hkv·D),
v (L, T, Hkv·D), and q_proj and k_proj, the projections before the norm and RoPE, in the
same layout as q and k.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_minimax_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import torch

from fixture_npz import write_npz
from make_moe_fixtures import attention_weights
from make_checkpoint_fixtures import FIX, DT, expected, rand, rms_norm, rotate_half, safetensors_bytes, write, write_json, write_config
from make_mla_fixtures import fp8_quantize, fp8_safetensors_bytes

IDS = [1, 3, 4, 5, 6, 7, 8, 9]


def weights(g, cfg):
    """The Hub checkpoint's tensors (model. prefix, block_sparse_moe experts w1/w2/w3)."""
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Hkv, D, X = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["num_local_experts"]
    w = {"model.embed_tokens.weight": rand(g, V, E, scale=1.0), "model.norm.weight": 1 + rand(g, E, scale=0.1)}
    for l in range(L):
        p = f"model.layers.{l}."
        attention_weights(g, cfg, p, w, qkv_bias=False, o_bias=False)
        w[p + "self_attn.q_norm.weight"] = 1 + rand(g, H * D, scale=0.5)
        w[p + "self_attn.k_norm.weight"] = 1 + rand(g, Hkv * D, scale=0.5)
        m = p + "block_sparse_moe."
        w[m + "gate.weight"] = rand(g, X, E, scale=1.0)
        w[m + "e_score_correction_bias"] = rand(g, X, scale=0.3)
        for e in range(X):
            w[m + f"experts.{e}.w1.weight"] = rand(g, I, E)
            w[m + f"experts.{e}.w3.weight"] = rand(g, I, E)
            w[m + f"experts.{e}.w2.weight"] = rand(g, E, I)
    return w


def fused(w, cfg):
    """transformers v5's layout after conversion_mapping "minimax_m2": the gate renamed
    .block_sparse_moe.gate → .mlp.gate, the bias → .mlp.e_score_correction_bias, the experts
    merged: gate_up_proj = stack_e(cat(w1_e, w3_e)), down_proj = stack_e(w2_e)."""
    out = {k: v for k, v in w.items() if ".block_sparse_moe." not in k}
    for l in range(cfg["num_hidden_layers"]):
        m, p = f"model.layers.{l}.block_sparse_moe.", f"model.layers.{l}.mlp."
        X = cfg["num_local_experts"]
        out[p + "gate.weight"] = w[m + "gate.weight"]
        out[p + "e_score_correction_bias"] = w[m + "e_score_correction_bias"]
        out[p + "experts.gate_up_proj"] = torch.stack(
            [torch.cat((w[m + f"experts.{e}.w1.weight"], w[m + f"experts.{e}.w3.weight"]), dim=0) for e in range(X)])
        out[p + "experts.down_proj"] = torch.stack([w[m + f"experts.{e}.w2.weight"] for e in range(X)])
    return out


def router(W, m, cfg, x):
    """MiniMaxM2TopKRouter.forward: (top_k_index, top_k_weights, the index without the bias)."""
    K = cfg["num_experts_per_tok"]
    logits = torch.nn.functional.linear(x, W[m + "gate.weight"])
    s = torch.sigmoid(logits)
    choice = s + W[m + "e_score_correction_bias"]
    idx = torch.topk(choice, K, dim=-1, sorted=False)[1]
    wts = s.gather(1, idx)
    wts = wts / wts.sum(dim=-1, keepdim=True)
    return idx, wts, torch.topk(s, K, dim=-1, sorted=False)[1]


def experts(W, m, cfg, x, idx, wts):
    """MiniMaxM2Experts.forward (MixtralExperts) over the merged gate_up_proj / down_proj."""
    X = cfg["num_local_experts"]
    gate_up = torch.stack(
        [torch.cat((W[m + f"experts.{e}.w1.weight"], W[m + f"experts.{e}.w3.weight"]), dim=0) for e in range(X)])
    down = torch.stack([W[m + f"experts.{e}.w2.weight"] for e in range(X)])
    out = torch.zeros_like(x)
    mask = torch.nn.functional.one_hot(idx, num_classes=X).permute(2, 1, 0)
    for e in range(X):
        top_k_pos, token_idx = torch.where(mask[e])
        if token_idx.numel() == 0:
            continue
        gate, up = torch.nn.functional.linear(x[token_idx], gate_up[e]).chunk(2, dim=-1)
        h = torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, down[e])
        out.index_add_(0, token_idx, h * wts[token_idx, top_k_pos, None])
    return out


def reference(w, cfg, ids):
    """hidden_states, x_norm, weights, output per layer, q_proj, k_proj, q, k, v (T, heads·D),
    scores (H, T, T), and per layer the routes with and without the correction bias."""
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    T = len(ids)
    partial = cfg.get("rotary_dim", D // 2) / D  # MiniMaxM2Config.convert_rope_params_to_dict
    R = int(D * partial)  # compute_default_rope_parameters: dim = int(head_dim * partial_rotary_factor)
    theta = cfg["rope_theta"]
    inv_freq = 1.0 / (theta ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R))
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"])
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    x = W["model.embed_tokens.weight"][ids]
    hs, xn_all, att_all, outs, routes = [x], [], [], [], []
    extra = {"q_proj": [], "k_proj": [], "q": [], "k": [], "v": [], "scores": []}
    for l in range(L):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        xn = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        qp, kp, v = lin(xn, a + "q_proj"), lin(xn, a + "k_proj"), lin(xn, a + "v_proj")
        # MiniMaxM2Attention: q_norm(q_proj(x)), k_norm(k_proj(x)) over H·D, then view(…, head_dim)
        q = rms_norm(qp, W[a + "q_norm.weight"], eps).view(T, H, D).transpose(0, 1)
        k = rms_norm(kp, W[a + "k_norm.weight"], eps).view(T, Hkv, D).transpose(0, 1)
        v = v.view(T, Hkv, D).transpose(0, 1)
        rot = lambda t: torch.cat((t[..., :R] * cos + rotate_half(t[..., :R]) * sin, t[..., R:]), dim=-1)
        q, k = rot(q), rot(k)
        extra["q_proj"].append(qp), extra["k_proj"].append(kp)
        extra["q"].append(q.transpose(0, 1).reshape(T, H * D)), extra["k"].append(k.transpose(0, 1).reshape(T, Hkv * D))
        extra["v"].append(v.transpose(0, 1).reshape(T, Hkv * D))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        s = q @ k.transpose(-1, -2) * D ** -0.5
        extra["scores"].append(torch.where(ki <= qi, s, -torch.inf))
        s = torch.where(ki <= qi, s, torch.finfo(DT).min)
        att = torch.softmax(s, dim=-1)
        o = lin((att @ v).transpose(0, 1).reshape(T, H * D), a + "o_proj")
        h = x + o
        n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        m = p + "block_sparse_moe."
        idx, wts, unbiased = router(W, m, cfg, n)
        routes.append((idx, unbiased))
        x = h + experts(W, m, cfg, n, idx, wts)
        xn_all.append(xn), att_all.append(att), outs.append(o), hs.append(x)
    return (hs, xn_all, att_all, outs), {n: torch.stack(t).numpy() for n, t in extra.items()}, routes


def write_expected(d, cfg, w):
    result, extra, routes = reference(w, cfg, IDS)
    sets = lambda t: [tuple(sorted(r.tolist())) for r in t]
    assert any(sets(c) != sets(u) for c, u in routes), "the correction bias changes no choice"
    assert len({r for c, _ in routes for r in sets(c)}) >= 3, "too few distinct routes"
    e = expected(IDS, result)
    e.update(extra)
    write_npz(os.path.join(d, "expected.npz"), e)


def fp8_tensors(w, bm, bn):
    """MiniMax's published FP8 layout: the Linear weights of the layers (q/k/v/o_proj, the
    experts' w1/w2/w3) F8_E4M3 with their weight_scale_inv; the router (block_sparse_moe.gate)
    and e_score_correction_bias float32 (modules_to_not_convert); the rest BF16. Returns the
    stored tensors and the values the reference computes with."""
    stored, values = {}, {}
    for name, t in w.items():
        if ".layers." in name and (name.endswith("proj.weight") or ".experts." in name):
            codes, scale, deq = fp8_quantize(t, bm, bn)
            stored[name] = ("F8_E4M3", codes)
            stored[name + "_scale_inv"] = scale
            values[name] = deq
        elif name.endswith("block_sparse_moe.gate.weight") or name.endswith("e_score_correction_bias"):
            stored[name], values[name] = t, t
        else:
            b = t.to(torch.bfloat16)
            stored[name], values[name] = b, b.to(torch.float32)
    return stored, values


def main():
    g = torch.Generator().manual_seed(2027)
    L = 3
    cfg = {
        "architectures": ["MiniMaxM2ForCausalLM"],
        "attention_dropout": 0.0,
        "attn_type_list": [1] * L,
        "auto_map": {"AutoConfig": "configuration_minimax_m2.MiniMaxM2Config",
                     "AutoModelForCausalLM": "modeling_minimax_m2.MiniMaxM2ForCausalLM"},
        "head_dim": 16,
        "hidden_act": "silu",
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 12,
        "max_position_embeddings": 64,
        "model_type": "minimax_m2",
        "mtp_transformer_layers": 1,
        "num_attention_heads": 4,
        "num_experts_per_tok": 2,
        "num_hidden_layers": L,
        "num_key_value_heads": 2,
        "num_local_experts": 6,
        "num_mtp_modules": 3,
        "output_router_logits": False,
        "qk_norm_type": "per_layer",
        "rms_norm_eps": 1e-06,
        "rope_theta": 5000000,
        "rotary_dim": 12,
        "router_aux_loss_coef": 0.001,
        "router_jitter_noise": 0.0,
        "scoring_func": "sigmoid",
        "shared_intermediate_size": 0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.57.1",
        "use_cache": True,
        "use_mtp": True,
        "use_qk_norm": True,
        "use_routing_bias": True,
        "vocab_size": 64,
    }
    w = weights(g, cfg)
    d = os.path.join(FIX, "minimax-m2-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    write_expected(d, cfg, w)

    d = os.path.join(FIX, "minimax-m2-tiny-fused")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(fused(w, cfg), {"format": "pt"}))
    write_config(d, cfg)

    fp8 = dict(cfg, torch_dtype="bfloat16",
               quantization_config={"activation_scheme": "dynamic", "fmt": "float8_e4m3fn", "quant_method": "fp8",
                                    "weight_block_size": [8, 8],
                                    "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]})
    stored, values = fp8_tensors(w, 8, 8)
    d = os.path.join(FIX, "minimax-m2-fp8-tiny")
    write(os.path.join(d, "model.safetensors"), fp8_safetensors_bytes(stored))
    write_config(d, fp8)
    write_expected(d, fp8, values)


if __name__ == "__main__":
    main()
