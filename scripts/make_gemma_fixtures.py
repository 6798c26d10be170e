#!/usr/bin/python3
"""Tiny random Gemma, Gemma 2 and Gemma 3 (text) checkpoints (docs/design.md §5.2), and what
an independent implementation computes from them, written here in PyTorch from Hugging Face
transformers' modeling code (transformers is not installed on this machine; the forward
passes below follow it line by line and share nothing with attn):

  gemma        models/gemma/modeling_gemma.py: GemmaRMSNorm (float32, x·rsqrt(mean(x²) + eps)
               ·(1 + w), cast back), embeddings × torch.tensor(√hidden, dtype=hidden dtype),
               GemmaAttention (q/k/v_proj, RoPE rotate_half, repeat_kv, causal,
               scaling head_dim^−½, o_proj), pre-norm GemmaDecoderLayer, GemmaMLP
               down(act(gate x)·up x) with ACT2FN[config.hidden_act]
  gemma2       models/gemma2/modeling_gemma2.py: scaling query_pre_attn_scalar^−½;
               eager_attention_forward's softcap (scores / c, tanh, × c) BEFORE the mask;
               sliding window (create_sliding_window_causal_mask: kv_idx > q_idx − W) on the
               layers config.layer_types names, by default "sliding_attention" when
               (i + 1) % 2 (the even layers); Gemma2DecoderLayer's sandwich norms
               (post_attention_layernorm on the attention output, pre_feedforward_layernorm
               and post_feedforward_layernorm around the MLP); ACT2FN[config.hidden_activation]
  gemma3_text  models/gemma3/modeling_gemma3.py: Gemma3Attention adds q_norm/k_norm
               (Gemma3RMSNorm(head_dim), (1 + w), per head) before RoPE and passes no
               softcap; layer_types by default "sliding_attention" when
               (i + 1) % sliding_window_pattern; Gemma3TextModel's two rotary embeddings:
               global (full_attention) from rope_theta with rope_scaling, local
               (sliding_attention) from rope_local_base_freq with rope_type default
               (transformers v5: rope_parameters["full_attention"] / ["sliding_attention"]);
               Gemma3TextScaledWordEmbedding: × torch.tensor(√hidden) — a float32 tensor —
               .to(weight dtype)

Cases (tests/fixtures/checkpoints/): gemma-tiny (2 layers, GQA 4:2), gemma2-tiny (3 layers,
layers 0 and 2 sliding with W = 4 at T = 8, softcap 5), gemma3-tiny (4 layers,
sliding_window_pattern 3: layers 0, 1, 3 local, 2 global; rope_scaling linear 8 on the
global layer), gemma3-rope-parameters-tiny (the v5 config form: layer_types and
rope_parameters per layer type), gemma3-conditional-tiny (the gemma3-tiny weights as
Gemma3ForConditionalGeneration stores them: model_type gemma3, text_config, names under
language_model.model.; its reference is gemma3-tiny's). Each holds config.json,
model.safetensors (HF names) and expected.npz: ids (T,), hidden_states (L+1, T, E) (before
the final norm), x_layer1 (T, E), x_norm (L, T, E), weights (L, H, T, T), output (L, T, E)
(after o_proj, before post_attention_layernorm), rollout (T, T), and q, k after RoPE
(L, T, H·D) and (L, T, Hkv·D).

Everything is float64 except what transformers computes in float32 whatever the model's
dtype: GemmaRMSNorm (x.float(), w.float()) and Gemma 3's embedding scale (a float32 tensor).
RoPE tables are float64 (transformers builds them in float32), as every reference here.
One liberty in the norm: the mean of the float32 squares is their float64 sum rounded once
to float32 (the correctly rounded float32 mean); torch's float32 reduction sums in an order
of its own and lands one ulp away in about a third of rows. The script checks that the two
stay within 1e-6 of each other.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_gemma_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import torch
import torch.nn.functional as F

from fixture_npz import write_npz
from make_checkpoint_fixtures import FIX, expected, rand, rope_inv_freq, rotate_half, safetensors_bytes, write, write_json, write_config

DT = torch.float64


def gemma_rms_norm(x, w, eps):
    """GemmaRMSNorm.forward (Gemma2RMSNorm, Gemma3RMSNorm are the same): computed in
    float32, (1 + w), cast back to x's dtype."""
    xf = x.float()
    # _norm: x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps); the mean rounded once (see above)
    sq = xf.pow(2)
    mean = (sq.to(torch.float64).sum(-1, keepdim=True) / sq.shape[-1]).to(torch.float32)
    torch_mean = sq.mean(-1, keepdim=True)
    assert torch.allclose(mean, torch_mean, rtol=1e-6, atol=0), "float32 mean beyond an ulp"
    out = xf * torch.rsqrt(mean + eps)
    out = out * (1.0 + w.float())
    return out.type_as(x)


