#!/usr/bin/python3
"""Tiny random checkpoints of the qwen3, qwen3_moe and olmo2 families (docs/design.md
§5.2) and what an independent implementation computes from them, written here in
PyTorch from Hugging Face transformers' modeling code (eager attention), in float64,
sharing nothing with attn:

  Qwen3      models/qwen3/modeling_qwen3.py: Qwen3DecoderLayer (RMSNorm input_layernorm,
             attention, residual, RMSNorm post_attention_layernorm, SiLU-gated MLP,
             residual); Qwen3Attention: q_proj, k_proj, v_proj (bias = attention_bias),
             q_norm / k_norm = Qwen3RMSNorm(head_dim) on q_proj(x).view(…, head_dim),
             i.e. per head, BEFORE apply_rotary_pos_emb; explicit head_dim (≠ hidden /
             heads here); scaling head_dim^−½; repeat_kv; sliding window (kv_idx > q_idx − W)
             on the layers Qwen3Config.layer_types names: use_sliding_window and
             i ≥ max_window_layers.
  Qwen3-MoE  models/qwen3_moe/modeling_qwen3_moe.py: Qwen3 attention; Qwen3MoeDecoderLayer
             takes Qwen3MoeSparseMoeBlock when layer ∉ mlp_only_layers and
             (layer + 1) % decoder_sparse_step == 0, else Qwen3MoeMLP(intermediate_size);
             the sparse block: router logits gate(x), softmax over all experts, top-k,
             divided by their sum when norm_topk_prob, Σ weight · expert(x) with experts
             Qwen3MoeMLP(moe_intermediate_size), checkpoint names mlp.gate.weight and
             mlp.experts.{e}.{gate,up,down}_proj.weight.
  OLMo 2     models/olmo2/modeling_olmo2.py: Olmo2DecoderLayer has no pre-attention norm:
             h = x + post_attention_layernorm(attn(x)); out = h +
             post_feedforward_layernorm(mlp(h)); Olmo2Attention: q_norm = RMSNorm(H·D),
             k_norm = RMSNorm(Hkv·D) over the WHOLE projection, before the head split and
             RoPE.

Cases (tests/fixtures/checkpoints/<name>/: config.json as transformers writes it,
model.safetensors with HF's names under "model.", expected.npz):

  qwen3-tiny          3 layers, 4 heads, 2 KV heads, head_dim 16 (hidden 32), sliding
                      window 3 on layer 2 (use_sliding_window, max_window_layers 2)
  qwen3-moe-tiny      3 layers, 4 experts, top-2, norm_topk_prob, mlp_only_layers [1]
                      (layers 0 and 2 sparse, layer 1 dense)
  qwen3-moe-step-tiny 3 layers, 4 experts, top-2, no norm_topk_prob, decoder_sparse_step 2
                      (layer 1 sparse, layers 0 and 2 dense)
  olmo2-tiny          2 layers, 4 heads, 2 KV heads

expected.npz: ids (T,), hidden_states (L+1, T, E), x_layer1 (T, E), x_norm (L, T, E)
(what q/k/v_proj see: OLMo 2's is x itself), weights (L, H, T, T), output (L, T, E) (after
o_proj), rollout (T, T), q and k after the norm and RoPE (L, T, H·D) and (L, T, Hkv·D),
and q_proj and k_proj, the projections before any norm and RoPE (docs/design.md §5.2),
in the same layout.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_qwen_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import torch

from fixture_npz import write_npz
from make_checkpoint_fixtures import FIX, DT, expected, rand, rms_norm, rotate_half, safetensors_bytes, write, write_json, write_config

IDS = [1, 3, 4, 5, 6, 7, 8, 9]


def qwen3_weights(g, cfg, prefix, layer_norms):
    """Qwen3 / Qwen3-MoE / OLMo 2 tensors under HF's names. layer_norms names the block's
    RMSNorms (input_layernorm + post_attention_layernorm, or OLMo 2's post_attention_ and
    post_feedforward_layernorm); the q/k norm weights are (D,) for Qwen3, (H·D,) and
    (Hkv·D,) for OLMo 2 (cfg["model_type"])."""
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", E // H)
    olmo = cfg["model_type"] == "olmo2"
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "norm.weight": torch.ones(E)}
    for l in range(L):
        p = f"{prefix}layers.{l}."
        for n in layer_norms:
            w[p + n + ".weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
        w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        # Weights far from 1, so that a norm applied at the wrong place or width shows.
        w[p + "self_attn.q_norm.weight"] = 1 + rand(g, H * D if olmo else D, scale=0.5)
        w[p + "self_attn.k_norm.weight"] = 1 + rand(g, Hkv * D if olmo else D, scale=0.5)
        if sparse_layer(cfg, l):
            X, Im = cfg["num_experts"], cfg["moe_intermediate_size"]
            w[p + "mlp.gate.weight"] = rand(g, X, E, scale=1.0)
            for e in range(X):
                w[p + f"mlp.experts.{e}.gate_proj.weight"] = rand(g, Im, E)
                w[p + f"mlp.experts.{e}.up_proj.weight"] = rand(g, Im, E)
                w[p + f"mlp.experts.{e}.down_proj.weight"] = rand(g, E, Im)
        else:
            w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
            w[p + "mlp.up_proj.weight"] = rand(g, I, E)
            w[p + "mlp.down_proj.weight"] = rand(g, E, I)
    return w


def sparse_layer(cfg, l):
    # Qwen3MoeDecoderLayer.__init__
    if cfg["model_type"] != "qwen3_moe":
        return False
    return l not in (cfg.get("mlp_only_layers") or []) and cfg["num_experts"] > 0 and (l + 1) % cfg.get("decoder_sparse_step", 1) == 0


def sliding_layers(cfg):
    # Qwen3Config.__post_init__: sliding_window only with use_sliding_window; layer_types
    # from max_window_layers when not given. Qwen3MoeAttention: the window on every layer.
    if not cfg.get("use_sliding_window", False) or cfg.get("sliding_window") is None:
        return ()
    L = cfg["num_hidden_layers"]
    if cfg["model_type"] == "qwen3_moe":
        return tuple(range(L))
    types = cfg.get("layer_types") or ["sliding_attention" if i >= cfg.get("max_window_layers", 28) else "full_attention" for i in range(L)]
    return tuple(i for i, t in enumerate(types) if t == "sliding_attention")


def mlp(W, p, x):
    # Qwen3MLP / Qwen3MoeMLP / Olmo2MLP: down_proj(silu(gate_proj(x)) * up_proj(x))
    lin = lambda t, n: torch.nn.functional.linear(t, W[p + n + ".weight"])
    return lin(torch.nn.functional.silu(lin(x, "gate_proj")) * lin(x, "up_proj"), "down_proj")


def sparse_moe(W, p, cfg, x):
    # Qwen3MoeSparseMoeBlock.forward: softmax over all experts (float; float64 here), top-k,
    # renormalised when norm_topk_prob, the chosen experts' outputs weighted and summed.
    logits = torch.nn.functional.linear(x, W[p + "mlp.gate.weight"])
    probs = torch.softmax(logits, dim=-1)
    weights, chosen = torch.topk(probs, cfg["num_experts_per_tok"], dim=-1)
    if cfg.get("norm_topk_prob", False):
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(chosen.shape[1]):
            e = int(chosen[t, j])
            out[t] += weights[t, j] * mlp(W, p + f"mlp.experts.{e}.", x[t:t + 1])[0]
    return out


def reference(w, cfg, prefix, ids):
    """hidden_states, x_norm, weights, output per layer, and q_proj, k_proj, q, k (T, heads·D)."""
    W = {k: v.to(DT) for k, v in w.items()}
    E, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    eps = cfg.get("rms_norm_eps", 1e-5)  # Olmo2Config's default (this case leaves it out)
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", E // H)
    T = len(ids)
    olmo = cfg["model_type"] == "olmo2"
    # Qwen3RotaryEmbedding / Olmo2RotaryEmbedding compute_default_rope_parameters: dim = head_dim
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).to(DT) / D))
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    sliding, window = sliding_layers(cfg), cfg.get("sliding_window")
    x = W[prefix + "embed_tokens.weight"][ids]
    hs, xn_all, weights, outs = [x], [], [], []
    extra = {"q_proj": [], "k_proj": [], "q": [], "k": []}
    for l in range(L):
        p = f"{prefix}layers.{l}."
        a = p + "self_attn."
        xn = x if olmo else rms_norm(x, W[p + "input_layernorm.weight"], eps)
        qp, kp, v = lin(xn, a + "q_proj"), lin(xn, a + "k_proj"), lin(xn, a + "v_proj")
        if olmo:
            # Olmo2Attention: q_norm(q_proj(x)) over H·D, then view(…, head_dim)
            q = rms_norm(qp, W[a + "q_norm.weight"], eps).view(T, H, D).transpose(0, 1)
            k = rms_norm(kp, W[a + "k_norm.weight"], eps).view(T, Hkv, D).transpose(0, 1)
        else:
            # Qwen3Attention: q_norm(q_proj(x).view(…, head_dim)), per head over D
            q = rms_norm(qp.view(T, H, D), W[a + "q_norm.weight"], eps).transpose(0, 1)
            k = rms_norm(kp.view(T, Hkv, D), W[a + "k_norm.weight"], eps).transpose(0, 1)
        v = v.view(T, Hkv, D).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin  # apply_rotary_pos_emb
        k = k * cos + rotate_half(k) * sin
        extra["q_proj"].append(qp), extra["k_proj"].append(kp)
        extra["q"].append(q.transpose(0, 1).reshape(T, H * D)), extra["k"].append(k.transpose(0, 1).reshape(T, Hkv * D))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        allowed = ki <= qi
        if l in sliding:
            allowed = allowed & (ki > qi - window)
        s = q @ k.transpose(-1, -2) * D ** -0.5
        s = torch.where(allowed, s, torch.finfo(DT).min)
        att = torch.softmax(s, dim=-1)
        o = lin((att @ v).transpose(0, 1).reshape(T, H * D), a + "o_proj")
        if olmo:
            h = x + rms_norm(o, W[p + "post_attention_layernorm.weight"], eps)
            x_next = h + rms_norm(mlp(W, p + "mlp.", h), W[p + "post_feedforward_layernorm.weight"], eps)
        else:
            h = x + o
            n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
            x_next = h + (sparse_moe(W, p, cfg, n) if sparse_layer(cfg, l) else mlp(W, p + "mlp.", n))
        xn_all.append(xn), weights.append(att), outs.append(o), hs.append(x_next)
        x = x_next
    return (hs, xn_all, weights, outs), {n: torch.stack(t).numpy() for n, t in extra.items()}


def write_case(name, cfg, w):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    result, extra = reference(w, cfg, "model.", IDS)
    e = expected(IDS, result)
    e.update(extra)
    write_npz(os.path.join(d, "expected.npz"), e)


def main():
    g = torch.Generator().manual_seed(31)
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
            "vocab_size": 64, "max_position_embeddings": 64, "hidden_act": "silu", "attention_bias": False,
            "attention_dropout": 0.0, "tie_word_embeddings": False, "use_cache": True, "initializer_range": 0.02}

    qwen3_cfg = dict(base, model_type="qwen3", architectures=["Qwen3ForCausalLM"], num_hidden_layers=3, head_dim=16,
                     rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None, use_sliding_window=True,
                     sliding_window=3, max_window_layers=2, torch_dtype="float32")
    write_case("qwen3-tiny", qwen3_cfg, qwen3_weights(g, qwen3_cfg, "model.", ("input_layernorm", "post_attention_layernorm")))

    moe = dict(base, model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], num_hidden_layers=3, head_dim=8,
               rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None, use_sliding_window=False,
               sliding_window=None, max_window_layers=3, num_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=16, output_router_logits=False, router_aux_loss_coef=0.001,
               torch_dtype="float32")
    for name, extra in (("qwen3-moe-tiny", {"norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [1]}),
                        ("qwen3-moe-step-tiny", {"norm_topk_prob": False, "decoder_sparse_step": 2, "mlp_only_layers": []})):
        cfg = dict(moe, **extra)
        write_case(name, cfg, qwen3_weights(g, cfg, "model.", ("input_layernorm", "post_attention_layernorm")))

    olmo2_cfg = dict(base, model_type="olmo2", architectures=["Olmo2ForCausalLM"], num_hidden_layers=2,
                     rope_theta=500000.0, rope_scaling=None, pad_token_id=1, eos_token_id=50279, torch_dtype="float32")
    write_case("olmo2-tiny", olmo2_cfg, qwen3_weights(g, olmo2_cfg, "model.", ("post_attention_layernorm", "post_feedforward_layernorm")))


if __name__ == "__main__":
    main()
