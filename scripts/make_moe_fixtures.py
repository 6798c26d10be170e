#!/usr/bin/python3
"""Tiny random checkpoints of the sparse mixture-of-experts families (docs/design.md §5.2),
and what an independent implementation computes from them, written here in PyTorch from
Hugging Face transformers' modeling code (eager attention) and sharing nothing with attn:

  mixtral    models/mixtral/modeling_mixtral.py: MixtralDecoderLayer (pre-norm RMSNorm),
             MixtralAttention (q/k/v/o_proj without biases, RoPE rotate_half, repeat_kv,
             causal and sliding_window kv_idx > q_idx − W on every layer),
             MixtralSparseMoeBlock (router `gate`, softmax over all experts, torch.topk,
             renormalised; experts w2(silu(w1 x) · w3 x)). Published checkpoints' names:
             block_sparse_moe.gate, block_sparse_moe.experts.N.w1/w2/w3. mixtral-tiny-fused
             holds the same weights as transformers v5 holds them after its
             conversion_mapping (mlp.gate, mlp.experts.gate_up_proj = cat(w1, w3) per
             expert, mlp.experts.down_proj), with the same expected.npz.
  qwen2_moe  models/qwen2_moe/modeling_qwen2_moe.py and configuration_qwen2_moe.py (v5):
             Qwen2MoeAttention (q/k/v biases, qkv_bias default true; sliding on the layers
             layer_types names, by default those with (i + 1) % 2 and i < max_window_layers
             when use_sliding_window), Qwen2MoeSparseMoeBlock (softmax, top-k,
             renormalised only when norm_topk_prob — false here — plus shared_expert
             scaled by sigmoid(shared_expert_gate(x))) on the layers with
             (i + 1) % decoder_sparse_step == 0 and i not in mlp_only_layers, else
             Qwen2MoeMLP(intermediate_size).
  gpt_oss    models/gpt_oss/modeling_gpt_oss.py and configuration_gpt_oss.py: GptOssAttention
             (q/k/v/o with bias, attention_bias; `sinks`: a per-head logit joining each
             row's softmax, eager_attention_forward; layer_types sliding / full), YaRN
             (rope_scaling, truncate false) through make_rope_scaling_fixtures.py's
             transcription of modeling_rope_utils.py, GptOssMLP (GptOssTopKRouter with bias,
             top-k then softmax over the k; GptOssExperts gate_up_proj with gate/up
             interleaved in columns, clamp swiglu_limit, (up + 1)·gate·σ(1.702·gate)).
             gpt-oss-tiny stores the experts dequantised (gate_up_proj (E, hidden, 2I)
             float32); gpt-oss-mxfp4-tiny as the published checkpoints do
             (gate_up_proj_blocks / _scales, down_proj_blocks / _scales, U8; the rest
             BF16; quantization_config mxfp4), dequantised as integrations/mxfp4.py's
             convert_moe_packed_tensors (imported from make_block_fixtures.py).

The MoE blocks are make_block_fixtures.py's transcriptions (softmax_topk_moe, gpt_oss_moe).
Each case writes tests/fixtures/checkpoints/<name>/: config.json as transformers writes it,
model.safetensors with transformers' names (under model.), expected.npz: ids (T,),
hidden_states (L+1, T, E), x_layer1, x_norm (L, T, E), weights (L, H, T, T), output
(L, T, E), rollout (T, T), q and k after RoPE (L, T, heads·D). Everything is float64.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_moe_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

import torch
import torch.nn.functional as F

from fixture_npz import write_npz
import make_checkpoint_fixtures
from make_checkpoint_fixtures import (write_config, DT, FIX, expected, rand, rms_norm, rope_inv_freq, rotate_half,
                                      safetensors_bytes, write, write_json)
from make_block_fixtures import convert_moe_packed_tensors, gpt_oss_moe, softmax_topk_moe

IDS = [1, 3, 4, 5, 6, 7, 8, 9]
# MXFP4 blocks and scales are U8 in safetensors.
make_checkpoint_fixtures.DTYPES.setdefault(torch.uint8, ("U8", 1))


def shared_expert_mlp_weights(g, w, p, sparse, E, X, I, Im, Is, router_scale):
    """Into w: Qwen2MoeSparseMoeBlock's tensors under p (router `gate`, X experts of width Im,
    the shared expert of width Is and its σ gate) when `sparse`, else a dense MLP of width I;
    Qwen3-Next's blocks use the same names (make_qwen3_next_fixtures.py)."""
    if sparse:
        w[p + "gate.weight"] = rand(g, X, E, scale=router_scale)
        for x in range(X):
            w[p + f"experts.{x}.gate_proj.weight"] = rand(g, Im, E)
            w[p + f"experts.{x}.up_proj.weight"] = rand(g, Im, E)
            w[p + f"experts.{x}.down_proj.weight"] = rand(g, E, Im)
        w[p + "shared_expert.gate_proj.weight"] = rand(g, Is, E)
        w[p + "shared_expert.up_proj.weight"] = rand(g, Is, E)
        w[p + "shared_expert.down_proj.weight"] = rand(g, E, Is)
        w[p + "shared_expert_gate.weight"] = rand(g, 1, E, scale=1.0)
    else:
        w[p + "gate_proj.weight"] = rand(g, I, E)
        w[p + "up_proj.weight"] = rand(g, I, E)
        w[p + "down_proj.weight"] = rand(g, E, I)


