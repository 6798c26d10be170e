#!/usr/bin/python3
"""Generates the committed fixtures of tests/fixtures/rope-scaling/: RoPE scalings as HF
transformers computes them, transcribed here in PyTorch from
src/transformers/modeling_rope_utils.py (transformers is not installed on this machine;
the functions below follow it line by line, sharing nothing with attn):

  default   _compute_default_rope_parameters    inv_freq = 1 / theta^(arange(0, R, 2) / R)
  linear    _compute_linear_scaling_rope_parameters   inv_freq / factor
  dynamic   _compute_dynamic_ntk_parameters     base scaled by (factor*L/max - (factor-1))^(R/(R-2))
                                                for L = max(position_ids) + 1 > max_position_embeddings
  yarn      _compute_yarn_parameters            ramp between interpolation and extrapolation,
                                                attention factor 0.1*ln(factor) + 1 (or mscale ratio)
  llama3    _compute_llama3_parameters          by wavelength against original_max / {low, high}_freq_factor
  longrope  _compute_longrope_parameters        long_factor when L > original_max, short_factor otherwise;
                                                attention factor sqrt(1 + ln(factor) / ln(original_max))

and the rotary module's forward (models/llama/modeling_llama.py, LlamaRotaryEmbedding.forward:
freqs = inv_freq @ position_ids, emb = cat(freqs, freqs), cos = emb.cos() * attention_scaling,
likewise sin) with apply_rotary_pos_emb (q * cos + rotate_half(q) * sin on the first R dims,
the rest passed through as in models/phi3/modeling_phi3.py). The sequence length L the
dynamic and longrope scalings read is max(position_ids) + 1, as the dynamic_rope_update
decorator (modeling_rope_utils.py) computes it on a model's first forward pass.

Where transformers versions differ, the current one is followed: yarn uses the configured
`factor`, as current transformers does (older releases replaced it by
max_position_embeddings / original_max_position_embeddings whenever the config had the latter),
and `truncate` (default true; gpt-oss sets false) decides whether the correction range is
floored/ceiled.

Everything is computed in float64 (the transcription takes the dtype as a parameter;
transformers itself computes inv_freq and the tables in float32): the expected values are
the exact ones to within float64 rounding. inv_freq_float32 is the same function run in
float32, as transformers runs it, for a looser check that the float64 transcription is the
same function.

Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_rope_scaling_fixtures.py

cases.json gives each case's scaling parameters; each <case>.npz holds positions (B, T)
int64, inv_freq (R/2), inv_freq_float32, attention_factor (a 0-d array), cos and sin
(B, T, R/2: the first half of transformers' (B, T, R) tables, whose second half repeats
it), q (B, H, T, D) and q_embed, apply_rotary_pos_emb's output. The output is
deterministic: rerunning this script must leave `git status` clean.
"""

import json
import math
import os

from fixture_npz import write_npz
import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "rope-scaling")
DT = torch.float64


# ---------------------------------------------------------------------------------------
# modeling_rope_utils.py, transcribed. `p` holds what the config gives: theta (rope_theta),
# dim (int(head_dim * partial_rotary_factor)), max_position_embeddings and the
# rope_scaling entries; `dt` the dtype transformers hard-codes as float32.

def _compute_default_rope_parameters(p, seq_len, dt):
    base, dim = p["theta"], p["dim"]
    attention_factor = 1.0  # Unused in this type of RoPE
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dt) / dim))
    return inv_freq, attention_factor


def _compute_linear_scaling_rope_parameters(p, seq_len, dt):
    factor = p["factor"]
    inv_freq, attention_factor = _compute_default_rope_parameters(p, seq_len, dt)
    inv_freq /= factor
    return inv_freq, attention_factor


def _compute_dynamic_ntk_parameters(p, seq_len, dt):
    base, dim = p["theta"], p["dim"]
    max_position_embeddings = p["max_position_embeddings"]
    factor = p["factor"]
    attention_factor = 1.0  # Unused in this type of RoPE
    # seq_len: default to max_position_embeddings, e.g. at init time
    if seq_len is None:
        seq_len = max_position_embeddings
    else:
        seq_len = max(seq_len, max_position_embeddings)
    base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dt) / dim))
    return inv_freq, attention_factor