def gelu_tanh(v):
    # transformers.activations: gelu_pytorch_tanh
    return F.gelu(v, approximate="tanh")


ACT = {"gelu_pytorch_tanh": gelu_tanh, "gelu": F.gelu, "silu": F.silu}


def gemma_weights(g, cfg, prefix, sandwich, qk_norm):
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    # Norm weights around 0: the norm multiplies by 1 + w (Gemma*RMSNorm initialises w to 0).
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=0.5), prefix + "norm.weight": rand(g, E, scale=0.1)}
    for l in range(L):
        p = f"{prefix}layers.{l}."
        w[p + "input_layernorm.weight"] = rand(g, E, scale=0.3)
        w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
        w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        if qk_norm:
            w[p + "self_attn.q_norm.weight"] = rand(g, D, scale=0.3)
            w[p + "self_attn.k_norm.weight"] = rand(g, D, scale=0.3)
        w[p + "post_attention_layernorm.weight"] = rand(g, E, scale=0.3)
        if sandwich:
            w[p + "pre_feedforward_layernorm.weight"] = rand(g, E, scale=0.3)
            w[p + "post_feedforward_layernorm.weight"] = rand(g, E, scale=0.3)
        w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
        w[p + "mlp.up_proj.weight"] = rand(g, I, E)
        w[p + "mlp.down_proj.weight"] = rand(g, E, I)
    return w