def attention_weights(g, cfg, p, w, qkv_bias, o_bias, sinks=False):
    E, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", E // H)
    w[p + "input_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
    w[p + "post_attention_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
    w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
    w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
    w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
    w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
    if qkv_bias:
        w[p + "self_attn.q_proj.bias"] = rand(g, H * D, scale=0.2)
        w[p + "self_attn.k_proj.bias"] = rand(g, Hkv * D, scale=0.2)
        w[p + "self_attn.v_proj.bias"] = rand(g, Hkv * D, scale=0.2)
    if o_bias:
        w[p + "self_attn.o_proj.bias"] = rand(g, E, scale=0.2)
    if sinks:
        w[p + "self_attn.sinks"] = rand(g, H, scale=1.0)


def forward(W, cfg, ids, sliding_layers, window, mlp, qk):
    """The decoder stack as the three modeling files run it: pre-norm blocks, eager
    attention (sinks when the layer has them), `mlp(l, n)` the layer's MLP or MoE."""
    prefix = "model."
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", E // H)
    R, T = D, len(ids)
    if cfg.get("rope_scaling"):
        inv_freq, factor = rope_inv_freq(cfg, R, T)
    else:
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R))
        factor = 1.0
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)  # gpt-oss's _apply_rotary_emb on halves is the same rotation
    cos, sin = emb.cos() * factor, emb.sin() * factor
    lin = lambda x, n: F.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    x = W[prefix + "embed_tokens.weight"][ids]
    hs, xn_all, weights, outs = [x], [], [], []
    for l in range(L):
        p = f"{prefix}layers.{l}."
        xn = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(xn, p + "self_attn.q_proj").view(T, H, D).transpose(0, 1)
        k = lin(xn, p + "self_attn.k_proj").view(T, Hkv, D).transpose(0, 1)
        v = lin(xn, p + "self_attn.v_proj").view(T, Hkv, D).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        qk.append((q, k))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        allowed = ki <= qi
        if l in sliding_layers:
            allowed = allowed & (ki > qi - window)  # sliding_window_overlay: kv_idx > q_idx - W
        s = q @ k.transpose(-1, -2) * D ** -0.5
        s = torch.where(allowed, s, torch.finfo(DT).min)
        if p + "self_attn.sinks" in W:
            # eager_attention_forward (gpt_oss): the sink joins each row, then is dropped
            sinks = W[p + "self_attn.sinks"].reshape(-1, 1, 1).expand(-1, T, 1)
            combined = torch.cat([s, sinks], dim=-1)
            combined = combined - combined.max(dim=-1, keepdim=True).values
            a = F.softmax(combined, dim=-1)[..., :-1]
        else:
            a = torch.softmax(s, dim=-1)
        o = lin((a @ v).transpose(0, 1).reshape(T, H * D), p + "self_attn.o_proj")
        h = x + o
        n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        x = h + mlp(l, n)
        xn_all.append(xn), weights.append(a), outs.append(o), hs.append(x)
    return hs, xn_all, weights, outs


