#!/usr/bin/python3
"""Tiny random Gemma 3n (text) checkpoints (docs/design.md §6.1 row "gemma3n"), and what an
independent implementation computes from them, written here in PyTorch from Hugging Face
transformers' models/gemma3n/modeling_gemma3n.py and configuration_gemma3n.py (transformers
is not installed on this machine; the forward below follows Gemma3nTextModel's eager path
line by line, with the DynamicCache a forward with use_cache makes, and shares nothing with
attn):

  Gemma3nRMSNorm       x.float() / sqrt(mean(x²) + eps) · w.float() (no 1 + w), cast back;
                       with_scale=False (v_norm): no weight
  embeddings           Gemma3nTextScaledWordEmbedding: embed_tokens[ids] · float32(√hidden);
                       AltUp streams: stream 0 the embeddings h0, stream i altup_projections
                       [i−1](h0) · rms(h0) / sqrt(max(mean(p²), float32(1e-5)))
  per-layer inputs     get_per_layer_inputs: embed_tokens_per_layer[ids] · float32(√ple),
                       (T, L, ple); project_per_layer_inputs: per_layer_projection_norm(
                       per_layer_model_projection(h0) · float32(hidden^−½) viewed (T, L, ple));
                       (that + the lookup) · float32(rsqrt 2)
  Gemma3nTextAltUp     router(x) = tanh(float32(modality_router(router_norm(x) ·
                       float32(1/hidden)))); predict: pred_j = s_j + Σ_k c[j·K + k] s_k with
                       c = prediction_coefs(router(s_active)); correct: out_i = pred_i +
                       (act − pred_active) · (correction_coefs(router(act))_i + 1), the
                       correction_coefs weight clamped to ±altup_coef_clip (correct() clamps
                       it in eval too; predict() only in training)
  Gemma3nTextLaurelBlock  n + post_laurel_norm(linear_right(linear_left(n)))
  Gemma3nTextMLP       down(act(g) · up n), g = gate n, with activation_sparsity_pattern[l] > 0
                       g = relu(g − (mean(g) + std(g, unbiased=False) · Normal(0, 1).icdf(p)))
  Gemma3nTextAttention q_norm, k_norm (weights), v_norm (none) per head, RoPE after the norms,
                       one RoPE per layer type (rope_parameters[type].rope_theta, or
                       rope_local_base_freq / rope_theta), scaling 1.0, sliding window on
                       sliding_attention layers (kv_idx > q_idx − W); KV sharing: the last
                       num_kv_shared_layers layers take the (k, v) the last non-shared layer
                       of their type stored (store_full_length_kv)
  Gemma3nTextDecoderLayer  pred = predict(s); a = pred[active]; n = input_layernorm(a);
                       h = (a + post_attention_layernorm(attn(n)) + laurel(n)) / √2;
                       out = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)));
                       c = correct(pred, out); f = c[active] · correct_output_scale
                       (altup_correct_scale); c[1:] += post_per_layer_input_norm(
                       per_layer_projection(act(per_layer_input_gate(f)) · pli_l))

Cases (tests/fixtures/checkpoints/): gemma3n-tiny (5 layers sliding, sliding, full, sliding,
full; the last 2 KV-shared: layer 3 takes layer 1's k and v, layer 4 layer 2's; W = 3 at
T = 7; altup_num_inputs 4 with altup_coef_clip 0.5 below some correction coefficients;
intermediate_size per layer; activation sparsity 0.95 and 0.6 on layers 0 and 1;
laurel_rank 4; hidden_size_per_layer_input 8), gemma3n-conditional-tiny (its weights as
Gemma3nForConditionalGeneration stores them: model_type gemma3n, text_config with the older
rope_theta / rope_local_base_freq keys, names under model.language_model., and vision and
audio tensors attn must ignore; its reference is gemma3n-tiny's). gemma3n-tiny holds
config.json, model.safetensors (HF names), tokenizer.json and expected.npz: ids (T,),
x_norm (L, T, E), weights (L, H, T, T), output (L, T, E) (after o_proj), per layer l q_proj_l,
k_proj_l (before the norms), q_l, k_l (after norm and RoPE), v_l (after v_norm), each
(T, heads·D) (a shared layer's k_proj, k, v are its source layer's), and the weights of every
layer under a plausible mistake: weights_no_correct (AltUp's correct step skipped: the
layer's output replaces the active stream alone), weights_no_laurel (h without LAuReL and
√2), weights_dense (activation sparsity ignored), weights_no_kv_sharing (the shared layers
project their own k and v), weights_clip_ignored (correction coefficients not clamped).

Everything is float64 except what transformers computes in float32 whatever the model's
dtype: Gemma3nRMSNorm (x.float(), w.float()), the router's tanh (routed.float()), the
float32 buffers (embedding scales, router_input_scale, per_layer_projection_scale,
per_layer_input_scale, the AltUp epsilon) and the icdf of the target sparsity (a float32
tensor). RoPE tables are float64 (transformers builds them in float32), as every reference
here. The liberties make_gemma4_fixtures.py takes in the norm are taken here; and the
float32 tanh is float64's rounded once, which the script checks against torch's own within
an ulp; the float32 icdf follows ATen's calc_erfinv step by step (erf and exp float64's
rounded), which the script checks equal to torch's at the sparsities used.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_gemma3n_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from fixture_npz import write_npz
from make_checkpoint_fixtures import FIX, rand, safetensors_bytes, write, write_config
from make_gemma4_fixtures import gelu_tanh, is_shared, norm4, rope, stores_kv

DT = torch.float64
F32 = lambda v: float(np.float32(v))


def tanh32(v):
    """torch.tanh(v.float()) as float64's tanh of the float32 value, rounded once."""
    vf = v.float()
    out = torch.tanh(vf.to(DT)).float()
    assert torch.allclose(out, torch.tanh(vf), rtol=2e-7, atol=1e-30), "float32 tanh beyond an ulp"
    return out