def _compute_yarn_parameters(p, seq_len, dt):
    base, dim = p["theta"], p["dim"]
    factor = p["factor"]
    attention_factor = p.get("attention_factor")
    mscale = p.get("mscale")
    mscale_all_dim = p.get("mscale_all_dim")
    original_max_position_embeddings = p.get("original_max_position_embeddings") or p["max_position_embeddings"]

    def get_mscale(scale, mscale=1):
        if scale <= 1:
            return 1.0
        return 0.1 * mscale * math.log(scale) + 1.0

    # Sets the attention factor as suggested in the paper
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)

    # beta_fast/beta_slow: as suggested in the paper, default to 32/1 (correspondingly)
    beta_fast = p.get("beta_fast") or 32
    beta_slow = p.get("beta_slow") or 1

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate):
        low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
        high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
        if truncate:
            low = math.floor(low)
            high = math.ceil(high)
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):
        if min == max:
            max += 0.001  # Prevent singularity
        linear_func = (torch.arange(dim, dtype=dt) - min) / (max - min)
        ramp_func = torch.clamp(linear_func, 0, 1)
        return ramp_func

    pos_freqs = base ** (torch.arange(0, dim, 2).to(dt) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)

    truncate = p.get("truncate", True)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings, truncate)

    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).to(dt)
    inv_freq = (
        inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
        + inv_freq_extrapolation * inv_freq_extrapolation_factor
    )
    return inv_freq, attention_factor


def _compute_longrope_parameters(p, seq_len, dt):
    base, dim = p["theta"], p["dim"]
    long_factor = p["long_factor"]
    short_factor = p["short_factor"]
    factor = p.get("factor")
    attention_factor = p.get("attention_factor")
    original_max_position_embeddings = p["original_max_position_embeddings"]
    # Phi-3 gives no factor: the ratio of the two lengths.
    if factor is None:
        factor = p["max_position_embeddings"] / original_max_position_embeddings

    if attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original_max_position_embeddings))

    # Compute the inverse frequencies -- scaled based on the target sequence length
    if seq_len and seq_len > original_max_position_embeddings:
        ext_factors = torch.tensor(long_factor, dtype=dt)
    else:
        ext_factors = torch.tensor(short_factor, dtype=dt)
    inv_freq_shape = torch.arange(0, dim, 2, dtype=torch.int64).to(dt) / dim
    inv_freq = 1.0 / (ext_factors * base**inv_freq_shape)
    return inv_freq, attention_factor


def _compute_llama3_parameters(p, seq_len, dt):
    inv_freq, attention_factor = _compute_default_rope_parameters(p, seq_len, dt)

    factor = p["factor"]  # `8` in the original implementation
    low_freq_factor = p["low_freq_factor"]  # `1` in the original implementation
    high_freq_factor = p["high_freq_factor"]  # `4` in the original implementation
    old_context_len = p["original_max_position_embeddings"]  # `8192` in the original implementation

    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor

    wavelen = 2 * math.pi / inv_freq
    # wavelen < high_freq_wavelen: do nothing
    # wavelen > low_freq_wavelen: divide by factor
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # otherwise: interpolate between the two, using a smooth factor
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    return inv_freq_llama, attention_factor


ROPE_INIT_FUNCTIONS = {
    "default": _compute_default_rope_parameters,
    "linear": _compute_linear_scaling_rope_parameters,
    "dynamic": _compute_dynamic_ntk_parameters,
    "yarn": _compute_yarn_parameters,
    "longrope": _compute_longrope_parameters,
    "llama3": _compute_llama3_parameters,
}


# models/llama/modeling_llama.py
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary_forward(inv_freq, attention_scaling, position_ids):
    """LlamaRotaryEmbedding.forward: (B, T, R) cos and sin, scaled by the attention factor."""
    inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].to(inv_freq.dtype)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * attention_scaling
    sin = emb.sin() * attention_scaling
    return cos, sin