def write_case(name, cfg, w, ids, sliding_layers, window, mlp, W=None):
    d = os.path.join(FIX, name)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    W = W if W is not None else {k: v.to(DT) for k, v in w.items()}
    qk = []
    e = expected(ids, forward(W, cfg, ids, sliding_layers, window, lambda l, n: mlp(W, l, n), qk))
    # In the input's layout, as attn dumps q and k: (T, heads·D) per layer.
    e["q"] = torch.stack([q.transpose(0, 1).reshape(len(ids), -1) for q, _ in qk]).numpy()
    e["k"] = torch.stack([k.transpose(0, 1).reshape(len(ids), -1) for _, k in qk]).numpy()
    write_npz(os.path.join(d, "expected.npz"), e)
    return e


def distinct_routes(selected):
    """Routing must differ between tokens, or the test could not tell experts apart."""
    routes = {tuple(sorted(r)) for r in selected.tolist()}
    assert len(routes) >= 3, f"too few distinct routes: {routes}"


# ---------------------------------------------------------------------------- mixtral

def mixtral(g):
    cfg = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 32,
           "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 8, "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
           "rope_theta": 1000000.0, "sliding_window": 5, "num_local_experts": 4, "num_experts_per_tok": 2,
           "output_router_logits": False, "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0,
           "attention_dropout": 0.0, "vocab_size": 64, "tie_word_embeddings": False}
    E, I, L, X = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_local_experts"]
    w = {"model.embed_tokens.weight": rand(g, 64, E, scale=1.0), "model.norm.weight": torch.ones(E)}
    for l in range(L):
        p = f"model.layers.{l}."
        attention_weights(g, cfg, p, w, False, False)
        w[p + "block_sparse_moe.gate.weight"] = rand(g, X, E, scale=0.2)
        for x in range(X):
            w[p + f"block_sparse_moe.experts.{x}.w1.weight"] = rand(g, I, E)
            w[p + f"block_sparse_moe.experts.{x}.w2.weight"] = rand(g, E, I)
            w[p + f"block_sparse_moe.experts.{x}.w3.weight"] = rand(g, I, E)

    def mlp(W, l, n):
        p = f"model.layers.{l}.block_sparse_moe."
        stack = lambda m: torch.stack([W[p + f"experts.{x}.{m}.weight"] for x in range(X)])
        out, _, sel, _ = softmax_topk_moe(n, W[p + "gate.weight"], stack("w1"), stack("w3"), stack("w2"),
                                          cfg["num_experts_per_tok"], True)
        distinct_routes(sel)
        return out

    write_case("mixtral-tiny", cfg, w, IDS, sliding_layers=range(L), window=cfg["sliding_window"], mlp=mlp)
    # transformers v5's layout (conversion_mapping "mixtral"): the same weights, merged.
    fused = {k: v for k, v in w.items() if ".block_sparse_moe." not in k}
    for l in range(L):
        p = f"model.layers.{l}."
        stack = lambda m: torch.stack([w[p + f"block_sparse_moe.experts.{x}.{m}.weight"] for x in range(X)])
        fused[p + "mlp.gate.weight"] = w[p + "block_sparse_moe.gate.weight"]
        fused[p + "mlp.experts.gate_up_proj"] = torch.cat([stack("w1"), stack("w3")], dim=1)
        fused[p + "mlp.experts.down_proj"] = stack("w2")
    d = os.path.join(FIX, "mixtral-tiny-fused")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(fused, {"format": "pt"}))
    write_config(d, cfg)