def erfinv32(y):
    """torch's float32 erfinv (ATen calc_erfinv): a rational first guess, two Newton steps,
    in float32, erf and exp float64's rounded once."""
    f = np.float32
    y = f(y)
    a = [f(0.886226899), f(-1.645349621), f(0.914624893), f(-0.140543331)]
    b = [f(-2.118377725), f(1.442710462), f(-0.329097515), f(0.012229801)]
    c = [f(-1.970840454), f(-1.624906493), f(3.429567803), f(1.641345311)]
    d = [f(3.543889200), f(1.637067800)]
    if abs(y) <= f(0.7):
        z = y * y
        x = y * (((a[3] * z + a[2]) * z + a[1]) * z + a[0]) / ((((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + f(1.0))
    else:
        z = f(math.sqrt(-f(math.log((f(1.0) - abs(y)) / f(2.0)))))
        x = f(math.copysign(((c[3] * z + c[2]) * z + c[1]) * z + c[0], y)) / ((d[1] * z + d[0]) * z + f(1.0))
    k = f(2.0) / f(math.sqrt(math.pi))
    for _ in range(2):
        x = x - (f(math.erf(x)) - y) / (k * f(math.exp(-x * x)))
    return f(x)


def std_multiplier(p):
    """Normal(0, 1).icdf(float32 p) = erfinv(2p − 1)·√2 in float32 (torch.distributions)."""
    t = torch.tensor(p, dtype=torch.float32)
    u = 2 * t - 1
    ours = float(np.float32(erfinv32(u.item()) * np.float32(math.sqrt(2))))
    theirs = torch.distributions.normal.Normal(0, 1).icdf(t).item()
    assert ours == theirs, f"float32 icdf({p}): {ours} vs torch's {theirs}"
    return ours


def kv_source(cfg, l):
    first = cfg["num_hidden_layers"] - cfg["num_kv_shared_layers"]
    prev = cfg["layer_types"][:first]
    return len(prev) - 1 - prev[::-1].index(cfg["layer_types"][l])


def weights_of(g, cfg):
    E, V, L, K = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["altup_num_inputs"]
    H, Hkv, D, P, R = (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
                       cfg["hidden_size_per_layer_input"], cfg["laurel_rank"])
    one = lambda *s: 1.0 + rand(g, *s, scale=0.3)  # Gemma3nRMSNorm multiplies by w (initialised to 1)
    w = {"model.embed_tokens.weight": rand(g, V, E, scale=0.5), "model.norm.weight": one(E),
         "model.embed_tokens_per_layer.weight": rand(g, cfg["vocab_size_per_layer_input"], L * P, scale=0.5),
         "model.per_layer_model_projection.weight": rand(g, L * P, E),
         "model.per_layer_projection_norm.weight": one(P)}
    for i in range(K - 1):
        w[f"model.altup_projections.{i}.weight"] = rand(g, E, E)
        w[f"model.altup_unembed_projections.{i}.weight"] = rand(g, E, E)
    for l in range(L):
        p = f"model.layers.{l}."
        I = cfg["intermediate_size"][l]
        w[p + "input_layernorm.weight"] = one(E)
        w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
        w[p + "self_attn.q_norm.weight"] = one(D)
        # Gemma 3n's checkpoints keep k_proj, v_proj and k_norm on the shared layers too.
        w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.k_norm.weight"] = one(D)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        for n in ("post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm",
                  "post_per_layer_input_norm"):
            w[p + n + ".weight"] = one(E)
        w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
        w[p + "mlp.up_proj.weight"] = rand(g, I, E)
        w[p + "mlp.down_proj.weight"] = rand(g, E, I)
        w[p + "altup.correct_output_scale"] = one(E)
        w[p + "altup.correction_coefs.weight"] = rand(g, K, K, scale=0.6)
        w[p + "altup.prediction_coefs.weight"] = rand(g, K * K, K, scale=0.6)
        w[p + "altup.modality_router.weight"] = rand(g, K, E, scale=3.0)
        w[p + "altup.router_norm.weight"] = one(E)
        w[p + "laurel.linear_left.weight"] = rand(g, R, E)
        w[p + "laurel.linear_right.weight"] = rand(g, E, R)
        w[p + "laurel.post_laurel_norm.weight"] = one(E)
        w[p + "per_layer_input_gate.weight"] = rand(g, P, E)
        w[p + "per_layer_projection.weight"] = rand(g, E, P)
    return w


def inv_freq_of(cfg, layer_type):
    """Gemma3nRotaryEmbedding's default inv_freq (head_dim/2,) of one layer type, float64."""
    rp = cfg.get("rope_parameters")
    if rp:
        theta = rp[layer_type]["rope_theta"]
    else:
        theta = cfg["rope_theta"] if layer_type == "full_attention" else cfg["rope_local_base_freq"]
    dim = cfg["head_dim"]
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(DT) / dim))


