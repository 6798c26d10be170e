#!/usr/bin/python3
"""Generates the committed fixtures of tests/fixtures/blocks/: the block numerics the
families of docs/design.md §5.2 need beyond llama's, transcribed here in PyTorch from HF
transformers' modeling code (transformers is not installed on this machine; the functions
below follow it line by line, sharing nothing with attn):

  mixtral     models/mixtral/modeling_mixtral.py, MixtralSparseMoeBlock.forward: softmax over
              all experts (float32 in transformers), torch.topk, renormalise the top-k;
              experts w2(silu(w1 x) * w3 x)
  qwen2_moe   models/qwen2_moe/modeling_qwen2_moe.py, Qwen2MoeSparseMoeBlock.forward: the same,
              renormalised only when norm_topk_prob, plus shared_expert (Qwen2MoeMLP) scaled by
              sigmoid(shared_expert_gate(x)) (Linear(hidden, 1, bias=False))
  qwen3_moe   models/qwen3_moe/modeling_qwen3_moe.py, Qwen3MoeSparseMoeBlock.forward: no shared
              expert, norm_topk_prob (true in published configs)
  gpt_oss     models/gpt_oss/modeling_gpt_oss.py, GptOssTopKRouter.forward (Linear with bias,
              torch.topk over the logits, softmax over the k chosen) and GptOssExperts.forward
              (gate_up = x @ gate_up_proj[e] + bias; gate, up = gate_up[..., ::2],
              gate_up[..., 1::2]; gate.clamp(max=limit); up.clamp(-limit, limit);
              glu = gate * sigmoid(gate * alpha); (up + 1) * glu @ down_proj[e] + bias)
  mxfp4       integrations/mxfp4.py, FP4_VALUES and convert_moe_packed_tensors (low nibble
              first, ldexp by scale - 127, reshape to (*prefix, G*32), transpose(1, 2))
  gemma_norm  models/gemma/modeling_gemma.py, GemmaRMSNorm.forward: x.float(), x*rsqrt(mean(x^2)
              + eps), * (1 + w.float()), cast back
  gated_mlp   models/gemma/modeling_gemma.py, GemmaMLP.forward: down(gelu_tanh(gate x) * up x)
  fused_mlp   models/phi3/modeling_phi3.py, Phi3MLP.forward: gate, up = gate_up_proj(x).chunk(2)
              ([gate | up] along the output rows), down(up * silu(gate))
  neox_mlp    models/gpt_neox/modeling_gpt_neox.py, GPTNeoXMLP.forward: dense_4h_to_h(gelu(
              dense_h_to_4h(x))), both with biases, hidden_act gelu (exact, erf) as Pythia

transformers versions: gpt-oss and MXFP4 follow the files as read at transformers commits
00d4b3d (models/gpt_oss/modeling_gpt_oss.py, GptOssExperts' eval path, with limit 7.0
fixed there; Mxfp4GptOssExperts takes it from config.swiglu_limit, default 7.0) and 0189b1d (integrations/mxfp4.py, v5
development with Mxfp4Quantize; convert_moe_packed_tensors is the function the gpt-oss
release shipped). The SwiGLU MoE blocks follow the per-expert loop of the 4.x modeling files
(mixtral, qwen2_moe, qwen3_moe); v5's MixtralTopKRouter + MixtralExperts (fused gate_up_proj,
[gate | up]) compute the same numbers. transformers takes the router softmax in float32;
here it is float64 like the rest.

torch.topk's choice between equal values is not specified; on the CPU it is what ATen's
topk_impl_loop (aten/src/ATen/native/TopKImpl.h) gets from std::nth_element (or
std::partial_sort when 64k <= n) and std::sort over (value, index) pairs compared by value
only, which attn runs the same way. The cases with a tie in router logits (mixtral token 0,
qwen2_moe token 1, gpt_oss token 2) tie exactly at the k-th place (the script asserts it);
torch picked the lower index in some and the higher in others, and the fixture records it.

Everything is float64 except the MXFP4 tables (float32; the script checks that transformers'
default bfloat16 gives the same values) and GemmaRMSNorm, which computes in float32 as Gemma does.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_block_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import os

from fixture_npz import write_npz
import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "blocks")
DT = torch.float64


def rand(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=DT) * scale


def np_(t):
    return t.detach().cpu().numpy()


# --- Mixtral / Qwen2-MoE / Qwen3-MoE: softmax over all experts, then top-k -------------
def softmax_topk_moe(x, router, gate, up, down, top_k, norm_topk_prob, shared=None):
    """MixtralSparseMoeBlock.forward / Qwen2MoeSparseMoeBlock.forward, per expert as there.
    router (E, H); gate, up (E, I, H); down (E, H, I) (nn.Linear weights, out x in)."""
    router_logits = F.linear(x, router)
    routing_weights = F.softmax(router_logits, dim=1, dtype=DT)
    routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    if norm_topk_prob:
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    final = torch.zeros_like(x)
    expert_mask = F.one_hot(selected_experts, num_classes=router.shape[0]).permute(2, 1, 0)
    for e in range(router.shape[0]):
        idx, top_x = torch.where(expert_mask[e])
        cur = x[None, top_x].reshape(-1, x.shape[1])
        h = F.linear(F.silu(F.linear(cur, gate[e])) * F.linear(cur, up[e]), down[e])
        final.index_add_(0, top_x, h * routing_weights[top_x, idx, None])
    if shared is not None:
        sg, su, sd, sgate = shared
        s = F.linear(F.silu(F.linear(x, sg)) * F.linear(x, su), sd)
        final = final + torch.sigmoid(F.linear(x, sgate)) * s
    return final, router_logits, selected_experts, routing_weights


def swiglu_case(name, seed, N, H, I, E, k, norm, shared_I=0, tie=None):
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, H)
    router = rand(g, E, H, scale=0.5)
    if tie is not None:
        # token t: expert `lead` first, experts a < b tied exactly for the k-th place
        t, lead, a, b = tie
        x[t, 0] = 0.0
        u = x[t] / x[t].dot(x[t])
        router[lead] = 9.0 * u
        router[a] = 7.0 * u
        router[b] = 7.0 * u
        router[b, 0] += 0.25   # differs only where x[t] is 0: other tokens do not tie
    gate, up = rand(g, E, I, H, scale=0.3), rand(g, E, I, H, scale=0.3)
    down = rand(g, E, H, I, scale=0.3)
    arrays = {"x": x, "router": router, "gate": gate, "up": up, "down": down}
    shared = None
    if shared_I:
        shared = (rand(g, shared_I, H, scale=0.3), rand(g, shared_I, H, scale=0.3),
                  rand(g, H, shared_I, scale=0.3), rand(g, 1, H, scale=0.5))
        arrays.update(shared_gate=shared[0], shared_up=shared[1], shared_down=shared[2],
                      shared_expert_gate=shared[3])
    out, logits, sel, rw = softmax_topk_moe(x, router, gate, up, down, k, norm, shared)
    if tie is not None:
        t, lead, a, b = tie
        assert logits[t, a] == logits[t, b], "no exact tie"
        chosen = sel[t].tolist()
        assert chosen[0] == lead and len({a, b} & set(chosen)) == 1, f"not a tie at the k-th place: {chosen}"
    arrays.update(output=out, router_logits=logits, selected=sel.to(torch.int64), routing_weights=rw)
    write_npz(os.path.join(ROOT, name + ".npz"), {n: np_(v) for n, v in arrays.items()})


# --- gpt-oss: top-k over router logits, softmax over the k; clamped interleaved experts --
def gpt_oss_moe(x, rw_, rb, gate_up, gate_up_bias, down, down_bias, top_k, alpha=1.702, limit=7.0):
    """GptOssTopKRouter.forward + GptOssExperts.forward (eval path)."""
    router_logits = F.linear(x, rw_, rb)
    top_value, router_indices = torch.topk(router_logits, top_k, dim=-1)
    top_value = F.softmax(top_value, dim=1, dtype=top_value.dtype)
    router_scores = torch.zeros_like(router_logits).scatter_(1, router_indices, top_value)
    E = gate_up.shape[0]
    hs = x.repeat(E, 1).view(E, -1, x.shape[1])
    gu = torch.bmm(hs, gate_up) + gate_up_bias[..., None, :]
    gate, up = gu[..., ::2], gu[..., 1::2]
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    nxt = torch.bmm((up + 1) * glu, down) + down_bias[..., None, :]
    nxt = nxt * router_scores.transpose(0, 1)[..., None]
    return nxt.sum(dim=0), router_logits, router_indices, top_value


def gpt_oss_case(name, seed, N, H, I, E, k, limit, tie=None):
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, H)
    router = rand(g, E, H, scale=0.5)
    rb = rand(g, E, scale=0.5)
    if tie is not None:
        t, lead, a, b = tie
        x[t, 0] = 0.0
        u = x[t] / x[t].dot(x[t])
        rb[lead] = rb[a] = rb[b] = 0.0
        router[lead] = 9.0 * u
        router[a] = 7.0 * u
        router[b] = 7.0 * u
        router[b, 0] += 0.25
    gate_up = rand(g, E, H, 2 * I, scale=1.0)   # large enough that the clamp bites
    gate_up_bias = rand(g, E, 2 * I, scale=0.5)
    down = rand(g, E, I, H, scale=0.3)
    down_bias = rand(g, E, H, scale=0.3)
    out, logits, sel, tv = gpt_oss_moe(x, router, rb, gate_up, gate_up_bias, down, down_bias, k, limit=limit)
    if tie is not None:
        t, lead, a, b = tie
        assert logits[t, a] == logits[t, b], "no exact tie"
        chosen = sel[t].tolist()
        assert chosen[0] == lead and len({a, b} & set(chosen)) == 1, f"not a tie at the k-th place: {chosen}"
    gu = torch.bmm(x.repeat(E, 1).view(E, -1, H), gate_up) + gate_up_bias[..., None, :]
    assert (gu[..., ::2] > limit).any() and (gu[..., 1::2].abs() > limit).any(), "clamp never bites"
    arrays = {"x": x, "router": router, "router_bias": rb, "gate_up": gate_up, "gate_up_bias": gate_up_bias,
              "down": down, "down_bias": down_bias, "output": out, "router_logits": logits,
              "selected": sel.to(torch.int64), "routing_weights": tv, "limit": torch.tensor(limit, dtype=DT)}
    write_npz(os.path.join(ROOT, name + ".npz"), {n: np_(v) for n, v in arrays.items()})


# --- MXFP4: integrations/mxfp4.py ------------------------------------------------------
FP4_VALUES = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def convert_moe_packed_tensors(blocks, scales, dtype):
    """convert_moe_packed_tensors, one chunk (rows_per_chunk covers these sizes)."""
    scales = scales.to(torch.int32) - 127
    assert blocks.shape[:-1] == scales.shape
    lut = torch.tensor(FP4_VALUES, dtype=dtype)
    *prefix_shape, G, B = blocks.shape
    rows_total = int(np.prod(prefix_shape)) * G
    blocks = blocks.reshape(rows_total, B)
    scales = scales.reshape(rows_total, 1)
    out = torch.empty(rows_total, B * 2, dtype=dtype)
    idx_lo = (blocks & 0x0F).to(torch.long)
    idx_hi = (blocks >> 4).to(torch.long)
    out[:, 0::2] = lut[idx_lo]
    out[:, 1::2] = lut[idx_hi]
    torch.ldexp(out, scales, out=out)
    out = out.reshape(*prefix_shape, G, B * 2).view(*prefix_shape, G * B * 2)
    return out.transpose(1, 2).contiguous()


def mxfp4_case(name, seed, E, R, G, lo, hi):
    g = torch.Generator().manual_seed(seed)
    blocks = torch.randint(0, 256, (E, R, G, 16), generator=g, dtype=torch.int64).to(torch.uint8)
    scales = torch.randint(lo, hi + 1, (E, R, G), generator=g, dtype=torch.int64).to(torch.uint8)
    f32 = convert_moe_packed_tensors(blocks, scales, torch.float32)
    bf16 = convert_moe_packed_tensors(blocks, scales, torch.bfloat16)
    assert torch.equal(bf16.to(torch.float32), f32), "bfloat16 and float32 dequantisation differ"
    write_npz(os.path.join(ROOT, name + ".npz"),
              {"blocks": np_(blocks), "scales": np_(scales), "dequantized": np_(f32)})


# --- Gemma RMSNorm, gated MLPs --------------------------------------------------------
def gemma_rms_norm(x, w, eps):
    """GemmaRMSNorm.forward: computed in float32, (1 + w), cast back to x's dtype."""
    def _norm(v):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
    output = _norm(x.float())
    output = output * (1.0 + w.float())
    return output.type_as(x)