# ---------------------------------------------------------------------------- qwen2_moe

def qwen2_moe(g):
    cfg = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 32,
           "intermediate_size": 48, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24,
           "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
           "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "use_sliding_window": True,
           "sliding_window": 3, "max_window_layers": 2, "decoder_sparse_step": 2, "mlp_only_layers": [3],
           "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": False, "qkv_bias": True,
           "output_router_logits": False, "router_aux_loss_coef": 0.001, "attention_dropout": 0.0,
           "vocab_size": 64, "tie_word_embeddings": False}
    E, L, X = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_experts"]
    I, Im, Is = cfg["intermediate_size"], cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
    # Qwen2MoeDecoderLayer: the sparse block where (i + 1) % decoder_sparse_step == 0 and i
    # is not in mlp_only_layers; Qwen2MoeConfig.__post_init__'s default layer_types.
    sparse = [l not in cfg["mlp_only_layers"] and (l + 1) % cfg["decoder_sparse_step"] == 0 for l in range(L)]
    sliding = [l for l in range(L) if (l + 1) % 2 and l < cfg["max_window_layers"] and cfg["use_sliding_window"]]
    assert sparse == [False, True, False, False] and sliding == [0]
    w = {"model.embed_tokens.weight": rand(g, 64, E, scale=1.0), "model.norm.weight": torch.ones(E)}
    for l in range(L):
        p = f"model.layers.{l}."
        attention_weights(g, cfg, p, w, True, False)
        shared_expert_mlp_weights(g, w, p + "mlp.", sparse[l], E, X, I, Im, Is, router_scale=0.2)

    def mlp(W, l, n):
        p = f"model.layers.{l}.mlp."
        if not sparse[l]:  # Qwen2MoeMLP
            return F.linear(F.silu(F.linear(n, W[p + "gate_proj.weight"])) * F.linear(n, W[p + "up_proj.weight"]),
                            W[p + "down_proj.weight"])
        stack = lambda m: torch.stack([W[p + f"experts.{x}.{m}.weight"] for x in range(X)])
        shared = (W[p + "shared_expert.gate_proj.weight"], W[p + "shared_expert.up_proj.weight"],
                  W[p + "shared_expert.down_proj.weight"], W[p + "shared_expert_gate.weight"])
        out, _, sel, rw = softmax_topk_moe(n, W[p + "gate.weight"], stack("gate_proj"), stack("up_proj"),
                                           stack("down_proj"), cfg["num_experts_per_tok"], cfg["norm_topk_prob"], shared)
        distinct_routes(sel)
        assert (rw.sum(dim=-1) < 0.9).sum() >= 4, "norm_topk_prob false must leave the top-k visibly unnormalised"
        return out

    write_case("qwen2-moe-tiny", cfg, w, IDS, sliding_layers=sliding, window=cfg["sliding_window"], mlp=mlp)


# ---------------------------------------------------------------------------- gpt_oss

