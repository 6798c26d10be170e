#!/usr/bin/python3
"""Builds the inputs docs/seeds.md runs for seed documents 002, 003 and 004, and the
NumPy reference tables for the two that print no results (003, 004).

Run with Debian's /usr/bin/python3 (python3-numpy) from anywhere. The outputs are
committed, so neither tests nor readers need Python.
  data/seed001_padding.json         seed 001's padded id sequences (pad id 0) with a small made-up
                                    (8, 3) embedding table (the document's is random, unprinted)
  data/seed002.json                 q, k, v as seed 002 prints them (8 decimals; v from
                                    its `v` cell, whose first print is cut off), tokens
  data/seed003_river.json           x: seed 003's three static embeddings (river bank short)
  data/seed003_hey.json             x = one-hot rows, w_q, w_k, w_v (out, in) of "Hey welcome back"
  data/seed004.npz                  x (3, 4), w_q, w_k, w_v (4, 4), b_q, b_k, b_v (4,) drawn as
                                    seed 004 draws them: np.random.seed(3), then N(0, 1) in
                                    the order x_1, x_2, x_3, A_q, A_k, A_v, b_q, b_k, b_v
  data/seed004_embedding.npy        seed 004's printed nn.Embedding(5, 3) weight table
  tests/fixtures/golden/seed003.json, seed004.json
                                    the same computations in NumPy, written here from the
                                    documents' formulas (not from attn): the reference the
                                    tests compare attn with where the documents print nothing
The tables of 000 (data/notebook.*) come from scripts/make_data.py.
"""
import json
import pathlib
import sys

import numpy as np

root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "scripts"))
from fixture_npz import write_npz  # noqa: E402

data = root / "data"
golden = root / "tests" / "fixtures" / "golden"


def dump(path, obj):
    path.write_text(json.dumps(obj, indent=1) + "\n")


def softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# Seed 001: its two padded sequences; the embedding only has to turn ids into rows.
dump(data / "seed001_padding.json", {
    "token_ids": [[1, 2, 3, 0, 0], [4, 5, 6, 7, 0]],
    "embedding": [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]]})

# Seed 002: the tables as printed (In [18] for q and k, In [31] for v).
q002 = [[0.86077752, 0.05751135, 0.02612362, -1.52325092, 0.03492118, -0.13281609, 0.43783375, -1.21276692],
        [-0.00756158, -1.06221626, 0.68074476, -1.29058129, 0.71078074, 0.52764515, 0.57507123, -1.14201261],
        [-0.73302907, 0.59482344, 0.87388035, 0.53343665, -0.14270126, -0.52265778, 1.398796, -0.66534455],
        [1.9993377, 0.65475826, -0.2197526, -0.19100261, 0.20201535, -0.51793055, -0.01064389, -0.55998013]]
k002 = [[-0.83396908, 0.41413147, 0.45901608, -0.77657655, 1.76275194, 1.42835591, 1.61020357, 1.23936644],
        [-1.04071218, 0.44378557, -1.10591326, -0.64369719, 1.13178501, -1.05413332, 0.63961569, -0.37833217],
        [0.83823485, 0.34348399, -0.16759105, 1.10379012, -0.33623799, 0.32330632, 0.1894233, 1.05247889],
        [0.77600508, -0.00852938, -0.50080629, -0.93575148, -0.13079465, 0.40881099, -0.29409067, -0.76095374]]
v002 = [[-1.16632699e-01, 2.55035812e+00, -3.58315997e-01, -1.96968652e-01, 1.77860317e-01, -1.77182106e+00,
         -1.19170528e+00, 4.45454530e-01],
        [1.57809855e-03, 1.86622691e+00, -2.81045186e+00, 1.82610234e-01, -1.39679007e-01, 6.21204991e-01,
         -1.45195975e+00, -3.58951794e-01],
        [3.26213261e-01, 2.38734698e-01, -5.85942847e-01, -2.74250552e+00, -7.13683509e-01, 6.65380473e-01,
         3.30151258e-02, -1.16742653e+00],
        [-1.26175033e+00, -5.71635740e-01, 1.82684702e+00, -1.59572850e-01, 4.62584545e-02, 1.45816899e-01,
         1.22296204e+00, 4.30366362e-01]]