def gelu_tanh(v):
    # transformers.activations.PytorchGELUTanh (gelu_pytorch_tanh)
    return F.gelu(v, approximate="tanh")


def norm_mlp_case(name, seed, N, H, I):
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, H)
    w = rand(g, H, scale=0.5)
    eps = 1e-6
    gate, up, down = rand(g, I, H, scale=0.3), rand(g, I, H, scale=0.3), rand(g, H, I, scale=0.3)
    gated = F.linear(gelu_tanh(F.linear(x, gate)) * F.linear(x, up), down)        # GemmaMLP
    gate_up = torch.cat([gate, up], dim=0)                                         # Phi3 gate_up_proj
    gs, us = F.linear(x, gate_up).chunk(2, dim=-1)
    fused = F.linear(us * F.silu(gs), down)                                        # Phi3MLP
    w_in, b_in = rand(g, I, H, scale=0.3), rand(g, I, scale=0.3)
    w_out, b_out = rand(g, H, I, scale=0.3), rand(g, H, scale=0.3)
    neox = F.linear(F.gelu(F.linear(x, w_in, b_in)), w_out, b_out)                # GPTNeoXMLP
    arrays = {"w_in": w_in, "b_in": b_in, "w_out": w_out, "b_out": b_out, "neox_mlp_gelu": neox,
              "x": x, "norm_weight": w, "eps": torch.tensor(eps, dtype=DT),
              "gemma_norm": gemma_rms_norm(x, w, eps), "gate": gate, "up": up, "down": down,
              "gated_mlp_gelu_tanh": gated, "gate_up": gate_up, "fused_mlp_silu": fused}
    write_npz(os.path.join(ROOT, name + ".npz"), {n: np_(v) for n, v in arrays.items()})


def main():
    swiglu_case("mixtral", 1, N=5, H=16, I=24, E=8, k=2, norm=True, tie=(0, 1, 3, 6))
    swiglu_case("qwen2_moe", 2, N=6, H=24, I=12, E=6, k=2, norm=False, shared_I=20, tie=(1, 4, 0, 2))
    swiglu_case("qwen3_moe", 3, N=4, H=32, I=16, E=8, k=2, norm=True)
    gpt_oss_case("gpt_oss", 4, N=5, H=16, I=8, E=4, k=2, limit=7.0, tie=(2, 0, 1, 3))
    mxfp4_case("mxfp4", 5, E=2, R=6, G=2, lo=118, hi=132)
    norm_mlp_case("norm_mlp", 6, N=5, H=16, I=20)


if __name__ == "__main__":
    main()
