#!/usr/bin/python3
"""Generates the committed fixtures of tests/fixtures/analysis/: head statistics,
attention rollout and per-head divergences, written here in NumPy from their definitions
(docs/design.md §4.4 and the papers), sharing nothing with attn:

  head_stats_unit.npz     weights (3 heads, Tq 4, Tk 6) with a NaN row, a zero row, a row a
                          finite mask fill spread over masked keys, tiny visible weights and
                          a head with no row left; the mask's visible cells; expected per head
                          with that mask and with "visible = weight > 0" (no mask), sink_k 2
  head_stats_cli_b.npz    compute inputs q, k, v (B 2, H 2, Tq 4), a KV cache of 2 keys and a
  head_stats_cli_b_expected.npz   bool attn_mask hiding whole rows; with --mask causal
                          --sink-k 2: NumPy's softmax and head statistics, (B, H);
  head_stats_cli_b_fill_expected.npz   the same with --mask-fill -1e9 (uniform masked rows)
  head_stats_cli_x.npz    a lone x (5, 8) with --heads 2 --mask causal and an attn_mask (5, 5)
  head_stats_cli_x_expected.npz   hiding row 2: expected (H,) = (2,), sink_k 1
  rollout.npz             weights (L 3, B 2, H 3, T 5, T 5) whose rows do not sum to 1 (scaled
                          rows, a zero row), and expected (B, T, T): Abnar & Zuidema 2020,
                          A' = 0.5 mean_h(A) + 0.5 I, rows renormalised, R = A'_3 A'_2 A'_1
  rollout_nobatch.npy     the same weights of batch 1 only, (L, H, T, T); rollout.npz holds
                          its expected (T, T) as expected_nobatch
  divergence_a.npy, divergence_b.npy   (2, 3, 4, 5) weights with zeros in A and in B (KL = inf
                          where a > 0 = b), a row zero in both, a row equal in both;
  divergence.npz          expected per (head, row), worst first (max abs, then JS): head, row,
                          max_abs, kl, js (Kullback & Leibler 1951, Lin 1991)

Run with Debian's Python (python3-numpy; scipy is not used):

    /usr/bin/python3 scripts/make_analysis_fixtures.py

tests/core/test_analysis.cpp and tests/cli/test_cli_analysis.cpp read them. The output is
deterministic: rerunning this script must leave `git status` clean.
"""

import math
import os

import numpy as np
from fixture_npz import write_npz

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "analysis")


def write_npy(path, a):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.ascontiguousarray(a), allow_pickle=False)


# --- head statistics (docs/design.md §4.4) ------------------------------------------------------

def head_stats(w, visible, sink_k):
    """w (N, Tq, Tk); visible (N, Tq, Tk) bool or None (then visible = w > 0).
    Per head, the mean over rows that are not fully masked (sum 0 or a NaN) of: entropy
    -sum w ln w (0 ln 0 = 0), max w, distance sum w |p - j| with p = i + Tk - Tq, sink mass
    sum_{j < K} w, and the share of visible cells with w < 1e-3 (rows with a visible cell)."""
    n, tq, tk = w.shape
    out = {k: np.full(n, np.nan) for k in ("entropy", "max_weight", "distance", "sink_mass", "small_share")}
    for h in range(n):
        rows = {k: [] for k in out}
        for i in range(tq):
            row = w[h, i]
            if np.isnan(row).any() or row.sum() == 0:
                continue
            positive = row[row > 0]
            rows["entropy"].append(-np.sum(positive * np.log(positive)))
            rows["max_weight"].append(row.max())
            p = i + tk - tq
            rows["distance"].append(np.sum(row * np.abs(p - np.arange(tk))))
            rows["sink_mass"].append(row[:sink_k].sum())
            seen = (row > 0) if visible is None else visible[h, i].astype(bool)
            if seen.sum() > 0:
                rows["small_share"].append(np.sum((row < 1e-3) & seen) / seen.sum())
        for k in out:
            if rows[k]:
                out[k][h] = np.mean(rows[k])
    return out