def rope_tables(rope_cfg, D, T):
    """cos, sin (T, D) of one rotary embedding: rope_cfg holds rope_theta, max_position_embeddings
    and optionally rope_scaling (modeling_rope_utils via make_checkpoint_fixtures.rope_inv_freq)."""
    if rope_cfg.get("rope_scaling"):
        inv_freq, factor = rope_inv_freq(rope_cfg, D, T)
    else:
        inv_freq = 1.0 / (rope_cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).to(DT) / D))
        factor = 1.0
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def gemma_reference(w, cfg, prefix, ids, kind, layer_types=(), rope_global=None, rope_local=None, qk=None):
    """kind: gemma, gemma2, gemma3. layer_types: per layer "sliding_attention" or
    "full_attention" (gemma: all full). rope_global / rope_local: {rope_theta, rope_scaling,
    max_position_embeddings} of the two rotary embeddings (gemma, gemma2: one)."""
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    T = len(ids)
    act = ACT[cfg["hidden_act"] if kind == "gemma" else cfg["hidden_activation"]]
    scaling = D ** -0.5 if kind == "gemma" else cfg["query_pre_attn_scalar"] ** -0.5
    softcap = cfg.get("attn_logit_softcapping") if kind == "gemma2" else None  # Gemma3Attention passes none
    window = cfg.get("sliding_window")
    tables = {"full_attention": rope_tables(rope_global, D, T)}
    tables["sliding_attention"] = rope_tables(rope_local, D, T) if rope_local else tables["full_attention"]
    lin = lambda x, n: F.linear(x, W[n + ".weight"])
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]

    x = W[prefix + "embed_tokens.weight"][ids]
    if kind == "gemma3":
        # Gemma3TextScaledWordEmbedding: embed_scale = torch.tensor(√E) (float32), .to(weight dtype)
        x = x * torch.tensor(E ** 0.5).to(DT)
    else:
        # GemmaModel / Gemma2Model: normalizer = torch.tensor(√E, dtype=hidden_states.dtype)
        x = x * torch.tensor(E ** 0.5, dtype=DT)
    hs, xn_all, weights, outs = [x], [], [], []
    for l in range(L):
        p = f"{prefix}layers.{l}."
        lt = layer_types[l] if layer_types else "full_attention"
        cos, sin = tables[lt]
        xn = gemma_rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(xn, p + "self_attn.q_proj").view(T, H, D).transpose(0, 1)
        k = lin(xn, p + "self_attn.k_proj").view(T, Hkv, D).transpose(0, 1)
        v = lin(xn, p + "self_attn.v_proj").view(T, Hkv, D).transpose(0, 1)
        if kind == "gemma3":
            q = gemma_rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = gemma_rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if qk is not None:
            qk.append((q, k))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        s = q @ k.transpose(-1, -2) * scaling
        if softcap is not None:
            s = s / softcap
            s = torch.tanh(s)
            s = s * softcap
        allowed = ki <= qi
        if lt == "sliding_attention":
            allowed = allowed & (ki > qi - window)  # sliding_window_overlay: kv_idx > q_idx - W
        s = torch.where(allowed, s, torch.finfo(DT).min)
        a = torch.softmax(s, dim=-1)
        o = lin((a @ v).transpose(0, 1).reshape(T, H * D), p + "self_attn.o_proj")
        mlp = lambda n: lin(act(lin(n, p + "mlp.gate_proj")) * lin(n, p + "mlp.up_proj"), p + "mlp.down_proj")
        if kind == "gemma":
            # GemmaDecoderLayer: pre-norm
            h = x + o
            x_next = h + mlp(gemma_rms_norm(h, W[p + "post_attention_layernorm.weight"], eps))
        else:
            # Gemma2DecoderLayer / Gemma3DecoderLayer: sandwich norms
            h = x + gemma_rms_norm(o, W[p + "post_attention_layernorm.weight"], eps)
            m = mlp(gemma_rms_norm(h, W[p + "pre_feedforward_layernorm.weight"], eps))
            x_next = h + gemma_rms_norm(m, W[p + "post_feedforward_layernorm.weight"], eps)
        xn_all.append(xn), weights.append(a), outs.append(o), hs.append(x_next)
        x = x_next
    return hs, xn_all, weights, outs


def write_case(name, cfg, w, ids, result, qk):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    e = expected(ids, result)
    # In the input's layout, as attn dumps q and k: (T, heads·D) per layer.
    e["q"] = torch.stack([q.transpose(0, 1).reshape(len(ids), -1) for q, _ in qk]).numpy()
    e["k"] = torch.stack([k.transpose(0, 1).reshape(len(ids), -1) for _, k in qk]).numpy()
    write_npz(os.path.join(d, "expected.npz"), e)


