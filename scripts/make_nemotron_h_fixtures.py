#!/usr/bin/python3
"""A tiny random Nemotron-H checkpoint (model_type "nemotron_h", NemotronHForCausalLM), a
hybrid of Mamba2 mixers, attention and MLP layers (docs/design.md §6.1), and what an
independent implementation computes from it, written here in PyTorch from Hugging Face
transformers' models/nemotron_h/modeling_nemotron_h.py (eager attention, the Mamba2
mixer's torch_forward without a cache, i.e. the chunked "SSD naive" scan), in float64,
sharing nothing with attn.

  NemotronHBlock: x + mixer(norm(x)), one mixer per block, NemotronHRMSNorm
  x·rsqrt(mean(x²) + layer_norm_epsilon)·w; the mixer by hybrid_override_pattern's letter
  (NemotronHConfig._pattern_to_list): "M" Mamba2, "*" attention, "-" MLP, "E" MoE.
    M  NemotronHMamba2Mixer.torch_forward: in_proj(n) split [intermediate | conv_dim |
       num_heads] = gate z, xBC, dt (intermediate = mamba_num_heads·mamba_head_dim,
       conv_dim = intermediate + 2·n_groups·ssm_state_size); xBC through the depthwise
       nn.Conv1d (conv_kernel taps, padding conv_kernel − 1, first T outputs, bias
       use_conv_bias) and mamba_hidden_act; split x | B | C (n_groups groups of
       ssm_state_size, repeat_interleave to the heads); dt = softplus(dt + dt_bias)
       clamped to time_step_limit (see below); A = −exp(A_log); the chunked scan
       (chunk_size) with the D·x skip; Zamba2RMSNormGated: (y·silu(z)) normalised per group of intermediate /
       n_groups values, ·w (norm_before_gate false); out_proj. use_bias on in/out_proj.
    *  NemotronHAttention: q/k/v_proj (attention_bias), no RoPE, GQA (repeat_kv), scaling
       head_dim^−½, causal, o_proj.
    -  NemotronHMLP: down_proj(relu2(up_proj(n))), relu2 = relu(v)², mlp_bias.
    E  NemotronHMoE: NemotronHTopkRouter's logits gate(n); route_tokens_to_experts (σ, the
       choice by σ + e_score_correction_bias over n_group groups scored by their top 2,
       the topk_group best kept, the others −∞; the chosen σ without the bias renormalised
       + 1e-20 when norm_topk_prob, × routed_scaling_factor); NemotronHExperts
       down(relu(up x)²) per chosen expert; plus shared_experts (NemotronHMLP, relu2).
  norm_f (the final norm) comes after the last layer; no stage reaches it.

Two places where this script departs from torch_forward as transformers has it (both
inherited from Zamba2MambaMixer, both reported upstream), following instead what
cuda_kernels_forward (mamba_chunk_scan_combined), the Hub checkpoints' own
modeling_nemotron_h.py and the Mamba2 model compute:
  - the inter-chunk state passing: torch_forward sums decay_chunk · states over the
    target chunk (`.sum(dim=2)` after states.permute(0, 2, 1, 3, 4)), so no state crosses
    a chunk boundary; here the sum runs over the source chunk (the form transformers' Mamba2
    mixer was corrected to), which equals the sequential recurrence
    S_t = exp(dt_t·A)·S_{t−1} + dt_t·x_t⊗B_t, y_t = S_t·C_t + D·x_t;
  - the dt clamp: torch_forward floors dt at time_step_min; here dt is clamped to
    time_step_limit (the kernels' dt_limit), [0, ∞) in the Hub's configs.
expected.npz keeps what torch_forward's two conventions give (wrong_chunk_x,
wrong_clamp_x) so that the tests show attn computes neither.

Case (tests/fixtures/checkpoints/nemotron-h-tiny/: config.json with NemotronHConfig's key
names as the Hub's Nemotron-H checkpoints write them, time_step_limit [0.0, Infinity]
written as Python's json writes it; model.safetensors with the Hub's names under
"backbone.", expected.npz):

  nemotron-h-tiny  5 layers "M-*M*" (mamba, mlp, attention, mamba, attention); hidden 32,
              4 heads over 2 KV heads of head_dim 12 (not hidden / heads), mamba 4 heads of
              4 (intermediate 16), n_groups 2, ssm_state_size 6, conv_kernel 4,
              chunk_size 4 (T = 10: three chunks, the last padded), time_step_min 0.05
              with dt_bias low enough that the clamp binds, MLP intermediate_size 48.
  nemotron-h-bias-tiny  4 layers "*M-*" written as layers_block_type; attention_bias,
              use_bias (in_proj, out_proj) and mlp_bias, use_conv_bias false, n_groups 1,
              conv_kernel 3 and use_conv_bias under NemotronHConfig's legacy names
              (mamba_n_groups, mamba_d_conv, mamba_conv_bias, read before the others,
              which are written with other values), time_step_limit [0.0, 1.5]; its
              expected.npz holds ids, x_layer3 and the attention layers' stages.
  nemotron-h-moe-tiny  5 layers "E*ME*": see moe_case() below; expected.npz as
              nemotron-h-tiny's first keys (ids, attention_layers, hidden_states, x_layer4,
              the attention stages) and wrong_bias_weights_x (x had the experts' weights
              kept e_score_correction_bias), wrong_zero_fill_x (x had the dropped group's
              experts been ranked 0, DeepSeek-V3's masked_fill, rather than −∞).
  nemotron-h-moe-tiny-fused  the same weights, the experts fused (no expected.npz).

expected.npz (A = the attention layers, in model order):
  ids (T,), attention_layers (A,), hidden_states (L+1, T, E) the stream entering each layer
  and after the last (before norm_f), x_layer2 (T, E) and x_layer4 the stream entering
  layers 2 and 4, x, x_norm (A, T, E), q_proj (A, T, H·D), k_proj (A, T, Hkv·D) (q and k:
  the same, no RoPE), weights (A, H, T, T), output (A, T, E) after o_proj, rollout (T, T),
  and what three wrong conventions give, for the tests to tell apart:
  wrong_relu_x (A, T, E), x had the MLP used relu rather than relu²;
  wrong_softplus_x, x had dt skipped softplus (dt + dt_bias, clamped);
  wrong_clamp_x, x had dt been floored at time_step_min (torch_forward's clamp) rather than
  clamped to time_step_limit; wrong_chunk_x, x had the states crossed chunk boundaries as
  torch_forward's `.sum(dim=2)` has them; limit_x, x with time_step_limit [0.02, 0.3]
  (both bounds binding somewhere).
  batch_ids (2, T), batch_mask (2, T) a right-padded batch (item 1's last 3 tokens padding,
  so that no query row is fully masked), batch_x, batch_weights, batch_output (A, 2, …): the
  stages with that attention_mask, the Mamba2 mixers zeroing the padded positions' input
  and conv output (torch_forward's input_states · mask and hidden_states · mask), the
  attention masking the padded keys.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_nemotron_h_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import math
import os

import numpy as np
import torch

from fixture_npz import write_npz
from make_checkpoint_fixtures import FIX, DT, rand, rms_norm, safetensors_bytes, write, write_json, write_config

IDS = [1, 3, 4, 5, 6, 7, 8, 9, 10, 2]
LETTERS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
MARGIN = 1e-2  # the smallest gap allowed at a MoE layer's group and expert choices


def dims(cfg):
    I = cfg["mamba_num_heads"] * cfg["mamba_head_dim"]
    conv_dim = I + 2 * cfg["n_groups"] * cfg["ssm_state_size"]
    return I, conv_dim


def weights(g, cfg, prefix):
    E, V = cfg["hidden_size"], cfg["vocab_size"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    Hm, K = cfg["mamba_num_heads"], cfg["conv_kernel"]
    I, conv_dim = dims(cfg)
    w = {prefix + "embeddings.weight": rand(g, V, E, scale=1.0), prefix + "norm_f.weight": 1 + rand(g, E, scale=0.1)}
    for l, letter in enumerate(cfg["hybrid_override_pattern"]):
        p = f"{prefix}layers.{l}."
        w[p + "norm.weight"] = 1 + rand(g, E, scale=0.1)
        m = p + "mixer."
        if letter == "M":
            w[m + "in_proj.weight"] = rand(g, I + conv_dim + Hm, E)
            w[m + "conv1d.weight"] = rand(g, conv_dim, 1, K, scale=0.5)
            if cfg["use_conv_bias"]:
                w[m + "conv1d.bias"] = rand(g, conv_dim, scale=0.2)
            # dt_bias low enough that softplus(dt + dt_bias) falls below time_step_min at places.
            w[m + "dt_bias"] = rand(g, Hm, scale=1.0) - 2.5
            w[m + "A_log"] = torch.log(torch.arange(1, Hm + 1, dtype=torch.float32)) + rand(g, Hm, scale=0.2)
            w[m + "D"] = 1 + rand(g, Hm, scale=0.3)
            w[m + "norm.weight"] = 1 + rand(g, I, scale=0.2)
            w[m + "out_proj.weight"] = rand(g, E, I)
            if cfg["use_bias"]:
                w[m + "in_proj.bias"] = rand(g, I + conv_dim + Hm)
                w[m + "out_proj.bias"] = rand(g, E)
        elif letter == "*":
            w[m + "q_proj.weight"] = rand(g, H * D, E)
            w[m + "k_proj.weight"] = rand(g, Hkv * D, E)
            w[m + "v_proj.weight"] = rand(g, Hkv * D, E)
            w[m + "o_proj.weight"] = rand(g, E, H * D)
            if cfg["attention_bias"]:
                for name, rows in (("q_proj", H * D), ("k_proj", Hkv * D), ("v_proj", Hkv * D), ("o_proj", E)):
                    w[m + name + ".bias"] = rand(g, rows)
        elif letter == "E":
            X, Im, Is = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["moe_shared_expert_intermediate_size"]
            w[m + "gate.weight"] = rand(g, X, E, scale=0.6)
            # Negative enough that kept experts' ranks fall below 0 at places: ranking the
            # dropped groups' experts 0 (DeepSeek-V3's masked_fill) instead of −∞ then differs.
            w[m + "gate.e_score_correction_bias"] = rand(g, X, scale=0.3) - 0.5
            # A latent MoE (moe_latent_size): the experts work in the latent width, between
            # fc1_latent_proj (latent, E) and fc2_latent_proj (E, latent).
            Ex = cfg.get("moe_latent_size") or E
            if cfg.get("moe_latent_size"):
                w[m + "fc1_latent_proj.weight"] = rand(g, Ex, E)
                w[m + "fc2_latent_proj.weight"] = rand(g, E, Ex)
            for x in range(X):
                w[m + f"experts.{x}.up_proj.weight"] = rand(g, Im, Ex)
                w[m + f"experts.{x}.down_proj.weight"] = rand(g, Ex, Im)
            w[m + "shared_experts.up_proj.weight"] = rand(g, Is, E)
            w[m + "shared_experts.down_proj.weight"] = rand(g, E, Is)
        else:
            w[m + "up_proj.weight"] = rand(g, cfg["intermediate_size"], E)
            w[m + "down_proj.weight"] = rand(g, E, cfg["intermediate_size"])
            if cfg["mlp_bias"]:
                w[m + "up_proj.bias"] = rand(g, cfg["intermediate_size"])
                w[m + "down_proj.bias"] = rand(g, E)
    return w


def segment_sum(x):
    """modeling_nemotron_h.segment_sum: out[..., i, j] = Σ_{k=j+1..i} x[..., k] (i ≥ j), else −∞."""
    c = x.size(-1)
    x = x[..., None].expand(*x.size(), c)
    x = x.masked_fill(~torch.tril(torch.ones(c, c, dtype=torch.bool), diagonal=-1), 0)
    s = torch.cumsum(x, dim=-2)
    return s.masked_fill(~torch.tril(torch.ones(c, c, dtype=torch.bool), diagonal=0), -torch.inf)


def pad_seq(t, pad):
    shape = (0, 0, 0, 0, 0, pad, 0, 0) if t.dim() == 4 else (0, 0, 0, pad, 0, 0)
    return torch.nn.functional.pad(t, shape, mode="constant", value=0)


def chunks(t, pad, c):
    t = pad_seq(t, pad)
    return t.reshape(t.shape[0], -1, c, *t.shape[2:])


def mamba2(W, m, cfg, n, mask, softplus=True, clamp_min=False, chunk_bug=False):
    """NemotronHMamba2Mixer.torch_forward without a cache on n (B, T, E); mask (B, T) or None
    (all ones: transformers' _update_mamba_mask passes None). clamp_min and chunk_bug: the
    two conventions of transformers' torch_forward this script does not follow (above)."""
    Bsz, T, _ = n.shape
    Hm, P, G, N = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"], cfg["ssm_state_size"]
    K, c = cfg["conv_kernel"], cfg["chunk_size"]
    I, conv_dim = dims(cfg)
    lin = lambda x, name: torch.nn.functional.linear(x, W[name + ".weight"], W.get(name + ".bias"))
    if mask is not None:
        n = n * mask[:, :, None]
    proj = lin(n, m + "in_proj")
    gate, xbc, dt = proj.split([I, conv_dim, Hm], dim=-1)
    xbc = torch.nn.functional.conv1d(xbc.transpose(1, 2), W[m + "conv1d.weight"], W.get(m + "conv1d.bias"),
                                     padding=K - 1, groups=conv_dim)[..., :T].transpose(1, 2)
    xbc = torch.nn.functional.silu(xbc)  # mamba_hidden_act "silu"
    if mask is not None:
        xbc = xbc * mask[:, :, None]
    x, B, C = torch.split(xbc, [I, G * N, G * N], dim=-1)
    A = -torch.exp(W[m + "A_log"])
    dt = dt + W[m + "dt_bias"]
    if softplus:
        dt = torch.nn.functional.softplus(dt)
    if clamp_min:
        dt = torch.clamp(dt, cfg["time_step_min"])
    else:
        dt = torch.clamp(dt, cfg["time_step_limit"][0], cfg["time_step_limit"][1])
    x = x.reshape(Bsz, T, -1, P)
    B = B.reshape(Bsz, T, -1, N).repeat_interleave(Hm // G, dim=2)
    C = C.reshape(Bsz, T, -1, N).repeat_interleave(Hm // G, dim=2)
    pad = (c - T % c) % c
    D_res = W[m + "D"][..., None] * pad_seq(x, pad)
    x = x * dt[..., None]
    A = A * dt
    x, A, B, C = [chunks(t, pad, c) for t in (x, A, B, C)]
    A = A.permute(0, 3, 1, 2)
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(segment_sum(A))
    Gm = (C[:, :, :, None, :, :] * B[:, :, None, :, :, :]).sum(dim=-1)
    M = (Gm[..., None] * L.permute(0, 2, 3, 4, 1)[..., None]).sum(dim=-1)
    Y_diag = (M[..., None] * x[:, :, None]).sum(3)
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    B_decay = B * decay_states.permute(0, 2, 3, 1)[..., None]
    states = (B_decay.permute(0, 1, 3, 2, 4)[..., None] * x.permute(0, 1, 3, 2, 4)[..., None, :]).sum(dim=3).permute(0, 1, 2, 4, 3)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(segment_sum(torch.nn.functional.pad(A_cumsum[:, :, :, -1], (1, 0))))
    # Summed over the source chunk (axis 3; torch_forward sums over axis 2, the target: see above).
    new_states = (decay_chunk[..., None, None] * states.permute(0, 2, 1, 3, 4)[:, :, None, ...]).sum(dim=2 if chunk_bug else 3).permute(0, 2, 1, 3, 4)
    states = new_states[:, :-1]
    Y_off = (C[..., None, :] * states[:, :, None, ...]).sum(-1) * torch.exp(A_cumsum).permute(0, 2, 3, 1)[..., None]
    y = (Y_diag + Y_off).reshape(Bsz, -1, Hm, P) + D_res
    y = y[:, :T].reshape(Bsz, T, -1)
    # Zamba2RMSNormGated(intermediate, group_size = intermediate / n_groups): gate first.
    h = y * torch.nn.functional.silu(gate)
    hg = h.view(Bsz, T, G, I // G)
    hg = hg * torch.rsqrt(hg.pow(2).mean(-1, keepdim=True) + cfg["layer_norm_epsilon"])
    h = W[m + "norm.weight"] * hg.view(Bsz, T, I)
    return lin(h, m + "out_proj")


def moe(W, m, cfg, n, bias_in_weights=False, zero_fill=False, margins=None):
    """NemotronHMoE.forward on n (B, T, E): NemotronHTopkRouter's logits, route_tokens_to_experts
    (σ, + e_score_correction_bias for the choice, n_group groups scored by their top 2, the
    topk_group best kept, the others −∞, top-k; the chosen σ scores renormalised + 1e-20
    when norm_topk_prob, × routed_scaling_factor), NemotronHExperts (down(relu(up x)²)), plus
    shared_experts (NemotronHMLP, relu2). bias_in_weights: the weights taken from the scores
    with the bias (a wrong convention); zero_fill: the dropped groups ranked 0 as DeepSeek-V3
    ranks them. `margins` receives each layer's smallest gap at the group and expert choices."""
    X, k, G, TG = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"]
    x = n.reshape(-1, n.shape[-1])
    scores = torch.nn.functional.linear(x, W[m + "gate.weight"]).sigmoid()
    choice = scores + W[m + "gate.e_score_correction_bias"]
    group_scores = choice.view(-1, G, X // G).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=TG, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(-1, G, X // G).reshape(-1, X)
    ranked = choice.masked_fill(~score_mask.bool(), 0.0 if zero_fill else float("-inf"))
    idx = torch.topk(ranked, k=k, dim=-1, sorted=False)[1]
    weights = (choice if bias_in_weights else scores).gather(1, idx)
    if cfg["norm_topk_prob"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    weights = weights * cfg["routed_scaling_factor"]
    if margins is not None:
        gs = group_scores.sort(dim=-1, descending=True).values
        rs = ranked.sort(dim=-1, descending=True).values
        gap = (rs[:, k - 1] - rs[:, k]).min().item()
        if TG < G:
            gap = min(gap, (gs[:, TG - 1] - gs[:, TG]).min().item())
        margins.append(gap)
    relu2 = lambda v: torch.square(torch.relu(v))
    # The latent MoE: hidden_states = fc1_latent_proj(x), the experts on it, fc2_latent_proj
    # of their weighted sum; the router and the shared expert read x.
    latent = cfg.get("moe_latent_size")
    xe = torch.nn.functional.linear(x, W[m + "fc1_latent_proj.weight"]) if latent else x
    out = torch.zeros_like(xe)
    for t in range(x.shape[0]):
        for j in range(k):
            e = int(idx[t, j])
            h = relu2(W[m + f"experts.{e}.up_proj.weight"] @ xe[t])
            out[t] += weights[t, j] * (W[m + f"experts.{e}.down_proj.weight"] @ h)
    if latent:
        out = torch.nn.functional.linear(out, W[m + "fc2_latent_proj.weight"])
    shared = torch.nn.functional.linear(relu2(torch.nn.functional.linear(x, W[m + "shared_experts.up_proj.weight"])),
                                        W[m + "shared_experts.down_proj.weight"])
    return (out + shared).view(n.shape)


def reference(w, cfg, prefix, ids, mask=None, relu2=True, softplus=True, clamp_min=False, chunk_bug=False, **moe_args):
    """ids (B, T), mask (B, T) or None: the stream entering each layer and after the last,
    and per attention layer x, x_norm, q_proj, k_proj, weights and output (after o_proj);
    moe_args go to moe()."""
    W = {k: v.to(DT) for k, v in w.items()}
    eps = cfg["layer_norm_epsilon"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    ids = torch.tensor(ids)
    Bsz, T = ids.shape
    lin = lambda x, name: torch.nn.functional.linear(x, W[name + ".weight"], W.get(name + ".bias"))
    act = (lambda v: torch.square(torch.relu(v))) if relu2 else torch.relu
    # create_causal_mask with a padding mask: key j visible from query i iff j ≤ i and mask[j].
    allowed = (torch.arange(T)[None, :] <= torch.arange(T)[:, None])[None].expand(Bsz, T, T)
    if mask is not None:
        allowed = allowed & mask.bool()[:, None, :]
    mamba_mask = None if mask is None or bool(torch.all(mask == 1)) else mask.to(DT)
    x = W[prefix + "embeddings.weight"][ids]
    hs = [x]
    per = {n: [] for n in ("x", "x_norm", "q_proj", "k_proj", "weights", "output")}
    for l, letter in enumerate(cfg["hybrid_override_pattern"]):
        p = f"{prefix}layers.{l}."
        m = p + "mixer."
        n = rms_norm(x, W[p + "norm.weight"], eps)
        if letter == "M":
            o = mamba2(W, m, cfg, n, mamba_mask, softplus, clamp_min, chunk_bug)
        elif letter == "*":
            qp, kp, v = lin(n, m + "q_proj"), lin(n, m + "k_proj"), lin(n, m + "v_proj")
            q = qp.view(Bsz, T, H, D).transpose(1, 2)
            k = kp.view(Bsz, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
            vv = v.view(Bsz, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
            s = q @ k.transpose(-1, -2) * D ** -0.5
            s = torch.where(allowed[:, None], s, torch.finfo(DT).min)
            att = torch.softmax(s, dim=-1)
            o = lin((att @ vv).transpose(1, 2).reshape(Bsz, T, H * D), m + "o_proj")
            for name, t in (("x", x), ("x_norm", n), ("q_proj", qp), ("k_proj", kp), ("weights", att), ("output", o)):
                per[name].append(t)
        elif letter == "E":
            o = moe(W, m, cfg, n, **moe_args)
        else:
            o = lin(act(lin(n, m + "up_proj")), m + "down_proj")
        x = x + o
        hs.append(x)
    return hs, {name: torch.stack(t) for name, t in per.items()}


def main():
    g = torch.Generator().manual_seed(2028)
    cfg = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": 64, "hidden_size": 32,
           "hybrid_override_pattern": "M-*M*", "num_hidden_layers": 5, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 12, "attention_bias": False, "attention_dropout": 0.0,
           "max_position_embeddings": 4096, "intermediate_size": 48, "mlp_hidden_act": "relu2", "mlp_bias": False,
           "mamba_num_heads": 4, "mamba_head_dim": 4, "n_groups": 2, "ssm_state_size": 6, "conv_kernel": 4,
           "expand": 2, "mamba_hidden_act": "silu", "use_conv_bias": True, "use_bias": False, "chunk_size": 4,
           "time_step_min": 0.05, "time_step_max": 0.1, "time_step_floor": 0.0001,
           "time_step_limit": [0.0, float("inf")], "layer_norm_epsilon": 1e-05, "residual_in_fp32": False,
           "rescale_prenorm_residual": True, "use_mamba_kernels": True, "initializer_range": 0.02,
           "tie_word_embeddings": False, "use_cache": True, "num_logits_to_keep": 1, "pad_token_id": 0,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    w = weights(g, cfg, "backbone.")
    d = os.path.join(FIX, "nemotron-h-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)  # json.dumps writes inf as Infinity

    hs, per = reference(w, cfg, "backbone.", [IDS])
    per = {k: t[:, 0] for k, t in per.items()}  # one sequence: (A, T, …)
    r = None
    for a in per["weights"]:
        a_hat = 0.5 * a.mean(dim=0) + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
        a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)
        r = a_hat if r is None else a_hat @ r
    attention = [l for l, ch in enumerate(cfg["hybrid_override_pattern"]) if ch == "*"]
    e = {"ids": np.array(IDS, dtype=np.int64), "attention_layers": np.array(attention, dtype=np.int64),
         "hidden_states": torch.stack(hs)[:, 0].numpy(), "rollout": r.numpy(),
         "x_layer2": hs[2][0].numpy(), "x_layer4": hs[4][0].numpy()}
    e.update({n: t.numpy() for n, t in per.items()})
    e["wrong_relu_x"] = reference(w, cfg, "backbone.", [IDS], relu2=False)[1]["x"][:, 0].numpy()
    e["wrong_softplus_x"] = reference(w, cfg, "backbone.", [IDS], softplus=False)[1]["x"][:, 0].numpy()
    e["wrong_clamp_x"] = reference(w, cfg, "backbone.", [IDS], clamp_min=True)[1]["x"][:, 0].numpy()
    e["wrong_chunk_x"] = reference(w, cfg, "backbone.", [IDS], chunk_bug=True)[1]["x"][:, 0].numpy()
    e["limit_x"] = reference(w, dict(cfg, time_step_limit=[0.02, 0.3]), "backbone.", [IDS])[1]["x"][:, 0].numpy()
    # A right-padded batch: item 1's last three tokens are padding (pad_token_id 0).
    batch = [IDS, IDS[:7] + [0, 0, 0]]
    mask = torch.tensor([[1] * 10, [1] * 7 + [0] * 3], dtype=torch.int64)
    _, bper = reference(w, cfg, "backbone.", batch, mask=mask)
    e["batch_ids"] = np.array(batch, dtype=np.int64)
    e["batch_mask"] = mask.numpy()
    for name in ("x", "weights", "output"):
        e["batch_" + name] = bper[name].numpy()
    write_npz(os.path.join(d, "expected.npz"), e)

    # Every bias (attention_bias, use_bias, mlp_bias), no conv bias, one group, an attention
    # layer first; config.json with layers_block_type (transformers v5's names) for the
    # pattern and NemotronHConfig's legacy mamba_* names, which it reads first.
    bias = dict(cfg, hybrid_override_pattern="*M-*", num_hidden_layers=4, attention_bias=True, use_bias=True,
                mlp_bias=True, use_conv_bias=False, n_groups=1, conv_kernel=3, time_step_limit=[0.0, 1.5])
    w = weights(g, bias, "backbone.")
    written = {k: v for k, v in bias.items() if k not in ("hybrid_override_pattern", "n_groups", "conv_kernel", "use_conv_bias")}
    written.update(layers_block_type=["full_attention", "linear_attention", "mlp", "full_attention"], mamba_n_groups=1,
                   n_groups=8, mamba_d_conv=3, conv_kernel=4, mamba_conv_bias=False, use_conv_bias=True)
    d = os.path.join(FIX, "nemotron-h-bias-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, written)
    hs, per = reference(w, bias, "backbone.", [IDS])
    e = {"ids": np.array(IDS, dtype=np.int64), "x_layer3": hs[3][0].numpy()}
    e.update({n: t[:, 0].numpy() for n, t in per.items()})
    write_npz(os.path.join(d, "expected.npz"), e)
    moe_case(cfg)


def moe_case(base):
    """nemotron-h-moe-tiny: "E*ME*" (moe, attention, mamba, moe, attention), the "Nemotron 3
    Nano" MoE: 8 routed experts of moe_intermediate_size 8 in n_group 2 (topk_group 1), top
    2, norm_topk_prob, routed_scaling_factor 2.5, a shared expert of 12, stored per expert as
    the Hub's checkpoints hold them (mixer.experts.N.up_proj / down_proj); every group and
    expert choice at least MARGIN from a tie. nemotron-h-moe-tiny-fused: the same weights
    with the experts fused as transformers' NemotronHExperts holds them (mixer.experts.up_proj
    (X, I, E), down_proj (X, E, I)), checked against nemotron-h-moe-tiny's expected.npz."""
    g = torch.Generator().manual_seed(2038)
    cfg = dict(base, hybrid_override_pattern="E*ME*", num_hidden_layers=5, n_routed_experts=8, num_experts_per_tok=2,
               moe_intermediate_size=8, moe_shared_expert_intermediate_size=12, n_shared_experts=1, n_group=2,
               topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5, moe_latent_size=None)
    del cfg["intermediate_size"]  # no "-" layer
    w = weights(g, cfg, "backbone.")
    margins = []
    hs, per = reference(w, cfg, "backbone.", [IDS], margins=margins)
    assert len(margins) == 2 and min(margins) > MARGIN, f"a MoE choice near a tie: {margins}"
    per = {k: t[:, 0] for k, t in per.items()}
    attention = [l for l, ch in enumerate(cfg["hybrid_override_pattern"]) if ch == "*"]
    e = {"ids": np.array(IDS, dtype=np.int64), "attention_layers": np.array(attention, dtype=np.int64),
         "hidden_states": torch.stack(hs)[:, 0].numpy(), "x_layer4": hs[4][0].numpy()}
    e.update({n: t.numpy() for n, t in per.items()})
    for name, args in (("wrong_bias_weights_x", {"bias_in_weights": True}), ("wrong_zero_fill_x", {"zero_fill": True})):
        e[name] = reference(w, cfg, "backbone.", [IDS], **args)[1]["x"][:, 0].numpy()
        assert np.abs(e[name] - e["x"]).max() > 1e-2, name + " gives the same stream"
    d = os.path.join(FIX, "nemotron-h-moe-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    write_npz(os.path.join(d, "expected.npz"), e)
    fused = {k: v for k, v in w.items() if ".mixer.experts." not in k}
    for l, ch in enumerate(cfg["hybrid_override_pattern"]):
        if ch == "E":
            m = f"backbone.layers.{l}.mixer.experts."
            for part in ("up_proj", "down_proj"):
                fused[m + part] = torch.stack([w[m + f"{x}.{part}.weight"] for x in range(cfg["n_routed_experts"])])
    d = os.path.join(FIX, "nemotron-h-moe-tiny-fused")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(fused, {"format": "pt"}))
    write_config(d, cfg)
    latent_case(base)


def latent_case(base):
    """nemotron-h-latent-moe-tiny: "E*" with moe_case's MoE settings but moe_latent_size 6
    (Nemotron 3 Super's latent MoE): the routed experts read fc1_latent_proj(n) (6 wide) and
    their weighted sum goes through fc2_latent_proj; the router and the shared expert read n.
    Every group and expert choice at least MARGIN from a tie."""
    g = torch.Generator().manual_seed(2041)
    cfg = dict(base, hybrid_override_pattern="E*", num_hidden_layers=2, n_routed_experts=8, num_experts_per_tok=2,
               moe_intermediate_size=8, moe_shared_expert_intermediate_size=12, n_shared_experts=1, n_group=2,
               topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5, moe_latent_size=6)
    del cfg["intermediate_size"]
    w = weights(g, cfg, "backbone.")
    margins = []
    hs, per = reference(w, cfg, "backbone.", [IDS], margins=margins)
    assert len(margins) == 1 and min(margins) > MARGIN, f"a MoE choice near a tie: {margins}"
    per = {k: t[:, 0] for k, t in per.items()}
    e = {"ids": np.array(IDS, dtype=np.int64), "attention_layers": np.array([1], dtype=np.int64),
         "hidden_states": torch.stack(hs)[:, 0].numpy()}
    e.update({n: t.numpy() for n, t in per.items()})
    d = os.path.join(FIX, "nemotron-h-latent-moe-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_config(d, cfg)
    write_npz(os.path.join(d, "expected.npz"), e)


if __name__ == "__main__":
    main()