def masked_softmax(scores, visible):
    """Softmax over the last axis of the visible cells; a row with none gives zeros."""
    s = np.where(visible, scores, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(visible, np.exp(s - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def make_head_stats(rng):
    tq, tk, sink_k = 4, 6, 2
    w = rng.random((3, tq, tk))
    visible = np.ones((3, tq, tk), dtype=bool)
    visible[0, :, 4:] = False
    w[0] = np.where(visible[0], w[0], 0.0)
    w[0, 3] = np.nan                    # --masked-rows nan: left out
    w[1, 0] = 0.0                       # a fully masked row: left out
    visible[1, 0] = False
    visible[1, 2] = False               # --mask-fill -1e9: uniform weights, no visible cell
    w[1, 2] = 1.0 / tk
    w[2] = 0.0                          # a head with every row masked: NaN
    visible[2] = False
    w = w / np.where(np.nansum(w, -1, keepdims=True) > 0, np.nansum(w, -1, keepdims=True), 1.0)
    w[0, 1, 2] = 5e-4                   # tiny visible weights (the rows need not sum to 1 here)
    w[0, 1, 3] = 2e-4
    w[1, 3, 5] = 1e-5
    arrays = {"weights": w, "visible": visible.astype(np.uint8), "sink_k": np.array(sink_k, dtype=np.int64)}
    for name, value in head_stats(w, visible, sink_k).items():
        arrays["expected_" + name] = value
    for name, value in head_stats(w, None, sink_k).items():
        arrays["expected_novisible_" + name] = value
    write_npz(os.path.join(ROOT, "head_stats_unit.npz"), arrays)


def make_head_stats_cli(rng):
    # Batched, a KV cache of 2 keys (Tk = 6, Tq = 4), --mask causal, and an attn_mask
    # (True = attend) hiding row 1 of (batch 0, head 1) and row 3 of (batch 1, head 0).
    B, H, tq, past, d = 2, 2, 4, 2, 3
    tk = past + tq
    q = 4 * rng.standard_normal((B, H, tq, d))  # peaked rows: some visible weights below 1e-3
    k = rng.standard_normal((B, H, tq, d))
    v = rng.standard_normal((B, H, tq, d))
    pk = rng.standard_normal((B, H, past, d))
    pv = rng.standard_normal((B, H, past, d))
    attn_mask = rng.random((B, H, tq, tk)) > 0.2
    attn_mask[0, 1, 1] = False
    attn_mask[1, 0, 3] = False
    keys = np.concatenate([pk, k], axis=2)
    causal = np.arange(tk)[None, :] <= np.arange(tq)[:, None] + past
    visible = attn_mask & causal
    w = masked_softmax(q @ keys.transpose(0, 1, 3, 2) / math.sqrt(d), visible)
    st = head_stats(w.reshape(B * H, tq, tk), visible.reshape(B * H, tq, tk), 2)
    write_npz(os.path.join(ROOT, "head_stats_cli_b.npz"),
              {"q": q, "k": k, "v": v, "past_key": pk, "past_value": pv, "attn_mask": attn_mask})
    write_npz(os.path.join(ROOT, "head_stats_cli_b_expected.npz"),
              {name: value.reshape(B, H) for name, value in st.items()})
    # --mask-fill -1e9 (masked_fill): a fully masked row becomes uniform over every key, so
    # it counts, but its keys are not visible: it has no small share.
    filled = np.where(visible.any(axis=-1, keepdims=True), w, 1.0 / tk)
    st = head_stats(filled.reshape(B * H, tq, tk), visible.reshape(B * H, tq, tk), 2)
    write_npz(os.path.join(ROOT, "head_stats_cli_b_fill_expected.npz"),
              {name: value.reshape(B, H) for name, value in st.items()})

    # A lone x (T, H·Dh) split head-major into 2 heads: Q = K = V = x; (H,) statistics.
    T, H2, dh = 5, 2, 4
    x = 2 * rng.standard_normal((T, H2 * dh))
    x4 = x.reshape(T, H2, dh).transpose(1, 0, 2)
    mask2 = np.ones((T, T), dtype=bool)
    mask2[2] = False
    visible2 = np.broadcast_to(mask2 & (np.arange(T)[None, :] <= np.arange(T)[:, None]), (H2, T, T))
    w2 = masked_softmax(x4 @ x4.transpose(0, 2, 1) / math.sqrt(dh), visible2)
    write_npz(os.path.join(ROOT, "head_stats_cli_x.npz"), {"x": x, "attn_mask": mask2})
    write_npz(os.path.join(ROOT, "head_stats_cli_x_expected.npz"), head_stats(w2, visible2, 1))


# --- attention rollout (Abnar & Zuidema 2020) --------------------------------------------

def rollout(weights):
    """weights (L, B, H, T, T) -> (B, T, T): A'_l = 0.5 mean_h(A_l) + 0.5 I, each row divided
    by its sum (a zero-sum row stays 0); R = A'_L ... A'_1, the paper's recursion
    Ã(l_i) = A(l_i) Ã(l_{i-1}) starting from the first layer."""
    L, B, H, T, _ = weights.shape
    out = np.zeros((B, T, T))
    for b in range(B):
        result = None
        for l in range(L):
            a = 0.5 * weights[l, b].mean(axis=0) + 0.5 * np.eye(T)
            sums = a.sum(axis=-1, keepdims=True)
            a = np.divide(a, sums, out=np.zeros_like(a), where=sums != 0)
            result = a if result is None else a @ result
        out[b] = result
    return out


def make_rollout(rng):
    L, B, H, T = 3, 2, 3, 5
    w = rng.random((L, B, H, T, T))
    w /= w.sum(axis=-1, keepdims=True)
    w *= rng.uniform(0.3, 1.2, size=(L, B, H, T, 1))  # rows sum to 0.3–1.2, as with sinks or padding
    w[1, 0, :, 2] = 0.0                                # a fully masked row in every head
    before = 0.5 * w.mean(axis=2) + 0.5 * np.eye(T)
    assert np.abs(before.sum(axis=-1) - 1).max() > 0.05  # the renormalisation matters
    write_npz(os.path.join(ROOT, "rollout.npz"),
              {"weights": w, "expected": rollout(w), "expected_nobatch": rollout(w[:, 1:2])[0]})
    write_npy(os.path.join(ROOT, "rollout_nobatch.npy"), w[:, 1])


# --- per-head divergences ----------------------------------------------------------------

def kl(p, q):
    """KL(p || q) = sum p ln(p / q) in nats, 0 ln(0 / q) = 0, p > 0 = q gives +inf."""
    total = 0.0
    for x, y in zip(p, q):
        if x == 0:
            continue
        total += math.inf if y == 0 else x * math.log(x / y)
    return total


def js(p, q):
    m = 0.5 * (p + q)
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def make_divergence(rng):
    shape = (2, 3, 4, 5)
    a = rng.random(shape)
    b = rng.random(shape)
    a[0, 0, 1, [0, 3]] = 0.0        # zeros in A: contribute nothing to KL(A||B)
    b[0, 1, 2, 4] = 0.0             # a > 0 = b: KL = inf, JS finite
    a[1, 2, 0, 1] = 0.0
    b[1, 2, 0, 1] = 0.0             # zero in both
    a[1, 0, 3] = 0.0
    b[1, 0, 3] = 0.0                # a row zero in both: all 0
    a /= np.where(a.sum(-1, keepdims=True) > 0, a.sum(-1, keepdims=True), 1.0)
    b /= np.where(b.sum(-1, keepdims=True) > 0, b.sum(-1, keepdims=True), 1.0)
    b[0, 2, 3] = a[0, 2, 3]         # an equal row: all 0
    n, tq = 6, shape[2]
    fa, fb = a.reshape(n, tq, -1), b.reshape(n, tq, -1)
    heads, rows, max_abs, kls, jss = [], [], [], [], []
    for h in range(n):
        for i in range(tq):
            heads.append(h)
            rows.append(i)
            max_abs.append(np.abs(fa[h, i] - fb[h, i]).max())
            kls.append(kl(fa[h, i], fb[h, i]))
            jss.append(js(fa[h, i], fb[h, i]))
    max_abs, jss = np.array(max_abs), np.array(jss)
    order = np.lexsort((-jss, -max_abs))  # max_abs descending, then JS; stable
    write_npy(os.path.join(ROOT, "divergence_a.npy"), a)
    write_npy(os.path.join(ROOT, "divergence_b.npy"), b)
    write_npz(os.path.join(ROOT, "divergence.npz"), {
        "head": np.array(heads, dtype=np.int64)[order], "row": np.array(rows, dtype=np.int64)[order],
        "max_abs": max_abs[order], "kl": np.array(kls)[order], "js": jss[order]})


def main():
    os.makedirs(ROOT, exist_ok=True)
    rng = np.random.default_rng(16)
    make_head_stats(rng)
    make_head_stats_cli(rng)
    make_rollout(rng)
    make_divergence(rng)


if __name__ == "__main__":
    main()
