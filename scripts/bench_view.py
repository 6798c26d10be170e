#!/usr/bin/python3
"""attn view of a whole model: page size, load time and head/layer switch times in headless
chromium, on this machine (docs/design.md §5.4):

    /usr/bin/python3 scripts/bench_view.py [--build DIR] [--runs N] [--layers L] [--heads H] [-T T]

Writes (L, 1, H, T, T) float32 causal attention weights (default 24 x 14 at T = 512, the
shape of Qwen2.5-0.5B's output_attentions) in two kinds, makes each page with
`attn view W.npy -o page.html`, and opens it N times (default 3) in Debian's
/usr/bin/chromium, headless and in real time, with the page's timing self-test
(`#test={"timing":{"rounds":1}}`, timingTest in src/io/html/view_tests.js.inc): it switches the
head selector through every head and the mean of heads, the layer selector through every
layer and the rollout, and times each switch until the heatmap is drawn ("drawn") and
until the next animation frame ("frame"). The kinds:
  uniform  row i: i + 1 uniform random numbers normalised to sum 1 (as the browser test);
  peaked   row i: softmax of i + 1 normal scores of standard deviation 3, closer to a
           trained model's rows (a few large weights, most near 0).
Page sizes depend on the weights: the 8-bit codes of both kinds are mostly small and
deflate well; noise over the whole [0, 1] range would not.
Prints one table row per kind: page MB, load (ms from navigation until the page is drawn),
and for head, mean-of-heads, layer and rollout switches the median over runs of each run's
median, and the largest over runs of each run's maximum. Note the load average printed with
it: the machine may be shared.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def write_weights(path, L, H, T, kind, seed=0):
    rng = np.random.default_rng(seed)
    causal = np.tril(np.ones((T, T), dtype=bool))
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(L, 1, H, T, T))
    for layer in range(L):
        if kind == "uniform":
            w = rng.random((H, T, T), dtype=np.float32) * causal
        else:
            s = rng.standard_normal((H, T, T), dtype=np.float32) * 3
            s = np.where(causal, s, -np.inf)
            w = np.exp(s - s.max(-1, keepdims=True))
        out[layer, 0] = w / w.sum(-1, keepdims=True)
    out.flush()
    del out


def timed_run(page, profile):
    spec = urllib.parse.quote(json.dumps({"timing": {"rounds": 1}}, separators=(",", ":")), safe="")
    cmd = ["timeout", "180", "/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
           "file://" + str(page) + "#test=" + spec]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    mark = '"attn-timing '
    at = p.stderr.find(mark)
    if at < 0:
        sys.exit("bench_view: no attn-timing line from chromium (exit %d)" % p.returncode)
    end = p.stderr.find('", source: ', at)
    return json.loads(p.stderr[at + len(mark):end])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("-T", type=int, default=512)
    a = ap.parse_args()
    attn = Path(a.build) / "attn"
    if not attn.exists() or not os.access("/usr/bin/chromium", os.X_OK):
        sys.exit("bench_view: needs %s (cmake --build) and /usr/bin/chromium (scripts/setup.sh)" % attn)
    print("attn view, (%d, 1, %d, %d, %d) float32 weights, %d chromium runs each; load average %s" %
          (a.layers, a.heads, a.T, a.T, a.runs, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("| weights | page MB | load ms | head ms median / max | mean of heads ms | layer ms median / max | rollout ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bench_view.") as tmp:
        for kind in ("uniform", "peaked"):
            npy, page = Path(tmp) / "w.npy", Path(tmp) / (kind + ".html")
            write_weights(npy, a.layers, a.heads, a.T, kind)
            t0 = time.perf_counter()
            subprocess.run([str(attn), "view", str(npy), "-o", str(page)], check=True)
            write_s = time.perf_counter() - t0
            npy.unlink()
            runs = [timed_run(page, str(Path(tmp) / ("profile%d" % k))) for k in range(a.runs)]
            for r in runs:
                if r["errors"] or r["mismatched_cells"]:
                    sys.exit("bench_view: the page reported %s" % json.dumps(r))

            def cell(key, what="sync"):
                med = statistics.median(r[key][what]["median"] for r in runs)
                top = max(r[key][what]["max"] for r in runs)
                return "%.0f / %.0f" % (med, top)

            load = statistics.median(r["load_ms"]["drawn"] for r in runs)
            print("| %s | %.1f | %.0f | %s | %s | %s | %s |" % (
                kind, page.stat().st_size / 1e6, load, cell("head"), cell("mean").split(" /")[0], cell("layer"),
                cell("rollout").split(" /")[0]))
            print("|  (on screen at the next frame) | | | %s | %s | %s | %s |" % (
                cell("head", "frame"), cell("mean", "frame").split(" /")[0], cell("layer", "frame"),
                cell("rollout", "frame").split(" /")[0]), flush=True)
            sys.stderr.write("%s: page written by attn view in %.1f s; render steps (ms, last run): %s\n" %
                             (kind, write_s, json.dumps(runs[-1]["spent_ms"])))


if __name__ == "__main__":
    main()
