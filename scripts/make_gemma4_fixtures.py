#!/usr/bin/python3
"""Tiny random Gemma 4 (text) checkpoints (docs/design.md §6.1 row "gemma4"), and what an
independent implementation computes from them, written here in PyTorch from Hugging Face
transformers' models/gemma4/modeling_gemma4.py and configuration_gemma4.py (transformers is
not installed on this machine; the forward below follows Gemma4TextModel's eager path
without a cache line by line and shares nothing with attn):

  Gemma4RMSNorm        x.float() · pow(mean(x²) + eps, −½) · w.float() (no 1 + w), cast back;
                       with_scale=False (v_norm, the router's norm): no weight
  Gemma4TextScaledWordEmbedding  embed_tokens[ids] · torch.tensor(√hidden) (a float32 tensor)
  Gemma4TextRotaryEmbedding      one RoPE per layer type from rope_parameters[type]:
                       "default" over config.head_dim, "proportional" (modeling_rope_utils
                       _compute_proportional_rope_parameters, head_dim_key global_head_dim on
                       full_attention): rope_angles = int(partial_rotary_factor·hd // 2)
                       frequencies 1/θ^(2i/hd), the other hd/2 − rope_angles zero, / factor,
                       rotate_half over the whole head
  Gemma4TextAttention  head_dim global_head_dim on full_attention layers; q_norm, k_norm
                       (weights) and v_norm (none) per head, RoPE after q_norm / k_norm;
                       attention_k_eq_v on full layers: no v_proj, num_global_key_value_heads,
                       v = v_norm(k_proj(x)) (k before k_norm); scaling 1.0; sliding window
                       on sliding_attention layers (kv_idx > q_idx − W); KV sharing: the last
                       num_kv_shared_layers layers take the (k, v) the last non-shared layer of
                       their type stored (store_full_length_kv)
  Gemma4TextDecoderLayer  h = x + post_attention_layernorm(attn(input_layernorm(x)));
                       m = mlp(pre_feedforward_layernorm(h)); with enable_moe_block
                       m = post_feedforward_layernorm_1(m) + post_feedforward_layernorm_2(
                       experts(pre_feedforward_layernorm_2(h), router(h))); out = h +
                       post_feedforward_layernorm(m); with hidden_size_per_layer_input
                       out += post_per_layer_input_norm(per_layer_projection(act(
                       per_layer_input_gate(out)) · per_layer_input)); out ·= layer_scalar
  Gemma4TextRouter     norm(h) (no weight) · scale · hidden^−½, proj, softmax, top-k,
                       renormalised, · per_expert_scale[index]
  Gemma4TextExperts    gate, up = (gate_up_proj[e] x).chunk(2); down_proj[e](act(gate)·up)
  Gemma4TextMLP        use_double_wide_mlp: 2·intermediate_size on the KV-shared layers
  per-layer inputs     get_per_layer_inputs: embed_tokens_per_layer[ids] · √ple (float32
                       tensor), (T, L, ple); project_per_layer_inputs:
                       per_layer_projection_norm(per_layer_model_projection(embeds) ·
                       hidden^−½ viewed (T, L, ple)), (that + the lookup) · 2^−½

Cases (tests/fixtures/checkpoints/): gemma4-tiny (dense: sliding, full, sliding, full;
head_dim 8, global_head_dim 16, attention_k_eq_v with 1 global KV head, W = 3 at T = 7,
proportional RoPE 0.25 on the full layers, layer_scalar ≠ 1), gemma4-kv-shared-tiny (5
layers, the last 2 KV-shared, use_double_wide_mlp, v_proj on every non-shared layer),
gemma4-moe-tiny (enable_moe_block, 4 experts top-2; the script asserts a margin between the
top-k and the rest), gemma4-ple-tiny (hidden_size_per_layer_input 8), gemma4-conditional-tiny
(gemma4-tiny's weights as Gemma4ForConditionalGeneration stores them: model_type gemma4,
text_config, names under model.language_model., and vision tensors attn must ignore; its
reference is gemma4-tiny's). Each (but the conditional) holds config.json, model.safetensors
(HF names) and expected.npz: ids (T,), hidden_states (L+1, T, E), x (L, T, E) entering each
layer, x_norm (L, T, E), weights (L, H, T, T), output (L, T, E) (after o_proj), and per layer
l (their widths differ between layer types): q_proj_l, k_proj_l (before the norms), q_l, k_l
(after norm and RoPE), v_l (after v_norm), each (T, heads·D); a shared layer's k_proj, k, v
are its source layer's. gemma4-tiny also holds weights_partial_rope: layer 1's weights when
its RoPE rotates the first 2·rope_angles dims as ordinary partial RoPE does (a wrong
convention attn must not match).

Everything is float64 except what transformers computes in float32 whatever the model's
dtype: Gemma4RMSNorm (x.float(), w.float()) and the embedding scales (float32 tensors).
RoPE tables are float64 (transformers builds them in float32), as every reference here.
Two liberties in the norm, as make_gemma_fixtures.py takes one: the mean of the float32
squares is their float64 sum rounded once to float32, and pow(s, −½) is 1/sqrt(s) in
float32; the script checks both against torch's own float32 ops within 1e-6.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_gemma4_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import copy
import os

import numpy as np
import torch
import torch.nn.functional as F

from fixture_npz import write_npz
from make_checkpoint_fixtures import FIX, rand, rotate_half, safetensors_bytes, write, write_json, write_config

DT = torch.float64


def norm4(x, w, eps):
    """Gemma4RMSNorm.forward: float32, x · pow(mean(x²) + eps, −½) · w (w None: with_scale False)."""
    xf = x.float()
    sq = xf.pow(2)
    mean = (sq.to(torch.float64).sum(-1, keepdim=True) / sq.shape[-1]).to(torch.float32)
    assert torch.allclose(mean, sq.mean(-1, keepdim=True), rtol=1e-6, atol=0), "float32 mean beyond an ulp"
    s = mean + eps
    inv = 1.0 / torch.sqrt(s)
    assert torch.allclose(inv, torch.pow(s, -0.5), rtol=1e-6, atol=0), "1/sqrt and pow(-0.5) beyond an ulp"
    out = xf * inv
    if w is not None:
        out = out * w.float()
    return out.type_as(x)


def gelu_tanh(v):
    return F.gelu(v, approximate="tanh")


def layer_types_of(cfg):
    return cfg["layer_types"]


def is_shared(cfg, l):
    first = cfg["num_hidden_layers"] - cfg.get("num_kv_shared_layers", 0)
    return l >= first >= 0 and cfg.get("num_kv_shared_layers", 0) > 0


def stores_kv(cfg, l):
    """Gemma4TextAttention.store_full_length_kv: the last non-shared layer of its type."""
    if is_shared(cfg, l):
        return False
    first = cfg["num_hidden_layers"] - cfg.get("num_kv_shared_layers", 0)
    prev = cfg["layer_types"][:first]
    return l == len(prev) - 1 - prev[::-1].index(cfg["layer_types"][l])


def dims(cfg, l):
    """(head_dim, kv heads, k_eq_v) of layer l."""
    full = cfg["layer_types"][l] == "full_attention"
    D = cfg["global_head_dim"] if full and cfg.get("global_head_dim") else cfg["head_dim"]
    alt = cfg.get("attention_k_eq_v", False) and full
    return D, cfg["num_global_key_value_heads"] if alt else cfg["num_key_value_heads"], alt


def weights_of(g, cfg):
    E, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    one = lambda *s: 1.0 + rand(g, *s, scale=0.3)  # Gemma4RMSNorm multiplies by w (initialised to 1)
    w = {"model.embed_tokens.weight": rand(g, V, E, scale=0.5), "model.norm.weight": one(E)}
    P = cfg.get("hidden_size_per_layer_input") or 0
    if P:
        w["model.embed_tokens_per_layer.weight"] = rand(g, cfg["vocab_size_per_layer_input"], L * P, scale=0.5)
        w["model.per_layer_model_projection.weight"] = rand(g, L * P, E)
        w["model.per_layer_projection_norm.weight"] = one(P)
    for l in range(L):
        p = f"model.layers.{l}."
        D, Hkv, alt = dims(cfg, l)
        I = cfg["intermediate_size"] * (2 if cfg.get("use_double_wide_mlp") and is_shared(cfg, l) else 1)
        w[p + "input_layernorm.weight"] = one(E)
        w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
        w[p + "self_attn.q_norm.weight"] = one(D)
        if not is_shared(cfg, l):
            w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
            w[p + "self_attn.k_norm.weight"] = one(D)
            if not alt:
                w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        for n in ("post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            w[p + n + ".weight"] = one(E)
        w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
        w[p + "mlp.up_proj.weight"] = rand(g, I, E)
        w[p + "mlp.down_proj.weight"] = rand(g, E, I)
        w[p + "layer_scalar"] = 0.75 + 0.5 * torch.rand(1, generator=g, dtype=torch.float32)
        if cfg.get("enable_moe_block"):
            X, M = cfg["num_experts"], cfg["moe_intermediate_size"]
            w[p + "router.proj.weight"] = rand(g, X, E, scale=1.0)
            w[p + "router.scale"] = one(E)
            w[p + "router.per_expert_scale"] = one(X)
            w[p + "experts.gate_up_proj"] = rand(g, X, 2 * M, E)
            w[p + "experts.down_proj"] = rand(g, X, E, M)
            for n in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2", "pre_feedforward_layernorm_2"):
                w[p + n + ".weight"] = one(E)
        if P:
            w[p + "per_layer_input_gate.weight"] = rand(g, P, E)
            w[p + "per_layer_projection.weight"] = rand(g, E, P)
            w[p + "post_per_layer_input_norm.weight"] = one(E)
    return w


def inv_freq_of(cfg, layer_type, partial_as_ordinary=False):
    """Gemma4TextRotaryEmbedding's inv_freq (hd/2,) of one layer type, in float64."""
    rp = cfg["rope_parameters"][layer_type]
    theta = rp["rope_theta"]
    if rp["rope_type"] == "default":
        dim = cfg["head_dim"]  # compute_default_rope_parameters: config.head_dim
        return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(DT) / dim))
    assert rp["rope_type"] == "proportional"
    hd = cfg["global_head_dim"] if layer_type == "full_attention" else cfg["head_dim"]
    angles = int(rp.get("partial_rotary_factor", 1.0) * hd // 2)
    if partial_as_ordinary:
        # The wrong convention: ordinary partial RoPE on the first R = 2·angles dims.
        R = 2 * angles
        return 1.0 / (theta ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R)), R
    rot = 1.0 / (theta ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(DT) / hd))
    inv = torch.cat((rot, torch.zeros(hd // 2 - angles, dtype=DT)))
    return inv / rp.get("factor", 1.0)


def rope(x, inv, T):
    """apply_rotary_pos_emb over x's last axis (T, heads, D), rotate_half, positions 0..T−1."""
    freqs = torch.arange(T, dtype=DT)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos()[:, None, :] + rotate_half(x) * emb.sin()[:, None, :]


def reference(w, cfg, ids, wrong=None):
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"], cfg["num_attention_heads"]
    T = len(ids)
    lin = lambda x, n: F.linear(x, W[n + ".weight"])
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    x = W["model.embed_tokens.weight"][ids] * torch.tensor(E ** 0.5).to(DT)
    P = cfg.get("hidden_size_per_layer_input") or 0
    pli = None
    if P:
        look = (W["model.embed_tokens_per_layer.weight"][ids] * torch.tensor(P ** 0.5).to(DT)).reshape(T, L, P)
        proj = (lin(x, "model.per_layer_model_projection") * E ** -0.5).reshape(T, L, P)
        proj = norm4(proj, W["model.per_layer_projection_norm.weight"], eps)
        pli = (proj + look) * 2.0 ** -0.5
    inv = {t: inv_freq_of(cfg, t) for t in set(cfg["layer_types"])}
    out = {"hidden_states": [x], "x": [], "x_norm": [], "weights": [], "output": []}
    shared = {}
    for l in range(L):
        p = f"model.layers.{l}."
        lt = cfg["layer_types"][l]
        D, Hkv, alt = dims(cfg, l)
        xn = norm4(x, W[p + "input_layernorm.weight"], eps)
        qp = lin(xn, p + "self_attn.q_proj").view(T, H, D)
        q = rope(norm4(qp, W[p + "self_attn.q_norm.weight"], eps), inv[lt], T)
        if is_shared(cfg, l):
            kp, k, v = shared[lt]
        else:
            kp = lin(xn, p + "self_attn.k_proj").view(T, Hkv, D)
            vr = kp if alt else lin(xn, p + "self_attn.v_proj").view(T, Hkv, D)
            k = rope(norm4(kp, W[p + "self_attn.k_norm.weight"], eps), inv[lt], T)
            v = norm4(vr, None, eps)
        if stores_kv(cfg, l):
            shared[lt] = (kp, k, v)
        flat = lambda t: t.reshape(T, -1).numpy()
        out[f"q_proj_{l}"], out[f"k_proj_{l}"] = flat(qp), flat(kp)
        out[f"q_{l}"], out[f"k_{l}"], out[f"v_{l}"] = flat(q), flat(k), flat(v)
        kr = k.transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
        vr_ = v.transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
        allowed = ki <= qi
        if lt == "sliding_attention":
            allowed = allowed & (ki > qi - cfg["sliding_window"])

        def attend(qh):
            s = qh @ kr.transpose(-1, -2) * 1.0  # Gemma4TextAttention.scaling
            return torch.softmax(torch.where(allowed, s, torch.finfo(DT).min), dim=-1)

        a = attend(q.transpose(0, 1))
        if wrong is not None and l == wrong["layer"]:
            # The same layer with ordinary partial RoPE on the first R dims of q and k.
            inv_w, R = inv_freq_of(cfg, lt, partial_as_ordinary=True)
            qn = norm4(qp, W[p + "self_attn.q_norm.weight"], eps)
            kn = norm4(kp, W[p + "self_attn.k_norm.weight"], eps)
            qw = torch.cat((rope(qn[..., :R], inv_w, T), qn[..., R:]), dim=-1)
            kw = torch.cat((rope(kn[..., :R], inv_w, T), kn[..., R:]), dim=-1)
            kr_save = kr
            kr = kw.transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
            wrong["weights"] = attend(qw.transpose(0, 1)).numpy()
            kr = kr_save
        o = lin((a @ vr_).transpose(0, 1).reshape(T, H * D), p + "self_attn.o_proj")
        h = x + norm4(o, W[p + "post_attention_layernorm.weight"], eps)
        n = norm4(h, W[p + "pre_feedforward_layernorm.weight"], eps)
        m = lin(gelu_tanh(lin(n, p + "mlp.gate_proj")) * lin(n, p + "mlp.up_proj"), p + "mlp.down_proj")
        if cfg.get("enable_moe_block"):
            m1 = norm4(m, W[p + "post_feedforward_layernorm_1.weight"], eps)
            r = norm4(h, None, eps) * W[p + "router.scale"] * E ** -0.5
            probs = torch.softmax(lin(r, p + "router.proj"), dim=-1)
            K = cfg["top_k_experts"]
            top_w, top_i = torch.topk(probs, k=K, dim=-1)
            srt = torch.sort(probs, dim=-1, descending=True).values
            margin = (srt[:, K - 1] - srt[:, K]).min().item()
            assert margin > 1e-3, f"layer {l}: top-{K} too close to the next expert ({margin})"
            top_w = top_w / top_w.sum(dim=-1, keepdim=True)
            top_w = top_w * W[p + "router.per_expert_scale"][top_i]
            xe = norm4(h, W[p + "pre_feedforward_layernorm_2.weight"], eps)
            moe = torch.zeros_like(xe)
            for t in range(T):
                for j in range(K):
                    e = top_i[t, j].item()
                    gate, up = F.linear(xe[t], W[p + "experts.gate_up_proj"][e]).chunk(2, dim=-1)
                    moe[t] += F.linear(gelu_tanh(gate) * up, W[p + "experts.down_proj"][e]) * top_w[t, j]
            m = m1 + norm4(moe, W[p + "post_feedforward_layernorm_2.weight"], eps)
        nxt = h + norm4(m, W[p + "post_feedforward_layernorm.weight"], eps)
        if P:
            t_ = gelu_tanh(lin(nxt, p + "per_layer_input_gate")) * pli[:, l, :]
            nxt = nxt + norm4(lin(t_, p + "per_layer_projection"), W[p + "post_per_layer_input_norm.weight"], eps)
        nxt = nxt * W[p + "layer_scalar"]
        out["x"].append(x), out["x_norm"].append(xn), out["weights"].append(a), out["output"].append(o)
        out["hidden_states"].append(nxt)
        x = nxt
    e = {k: (torch.stack(v).numpy() if isinstance(v, list) else v) for k, v in out.items()}
    e["ids"] = np.array(ids, dtype=np.int64)
    for l in range(1, L):
        e[f"x_layer{l}"] = out["hidden_states"][l].numpy()
    return e


def text_config(**over):
    """A Gemma4TextConfig as config.json writes it (google/gemma-4-*'s text_config keys)."""
    cfg = {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "vocab_size": 64, "hidden_size": 32,
           "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 8, "global_head_dim": 16, "num_global_key_value_heads": 1, "attention_k_eq_v": True,
           "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
           "attention_bias": False, "attention_dropout": 0.0, "sliding_window": 3,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                  "rope_theta": 1000000.0}},
           "final_logit_softcapping": 30.0, "use_bidirectional_attention": None,
           "hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 64, "num_kv_shared_layers": 0,
           "use_double_wide_mlp": False, "enable_moe_block": False, "num_experts": None, "top_k_experts": None,
           "moe_intermediate_size": None, "tie_word_embeddings": True, "pad_token_id": 0, "eos_token_id": 1,
           "bos_token_id": 2, "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32"}
    cfg.update(over)
    return cfg


def write_case(name, cfg, w, e):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    write_npz(os.path.join(d, "expected.npz"), e)


def main():
    ids = [2, 5, 9, 14, 3, 27, 40]

    # Dense: per-layer-type head dims, attention_k_eq_v on the full layers, proportional RoPE.
    g = torch.Generator().manual_seed(41)
    cfg = text_config()
    w = weights_of(g, cfg)
    wrong = {"layer": 1}
    e = reference(w, cfg, ids, wrong=wrong)
    e["weights_partial_rope"] = wrong["weights"]
    assert np.abs(e["weights_partial_rope"] - e["weights"][1]).max() > 1e-3, "partial RoPE indistinguishable"
    write_case("gemma4-tiny", cfg, w, e)

    # Gemma4ForConditionalGeneration: the same weights under model.language_model., a vision
    # tower and embedder attn must ignore.
    d = os.path.join(FIX, "gemma4-conditional-tiny")
    text = {k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")}
    mm = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": text,
          "vision_config": {"model_type": "gemma4_vision", "hidden_size": 8, "intermediate_size": 16,
                            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 4,
                            "patch_size": 4, "pooling_kernel_size": 2},
          "audio_config": None, "boi_token_id": 60, "eoi_token_id": 61, "image_token_id": 62,
          "tie_word_embeddings": True, "torch_dtype": "float32"}
    mw = {"model.language_model." + k[len("model."):]: v for k, v in w.items()}
    gv = torch.Generator().manual_seed(42)
    mw["model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"] = rand(gv, 8, 8)
    mw["model.embed_vision.embedding_projection.weight"] = rand(gv, 32, 8)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(mw, {"format": "pt"}))
    write_config(d, mm)

    # KV sharing: layers 3 (sliding) and 4 (full) reuse layers 2's and 1's k and v.
    g = torch.Generator().manual_seed(43)
    cfg = text_config(num_hidden_layers=5, num_kv_shared_layers=2, use_double_wide_mlp=True, attention_k_eq_v=False,
                      layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                                   "full_attention"])
    w = weights_of(g, cfg)
    write_case("gemma4-kv-shared-tiny", cfg, w, reference(w, cfg, ids))

    # MoE beside the MLP (26B-A4B style).
    g = torch.Generator().manual_seed(44)
    cfg = text_config(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], enable_moe_block=True,
                      num_experts=4, top_k_experts=2, moe_intermediate_size=16)
    w = weights_of(g, cfg)
    write_case("gemma4-moe-tiny", cfg, w, reference(w, cfg, ids))

    # Per-layer inputs (E2B / E4B style).
    g = torch.Generator().manual_seed(45)
    cfg = text_config(num_hidden_layers=3, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                      hidden_size_per_layer_input=8, vocab_size_per_layer_input=64)
    w = weights_of(g, cfg)
    write_case("gemma4-ple-tiny", cfg, w, reference(w, cfg, ids))


if __name__ == "__main__":
    main()