def gpt_oss(g):
    cfg = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": 32,
           "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 8, "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
           "rope_theta": 150000.0, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                                                    "beta_slow": 1.0, "truncate": False,
                                                    "original_max_position_embeddings": 64},
           "sliding_window": 3, "layer_types": ["sliding_attention", "full_attention"], "attention_bias": True,
           "num_local_experts": 4, "num_experts_per_tok": 2, "swiglu_limit": 7.0, "experts_per_token": 2,
           "router_aux_loss_coef": 0.9, "output_router_logits": False, "attention_dropout": 0.0,
           "initial_context_length": 64, "vocab_size": 64, "tie_word_embeddings": False}
    E, I, L, X = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_local_experts"]
    w = {"model.embed_tokens.weight": rand(g, 64, E, scale=1.0), "model.norm.weight": torch.ones(E)}
    blocks = {}
    for l in range(L):
        p = f"model.layers.{l}."
        attention_weights(g, cfg, p, w, True, True, sinks=True)
        w[p + "mlp.router.weight"] = rand(g, X, E, scale=0.2)
        w[p + "mlp.router.bias"] = rand(g, X, scale=0.5)
        w[p + "mlp.experts.gate_up_proj"] = rand(g, X, E, 2 * I, scale=0.6)
        w[p + "mlp.experts.gate_up_proj_bias"] = rand(g, X, 2 * I, scale=0.5)
        w[p + "mlp.experts.down_proj"] = rand(g, X, I, E, scale=0.3)
        w[p + "mlp.experts.down_proj_bias"] = rand(g, X, E, scale=0.3)
        # The MXFP4 copy's experts: packed FP4 codes and E8M0 scales, (E, rows, G, 16) / (E, rows, G)
        for m, rows, cols in (("gate_up_proj", 2 * I, E), ("down_proj", E, I)):
            blocks[p + f"mlp.experts.{m}_blocks"] = torch.randint(0, 256, (X, rows, cols // 32, 16), generator=g,
                                                                  dtype=torch.int64).to(torch.uint8)
            blocks[p + f"mlp.experts.{m}_scales"] = torch.randint(123, 127, (X, rows, cols // 32), generator=g,
                                                                  dtype=torch.int64).to(torch.uint8)

    def mlp(W, l, n):
        p = f"model.layers.{l}.mlp."
        out, _, sel, _ = gpt_oss_moe(n, W[p + "router.weight"], W[p + "router.bias"], W[p + "experts.gate_up_proj"],
                                     W[p + "experts.gate_up_proj_bias"], W[p + "experts.down_proj"],
                                     W[p + "experts.down_proj_bias"], cfg["num_experts_per_tok"],
                                     limit=cfg["swiglu_limit"])
        distinct_routes(sel)
        gu = torch.einsum("th,ehc->etc", n, W[p + "experts.gate_up_proj"]) + W[p + "experts.gate_up_proj_bias"][:, None, :]
        assert (gu[..., ::2] > cfg["swiglu_limit"]).any(), "the gate clamp never bites"
        return out

    sliding = [l for l, t in enumerate(cfg["layer_types"]) if t == "sliding_attention"]
    write_case("gpt-oss-tiny", cfg, w, IDS, sliding_layers=sliding, window=cfg["sliding_window"], mlp=mlp)

    # As published: experts MXFP4 (U8 blocks and scales), everything else BF16.
    qcfg = dict(cfg, quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]})
    q = {k: v.to(torch.bfloat16) for k, v in w.items() if not k.endswith(("experts.gate_up_proj", "experts.down_proj"))}
    q.update(blocks)
    W = {k: v.to(DT) for k, v in q.items() if v.dtype != torch.uint8}
    for l in range(L):
        p = f"model.layers.{l}.mlp.experts."
        for m in ("gate_up_proj", "down_proj"):
            # convert_moe_packed_tensors: (E, rows, G·32) transposed to (E, G·32, rows)
            W[p + m] = convert_moe_packed_tensors(blocks[p + m + "_blocks"], blocks[p + m + "_scales"],
                                                  torch.float32).to(DT)
    assert W["model.layers.0.mlp.experts.gate_up_proj"].shape == (X, E, 2 * I)
    assert W["model.layers.0.mlp.experts.down_proj"].shape == (X, I, E)
    write_case("gpt-oss-mxfp4-tiny", qcfg, q, IDS, sliding_layers=sliding, window=cfg["sliding_window"], mlp=mlp, W=W)


def main():
    mixtral(torch.Generator().manual_seed(31))
    qwen2_moe(torch.Generator().manual_seed(32))
    gpt_oss(torch.Generator().manual_seed(33))


if __name__ == "__main__":
    main()
