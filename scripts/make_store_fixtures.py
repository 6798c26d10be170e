#!/usr/bin/python3
"""The reference for `--store float16|bfloat16` (docs/design.md §5.4): how NumPy rounds
float64 and float32 values to float16 (np.float16, round to nearest even, overflow to inf)
and how PyTorch rounds them to bfloat16 (Tensor.to(torch.bfloat16)), as bit patterns,
over edge cases (ties, subnormals, the overflow boundary, NaN, ±inf, ±0) and random values
of every magnitude. Writes tests/fixtures/io/store.npz:

  values64 (N,) float64, half64 (N,) uint16 = values64.astype(float16) bits,
  bf16_64 (N,) uint16 = torch bf16 bits of values64,
  values32 (N,) float32, half32 and bf16_32 likewise from float32.

Run with Debian's Python (python3-numpy, python3-torch); the output is deterministic.
"""
import os

import numpy as np
import torch
from fixture_npz import write_npz

HERE = os.path.dirname(os.path.abspath(__file__))

edge = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e6, -1e6, 2.0 ** -24, 2.0 ** -25,
        2.0 ** -25 * 1.0000001, 3 * 2.0 ** -25, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 6.1e-5, 1e-8, 1e-30,
        1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -11 + 2.0 ** -40, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,
        1.0 + 2.0 ** -8 + 2.0 ** -30, 3.3895314e38, 3.4e38, 1e300, -1e300, 1e-300,
        float("inf"), float("-inf"), float("nan"), 0.1, 0.2, 0.3, 1 / 3, 2 / 3, -0.5, 0.999, 0.9999]
rng = np.random.default_rng(27)
random = rng.standard_normal(400) * np.exp2(rng.integers(-30, 20, 400))
weights = rng.random(200)  # softmax-like values in [0, 1)
values64 = np.concatenate([np.array(edge), random, weights]).astype(np.float64)
with np.errstate(over="ignore"):  # 1e300 becomes inf in float32
    values32 = values64.astype(np.float32)


def bf16_bits(v):
    return torch.from_numpy(v).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


with np.errstate(over="ignore"):  # 1e6 and beyond overflow float16 to inf, as intended
    out = {
        "values64": values64, "half64": values64.astype(np.float16).view(np.uint16), "bf16_64": bf16_bits(values64),
        "values32": values32, "half32": values32.astype(np.float16).view(np.uint16), "bf16_32": bf16_bits(values32),
    }
write_npz(os.path.join(HERE, "..", "tests", "fixtures", "io", "store.npz"), out)
