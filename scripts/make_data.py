#!/usr/bin/python3
"""Builds data/ (the shipped examples) from the notebook tables in ../shared/golden.

Run with Debian's /usr/bin/python3 (python3-numpy). The outputs are committed, so
neither tests nor CI need Python.
  data/notebook.npz   q, k, v (float64) as the notebook printed them
  data/notebook.json  the same arrays plus tokens, as a JSON object
  data/x.npy          a (4, 8) float64 X for self-attention (the notebook's q table)
"""
import json
import pathlib

import numpy as np

root = pathlib.Path(__file__).resolve().parent.parent
golden = json.loads((root.parent / "shared" / "golden" / "seed000.json").read_text())
data = root / "data"
data.mkdir(exist_ok=True)

q, k, v = (np.array(golden[n], dtype=np.float64) for n in ("q", "k", "v"))
np.savez(data / "notebook.npz", q=q, k=k, v=v)
(data / "notebook.json").write_text(
    json.dumps({"tokens": golden["tokens"], "q": q.tolist(), "k": k.tolist(), "v": v.tolist()}, indent=1) + "\n")
np.save(data / "x.npy", q)
