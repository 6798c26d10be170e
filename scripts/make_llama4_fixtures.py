#!/usr/bin/env python3
"""Tiny random checkpoints of the llama4 family (docs/design.md §6.1: llama4_text, and the
text model of the llama4 multimodal checkpoint) and what an independent implementation
computes from them, written here in PyTorch from Hugging Face transformers'
models/llama4/modeling_llama4.py (eager attention), in float64, sharing nothing with attn:

  Llama4TextAttention  q/k/v_proj; on a RoPE layer (no_rope_layers[l] == 1)
                       apply_rotary_emb: view_as_complex of pairs (2i, 2i + 1) times
                       freqs_cis = polar(1, pos·inv_freq)·attention_scaling, then with
                       use_qk_norm Llama4TextL2Norm(rms_norm_eps) (x·rsqrt(mean(x²) + eps),
                       no weight) on q and k; on a NoPE layer with attn_temperature_tuning
                       q·(log1p(floor((cache_position + 1) / floor_scale))·attn_scale + 1);
                       eager_attention_forward with scaling head_dim^-0.5 and the layer's
                       mask: create_chunked_causal_mask on "chunked_attention" layers
                       (kv // chunk == q // chunk and kv <= q), create_causal_mask on the others.
  Llama4TextDecoderLayer  h = x + attn(input_layernorm(x)); out = h + ff(post_attention_layernorm(h)),
                       ff = Llama4TextMoe on moe_layers, else Llama4TextMLP(intermediate_size_mlp).
  Llama4TextMoe        Llama4Router: topk of the logits, scattered into -inf, sigmoid; routed_in =
                       x.repeat(E, 1) · scores (the expert *input* scaled); Llama4TextExperts:
                       bmm(routed_in, gate_up_proj (E, hidden, 2I)), gate, up = chunk(2),
                       bmm(up·silu(gate), down_proj (E, I, hidden)); plus the shared expert.
  Llama4TextConfig.__post_init__  no_rope_layers from no_rope_layer_interval, moe_layers from
                       interleave_moe_layer_step, layer_types from no_rope_layers, when absent.

Cases (tests/fixtures/checkpoints/<name>/: config.json, model.safetensors, expected.npz):

  llama4-text-tiny       Llama4ForCausalLM (model_type llama4_text, tensors under model.):
                         4 layers, no_rope_layers [1, 0, 1, 1] (layer 1 NoPE),
                         interleave_moe_layer_step 2 (layers 1 and 3 MoE, 0 and 2 dense),
                         attention_chunk_size 4 over T = 10, use_qk_norm, temperature tuning
                         with floor_scale 2 and attn_scale 0.5, default RoPE
  llama4-conditional-tiny  Llama4ForConditionalGeneration (model_type llama4, the text
                         config under text_config, tensors under language_model.model., plus
                         language_model.lm_head and vision/projector tensors attn ignores):
                         4 layers from no_rope_layer_interval 2 (layers 1 and 3 NoPE), moe_layers
                         [0, 2] written out, attention_chunk_size 3, use_qk_norm false,
                         rope_scaling llama3, 2 of 4 experts per token

expected.npz: ids (T,), hidden_states (L+1, T, E), x_layer1 (T, E), x_norm (L, T, E),
weights (L, H, T, T), output (L, T, E) (after o_proj), rollout (T, T), q and k as they
enter Q·Kᵀ (L, T, H·D) and (L, T, Hkv·D) (after RoPE, the L2 norm and the temperature),
and q_proj and k_proj, the projections before them, in the same layout.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_llama4_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import torch

from fixture_npz import write_npz
from make_moe_fixtures import attention_weights
from make_checkpoint_fixtures import FIX, DT, expected, rand, rms_norm, rope_inv_freq, safetensors_bytes, write, write_json, write_config

IDS = [1, 3, 4, 5, 6, 7, 8, 9, 10, 11]


def plan(tc):
    """Llama4TextConfig.__post_init__: per layer (uses RoPE, chunked, MoE)."""
    L = tc["num_hidden_layers"]
    interval = tc.get("no_rope_layer_interval", 4)
    no_rope = tc.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(L)]
    step = tc.get("interleave_moe_layer_step", 1)
    moe = tc.get("moe_layers") if tc.get("moe_layers") is not None else list(range(step - 1, L, step))
    types = tc.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in no_rope]
    return [(bool(no_rope[l]), types[l] == "chunked_attention", l in moe) for l in range(L)]


def weights(g, tc, prefix):
    E, V, I, Im = tc["hidden_size"], tc["vocab_size"], tc["intermediate_size"], tc["intermediate_size_mlp"]
    H, Hkv, D, X = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"], tc["num_local_experts"]
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "norm.weight": torch.ones(E)}
    for l, (_, _, moe) in enumerate(plan(tc)):
        p = f"{prefix}layers.{l}."
        attention_weights(g, tc, p, w, qkv_bias=False, o_bias=False)
        f = p + "feed_forward."
        if moe:
            w[f + "router.weight"] = rand(g, X, E, scale=1.0)
            w[f + "experts.gate_up_proj"] = rand(g, X, E, 2 * I)  # (E, hidden, 2I) as published
            w[f + "experts.down_proj"] = rand(g, X, I, E)         # (E, I, hidden)
            for n, shape in (("gate_proj", (I, E)), ("up_proj", (I, E)), ("down_proj", (E, I))):
                w[f + "shared_expert." + n + ".weight"] = rand(g, *shape)
        else:
            w[f + "gate_proj.weight"] = rand(g, Im, E)
            w[f + "up_proj.weight"] = rand(g, Im, E)
            w[f + "down_proj.weight"] = rand(g, E, Im)
    return w


def freqs_cis(tc, D, T):
    """Llama4TextRotaryEmbedding.forward: polar(1, pos·inv_freq)·attention_scaling, (T, D/2)."""
    rs = tc.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type", "default")) != "default":
        inv_freq, factor = rope_inv_freq(tc, D, T)
    else:
        inv_freq = 1.0 / (tc["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).to(DT) / D))
        factor = 1.0
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    return torch.polar(torch.ones_like(freqs), freqs) * factor


def apply_rotary_emb(x, fc):
    """x (T, heads, D): view_as_complex of pairs (2i, 2i + 1) times fc[:, None, :]."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * fc[:, None, :]).flatten(2)


