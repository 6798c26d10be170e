#!/usr/bin/python3
"""Generates the committed PyTorch fixtures under tests/fixtures/torch/.

Run with Debian's Python (python3-torch 1.13 and NumPy live there, not in the python3
first on PATH):

    /usr/bin/python3 scripts/make_torch_fixtures.py

Each case is a torch.nn.MultiheadAttention (batch_first=True, float64, every parameter
drawn at random under a fixed seed, dropout 0) run on random inputs. It writes

  <case>.npz   the inputs under attn's bundle names (x, x_kv, w_q, w_k, w_v, b_q, b_k,
               b_v, in_proj_weight, in_proj_bias, w_o, b_o, key_padding_mask,
               attn_mask) and what PyTorch returned: expected_output (attn_output)
               and expected_weights (attn_output_weights)
  cases.json   per case: the attn options that express the same computation, and
               what the case covers

Conventions translated on the way (attn's docs/design.md §1):
  - MHA's bool attn_mask is True = NOT allowed; attn's is True = attend, so the saved
    attn_mask is the logical negation. A float attn_mask is additive in both.
  - key_padding_mask (True = padding) is the same in both and saved as is.
  - MHA's per-head attn_mask (B·H, Tq, Tk) is indexed b·H + h: saved as (B, H, Tq, Tk).
  - out_proj.weight / out_proj.bias are attn's w_o / b_o (nn.Linear (out, in) layout,
    attn's default --weight-layout out-in).
  - A causal case uses an additive -inf upper triangle in torch (1.13's MHA has no
    is_causal) and `--mask causal` in attn.

The C++ test (tests/core/test_torch_fixtures.cpp) runs
`attn compute <case>.npz <options> --dtype float64 --dump output,weights` and compares.
The output is deterministic: rerunning this script must leave `git status` clean.
"""

import json
import os

import numpy as np
from fixture_npz import write_npz
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "torch")
DT = torch.float64


def make_mha(embed_dim, heads, kdim=None, vdim=None, batch_first=True):
    mha = torch.nn.MultiheadAttention(embed_dim, heads, dropout=0.0, bias=True, kdim=kdim, vdim=vdim,
                                      batch_first=batch_first, dtype=DT)
    mha.eval()
    # The default init zeroes the biases: draw everything so that every bias matters.
    # Scale 1/sqrt(fan_in) keeps the scores O(1), so the softmax is not saturated.
    with torch.no_grad():
        for p in mha.parameters():
            fan_in = p.shape[-1] if p.dim() == 2 else embed_dim
            p.copy_(torch.randn(p.shape, dtype=DT) / fan_in ** 0.5)
    return mha


def weight_arrays(mha, packed):
    """attn's names for the module's parameters: packed in_proj_* or separate w_*/b_*."""
    E = mha.embed_dim
    out = {"w_o": mha.out_proj.weight, "b_o": mha.out_proj.bias}
    b_q, b_k, b_v = mha.in_proj_bias[:E], mha.in_proj_bias[E:2 * E], mha.in_proj_bias[2 * E:]
    if mha._qkv_same_embed_dim:
        if packed:
            out.update(in_proj_weight=mha.in_proj_weight, in_proj_bias=mha.in_proj_bias)
        else:
            w = mha.in_proj_weight
            out.update(w_q=w[:E], w_k=w[E:2 * E], w_v=w[2 * E:], b_q=b_q, b_k=b_k, b_v=b_v)
    else:
        assert not packed, "kdim/vdim != embed_dim has no packed in_proj_weight"
        out.update(w_q=mha.q_proj_weight, w_k=mha.k_proj_weight, w_v=mha.v_proj_weight, b_q=b_q, b_k=b_k, b_v=b_v)
    return {k: v.detach().numpy().copy() for k, v in out.items()}


CASES = []


