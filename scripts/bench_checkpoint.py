#!/usr/bin/python3
"""Checkpoint benchmarks, a section of scripts/bench; also runs alone:

    /usr/bin/python3 scripts/bench_checkpoint.py [--build DIR]

1. Memory: a synthetic 1 GB float32 Llama-layout checkpoint (16 layers, hidden 2048,
   attention tensors and a tiny MLP, intermediate 64), layer 7 from --x at T=128: peak RSS against the bytes of that
   layer's tensors (+ 100 MB allowed), and the time as a ratio to reading those bytes
   (dd of the layer's byte range, page cache warm for both).
2. Time: --layer all on a 12-layer, hidden-768 GPT-2-shaped checkpoint at T=256 (weights
   dumped as .npz): attn's whole process per layer against PyTorch running the same
   blocks in-process (scripts/make_checkpoint_fixtures.py's gpt2_reference, float32,
   2 threads, weights materialised), in the same run.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_checkpoint_fixtures import gpt2_reference, safetensors_header  # noqa: E402


def write_checkpoint(path, tensors):
    """tensors: {name: np.float32 array or a callable making it}, written sorted by name
    without holding the whole file in memory."""
    names = sorted(tensors)
    shapes = {n: tensors[n][0] for n in names}
    entries = [(n, "F32", shapes[n], int(np.prod(shapes[n])) * 4) for n in names]
    with open(path, "wb") as f:
        f.write(safetensors_header(entries))
        for n in names:
            f.write(np.ascontiguousarray(tensors[n][1](), dtype=np.float32).tobytes())
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), 8 + n


def section_checkpoint(build, rep, tmp, torch, run_process):
    """run_process(cmd, reps) → (median seconds, peak RSS MB): scripts/bench's."""
    rep.say("\n## Checkpoints\n")
    rng = np.random.default_rng(15)
    E, L, layer, T, F = 2048, 16, 7, 128, 64
    d = tmp / "big"
    d.mkdir(exist_ok=True)
    mat = lambda r, c: (lambda: (rng.standard_normal((r, c), dtype=np.float32) * 0.02))
    tensors = {"model.embed_tokens.weight": ((32, E), mat(32, E))}
    for l in range(L):
        p = f"model.layers.{l}."
        tensors[p + "input_layernorm.weight"] = ((E,), lambda: np.ones(E, np.float32))
        for n in "qkvo":
            tensors[p + f"self_attn.{n}_proj.weight"] = ((E, E), mat(E, E))
        # The llama family reads every layer's MLP: a tiny one (intermediate 64, 1.5 MB a layer).
        tensors[p + "post_attention_layernorm.weight"] = ((E,), lambda: np.ones(E, np.float32))
        for n, shape in (("gate", (F, E)), ("up", (F, E)), ("down", (E, F))):
            tensors[p + f"mlp.{n}_proj.weight"] = (shape, mat(*shape))
    header, data_start = write_checkpoint(d / "model.safetensors", tensors)
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": E, "num_attention_heads": 16,
                                               "num_key_value_heads": 16, "num_hidden_layers": L, "vocab_size": 32,
                                               "intermediate_size": F, "rms_norm_eps": 1e-6}))
    np.save(tmp / "x.npy", rng.standard_normal((T, E), dtype=np.float32))
    mine = [v["data_offsets"] for k, v in header.items() if k.startswith(f"model.layers.{layer}.")]
    begin, end = min(b for b, _ in mine), max(e for _, e in mine)
    layer_mb = (end - begin) / 2**20
    file_gb = (d / "model.safetensors").stat().st_size / 2**30
    t_attn, peak = run_process([build / "attn", "compute", d / "model.safetensors", "--layer", layer, "--x",
                                  tmp / "x.npy", "--dump", "weights,output", "-o", tmp / "layer.npz"], 3)
    t_cat, _ = run_process(["dd", f"if={d / 'model.safetensors'}", "of=/dev/null", "bs=1M", "iflag=skip_bytes,count_bytes",
                              f"skip={data_start + begin}", f"count={end - begin}"], 3)
    rep.say(f"- {file_gb:.2f} GB float32 checkpoint, layer {layer} from --x at T={T}: {t_attn * 1e3:.0f} ms, peak RSS "
            f"{peak:.0f} MB; the layer's tensors are {layer_mb:.0f} MB; reading them (dd, warm cache) "
            f"{t_cat * 1e3:.0f} ms: ratio {t_attn / t_cat:.1f}x")
    rep.target("1 GB checkpoint, one layer: peak RSS above the layer's tensors", peak - layer_mb, 100, " MB",
               higher_is_better=False)
    (d / "model.safetensors").unlink()

    # --layer all on a GPT-2-shaped checkpoint.
    import torch as _  # noqa: F401  (the caller imported it and set the threads)
    E, H, L, T, V = 768, 12, 12, 256, 1024
    cfg = {"model_type": "gpt2", "n_embd": E, "n_head": H, "n_layer": L, "n_positions": 1024, "n_inner": 4 * E,
           "vocab_size": V, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
    g = tmp / "gpt2"
    g.mkdir(exist_ok=True)
    shapes = {"wte.weight": (V, E), "wpe.weight": (1024, E)}
    for l in range(L):
        p = f"h.{l}."
        shapes.update({p + "ln_1.weight": (E,), p + "ln_1.bias": (E,), p + "attn.c_attn.weight": (E, 3 * E),
                       p + "attn.c_attn.bias": (3 * E,), p + "attn.c_proj.weight": (E, E), p + "attn.c_proj.bias": (E,),
                       p + "ln_2.weight": (E,), p + "ln_2.bias": (E,), p + "mlp.c_fc.weight": (E, 4 * E),
                       p + "mlp.c_fc.bias": (4 * E,), p + "mlp.c_proj.weight": (4 * E, E), p + "mlp.c_proj.bias": (E,)})
    values = {n: (rng.standard_normal(s, dtype=np.float32) * 0.05 + (1.0 if n.endswith("ln_1.weight") or
                                                                      n.endswith("ln_2.weight") else 0.0)).astype(np.float32)
              for n, s in shapes.items()}
    write_checkpoint(g / "model.safetensors", {n: (v.shape, (lambda v=v: v)) for n, v in values.items()})
    (g / "config.json").write_text(json.dumps(cfg))
    ids = rng.integers(0, V, T).astype(np.int64)
    np.save(tmp / "ids.npy", ids)
    t_attn, _ = run_process([build / "attn", "compute", g / "model.safetensors", "--layer", "all", "--token-ids",
                               tmp / "ids.npy", "--dump", "weights", "-o", tmp / "all.npz"], 3)
    w = {n: torch.from_numpy(v) for n, v in values.items()}
    ids_t = torch.from_numpy(ids)
    t_torch = statistics.median(
        [(lambda t0: (gpt2_reference(w, cfg, "", ids_t, torch.float32), time.perf_counter() - t0)[1])(time.perf_counter())
         for _ in range(4)][1:])
    rep.say(f"- --layer all, 12-layer hidden-768 GPT-2 shape, T={T}, weights of every layer written: attn "
            f"{t_attn / L * 1e3:.1f} ms per layer (whole process: read, 12 blocks, write .npz); PyTorch "
            f"{t_torch / L * 1e3:.1f} ms per layer (in-process, same blocks, weights materialised): "
            f"ratio {t_torch / t_attn:.2f}")
    rep.target("--layer all per layer vs PyTorch (higher: attn faster)", t_torch / t_attn, 1.0)


if __name__ == "__main__":
    import argparse
    import importlib.machinery
    import importlib.util

    import torch

    loader = importlib.machinery.SourceFileLoader("bench", str(Path(__file__).resolve().parent / "bench"))
    bench = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench", loader))
    loader.exec_module(bench)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(Path(__file__).resolve().parent.parent / "build"))
    args = ap.parse_args()
    torch.set_num_threads(bench.THREADS)
    rep = bench.Report()
    with tempfile.TemporaryDirectory(prefix="attn-bench-") as t:
        section_checkpoint(Path(args.build).resolve(), rep, Path(t), torch, bench.run_process)
    for name, value, goal, unit, ok, higher in rep.targets:
        print(f"target: {name}: {value:.2f}{unit} ({'>=' if higher else '<='} {goal}{unit}): {'met' if ok else 'NOT met'}")