def l2_norm(x, eps):
    """Llama4TextL2Norm._norm."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def moe(W, f, tc, x, mlp):
    """Llama4TextMoe.forward on x (T, hidden)."""
    X, K = tc["num_local_experts"], tc["num_experts_per_tok"]
    logits = torch.nn.functional.linear(x, W[f + "router.weight"])
    top_v, top_i = torch.topk(logits, K, dim=1)
    scores = torch.full_like(logits, float("-inf")).scatter_(1, top_i, top_v)
    scores = torch.sigmoid(scores)
    routed_in = x.repeat(scores.shape[1], 1) * scores.transpose(0, 1).reshape(-1, 1)
    hs = routed_in.view(X, -1, x.shape[-1])
    gate, up = torch.bmm(hs, W[f + "experts.gate_up_proj"]).chunk(2, dim=-1)
    routed_out = torch.bmm(up * torch.nn.functional.silu(gate), W[f + "experts.down_proj"]).view(-1, x.shape[-1])
    out = mlp(f + "shared_expert.", x)
    return out + routed_out.reshape(X, -1, x.shape[-1]).sum(dim=0)


def reference(w, tc, prefix, ids):
    """hidden_states, x_norm, weights, output per layer, and q_proj, k_proj, q, k (T, heads·D)."""
    W = {k: v.to(DT) for k, v in w.items()}
    eps = tc["rms_norm_eps"]
    H, Hkv, D, C = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"], tc["attention_chunk_size"]
    T = len(ids)
    fc = freqs_cis(tc, D, T)
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    mlp = lambda p, x: lin(torch.nn.functional.silu(lin(x, p + "gate_proj")) * lin(x, p + "up_proj"), p + "down_proj")
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    cache_position = torch.arange(T, dtype=DT)
    x = W[prefix + "embed_tokens.weight"][ids]
    hs, xn_all, att_all, outs = [x], [], [], []
    extra = {"q_proj": [], "k_proj": [], "q": [], "k": []}
    for l, (use_rope, chunked, is_moe) in enumerate(plan(tc)):
        p = f"{prefix}layers.{l}."
        a = p + "self_attn."
        xn = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        qp, kp = lin(xn, a + "q_proj"), lin(xn, a + "k_proj")
        q, k = qp.view(T, H, D), kp.view(T, Hkv, D)
        v = lin(xn, a + "v_proj").view(T, Hkv, D).transpose(0, 1)
        if use_rope:
            q, k = apply_rotary_emb(q, fc), apply_rotary_emb(k, fc)
        if tc["use_qk_norm"] and use_rope:
            q, k = l2_norm(q, eps), l2_norm(k, eps)
        if tc["attn_temperature_tuning"] and not use_rope:
            scales = torch.log1p(torch.floor((cache_position + 1.0) / tc["floor_scale"])) * tc["attn_scale"] + 1.0
            q = q * scales.view(T, 1, 1)
        extra["q_proj"].append(qp), extra["k_proj"].append(kp)
        extra["q"].append(q.reshape(T, H * D)), extra["k"].append(k.reshape(T, Hkv * D))
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        allowed = ki <= qi
        if chunked:  # chunked_overlay (no left padding) and causal_mask_function
            allowed = allowed & (ki // C == qi // C)
        s = q @ k.transpose(-1, -2) * D ** -0.5
        s = torch.where(allowed, s, torch.finfo(DT).min)
        att = torch.softmax(s, dim=-1)
        o = lin((att @ v).transpose(0, 1).reshape(T, H * D), a + "o_proj")
        h = x + o
        n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        x = h + (moe(W, p + "feed_forward.", tc, n, mlp) if is_moe else mlp(p + "feed_forward.", n))
        xn_all.append(xn), att_all.append(att), outs.append(o), hs.append(x)
    return (hs, xn_all, att_all, outs), {n: torch.stack(t).numpy() for n, t in extra.items()}


def write_case(name, cfg, tc, w, prefix, extra_tensors=None):
    d = os.path.join(FIX, name)
    stored = dict(w)
    stored.update(extra_tensors or {})
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(stored, {"format": "pt"}))
    write_config(d, cfg)
    result, extra = reference(w, tc, prefix, IDS)
    e = expected(IDS, result)
    e.update(extra)
    write_npz(os.path.join(d, "expected.npz"), e)


def main():
    g = torch.Generator().manual_seed(4004)
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
            "intermediate_size": 16, "intermediate_size_mlp": 24, "vocab_size": 64, "num_hidden_layers": 4,
            "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
            "attention_bias": False, "attention_dropout": 0.0, "num_local_experts": 4, "num_experts_per_tok": 1,
            "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "output_router_logits": False,
            "initializer_range": 0.02, "tie_word_embeddings": False, "use_cache": True, "pad_token_id": 0,
            "bos_token_id": 1, "eos_token_id": 2}

    text = dict(base, model_type="llama4_text", architectures=["Llama4ForCausalLM"], rope_scaling=None,
                no_rope_layers=[1, 0, 1, 1], interleave_moe_layer_step=2, attention_chunk_size=4,
                use_qk_norm=True, attn_temperature_tuning=True, floor_scale=2, attn_scale=0.5,
                torch_dtype="float32")
    write_case("llama4-text-tiny", text, text, weights(g, text, "model."), "model.")

    # Llama4ForConditionalGeneration: the text model's config under text_config, its tensors
    # under language_model.model. (language_model.lm_head beside them), the vision tower's and
    # the projector's tensors, which the text model does not read.
    tc = dict(base, model_type="llama4_text", no_rope_layer_interval=2, moe_layers=[0, 2], attention_chunk_size=3,
              use_qk_norm=False, attn_temperature_tuning=True, floor_scale=3, attn_scale=0.25, num_experts_per_tok=2,
              rope_scaling={"rope_type": "llama3", "factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 4})
    mm = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "text_config": tc,
          "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 16, "num_hidden_layers": 1,
                            "num_attention_heads": 2, "intermediate_size": 32, "image_size": 28, "patch_size": 14,
                            "vision_output_dim": 16, "projector_input_dim": 16, "projector_output_dim": 16,
                            "pixel_shuffle_ratio": 0.5, "rope_theta": 10000},
          "boi_token_index": 60, "eoi_token_index": 61, "image_token_index": 62, "tie_word_embeddings": False,
          "torch_dtype": "float32"}
    w = weights(g, tc, "language_model.model.")
    others = {"language_model.lm_head.weight": rand(g, tc["vocab_size"], tc["hidden_size"]),
              "multi_modal_projector.linear_1.weight": rand(g, tc["hidden_size"], 16),
              "vision_model.patch_embedding.linear.weight": rand(g, 16, 3 * 14 * 14)}
    write_case("llama4-conditional-tiny", mm, tc, w, "language_model.model.", others)


if __name__ == "__main__":
    main()
