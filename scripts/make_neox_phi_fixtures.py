#!/usr/bin/python3
"""Tiny random checkpoints of the gpt_neox (Pythia) and phi3 families (docs/design.md §5.2),
and what an independent implementation computes from them, written here in PyTorch from
Hugging Face transformers' modeling code and sharing nothing with attn:

  GPT-NeoX  models/gpt_neox/modeling_gpt_neox.py: LayerNorm input_layernorm (with bias),
            query_key_value nn.Linear whose output is viewed (T, H, 3·D) and chunked into
            q, k, v per head; RoPE rotate_half on the first int(D · rotary_pct) dims with
            base rotary_emb_base (transformers v5: rope_parameters' rope_theta and
            partial_rotary_factor); causal softmax(q·kᵀ·D^-½); dense; the MLP
            dense_h_to_4h → gelu (erf) → dense_4h_to_h; GPTNeoXLayer's parallel residual
            x + attn(ln1 x) + mlp(ln2 x) when use_parallel_residual, else
            h = x + attn(ln1 x), h + mlp(ln2 h). Embeddings embed_in[ids].
  Phi-3     models/phi3/modeling_phi3.py: RMSNorm input_layernorm, qkv_proj whose output is
            [q of all heads ‖ k ‖ v], RoPE on the first int(D · partial_rotary_factor) dims
            (longrope: short_factor when the pass's length ≤ original_max_position_embeddings,
            long_factor beyond, the attention factor √(1 + ln(factor)/ln(original)) on cos and
            sin, as modeling_rope_utils.py's _compute_longrope_parameters, transcribed in
            make_rope_scaling_fixtures.py), repeat_kv (GQA), causal with Mistral's sliding
            window (kv_idx > q_idx − W) on every layer when sliding_window is set, o_proj;
            RMSNorm, Phi3MLP down_proj(up · silu(gate)) with gate, up = gate_up_proj(x).chunk(2).

Cases (tests/fixtures/checkpoints/): gpt-neox-tiny (parallel residual, rotary_pct 0.5,
rotary_emb_base 500, names under gpt_neox.), gpt-neox-sequential-tiny (sequential residual,
attention_bias false, written as transformers v5 writes it: rope_parameters with rope_theta
and partial_rotary_factor 0.25), phi3-tiny (GQA, partial_rotary_factor 0.75, sliding
window 5), phi3-longrope-tiny (longrope with original_max_position_embeddings 16: expected.npz
at T = 8 reads the short factors, expected-long.npz at T = 24 the long ones). Each case has
config.json, model.safetensors and expected.npz as make_checkpoint_fixtures.py describes
them (ids, hidden_states, x_layer1, x_norm, weights, output, rollout), plus q and k after
RoPE, (L, T, heads·D).

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_neox_phi_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import torch
from fixture_npz import write_npz
from make_checkpoint_fixtures import DT, FIX, expected, rand, rms_norm, rope_inv_freq, rotate_half, safetensors_bytes, write, write_json, write_config


def rope_tables(inv_freq, factor, T):
    # LlamaRotaryEmbedding.forward (GPTNeoXRotaryEmbedding, Phi3RotaryEmbedding): cos and sin
    # of cat(freqs, freqs), times the attention scaling.
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def apply_rope(x, cos, sin, R):
    # apply_rotary_pos_emb: rotate_half on the first R dims, the rest passed through.
    return torch.cat((x[..., :R] * cos + rotate_half(x[..., :R]) * sin, x[..., R:]), dim=-1)


def causal_softmax(q, k, allowed, D):
    s = q @ k.transpose(-1, -2) * D ** -0.5  # eager_attention_forward: scaling = head_dim ** -0.5
    s = torch.where(allowed, s, torch.finfo(DT).min)
    return torch.softmax(s, dim=-1)


def with_qk(ids, result, qk):
    e = expected(ids, result)
    # In the input's layout, as attn dumps q and k: (T, heads·D) per layer.
    e["q"] = torch.stack([q.transpose(0, 1).reshape(len(ids), -1) for q, _ in qk]).numpy()
    e["k"] = torch.stack([k.transpose(0, 1).reshape(len(ids), -1) for _, k in qk]).numpy()
    return e


# ---------------------------------------------------------------------------- GPT-NeoX

def neox_weights(g, cfg, prefix, bias=True):
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    w = {prefix + "embed_in.weight": rand(g, V, E, scale=1.0), prefix + "final_layer_norm.weight": torch.ones(E),
         prefix + "final_layer_norm.bias": torch.zeros(E), "embed_out.weight": rand(g, V, E)}
    for l in range(L):
        p = f"{prefix}layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[p + n + ".weight"] = 1 + rand(g, E, scale=0.1)
            w[p + n + ".bias"] = rand(g, E, scale=0.1)
        w[p + "attention.query_key_value.weight"] = rand(g, 3 * E, E)
        w[p + "attention.dense.weight"] = rand(g, E, E)
        if bias:  # nn.Linear(bias=config.attention_bias)
            w[p + "attention.query_key_value.bias"] = rand(g, 3 * E, scale=0.2)
            w[p + "attention.dense.bias"] = rand(g, E, scale=0.2)
        w[p + "mlp.dense_h_to_4h.weight"] = rand(g, I, E)
        w[p + "mlp.dense_h_to_4h.bias"] = rand(g, I, scale=0.2)
        w[p + "mlp.dense_4h_to_h.weight"] = rand(g, E, I)
        w[p + "mlp.dense_4h_to_h.bias"] = rand(g, E, scale=0.2)
    return w


def neox_reference(w, cfg, prefix, ids, qk):
    W = {k: v.to(DT) for k, v in w.items()}
    E, H, L, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
    rp = cfg.get("rope_parameters") or {}
    theta = cfg.get("rotary_emb_base", rp.get("rope_theta", 10000.0))
    pct = cfg.get("rotary_pct", rp.get("partial_rotary_factor", 0.25))
    parallel = cfg.get("use_parallel_residual", True)
    D, T = E // H, len(ids)
    R = int(D * pct)  # GPTNeoXAttention.rotary_ndims
    inv_freq = 1.0 / (theta ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R))
    cos, sin = rope_tables(inv_freq, 1.0, T)
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (E,), W[n + ".weight"], W[n + ".bias"], eps)
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    mlp = lambda x, p: lin(torch.nn.functional.gelu(lin(x, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
    allowed = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    x = W[prefix + "embed_in.weight"][ids]
    hs, xn_all, weights, outs = [x], [], [], []
    for l in range(L):
        p = f"{prefix}layers.{l}."
        xn = ln(x, p + "input_layernorm")
        # query_key_value(x).view(T, H, 3·D).transpose, then chunk(3) per head.
        qkv = lin(xn, p + "attention.query_key_value").view(T, H, 3 * D).transpose(0, 1)
        q, k, v = qkv.chunk(3, dim=-1)
        q, k = apply_rope(q, cos, sin, R), apply_rope(k, cos, sin, R)
        qk.append((q, k))
        a = causal_softmax(q, k, allowed, D)
        o = lin((a @ v).transpose(0, 1).reshape(T, E), p + "attention.dense")
        if parallel:
            x = mlp(ln(x, p + "post_attention_layernorm"), p) + o + x
        else:
            h = o + x
            x = mlp(ln(h, p + "post_attention_layernorm"), p) + h
        xn_all.append(xn), weights.append(a), outs.append(o), hs.append(x)
    return hs, xn_all, weights, outs


# ---------------------------------------------------------------------------- Phi-3

def phi3_weights(g, cfg, prefix):
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = E // H
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "norm.weight": torch.ones(E),
         "lm_head.weight": rand(g, V, E)}
    for l in range(L):
        p = f"{prefix}layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "self_attn.qkv_proj.weight"] = rand(g, (H + 2 * Hkv) * D, E)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        w[p + "post_attention_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "mlp.gate_up_proj.weight"] = rand(g, 2 * I, E)
        w[p + "mlp.down_proj.weight"] = rand(g, E, I)
    return w


def phi3_reference(w, cfg, prefix, ids, qk):
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D, T = E // H, len(ids)
    R = int(D * cfg.get("partial_rotary_factor", 1.0))
    rs = cfg.get("rope_scaling")
    if rs:
        # Phi-3 keeps original_max_position_embeddings at the top level of its config.
        inv_freq, factor = rope_inv_freq(dict(cfg, rope_scaling=dict(rs, original_max_position_embeddings=cfg["original_max_position_embeddings"])), R, T)
    else:
        inv_freq, factor = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R)), 1.0
    cos, sin = rope_tables(inv_freq, factor, T)
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"])
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = ki <= qi
    if cfg.get("sliding_window"):
        allowed = allowed & (ki > qi - cfg["sliding_window"])  # sliding_window_overlay: kv_idx > q_idx − W
    x = W[prefix + "embed_tokens.weight"][ids]
    hs, xn_all, weights, outs = [x], [], [], []
    for l in range(L):
        p = f"{prefix}layers.{l}."
        xn = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        qkv = lin(xn, p + "self_attn.qkv_proj")
        q = qkv[:, :H * D].view(T, H, D).transpose(0, 1)
        k = qkv[:, H * D:(H + Hkv) * D].view(T, Hkv, D).transpose(0, 1)
        v = qkv[:, (H + Hkv) * D:].view(T, Hkv, D).transpose(0, 1)
        q, k = apply_rope(q, cos, sin, R), apply_rope(k, cos, sin, R)
        qk.append((q, k))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        a = causal_softmax(q, k, allowed, D)
        o = lin((a @ v).transpose(0, 1).reshape(T, H * D), p + "self_attn.o_proj")
        h = x + o
        gate, up = lin(rms_norm(h, W[p + "post_attention_layernorm.weight"], eps), p + "mlp.gate_up_proj").chunk(2, dim=-1)
        x = h + lin(up * torch.nn.functional.silu(gate), p + "mlp.down_proj")
        xn_all.append(xn), weights.append(a), outs.append(o), hs.append(x)
    return hs, xn_all, weights, outs


# ---------------------------------------------------------------------------- cases

def write_case(name, cfg, w, cases):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    for file, (reference, ids) in cases.items():
        qk = []
        write_npz(os.path.join(d, file), with_qk(ids, reference(ids, qk), qk))


def main():
    g = torch.Generator().manual_seed(51)
    ids = [0, 3, 5, 7, 11, 13, 17, 19]

    neox_cfg = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 32,
                "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 64,
                "max_position_embeddings": 64, "layer_norm_eps": 1e-5, "hidden_act": "gelu", "rotary_pct": 0.5,
                "rotary_emb_base": 500, "use_parallel_residual": True, "attention_bias": True,
                "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 0}
    w = neox_weights(g, neox_cfg, "gpt_neox.")
    write_case("gpt-neox-tiny", neox_cfg, w,
               {"expected.npz": (lambda i, qk: neox_reference(w, neox_cfg, "gpt_neox.", i, qk), ids)})

    seq_cfg = {k: v for k, v in neox_cfg.items() if k not in ("rotary_pct", "rotary_emb_base")}
    seq_cfg.update(use_parallel_residual=False, attention_bias=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})
    ws = neox_weights(g, seq_cfg, "", bias=False)
    write_case("gpt-neox-sequential-tiny", seq_cfg, ws,
               {"expected.npz": (lambda i, qk: neox_reference(ws, seq_cfg, "", i, qk), ids)})

    phi_cfg = {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "hidden_size": 32, "num_attention_heads": 4,
               "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 64,
               "max_position_embeddings": 64, "original_max_position_embeddings": 64, "rms_norm_eps": 1e-5,
               "rope_theta": 10000.0, "rope_scaling": None, "partial_rotary_factor": 0.75, "sliding_window": 5,
               "hidden_act": "silu", "tie_word_embeddings": False}
    wp = phi3_weights(g, phi_cfg, "model.")
    write_case("phi3-tiny", phi_cfg, wp, {"expected.npz": (lambda i, qk: phi3_reference(wp, phi_cfg, "model.", i, qk), ids)})

    # longrope as Phi-3-mini-128k writes it: factors per rotary frequency, the original length
    # at the top level, no factor (max_position_embeddings / original = 4: attention factor
    # √(1 + ln 4 / ln 16)). T = 8 ≤ 16 reads short_factor, T = 24 > 16 long_factor.
    long_cfg = dict(phi_cfg, num_key_value_heads=1, partial_rotary_factor=1.0, sliding_window=None,
                    original_max_position_embeddings=16,
                    rope_scaling={"type": "longrope", "short_factor": [1.0, 1.25, 1.5, 2.0], "long_factor": [1.5, 3.0, 6.0, 12.0]})
    wl = phi3_weights(g, long_cfg, "model.")
    long_ids = [(7 * i + 3) % 64 for i in range(24)]
    reference = lambda i, qk: phi3_reference(wl, long_cfg, "model.", i, qk)
    write_case("phi3-longrope-tiny", long_cfg, wl, {"expected.npz": (reference, ids), "expected-long.npz": (reference, long_ids)})


if __name__ == "__main__":
    main()