def case(name, description, options, *, E, H, B=2, Tq=5, Tk=None, kdim=None, packed=True,
         average=True, unbatched=False, key_padding_lengths=None, bool_mask=False, float_mask=False,
         per_head_mask=False, causal=False, seq_first=False, torch_masks=False, hf_lengths=None):
    """Builds one case. Tk is None for self-attention (x is query, key and value).
    seq_first: the module has batch_first=False and x is saved (T, B, E) as torch takes it.
    torch_masks: attn_mask is saved as torch takes it (bool True = blocked, per-head
    (B*H, Tq, Tk)), for attn's --attn-mask-true masked. hf_lengths: a Hugging Face
    attention_mask (B, Tk) int64, 1 = real token, saved as attention_mask and given to
    torch as key_padding_mask = attention_mask == 0."""
    cross = Tk is not None
    Tk = Tk if cross else Tq
    mha = make_mha(E, H, kdim=kdim, vdim=kdim, batch_first=not seq_first)
    lead = () if unbatched else (B,)
    x = torch.randn(*lead, Tq, E, dtype=DT)
    x_kv = torch.randn(*lead, Tk, kdim or E, dtype=DT) if cross else x
    if seq_first:
        x = x.transpose(0, 1).contiguous()
        x_kv = x_kv.transpose(0, 1).contiguous() if cross else x
    arrays = {"x": x.numpy()}
    if cross:
        arrays["x_kv"] = x_kv.numpy()
    arrays.update(weight_arrays(mha, packed))

    kwargs = {"need_weights": True, "average_attn_weights": average}
    if key_padding_lengths is not None:
        kpm = torch.arange(Tk)[None, :] >= torch.tensor(key_padding_lengths)[:, None]  # True = padding
        kwargs["key_padding_mask"] = kpm
        arrays["key_padding_mask"] = kpm.numpy()
    if hf_lengths is not None:
        attention_mask = (torch.arange(Tk)[None, :] < torch.tensor(hf_lengths)[:, None]).to(torch.int64)
        kwargs["key_padding_mask"] = attention_mask == 0
        arrays["attention_mask"] = attention_mask.numpy()
    mask_shape = (B * H, Tq, Tk) if per_head_mask else (Tq, Tk)
    if bool_mask:
        # MHA: True = not allowed. Keep the diagonal-ish key j = i % Tk allowed so that no
        # row is fully masked (torch 1.13 gives NaN there, attn gives 0 as ONNX does).
        blocked = torch.rand(mask_shape) < 0.4
        rows = torch.arange(Tq)
        blocked[..., rows, rows % Tk] = False
        kwargs["attn_mask"] = blocked
        arrays["attn_mask"] = blocked.numpy() if torch_masks else np.logical_not(blocked.numpy())
    if float_mask:
        bias = torch.randn(mask_shape, dtype=DT)
        hole = torch.rand(mask_shape) < 0.25
        rows = torch.arange(Tq)
        hole[..., rows, rows % Tk] = False
        bias[hole] = -float("inf")
        kwargs["attn_mask"] = bias
        arrays["attn_mask"] = bias.numpy()
    if per_head_mask and not torch_masks:
        arrays["attn_mask"] = arrays["attn_mask"].reshape(B, H, Tq, Tk)
    if causal:
        assert "attn_mask" not in kwargs
        kwargs["attn_mask"] = torch.triu(torch.full((Tq, Tk), -float("inf"), dtype=DT), diagonal=1)

    with torch.no_grad():
        out, weights = mha(x, x_kv, x_kv, **kwargs)
    arrays["expected_output"] = out.numpy()
    arrays["expected_weights"] = weights.numpy()
    for k, v in arrays.items():
        assert np.isfinite(v).all() or k == "attn_mask", (name, k)
    write_npz(os.path.join(ROOT, name + ".npz"), arrays)
    # nn.MultiheadAttention's state dict records neither num_heads nor batch_first, so
    # attn refuses a rank-3 x beside its weights without the layout (docs/design.md §2).
    if not seq_first and not unbatched:
        options = options + ["--batch-first"]
    CASES.append({"name": name, "options": options, "description": description})


