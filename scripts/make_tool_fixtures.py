#!/usr/bin/python3
"""Generates the committed fixtures of the stats stage and `attn inspect` under
tests/fixtures/tools/, with NumPy, independently of attn.

Run with Debian's Python (NumPy lives there, not in the python3 first on PATH):

    /usr/bin/python3 scripts/make_tool_fixtures.py

Writes
  notebook_stats.json   the stats stage of data/notebook.npz, without a mask and with
                        the causal mask, computed here from the notebook's q, k, v:
                        var_* as ndarray.var() (population), entropy -sum(w ln w) with
                        0 ln 0 = 0, max, argmax, row sums of the softmax weights
  mixed.npz             np.savez of arrays that exercise inspect: float32 with NaN and
                        +/-inf, big-endian float64, int16, uint8, bool, a 0-d array, an
                        empty (0, 3) array, an all-NaN array
  big.npy               a big-endian float32 array (np.save keeps the byte order)
  bundle.json           a JSON object as attn writes it: meta, tokens, a stage, and a
                        nested "stats" object with 0-d members
  inspect_expected.json for every array of mixed.npz, big.npy and bundle.json, in file
                        order: name, dtype, shape, byte order as stored, and min/max/
                        mean/std over the finite values in float64 (None when there is
                        none), NaN/+inf/-inf counts

The output is deterministic: rerunning it must leave `git status` clean.
"""
import json
import math
import pathlib

import numpy as np

root = pathlib.Path(__file__).resolve().parent.parent
out = root / "tests" / "fixtures" / "tools"
out.mkdir(parents=True, exist_ok=True)


def softmax_rows(s):
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def stats(q, k, causal):
    dk = q.shape[-1]
    qk = q @ k.T
    scaled = qk / math.sqrt(dk)
    scores = scaled.copy()
    if causal:
        scores[np.triu(np.ones(scores.shape, dtype=bool), k=1)] = -np.inf
    w = softmax_rows(scores)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, -w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    return {
        "dk": dk,
        "var_q": float(q.var()),
        "var_k": float(k.var()),
        "var_qk": float(qk.var()),
        "var_scaled": float(scaled.var()),
        "entropy": terms.sum(axis=-1).tolist(),
        "max_weight": w.max(axis=-1).tolist(),
        "argmax": [int(i) for i in w.argmax(axis=-1)],
        "row_sum": w.sum(axis=-1).tolist(),
    }


nb = np.load(root / "data" / "notebook.npz")
q, k = nb["q"].astype(np.float64), nb["k"].astype(np.float64)
(out / "notebook_stats.json").write_text(
    json.dumps({"none": stats(q, k, False), "causal": stats(q, k, True)}, indent=1) + "\n")

# --- inspect ---------------------------------------------------------------------------

rng = np.random.default_rng(7)
f4 = rng.standard_normal((3, 4)).astype(np.float32)
f4[0, 1] = np.nan
f4[1, 2] = np.inf
f4[2, 0] = -np.inf
f4[2, 3] = np.nan
mixed = {
    "Scores": f4,                                                    # mixed case kept
    "big_f8": rng.standard_normal((2, 3)).astype(">f8"),
    "ids": np.array([[3, -7, 12], [0, 5, 9]], dtype=np.int16),
    "bytes": np.array([0, 255, 17, 3], dtype=np.uint8),
    "flags": np.array([True, False, True], dtype=bool),
    "scalar": np.float64(2.5),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "all_nan": np.full((2,), np.nan, dtype=np.float64),
}
with open(out / "mixed.npz", "wb") as f:
    np.savez(f, **mixed)
big = rng.standard_normal((2, 2, 3)).astype(">f4")
with open(out / "big.npy", "wb") as f:
    np.save(f, big)

bundle_text = {
    "meta": {"attn_version": "0.1.0", "shapes": {"weights": [2, 2]}},
    "tokens": ["a", "b"],
    "weights": [[1, 0], [0.25, 0.75]],
    "stats": {"dk": 8, "var_q": 0.5, "entropy": [0, "NaN"], "argmax": [0, 1]},
}
(out / "bundle.json").write_text(json.dumps(bundle_text, indent=1) + "\n")
bundle_arrays = [
    ("weights", np.array([[1, 0], [0.25, 0.75]], dtype=np.float64)),
    ("stats.dk", np.array(8, dtype=np.int64)),
    ("stats.var_q", np.array(0.5, dtype=np.float64)),
    ("stats.entropy", np.array([0, np.nan], dtype=np.float64)),
    ("stats.argmax", np.array([0, 1], dtype=np.int64)),
]


def order(a):
    bo = a.dtype.byteorder
    if a.dtype.itemsize == 1 or bo == "|":
        return "n/a"
    if bo == "=":
        return "little" if np.little_endian else "big"
    return "little" if bo == "<" else "big"


def summary(name, a, byte_order):
    x = np.asarray(a).astype(np.float64).ravel()
    finite = x[np.isfinite(x)]
    have = finite.size > 0
    return {
        "name": name,
        "dtype": a.dtype.name,
        "shape": list(a.shape),
        "byte_order": byte_order,
        "count": int(x.size),
        "min": float(finite.min()) if have else None,
        "max": float(finite.max()) if have else None,
        "mean": float(finite.mean()) if have else None,
        "std": float(finite.std()) if have else None,
        "nan": int(np.isnan(x).sum()),
        "posinf": int(np.isposinf(x).sum()),
        "neginf": int(np.isneginf(x).sum()),
    }


expected = {
    "mixed.npz": [summary(n, np.asarray(a), order(np.asarray(a))) for n, a in mixed.items()],
    "big.npy": [summary(None, big, order(big))],
    "bundle.json": [summary(n, a, "n/a") for n, a in bundle_arrays],
}
(out / "inspect_expected.json").write_text(json.dumps(expected, indent=1) + "\n")