def reference(w, cfg, ids, wrong=None):
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"], cfg["num_attention_heads"]
    K, act_i, Hkv, D, P = (cfg["altup_num_inputs"], cfg["altup_active_idx"], cfg["num_key_value_heads"],
                           cfg["head_dim"], cfg["hidden_size_per_layer_input"])
    clip = cfg["altup_coef_clip"]
    T = len(ids)
    lin = lambda x, n: F.linear(x, W[n + ".weight"])
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    h0 = W["model.embed_tokens.weight"][ids] * torch.tensor(E ** 0.5).to(DT)
    look = (W["model.embed_tokens_per_layer.weight"][ids] * torch.tensor(P ** 0.5).to(DT)).reshape(T, L, P)
    proj = (lin(h0, "model.per_layer_model_projection") * torch.tensor(E ** -0.5).to(DT)).reshape(T, L, P)
    proj = norm4(proj, W["model.per_layer_projection_norm.weight"], eps)
    pli = (proj + look) * torch.rsqrt(torch.tensor(2.0)).to(DT)
    target = torch.mean(h0 ** 2, dim=-1, keepdim=True) ** 0.5
    floor = torch.tensor(1e-5)
    streams = [h0]
    for i in range(1, K):
        c = lin(h0, f"model.altup_projections.{i - 1}")
        mag = torch.sqrt(torch.maximum(torch.mean(c ** 2, dim=-1, keepdim=True), floor))
        streams.append(c * target / mag)
    s = torch.stack(streams)  # (K, T, E)
    inv = {t: inv_freq_of(cfg, t) for t in set(cfg["layer_types"])}
    out = {"x_norm": [], "weights": [], "output": []}
    shared = {}
    for l in range(L):
        p = f"model.layers.{l}."
        lt = cfg["layer_types"][l]

        def router(x):
            r = norm4(x, W[p + "altup.router_norm.weight"], eps) * torch.tensor(E ** -1.0)
            return tanh32(lin(r, p + "altup.modality_router")).type_as(x)

        m = router(s[act_i])
        coefs = lin(m, p + "altup.prediction_coefs").reshape(T, K, K).permute(0, 2, 1)
        pred = torch.matmul(s.permute(1, 2, 0), coefs).permute(2, 0, 1) + s
        a = pred[act_i]
        xn = norm4(a, W[p + "input_layernorm.weight"], eps)
        laurel = xn + norm4(lin(lin(xn, p + "laurel.linear_left"), p + "laurel.linear_right"),
                            W[p + "laurel.post_laurel_norm.weight"], eps)
        qp = lin(xn, p + "self_attn.q_proj").view(T, H, D)
        q = rope(norm4(qp, W[p + "self_attn.q_norm.weight"], eps), inv[lt], T)
        if is_shared(cfg, l) and not (wrong == "no_kv_sharing"):
            kp, k, v = shared[lt]
        else:
            kp = lin(xn, p + "self_attn.k_proj").view(T, Hkv, D)
            k = rope(norm4(kp, W[p + "self_attn.k_norm.weight"], eps), inv[lt], T)
            v = norm4(lin(xn, p + "self_attn.v_proj").view(T, Hkv, D), None, eps)
        if stores_kv(cfg, l):
            shared[lt] = (kp, k, v)
        flat = lambda t: t.reshape(T, -1).numpy()
        out[f"q_proj_{l}"], out[f"k_proj_{l}"] = flat(qp), flat(kp)
        out[f"q_{l}"], out[f"k_{l}"], out[f"v_{l}"] = flat(q), flat(k), flat(v)
        kr = k.transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
        vr = v.transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
        allowed = ki <= qi
        if lt == "sliding_attention":
            allowed = allowed & (ki > qi - cfg["sliding_window"])
        sc = q.transpose(0, 1) @ kr.transpose(-1, -2) * 1.0  # Gemma3nTextAttention.scaling
        wts = torch.softmax(torch.where(allowed, sc, torch.finfo(DT).min), dim=-1)
        o = lin((wts @ vr).transpose(0, 1).reshape(T, H * D), p + "self_attn.o_proj")
        gated = a + norm4(o, W[p + "post_attention_layernorm.weight"], eps)
        h = gated if wrong == "no_laurel" else (gated + laurel) / math.sqrt(2)
        n = norm4(h, W[p + "pre_feedforward_layernorm.weight"], eps)
        gp = lin(n, p + "mlp.gate_proj")
        sparsity = cfg["activation_sparsity_pattern"][l]
        if sparsity > 0.0 and wrong != "dense":
            mult = torch.tensor(std_multiplier(sparsity), dtype=torch.float32).type(gp.dtype)
            cutoff = torch.mean(gp, dim=-1, keepdim=True) + torch.std(gp, dim=-1, keepdim=True, unbiased=False) * mult
            gp = F.relu(gp - cutoff)
        mlp = lin(gelu_tanh(gp) * lin(n, p + "mlp.up_proj"), p + "mlp.down_proj")
        act = h + norm4(mlp, W[p + "post_feedforward_layernorm.weight"], eps)
        # correct
        if wrong == "no_correct":
            cor = pred.clone()
            cor[act_i] = act
        else:
            mc = router(act)
            innov = (act - pred[act_i]).repeat(K, 1, 1)
            cw = W[p + "altup.correction_coefs.weight"]
            if wrong != "clip_ignored":
                cw = cw.clamp(-clip, clip)
            cc = (F.linear(mc, cw) + 1.0).permute(1, 0).unsqueeze(-1)  # (K, T, 1)
            cor = innov * cc + pred
        first = cor[act_i].clone()
        if cfg["altup_correct_scale"]:
            first = first * W[p + "altup.correct_output_scale"]
        first = gelu_tanh(lin(first, p + "per_layer_input_gate")) * pli[:, l, :]
        first = norm4(lin(first, p + "per_layer_projection"), W[p + "post_per_layer_input_norm.weight"], eps)
        cor[1:] += first
        out["x_norm"].append(xn), out["weights"].append(wts), out["output"].append(o)
        s = cor
    e = {k: (torch.stack(v).numpy() if isinstance(v, list) else v) for k, v in out.items()}
    e["ids"] = np.array(ids, dtype=np.int64)
    return e


