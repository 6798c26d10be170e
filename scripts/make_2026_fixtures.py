#!/usr/bin/python3
"""Tiny random checkpoints of the olmo3, smollm3, ministral3 and glm4_moe families (docs/design.md
§6.1) and what an independent implementation computes from them, written here in
PyTorch from Hugging Face transformers' modeling code (eager attention), in float64,
sharing nothing with attn:

  OLMo 3     models/olmo3/modular_olmo3.py: OLMo 2's layer (no pre-attention norm;
             h = x + post_attention_layernorm(attn(x)); out = h +
             post_feedforward_layernorm(mlp(h)); q_norm = RMSNorm(H·D), k_norm =
             RMSNorm(Hkv·D) over the whole projection before the head split and RoPE);
             Olmo3Attention: sliding_window on the layers layer_types names
             "sliding_attention"; Olmo3Model.rotary_embs: the sliding layers' RoPE is the
             default one (rope_type "default", rope_theta), the full layers' the config's
             rope_scaling (here yarn, with its attention factor on cos/sin).
  SmolLM3    models/smollm3/modular_smollm3.py: Llama's layer; SmolLM3Attention.use_rope =
             no_rope_layers[layer] (1: RoPE, 0: NoPE, no rotation at all); no_rope_layers
             from no_rope_layer_interval when absent ((i + 1) % interval != 0); the
             sliding window only with use_sliding_window, on the layers layer_types names
             (by default the NoPE layers).
  Ministral3 models/ministral3/modeling_ministral3.py: Mistral's layer (no biases, head_dim,
             sliding_window on every layer when set), yarn RoPE from rope_parameters, then
             Ministral3Attention multiplies the rotated queries by
             _get_llama_4_attn_scale(cache_position, llama_4_scaling_beta,
             original_max_position_embeddings) = 1 + β·ln(1 + ⌊pos / original⌋).
  GLM-4 MoE  models/glm4_moe/modeling_glm4_moe.py: Llama's layer; Glm4MoeAttention: q/k/v
             bias = attention_bias, o_proj none, q_norm / k_norm per head before RoPE
             (use_qk_norm), RoPE on the first int(head_dim · partial_rotary_factor) dims;
             Glm4MoeMoE on layers ≥ first_k_dense_replace (route_tokens_to_experts as
             transcribed in glm4_moe() below), Glm4MoeMLP before.

Cases (tests/fixtures/checkpoints/<name>/: config.json as transformers writes it,
model.safetensors with HF's names under "model.", expected.npz):

  olmo3-tiny        4 layers, 4 heads, 2 KV heads, layer_types sliding, sliding, sliding,
                    full (the default pattern, written out), sliding_window 3, rope_scaling
                    yarn factor 4 (the full layer only)
  smollm3-tiny      4 layers, 4 heads, 2 KV heads, no_rope_layer_interval 2 (layers 1 and 3
                    NoPE), use_sliding_window with sliding_window 3 (on the NoPE layers)
  ministral3-tiny   2 layers, 4 heads, 2 KV heads, head_dim 16 (hidden 32), rope_parameters
                    yarn (factor 4, original_max_position_embeddings 3), llama_4_scaling_beta 0.5
  ministral3-conditional-tiny  the ministral3-tiny weights as Mistral3ForConditionalGeneration
                    stores them (config under text_config, tensors under language_model.model.;
                    no expected.npz: ministral3-tiny's)
  glm4-moe-tiny     3 layers (layer 0 dense, first_k_dense_replace 1), head_dim 16, partial
                    rotary 0.5, q/k/v biases, use_qk_norm, 8 experts in 2 groups, topk_group
                    1, top-2, a shared expert, norm_topk_prob, routed_scaling_factor 2.5

expected.npz: ids (T,), hidden_states (L+1, T, E), x_layer1 (T, E), x_norm (L, T, E),
weights (L, H, T, T), output (L, T, E) (after o_proj), rollout (T, T), q and k as they
enter Q·Kᵀ (L, T, H·D) and (L, T, Hkv·D), and q_proj and k_proj, the projections before
any norm, RoPE or temperature, in the same layout.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_2026_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import math
import os

import torch

from fixture_npz import write_npz
from make_checkpoint_fixtures import FIX, DT, expected, rand, rms_norm, rope_inv_freq, rotate_half, safetensors_bytes, write, write_json, write_config

IDS = [1, 3, 4, 5, 6, 7, 8, 9]


def weights(g, cfg, prefix):
    """Llama's tensors under HF's names; OLMo 3's norms (post_attention_ and
    post_feedforward_layernorm, whole-width q_norm / k_norm) instead of input_layernorm."""
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or E // H
    olmo = cfg["model_type"] == "olmo3"
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "norm.weight": torch.ones(E)}
    norms = ("post_attention_layernorm", "post_feedforward_layernorm") if olmo else ("input_layernorm", "post_attention_layernorm")
    for l in range(L):
        p = f"{prefix}layers.{l}."
        for n in norms:
            w[p + n + ".weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
        w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        if olmo:
            w[p + "self_attn.q_norm.weight"] = 1 + rand(g, H * D, scale=0.5)
            w[p + "self_attn.k_norm.weight"] = 1 + rand(g, Hkv * D, scale=0.5)
        if cfg["model_type"] == "glm4_moe":
            if cfg.get("attention_bias"):
                for n, rows in (("q", H * D), ("k", Hkv * D), ("v", Hkv * D)):
                    w[p + f"self_attn.{n}_proj.bias"] = rand(g, rows)
            if cfg.get("use_qk_norm"):
                w[p + "self_attn.q_norm.weight"] = 1 + rand(g, D, scale=0.5)
                w[p + "self_attn.k_norm.weight"] = 1 + rand(g, D, scale=0.5)
        if cfg["model_type"] == "glm4_moe" and l >= cfg["first_k_dense_replace"]:
            X, Im = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
            w[p + "mlp.gate.weight"] = rand(g, X, E, scale=1.0)
            w[p + "mlp.gate.e_score_correction_bias"] = rand(g, X, scale=0.3)
            for n, inter in [(f"experts.{e}.", Im) for e in range(X)] + [("shared_experts.", Im * cfg["n_shared_experts"])]:
                w[p + "mlp." + n + "gate_proj.weight"] = rand(g, inter, E)
                w[p + "mlp." + n + "up_proj.weight"] = rand(g, inter, E)
                w[p + "mlp." + n + "down_proj.weight"] = rand(g, E, inter)
            continue
        w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
        w[p + "mlp.up_proj.weight"] = rand(g, I, E)
        w[p + "mlp.down_proj.weight"] = rand(g, E, I)
    return w


def glm4_moe(W, p, cfg, x, mlp):
    """Glm4MoeMoE.forward: σ router, correction bias for the choice only, groups by the sum
    of their top-2 choices (others masked to 0), top-k, weights σ (÷ sum + 1e-20 when
    norm_topk_prob) × routed_scaling_factor, experts' outputs summed, plus the shared experts."""
    X, K, G, TG = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"]
    s = torch.sigmoid(torch.nn.functional.linear(x, W[p + "mlp.gate.weight"]))
    choice = s + W[p + "mlp.gate.e_score_correction_bias"]
    group_scores = choice.view(-1, G, X // G).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=TG, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(-1, G, X // G).reshape(-1, X)
    masked = choice.masked_fill(~score_mask.bool(), 0.0)
    idx = torch.topk(masked, k=K, dim=-1, sorted=False)[1]
    wts = s.gather(1, idx)
    if cfg.get("norm_topk_prob", True):
        wts = wts / (wts.sum(dim=-1, keepdim=True) + 1e-20)
    wts = wts * cfg.get("routed_scaling_factor", 1.0)
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(K):
            e = int(idx[t, j])
            out[t] += wts[t, j] * mlp(p + f"mlp.experts.{e}.", x[t:t + 1])[0]
    return out + mlp(p + "mlp.shared_experts.", x)


def cos_sin(cfg, D, T, scaled):
    """cos, sin (T, D) of the RoPE: the config's scaling (rope_inv_freq, attention factor
    on both) when `scaled`, else the default RoPE of rope_theta."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if scaled and rs and rs.get("rope_type", rs.get("type", "default")) != "default":
        inv_freq, factor = rope_inv_freq(cfg, D, T)
    else:
        theta = cfg.get("rope_theta", (rs or {}).get("rope_theta", 10000.0))
        inv_freq, factor = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).to(DT) / D)), 1.0
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def layer_plan(cfg):
    """Per layer: (rope: None for NoPE, "scaled" or "default"; sliding window or None)."""
    L, mt = cfg["num_hidden_layers"], cfg["model_type"]
    plan = []
    for l in range(L):
        if mt == "olmo3":
            # Olmo3Config: layer_types default (i + 1) % 4 != 0 sliding; Olmo3Attention window on those
            types = cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 4 != 0 else "full_attention" for i in range(L)]
            sliding = types[l] == "sliding_attention"
            plan.append(("default" if sliding else "scaled", cfg.get("sliding_window", 4096) if sliding else None))
        elif mt == "smollm3":
            # SmolLM3Config.__init__: no_rope_layers, then layer_types from it
            interval = cfg.get("no_rope_layer_interval", 4)
            use_rope = (cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(L)])[l]
            win = cfg.get("sliding_window")
            types = cfg.get("layer_types") or ["sliding_attention" if cfg.get("use_sliding_window") and win is not None and not r else "full_attention"
                                               for r in (cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(L)])]
            sliding = cfg.get("use_sliding_window") and types[l] == "sliding_attention"
            plan.append(("scaled" if use_rope else None, win if sliding else None))
        else:
            # Ministral3Attention: sliding_window=getattr(config, "sliding_window", None) on every layer
            plan.append(("scaled", cfg.get("sliding_window")))
    return plan


def reference(w, cfg, prefix, ids):
    """hidden_states, x_norm, weights, output per layer, and q_proj, k_proj, q, k (T, heads·D)."""
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or E // H
    T = len(ids)
    olmo = cfg["model_type"] == "olmo3"
    R = int(D * cfg.get("partial_rotary_factor", 1.0))  # Glm4MoeRotaryEmbedding: dim = int(head_dim · partial)
    tables = {"scaled": cos_sin(cfg, R, T, True), "default": cos_sin(cfg, R, T, False)}
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    mlp = lambda p, x: lin(torch.nn.functional.silu(lin(x, p + "gate_proj")) * lin(x, p + "up_proj"), p + "down_proj")
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    x = W[prefix + "embed_tokens.weight"][ids]
    hs, xn_all, att_all, outs = [x], [], [], []
    extra = {"q_proj": [], "k_proj": [], "q": [], "k": []}
    for l, (rope, window) in enumerate(layer_plan(cfg)):
        p = f"{prefix}layers.{l}."
        a = p + "self_attn."
        xn = x if olmo else rms_norm(x, W[p + "input_layernorm.weight"], eps)
        qp, kp, v = lin(xn, a + "q_proj"), lin(xn, a + "k_proj"), lin(xn, a + "v_proj")
        q, k = qp, kp
        if olmo:  # Olmo2Attention: q_norm(q_proj(x)) over H·D, then view(…, head_dim)
            q, k = rms_norm(qp, W[a + "q_norm.weight"], eps), rms_norm(kp, W[a + "k_norm.weight"], eps)
        q, k = q.view(T, H, D), k.view(T, Hkv, D)
        if cfg.get("use_qk_norm"):  # Glm4MoeAttention: q_norm / k_norm per head, before RoPE
            q, k = rms_norm(q, W[a + "q_norm.weight"], eps), rms_norm(k, W[a + "k_norm.weight"], eps)
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        v = v.view(T, Hkv, D).transpose(0, 1)
        if rope is not None:  # apply_rotary_pos_emb (SmolLM3: only when use_rope) on the first R dims
            cos, sin = tables[rope]
            rot = lambda t: torch.cat((t[..., :R] * cos + rotate_half(t[..., :R]) * sin, t[..., R:]), dim=-1)
            q, k = rot(q), rot(k)
        if cfg["model_type"] == "ministral3":
            rp = cfg["rope_parameters"]
            pos = torch.arange(T, dtype=DT)  # cache_position
            q = q * (1 + rp["llama_4_scaling_beta"] * torch.log(1 + torch.floor(pos / rp["original_max_position_embeddings"])))[:, None]
        extra["q_proj"].append(qp), extra["k_proj"].append(kp)
        extra["q"].append(q.transpose(0, 1).reshape(T, H * D)), extra["k"].append(k.transpose(0, 1).reshape(T, Hkv * D))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        allowed = ki <= qi
        if window is not None:
            allowed = allowed & (ki > qi - window)
        s = q @ k.transpose(-1, -2) * D ** -0.5
        s = torch.where(allowed, s, torch.finfo(DT).min)
        att = torch.softmax(s, dim=-1)
        o = lin((att @ v).transpose(0, 1).reshape(T, H * D), a + "o_proj")
        if olmo:
            h = x + rms_norm(o, W[p + "post_attention_layernorm.weight"], eps)
            x = h + rms_norm(mlp(p + "mlp.", h), W[p + "post_feedforward_layernorm.weight"], eps)
        else:
            h = x + o
            n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
            if cfg["model_type"] == "glm4_moe" and l >= cfg["first_k_dense_replace"]:
                x = h + glm4_moe(W, p, cfg, n, mlp)
            else:
                x = h + mlp(p + "mlp.", n)
        xn_all.append(xn), att_all.append(att), outs.append(o), hs.append(x)
    return (hs, xn_all, att_all, outs), {n: torch.stack(t).numpy() for n, t in extra.items()}


def write_case(name, cfg, w):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    result, extra = reference(w, cfg, "model.", IDS)
    e = expected(IDS, result)
    e.update(extra)
    write_npz(os.path.join(d, "expected.npz"), e)


def main():
    g = torch.Generator().manual_seed(2026)
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
            "vocab_size": 64, "hidden_act": "silu", "attention_dropout": 0.0, "tie_word_embeddings": False,
            "use_cache": True, "initializer_range": 0.02, "torch_dtype": "float32"}

    olmo3 = dict(base, model_type="olmo3", architectures=["Olmo3ForCausalLM"], num_hidden_layers=4,
                 max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=500000.0, attention_bias=False,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
                 sliding_window=3, layer_types=["sliding_attention"] * 3 + ["full_attention"],
                 pad_token_id=1, eos_token_id=50279)
    write_case("olmo3-tiny", olmo3, weights(g, olmo3, "model."))

    smollm3 = dict(base, model_type="smollm3", architectures=["SmolLM3ForCausalLM"], num_hidden_layers=4,
                   max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=2000000.0, rope_scaling=None,
                   attention_bias=False, mlp_bias=False, no_rope_layer_interval=2, use_sliding_window=True,
                   sliding_window=3, pad_token_id=128004, bos_token_id=128000, eos_token_id=128001)
    write_case("smollm3-tiny", smollm3, weights(g, smollm3, "model."))

    ministral3 = dict(base, model_type="ministral3", architectures=["Ministral3ForCausalLM"], num_hidden_layers=2,
                      head_dim=16, max_position_embeddings=12, rms_norm_eps=1e-5, sliding_window=None,
                      rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                       "original_max_position_embeddings": 3, "max_position_embeddings": 12,
                                       "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                       "llama_4_scaling_beta": 0.5},
                      pad_token_id=11, bos_token_id=1, eos_token_id=2)
    w3 = weights(g, ministral3, "model.")
    write_case("ministral3-tiny", ministral3, w3)
    # The same weights as Mistral3ForConditionalGeneration stores them (model_type mistral3,
    # the text model's config under text_config, its tensors under language_model.model.).
    d = os.path.join(FIX, "ministral3-conditional-tiny")
    text = {k: v for k, v in ministral3.items() if k not in ("architectures", "torch_dtype")}
    mm = {"model_type": "mistral3", "architectures": ["Mistral3ForConditionalGeneration"], "text_config": text,
          "vision_config": {"model_type": "pixtral", "hidden_size": 16, "image_size": 28, "patch_size": 14,
                            "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 32},
          "image_token_index": 10, "spatial_merge_size": 2, "torch_dtype": "float32"}
    write(os.path.join(d, "model.safetensors"), safetensors_bytes({"language_model." + k: v for k, v in w3.items()}, {"format": "pt"}))
    write_config(d, mm)

    glm = dict(base, model_type="glm4_moe", architectures=["Glm4MoeForCausalLM"], num_hidden_layers=3, head_dim=16,
               max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=1000000.0, rope_scaling=None,
               partial_rotary_factor=0.5, attention_bias=True, use_qk_norm=True, first_k_dense_replace=1,
               n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
               n_group=2, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5, pad_token_id=151329,
               eos_token_id=[151329, 151336, 151338])
    write_case("glm4-moe-tiny", glm, weights(g, glm, "model."))


if __name__ == "__main__":
    main()