def main():
    os.makedirs(ROOT, exist_ok=True)
    torch.manual_seed(20240607)
    torch.set_num_threads(1)

    case("self_packed_h1", "self-attention, one head, packed in_proj_weight/in_proj_bias",
         ["--heads", "1"], E=8, H=1)
    case("self_packed_h4_avg", "self-attention, 4 heads, packed weights, average_attn_weights=True",
         ["--heads", "4", "--average-heads"], E=16, H=4)
    case("self_packed_h4_per_head", "self-attention, 4 heads, packed weights, average_attn_weights=False",
         ["--heads", "4"], E=16, H=4, average=False)
    case("self_split_weights_h4", "self-attention, the packed in_proj split into w_q/w_k/w_v and b_q/b_k/b_v",
         ["--heads", "4"], E=16, H=4, packed=False, average=False)
    case("cross_packed_h2", "cross-attention x -> x_kv (Tq=4, Tk=6), kdim = vdim = embed_dim, packed weights",
         ["--heads", "2", "--average-heads"], E=12, H=2, B=3, Tq=4, Tk=6)
    case("cross_kdim_h4", "cross-attention with kdim = vdim = 10 != embed_dim 12: separate q/k/v_proj_weight",
         ["--heads", "4"], E=12, H=4, Tq=3, Tk=7, kdim=10, packed=False, average=False)
    case("key_padding_mask_h4", "key_padding_mask (True = padding), lengths 6, 4, 2",
         ["--heads", "4"], E=16, H=4, B=3, Tq=6, key_padding_lengths=[6, 4, 2], average=False)
    case("bool_attn_mask_h2", "bool attn_mask: MHA True = blocked, saved negated (attn True = attend)",
         ["--heads", "2"], E=8, H=2, Tq=5, average=False, bool_mask=True)
    case("float_attn_mask_h4", "float attn_mask (additive, with some -inf), same in both",
         ["--heads", "4", "--average-heads"], E=16, H=4, Tq=5, float_mask=True)
    case("per_head_float_mask_h2", "per-head float attn_mask (B*H, Tq, Tk) in torch = (B, H, Tq, Tk) in attn",
         ["--heads", "2"], E=8, H=2, B=2, Tq=4, Tk=5, average=False, float_mask=True, per_head_mask=True)
    case("causal_h4", "causal: -inf upper triangle in torch, --mask causal in attn",
         ["--heads", "4", "--mask", "causal"], E=16, H=4, Tq=6, average=False, causal=True)
    case("causal_key_padding_h2", "causal and key_padding_mask combined (lengths 6, 3)",
         ["--heads", "2", "--mask", "causal", "--average-heads"], E=8, H=2, Tq=6,
         key_padding_lengths=[6, 3], causal=True)
    case("cross_bool_mask_key_padding_h4", "cross-attention, bool attn_mask and key_padding_mask together",
         ["--heads", "4"], E=16, H=4, B=2, Tq=4, Tk=6, key_padding_lengths=[6, 5], bool_mask=True,
         average=False)
    case("unbatched_h1", "unbatched rank-2 input (T, E), one head",
         ["--heads", "1"], E=8, H=1, Tq=5, unbatched=True)
    # Averaged only: per-head weights of an unbatched input are (H, Tq, Tk) in torch and
    # (1, H, Tq, Tk) in attn (docs/design.md §2 gives rank 2 no head axis of its own).
    case("unbatched_h4_avg", "unbatched rank-2 input (T, E), 4 heads, average_attn_weights=True",
         ["--heads", "4", "--average-heads"], E=16, H=4, Tq=6, unbatched=True)
    # PyTorch's own conventions, saved as torch takes them and spoken by attn's options.
    case("mha_seq_first_bool_mask_h2",
         "batch_first=False (T, B, E) and MHA's bool attn_mask (True = blocked) saved as is, with key_padding_mask",
         ["--heads", "2", "--seq-first", "--attn-mask-true", "masked"], E=8, H=2, B=3, Tq=5,
         key_padding_lengths=[5, 3, 4], bool_mask=True, torch_masks=True, seq_first=True, average=False)
    case("mha_per_head_bool_mask_h2",
         "MHA's per-head bool attn_mask (B*H, Tq, Tk), True = blocked, saved as is",
         ["--heads", "2", "--attn-mask-true", "masked"], E=8, H=2, B=2, Tq=4, Tk=6, bool_mask=True,
         per_head_mask=True, torch_masks=True, average=False)
    case("hf_attention_mask_h4", "Hugging Face attention_mask (B, Tk) int64, 1 = real token, lengths 6, 2",
         ["--heads", "4"], E=16, H=4, B=2, Tq=6, hf_lengths=[6, 2], average=False)

    # One case per line: small, and diffs stay readable.
    with open(os.path.join(ROOT, "cases.json"), "w") as f:
        f.write('{"generator": "scripts/make_torch_fixtures.py", "torch": %s,\n "cases": [\n'
                % json.dumps(torch.__version__))
        f.write(",\n".join("  " + json.dumps(c) for c in CASES))
        f.write("\n ]}\n")


if __name__ == "__main__":
    main()