def text_config(**over):
    """A Gemma3nTextConfig as config.json writes it (google/gemma-3n-*'s text_config keys)."""
    cfg = {"model_type": "gemma3n_text", "architectures": ["Gemma3nForCausalLM"], "vocab_size": 64, "hidden_size": 32,
           "intermediate_size": [48, 40, 48, 56, 48], "num_hidden_layers": 5, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 8, "hidden_activation": "gelu_pytorch_tanh",
           "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "attention_bias": False, "attention_dropout": 0.0,
           "sliding_window": 3,
           "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
                           "full_attention"],
           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
           "final_logit_softcapping": 30.0, "vocab_size_per_layer_input": 64, "hidden_size_per_layer_input": 8,
           "altup_active_idx": 0, "altup_coef_clip": 0.5, "altup_correct_scale": True, "altup_num_inputs": 4,
           "num_kv_shared_layers": 2, "laurel_rank": 4, "activation_sparsity_pattern": [0.95, 0.6, 0.0, 0.0, 0.0],
           "tie_word_embeddings": True, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
           "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32"}
    cfg.update(over)
    return cfg


def main():
    ids = [2, 5, 9, 14, 3, 27, 40]
    g = torch.Generator().manual_seed(51)
    cfg = text_config()
    w = weights_of(g, cfg)
    clip = cfg["altup_coef_clip"]
    assert any((w[f"model.layers.{l}.altup.correction_coefs.weight"].abs() > clip).any() for l in range(5)), "no clip"
    e = reference(w, cfg, ids)
    for wrong in ("no_correct", "no_laurel", "dense", "no_kv_sharing", "clip_ignored"):
        other = reference(w, cfg, ids, wrong=wrong)["weights"]
        assert np.abs(other - e["weights"]).max() > 1e-3, f"{wrong} indistinguishable"
        e["weights_" + wrong] = other
    d = os.path.join(FIX, "gemma3n-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    write_npz(os.path.join(d, "expected.npz"), e)

    # Gemma3nForConditionalGeneration: the same weights under model.language_model., the
    # RoPE bases as the older rope_theta / rope_local_base_freq, and vision and audio
    # tensors attn must ignore.
    d = os.path.join(FIX, "gemma3n-conditional-tiny")
    text = {k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype", "rope_parameters")}
    text.update(rope_theta=1000000.0, rope_local_base_freq=10000.0)
    mm = {"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"], "text_config": text,
          "vision_config": {"model_type": "gemma3n_vision", "hidden_size": 8, "vocab_size": 4, "vocab_offset": 64},
          "audio_config": {"model_type": "gemma3n_audio", "hidden_size": 8, "vocab_size": 4, "vocab_offset": 68},
          "audio_soft_tokens_per_image": 4, "vision_soft_tokens_per_image": 4, "boi_token_id": 60, "eoi_token_id": 61,
          "image_token_id": 62, "audio_token_id": 63, "tie_word_embeddings": True, "torch_dtype": "float32"}
    mw = {"model.language_model." + k[len("model."):]: v for k, v in w.items()}
    gv = torch.Generator().manual_seed(52)
    mw["model.vision_tower.timm_model.conv_stem.conv.weight"] = rand(gv, 8, 3, 3, 3)
    mw["model.audio_tower.conformer.0.attention.attn.q_proj.weight"] = rand(gv, 8, 8)
    mw["model.embed_vision.embedding_projection.weight"] = rand(gv, 32, 8)
    mw["model.embed_audio.embedding_projection.weight"] = rand(gv, 32, 8)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(mw, {"format": "pt"}))
    write_config(d, mm)


if __name__ == "__main__":
    main()