def apply_rotary_pos_emb(q, cos, sin, unsqueeze_dim=1):
    """models/phi3/modeling_phi3.py: rotates the first R = cos.shape[-1] dims, passes the rest."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    return torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)


# ---------------------------------------------------------------------------------------
# Published configurations.

# Phi-3.5-mini-instruct's config.json (rope_scaling "longrope", 48 = 96 / 2 factors each;
# Phi-3-mini-128k-instruct has the same shape: head_dim 96, original 4096, max 131072).
PHI_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062,
]
PHI_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979,
    1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662,
    1.2899998426437378, 1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
    1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
    2.729999542236328, 2.749999523162842, 2.8399994373321533,
]
assert len(PHI_LONG) == 48 and len(PHI_SHORT) == 48

# (name, description, rope_type, parameters, head_dim D, positions per batch row)
SHORT = [[0, 1, 2, 3, 7, 100, 1000, 4000]]
LONG_4K = [[0, 1, 2, 4095, 4096, 4097, 8191, 8192], [17, 300, 2048, 5000, 30000, 65536, 100000, 131071]]
CASES = [
    ("default_llama2", "Llama 2: theta 10000, unscaled", "default",
     {"theta": 10000.0, "dim": 128}, 128, SHORT),
    ("default_gemma3_local", "Gemma 3's local (sliding-window) layers: rope_local_base_freq 10000, unscaled, "
     "head_dim 256", "default", {"theta": 10000.0, "dim": 256}, 256, LONG_4K),
    ("linear_gemma3_global", "Gemma 3's global layers: theta 1e6, linear factor 8, head_dim 256", "linear",
     {"theta": 1000000.0, "dim": 256, "factor": 8.0}, 256, LONG_4K),
    ("dynamic_short", "dynamic NTK factor 2, max_position_embeddings 4096, every position < 4096 "
     "(= default)", "dynamic",
     {"theta": 10000.0, "dim": 128, "factor": 2.0, "max_position_embeddings": 4096}, 128, SHORT),
    ("dynamic_long", "dynamic NTK factor 2, max_position_embeddings 4096, positions up to 131071 "
     "(L = 131072)", "dynamic",
     {"theta": 10000.0, "dim": 128, "factor": 2.0, "max_position_embeddings": 4096}, 128, LONG_4K),
    ("llama3_llama31_8b", "Llama 3.1 8B: theta 500000, factor 8, low_freq_factor 1, high_freq_factor 4, "
     "original 8192", "llama3",
     {"theta": 500000.0, "dim": 128, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "max_position_embeddings": 131072}, 128, LONG_4K),
    ("yarn_qwen25", "Qwen2.5 7B: theta 1e6, yarn factor 4, original 32768 (truncate default true)", "yarn",
     {"theta": 1000000.0, "dim": 128, "factor": 4.0, "original_max_position_embeddings": 32768,
      "max_position_embeddings": 32768}, 128, LONG_4K),
    ("yarn_gpt_oss", "gpt-oss: theta 150000, head_dim 64, yarn factor 32, beta_fast 32, beta_slow 1, "
     "original 4096, truncate false", "yarn",
     {"theta": 150000.0, "dim": 64, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
      "original_max_position_embeddings": 4096, "max_position_embeddings": 131072, "truncate": False}, 64, LONG_4K),
    ("yarn_deepseek_mscale", "DeepSeek-V3's yarn shape (factor 40, mscale 1, mscale_all_dim 1, original 4096) "
     "on a 64-dim rotary part: attention factor 1", "yarn",
     {"theta": 10000.0, "dim": 64, "factor": 40.0, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
      "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "max_position_embeddings": 163840},
     64, LONG_4K),
    ("yarn_mscale_ratio", "yarn factor 16 with mscale 0.707 and mscale_all_dim 1 (attention factor the "
     "ratio of the two get_mscale values), original 2048", "yarn",
     {"theta": 10000.0, "dim": 64, "factor": 16.0, "mscale": 0.707, "mscale_all_dim": 1.0,
      "original_max_position_embeddings": 2048, "max_position_embeddings": 32768}, 64, LONG_4K),
    ("yarn_attention_factor", "yarn factor 8 with an explicit attention_factor 1.25, beta_fast 16, beta_slow 2",
     "yarn",
     {"theta": 10000.0, "dim": 64, "factor": 8.0, "attention_factor": 1.25, "beta_fast": 16.0, "beta_slow": 2.0,
      "original_max_position_embeddings": 4096, "max_position_embeddings": 32768}, 64, LONG_4K),
    ("longrope_phi35_short", "Phi-3.5-mini: longrope, 48 short/long factors, original 4096, max 131072 "
     "(factor 32), every position < 4096: short_factor", "longrope",
     {"theta": 10000.0, "dim": 96, "short_factor": PHI_SHORT, "long_factor": PHI_LONG,
      "original_max_position_embeddings": 4096, "max_position_embeddings": 131072}, 96, SHORT),
    ("longrope_phi35_long", "Phi-3.5-mini: longrope, positions up to 131071: long_factor", "longrope",
     {"theta": 10000.0, "dim": 96, "short_factor": PHI_SHORT, "long_factor": PHI_LONG,
      "original_max_position_embeddings": 4096, "max_position_embeddings": 131072}, 96, LONG_4K),
    ("longrope_partial", "partial rotary (Phi-4-mini's shape: head_dim 128, partial_rotary_factor 0.75, "
     "R = 96) with Phi-3.5-mini's factors, long", "longrope",
     {"theta": 10000.0, "dim": 96, "short_factor": PHI_SHORT, "long_factor": PHI_LONG,
      "original_max_position_embeddings": 4096, "max_position_embeddings": 131072}, 128, LONG_4K),
    ("yarn_partial", "yarn factor 4, original 32768, on R = 32 of head_dim 64 (partial_rotary_factor 0.5)",
     "yarn",
     {"theta": 1000000.0, "dim": 32, "factor": 4.0, "original_max_position_embeddings": 32768,
      "max_position_embeddings": 131072}, 64, LONG_4K),
]


def main():
    os.makedirs(ROOT, exist_ok=True)
    torch.manual_seed(20261127)
    index = []
    H = 2
    for name, description, rope_type, params, D, rows in CASES:
        positions = torch.tensor(rows, dtype=torch.int64)
        B, T = positions.shape
        seq_len = int(positions.max()) + 1  # dynamic_rope_update: torch.max(position_ids) + 1
        fn = ROPE_INIT_FUNCTIONS[rope_type]
        # The rotary module at init (seq_len None), then the decorator's update for this pass.
        inv_freq, attention_factor = fn(params, None, DT)
        inv32, _ = fn(params, None, torch.float32)
        if rope_type == "dynamic" and seq_len > params["max_position_embeddings"]:
            inv_freq, attention_factor = fn(params, seq_len, DT)
            inv32, _ = fn(params, seq_len, torch.float32)
        if rope_type == "longrope" and seq_len > params["original_max_position_embeddings"]:
            inv_freq, _ = fn(params, params["original_max_position_embeddings"] + 1, DT)
            inv32, _ = fn(params, params["original_max_position_embeddings"] + 1, torch.float32)
        R = params["dim"]
        assert inv_freq.shape == (R // 2,)
        cos, sin = rotary_forward(inv_freq, attention_factor, positions)
        assert torch.equal(cos[..., : R // 2], cos[..., R // 2:]) and torch.equal(sin[..., : R // 2], sin[..., R // 2:])
        q = torch.randn(B, H, T, D, dtype=DT)
        q_embed = apply_rotary_pos_emb(q, cos, sin)
        write_npz(os.path.join(ROOT, name + ".npz"), {
            "positions": positions.numpy(),
            "inv_freq": inv_freq.numpy(),
            "inv_freq_float32": inv32.numpy(),
            "attention_factor": np.array(attention_factor, dtype=np.float64),
            "cos": cos[..., : R // 2].contiguous().numpy(),
            "sin": sin[..., : R // 2].contiguous().numpy(),
            "q": q.numpy(),
            "q_embed": q_embed.numpy(),
        })
        entry = {"name": name, "description": description, "rope_type": rope_type, "head_dim": D,
                 "seq_len": seq_len, "attention_factor": attention_factor}
        entry["parameters"] = {k: v for k, v in params.items()}
        index.append(entry)
    with open(os.path.join(ROOT, "cases.json"), "w") as f:
        json.dump({"generator": "scripts/make_rope_scaling_fixtures.py", "cases": index}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