def main():
    g = torch.Generator().manual_seed(31)
    ids = [2, 5, 9, 14, 3, 27, 40, 63]
    common = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
              "intermediate_size": 64, "vocab_size": 64, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
              "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
              "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32"}

    # Gemma: as google/gemma-*'s config.json (GemmaForCausalLM), hidden_act the MLP reads.
    cfg = dict(common, model_type="gemma", architectures=["GemmaForCausalLM"], num_hidden_layers=2,
               hidden_act="gelu_pytorch_tanh", hidden_activation=None, rope_theta=10000.0, rope_scaling=None)
    w = gemma_weights(g, cfg, "model.", sandwich=False, qk_norm=False)
    qk = []
    rope = {"rope_theta": 10000.0, "max_position_embeddings": 64}
    write_case("gemma-tiny", cfg, w, ids, gemma_reference(w, cfg, "model.", ids, "gemma", rope_global=rope, qk=qk), qk)

    # Gemma 2: no layer_types (the even layers slide), W = 4 < T = 8, a softcap small enough
    # to bend these scores (Gemma 2's own is 50), query_pre_attn_scalar ≠ head_dim.
    cfg = dict(common, model_type="gemma2", architectures=["Gemma2ForCausalLM"], num_hidden_layers=3,
               hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh", rope_theta=10000.0,
               query_pre_attn_scalar=12, sliding_window=4, attn_logit_softcapping=5.0, final_logit_softcapping=30.0,
               cache_implementation="hybrid")
    w = gemma_weights(g, cfg, "model.", sandwich=True, qk_norm=False)
    qk = []
    types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(3)]
    write_case("gemma2-tiny", cfg, w, ids,
               gemma_reference(w, cfg, "model.", ids, "gemma2", layer_types=types, rope_global=rope, qk=qk), qk)

    # Gemma 3 (text), config as transformers 4.50 wrote it: sliding_window_pattern 3 (layers
    # 0, 1 and 3 local, 2 global), rope_scaling linear 8 on the global layers, local layers
    # on rope_local_base_freq unscaled.
    cfg3 = dict(common, model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], num_hidden_layers=4,
                hidden_activation="gelu_pytorch_tanh", rope_theta=1000000.0, rope_local_base_freq=10000.0,
                rope_scaling={"rope_type": "linear", "factor": 8.0}, query_pre_attn_scalar=10, sliding_window=4,
                sliding_window_pattern=3, attn_logit_softcapping=None, final_logit_softcapping=None,
                cache_implementation="hybrid")
    w3 = gemma_weights(g, cfg3, "model.", sandwich=True, qk_norm=True)
    qk = []
    types = ["sliding_attention" if (i + 1) % 3 else "full_attention" for i in range(4)]
    rope_global = {"rope_theta": 1000000.0, "max_position_embeddings": 64, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    rope_local = {"rope_theta": 10000.0, "max_position_embeddings": 64}
    result3 = gemma_reference(w3, cfg3, "model.", ids, "gemma3", layer_types=types, rope_global=rope_global,
                              rope_local=rope_local, qk=qk)
    write_case("gemma3-tiny", cfg3, w3, ids, result3, qk)

    # The same weights as Gemma3ForConditionalGeneration stores them (model_type gemma3, the
    # text model's config under text_config, its tensors under language_model.model.).
    d = os.path.join(FIX, "gemma3-conditional-tiny")
    text = {k: v for k, v in cfg3.items() if k not in ("architectures", "torch_dtype")}
    mm = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
          "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 16, "image_size": 28, "patch_size": 14,
                            "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 32},
          "mm_tokens_per_image": 4, "boi_token_index": 60, "eoi_token_index": 61, "image_token_index": 62,
          "torch_dtype": "float32"}
    write(os.path.join(d, "model.safetensors"),
          safetensors_bytes({"language_model." + k: v for k, v in w3.items()}, {"format": "pt"}))
    write_config(d, mm)

    # Gemma 3, config as transformers v5 writes it: layer_types, rope_parameters per layer
    # type (the global one scaled, carrying rope_theta), use_bidirectional_attention false.
    cfg = {k: v for k, v in cfg3.items() if k not in ("rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern")}
    types = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    cfg.update(num_hidden_layers=5, layer_types=types, use_bidirectional_attention=False,
               rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 50000.0},
                                "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}})
    w = gemma_weights(g, cfg, "model.", sandwich=True, qk_norm=True)
    qk = []
    rope_global = {"rope_theta": 50000.0, "max_position_embeddings": 64, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    rope_local = {"rope_theta": 500.0, "max_position_embeddings": 64}
    write_case("gemma3-rope-parameters-tiny", cfg, w, ids,
               gemma_reference(w, cfg, "model.", ids, "gemma3", layer_types=types, rope_global=rope_global,
                               rope_local=rope_local, qk=qk), qk)


if __name__ == "__main__":
    main()