dump(data / "seed002.json", {"tokens": ["My", "name", "is", "Ankit"], "q": q002, "k": k002, "v": v002})

# Seed 003: static embeddings, then one-hot embeddings with (out, in) weights.
river = np.array([[0.39, 0.10, 0.65, 0.79, 0.21],
                  [0.62, 0.25, 0.15, 0.87, 0.37],
                  [0.49, 0.70, 0.05, 0.29, 0.58]])
dump(data / "seed003_river.json", {"tokens": ["River", "Bank", "Short"], "x": river.tolist()})
x_hey = np.eye(3)
w_q = np.array([[-0.5, 0.3, 0.8], [0.1, -0.7, 0.9]])
w_k = np.array([[0.6, -0.4, 0.2], [-0.3, 0.7, -0.5]])
w_v = np.array([[0.4, -0.6, 0.8], [-0.9, 0.5, -0.2]])
dump(data / "seed003_hey.json", {"tokens": ["Hey", "welcome", "back"], "x": x_hey.tolist(),
                                 "w_q": w_q.tolist(), "w_k": w_k.tolist(), "w_v": w_v.tolist()})
dots = river @ river.T
q3, k3, v3 = x_hey @ w_q.T, x_hey @ w_k.T, x_hey @ w_v.T
scaled3 = q3 @ k3.T / np.sqrt(k3.shape[1])
weights3 = softmax_rows(scaled3)
dump(golden / "seed003.json", {
    "source": "seed 003 (003_d68457078149a379.txt): its inputs through its formulas in NumPy "
              "(scripts/make_seed_data.py); the document prints no results",
    "river_dots": dots.tolist(),
    "river_unnormalised": (dots @ river).tolist(),
    "river_softmax_output": (softmax_rows(dots) @ river).tolist(),
    "q": q3.tolist(), "k": k3.tolist(), "v": v3.tolist(),
    "scaled": scaled3.tolist(), "weights": weights3.tolist(), "output": (weights3 @ v3).tolist()})

# Seed 004: the UDL-style toy with biases, drawn from NumPy's legacy generator, seed 3.
np.random.seed(3)
N, D = 3, 4
x4 = np.stack([np.random.normal(size=(D, 1)) for _ in range(N)])[:, :, 0]      # (N, D)
A_q, A_k, A_v = (np.random.normal(size=(D, D)) for _ in range(3))
b_q, b_k, b_v = (np.random.normal(size=(D, 1))[:, 0] for _ in range(3))
write_npz(str(data / "seed004.npz"), {"x": x4, "w_q": A_q, "w_k": A_k, "w_v": A_v, "b_q": b_q, "b_k": b_k, "b_v": b_v})
Q4, K4, V4 = x4 @ A_q.T + b_q, x4 @ A_k.T + b_k, x4 @ A_v.T + b_v
# The document's loop: out_i = sum_j softmax_j(k_j . q_i) v_j, no 1/sqrt(D) (its text then
# argues for the scaling, so the scaled variant is kept too).
unscaled = np.array([[K4[j] @ Q4[i] for j in range(N)] for i in range(N)])
w_unscaled = softmax_rows(unscaled)
w_scaled = softmax_rows(unscaled / np.sqrt(D))
np.save(data / "seed004_embedding.npy", np.array([[0.2668, -1.0410, -1.5245],
                                                  [-0.8257, 0.0528, 1.3637],
                                                  [-1.7534, -0.4505, -1.0951],
                                                  [-0.6984, -1.7775, -1.3832],
                                                  [2.5235, -0.7539, -2.1454]]))
dump(golden / "seed004.json", {
    "source": "seed 004 (004_0f92af6ebaf3e710.txt): np.random.seed(3) inputs through its loop "
              "formulas in NumPy (scripts/make_seed_data.py); the document prints no results",
    "x": x4.tolist(), "q": Q4.tolist(), "k": K4.tolist(), "v": V4.tolist(),
    "qk": unscaled.tolist(),
    "weights_unscaled": w_unscaled.tolist(), "output_unscaled": (w_unscaled @ V4).tolist(),
    "weights_scaled": w_scaled.tolist(), "output_scaled": (w_scaled @ V4).tolist()})
