#!/usr/bin/python3
"""Whole-model rows of two 2026 families (docs/design.md §5.4, §6.1), part of
`scripts/bench --whole-model` (`scripts/bench --whole-model-2026` runs these rows only); also
runs alone:

    /usr/bin/python3 scripts/bench_whole_model_2026.py [--build DIR] [--keep DIR] [--out FILE.md]

Two random checkpoints (BF16, the Hub's config.json keys and tensor names, written by the
fixture scripts' own weights() functions, every 2-D weight but the embedding rescaled to
std 1/√fan_in so that the stream stays O(1) through the layers; vocabulary cut to 4096
rows: both contenders read only the T rows their ids name), T = 2048 random ids, and for
each, as whole processes in the same run (page cache warmed first), on os.cpu_count()
threads each:

  attn     attn compute DIR --layer all --token-ids ids.npy --dump output -j N -o out.npz
  PyTorch  the float64 transcription of transformers' eager forward that the fixtures are
           checked against, imported from the fixture script and run in float32 under
           torch.no_grad (torch.set_num_threads(N)); weights loaded as float32 (BF16 on
           disk). The transcription keeps every attention layer's stages, as
           output_attentions=True would; attn writes the outputs only.

  (a) qwen3_5 (Qwen3_5ForConditionalGeneration, the text model under
      model.language_model.): Qwen3.5-0.8B's shapes in 4 layers: hidden 1024, layer_types
      3 × linear_attention then full_attention; Gated DeltaNet with 16 key heads and 16
      value heads of 128 (kernel 4, in_proj_qkv / in_proj_z / in_proj_b / in_proj_a);
      full attention 8 heads × 256 over 2 KV heads with the output gate, q_norm / k_norm,
      partial RoPE 0.25 (M-RoPE sections [11, 11, 10] of the text positions); dense MLP
      3584. PyTorch: make_qwen3_next_fixtures.reference, the DeltaNet by
      torch_chunk_gated_delta_rule (chunk 64, its transcription chunk_gated_delta_rule)
      as transformers' eager path runs it without flash-linear-attention; the fixture's
      check against the recurrent form is skipped (it is a float64 check, and a second
      DeltaNet). The recurrent share: the same runs on a one-layer model holding only the
      full_attention layer (the hybrid's layer 3 and its MLP); share = (t₄ − t₁) / t₄,
      the 3 DeltaNet layers with their MLPs, for both; for PyTorch also the DeltaNet
      mixers alone (timed inside the forward) / its forward.
  (b) deepseek_v3: MLA with DeepSeek-V3's latent shapes (q_lora_rank 1536, kv_lora_rank
      512, qk_nope 128, qk_rope 64, v_head_dim 128, rope_interleave, YaRN factor 40 with
      mscale = mscale_all_dim = 1 over 4096 original positions) at 16 heads and hidden
      2048; 4 layers, first_k_dense_replace 1 (a dense MLP 4096, then 3 DeepSeekMoE
      layers: 16 routed experts of 512 in 4 groups, topk_group 2, top-4, sigmoid router
      with correction bias, 1 shared expert, routed_scaling_factor 2.5).
      PyTorch: make_mla_fixtures.reference, its MoE replaced by DeepseekV3MoE.moe's eager
      loop over the experts (one_hot mask, torch.where, index_add_) with the fixture's
      router (topk_indices) and expert MLP: the fixture loops over tokens, which no
      PyTorch user runs.

Target: attn no slower than PyTorch eager (PyTorch / attn whole-process time ≥ 1).
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
T = 2048
VOCAB = 4096
N = os.cpu_count() or 1

QWEN35_TEXT = {
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None, "eos_token_id": 248044,
    "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3584,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 16, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "model_type": "qwen3_5_text", "num_attention_heads": 8, "num_hidden_layers": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                        "rope_theta": 10000000, "rope_type": "default"},
    "tie_word_embeddings": False, "use_cache": True, "vocab_size": VOCAB}

DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 2048,
    "intermediate_size": 4096, "vocab_size": VOCAB, "num_hidden_layers": 4, "num_attention_heads": 16,
    "num_key_value_heads": 16, "hidden_act": "silu", "rms_norm_eps": 1e-6, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "rope_interleave": True, "attention_bias": False, "attention_dropout": 0.0, "max_position_embeddings": 163840,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "first_k_dense_replace": 1, "moe_intermediate_size": 512, "n_routed_experts": 16, "n_group": 4, "topk_group": 2,
    "num_experts_per_tok": 4, "n_shared_experts": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "tie_word_embeddings": False, "initializer_range": 0.02,
    "torch_dtype": "bfloat16"}

# The PyTorch side, one process per run: argv model_dir ids.npy kind ("qwen3_5" | "deepseek_v3").
TORCH_FORWARD = r"""
import json, os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[4])
import numpy as np, torch
import torch.nn.functional as F
torch.set_num_threads(os.cpu_count())
import make_checkpoint_fixtures as mcf
model_dir, ids_path, kind = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = json.load(open(model_dir + "/config.json"))
raw = np.memmap(model_dir + "/model.safetensors", dtype=np.uint8, mode="r")
n = int(raw[:8].view(np.uint64)[0])
header = json.loads(bytes(raw[8:8 + n]))
header.pop("__metadata__", None)
W = {}
for name, e in header.items():  # from_pretrained in float32: every weight materialised
    a, b = e["data_offsets"]
    assert e["dtype"] == "BF16", e["dtype"]
    bits = torch.from_numpy(np.array(raw[8 + n + a:8 + n + b]).view(np.int16))
    W[name] = bits.view(torch.bfloat16).reshape(e["shape"]).to(torch.float32)
ids = np.load(ids_path).tolist()
mcf.DT = torch.float32  # the transcriptions' dtype (float64 for the fixtures), RoPE tables too
t_load = time.perf_counter()
mixer = [0.0]
with torch.no_grad():
    if kind == "qwen3_5":
        import make_qwen3_next_fixtures as mq
        mq.DT = torch.float32
        chunk, last = mq.chunk_gated_delta_rule, {}
        def chunk_once(*a):
            last["core"] = chunk(*a)
            return last["core"]
        mq.chunk_gated_delta_rule = chunk_once
        mq.recurrent_gated_delta_rule = lambda *a: last["core"]  # the float64 cross-check skipped
        gdn = mq.gated_delta_net
        def timed_gdn(*a):
            t = time.perf_counter()
            out = gdn(*a)
            mixer[0] += time.perf_counter() - t
            return out
        mq.gated_delta_net = timed_gdn
        text = cfg["text_config"]
        hs, per = mq.reference(W, text, ids, prefix="model.language_model.")
    else:
        import make_mla_fixtures as mla
        mla.DT = torch.float32
        def eager_moe(W, p, cfg, x, routes):
            # DeepseekV3MoE.forward: DeepseekV3TopkRouter (the fixture's topk_indices), then
            # DeepseekV3MoE.moe: per expert, the tokens routed to it (one_hot, torch.where),
            # expert(x[tokens]) · weight, index_add_; plus shared_experts(x).
            X = cfg["n_routed_experts"]
            scores = F.linear(x, W[p + "mlp.gate.weight"]).sigmoid()
            idx = mla.topk_indices(cfg, scores, W[p + "mlp.gate.e_score_correction_bias"])
            tw = scores.gather(1, idx)
            if cfg["norm_topk_prob"]:
                tw = tw / (tw.sum(dim=-1, keepdim=True) + 1e-20)
            tw = tw * cfg["routed_scaling_factor"]
            out = torch.zeros_like(x)
            expert_mask = F.one_hot(idx, num_classes=X).permute(2, 0, 1)
            for e in range(X):
                tok, slot = torch.where(expert_mask[e])
                if tok.numel() > 0:
                    y = mla.mlp(W, p + f"mlp.experts.{e}.", x[tok]) * tw[tok, slot].unsqueeze(-1)
                    out.index_add_(0, tok, y)
            return out + mla.mlp(W, p + "mlp.shared_experts.", x)
        mla.moe = eager_moe
        (hs, _, _, _), _ = mla.reference(W, cfg, ids, [])
t_end = time.perf_counter()
assert hs[-1].dtype == torch.float32 and bool(torch.isfinite(hs[-1]).all()), "not a finite float32 forward"
print(json.dumps({"load_s": t_load - t0, "forward_s": t_end - t_load, "mixer_s": mixer[0]}))
"""


def _bf16_scaled(w):
    """w's tensors in BF16, every 2-D weight but the embedding (and the router bias, 1-D)
    scaled to std 1/√fan_in: the fixtures' scales (0.3–1.0) are for hidden sizes of 32."""
    import torch

    out = {}
    for name, t in w.items():
        if t.ndim == 2 and "embed_tokens" not in name:
            t = t * (1.0 / (float(t.std()) * math.sqrt(t.shape[1])))
        out[name] = t.to(torch.bfloat16)
    return out


def _write(d, cfg, w):
    sys.path.insert(0, str(HERE))
    from make_checkpoint_fixtures import safetensors_bytes, write, write_json

    write(str(d / "model.safetensors"), safetensors_bytes(w, {"format": "pt"}))
    write_json(str(d / "config.json"), cfg)


def make_qwen3_5(d, d_one):
    """The hybrid (d) and the one-layer model of its full_attention layer (d_one)."""
    import torch

    sys.path.insert(0, str(HERE))
    import make_qwen3_next_fixtures as mq

    def config(text):
        return {"architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 248056,
                "model_type": "qwen3_5", "text_config": text, "tie_word_embeddings": False,
                "video_token_id": 248057, "vision_end_token_id": 248054, "vision_start_token_id": 248053}

    g = torch.Generator().manual_seed(2026)
    w = _bf16_scaled(mq.weights(g, QWEN35_TEXT, prefix="model.language_model.", split=True))
    _write(d, config(QWEN35_TEXT), w)
    one_text = dict(QWEN35_TEXT, num_hidden_layers=1, layer_types=["full_attention"])
    pre = "model.language_model."
    one = {}
    for name, t in w.items():
        if ".layers." not in name:
            one[name] = t
        elif name.startswith(pre + "layers.3."):
            one[name.replace(pre + "layers.3.", pre + "layers.0.")] = t
    _write(d_one, config(one_text), one)


def make_deepseek_v3(d):
    import torch

    sys.path.insert(0, str(HERE))
    import make_mla_fixtures as mla

    g = torch.Generator().manual_seed(2027)
    _write(d, DEEPSEEK_V3, _bf16_scaled(mla.weights(g, DEEPSEEK_V3)))


def section_2026(build, rep, tmp, kill_mb=12000):
    """rep: scripts/bench's Report; tmp: the bench's temporary directory (the models are
    written there)."""
    from bench_whole_model import run_measured

    attn = build / "attn"
    version = subprocess.run([str(attn), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    blas = next((l.split(":", 1)[1].strip() for l in version if l.startswith("BLAS:")), "?")
    rep.say("\n## Whole model, 2026 families: attn against PyTorch eager of the same transcription "
            "(docs/design.md §6.1)\n")
    rep.say(f"Random BF16 checkpoints (scripts/bench_whole_model_2026.py), T={T} random ids, --layer all, "
            f"whole processes, one run each, {N} threads for both (attn -j {N}, torch.set_num_threads({N})); "
            f"attn's BLAS: {blas}; load average at the start {os.getloadavg()[0]:.2f}. PyTorch: the fixture "
            f"script's float64 transcription of transformers' eager forward, run in float32 under no_grad.\n")
    rep.say("| model | T | attn s | attn peak MB | PyTorch s | PyTorch peak MB | PyTorch / attn | notes |")
    rep.say("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(2026)
    ids = tmp / "ids2026.npy"
    np.save(ids, rng.integers(0, VOCAB, T).astype(np.int64))

    def warm(d):
        subprocess.run(["cat", str(d / "model.safetensors")], stdout=subprocess.DEVNULL, check=True)

    def run_attn(d):
        warm(d)
        out = tmp / "out2026.npz"
        t, peak, _, _ = run_measured([attn, "compute", d, "--layer", "all", "--token-ids", ids, "--dump", "output",
                                      "-j", N, "-o", out], kill_mb)
        out.unlink()
        return t, peak

    def run_torch(d, kind):
        time.sleep(0.3)  # OpenBLAS's spinning threads of the previous process
        t, peak, stdout, killed = run_measured(["/usr/bin/python3", "-c", TORCH_FORWARD, d, ids, kind, HERE], kill_mb)
        if killed:
            sys.exit(f"bench_whole_model_2026: PyTorch {kind} killed above {kill_mb} MB")
        return t, peak, json.loads(stdout)

    res = {}
    # (a) the Qwen3.5-shaped hybrid
    d, d_one = tmp / "qwen3_5-hybrid", tmp / "qwen3_5-one-attention-layer"
    if not (d / "model.safetensors").exists():
        make_qwen3_5(d, d_one)
    t_a, m_a = run_attn(d)
    t_t, m_t, info = run_torch(d, "qwen3_5")
    t_a1, _ = run_attn(d_one)
    t_t1, _, info1 = run_torch(d_one, "qwen3_5")
    share_a, share_t = (t_a - t_a1) / t_a, (t_t - t_t1) / t_t
    rep.say(f"| qwen3_5 hybrid: hidden 1024, 3 Gated DeltaNet (16 k / 16 v heads × 128) + 1 gated attention "
            f"(8 × 256, 2 KV), dense MLP 3584 | {T} | {t_a:.1f} | {m_a:.0f} | {t_t:.1f} | {m_t:.0f} | "
            f"{t_t / t_a:.2f}x | PyTorch: DeltaNet by torch_chunk_gated_delta_rule (chunk 64); load "
            f"{info['load_s']:.1f} s, forward {info['forward_s']:.1f} s. Recurrent share (3 DeltaNet layers with "
            f"their MLPs = 1 − t(one attention layer) / t(hybrid), whole processes): attn {100 * share_a:.0f}% "
            f"({t_a1:.1f} s alone), PyTorch {100 * share_t:.0f}% ({t_t1:.1f} s alone); PyTorch's DeltaNet mixers "
            f"alone {info['mixer_s']:.1f} s = {100 * info['mixer_s'] / info['forward_s']:.0f}% of its forward |")
    res["qwen3_5"] = t_t / t_a
    # (b) the DeepSeek-V3-shaped MLA model
    d = tmp / "deepseek_v3-mla"
    if not (d / "model.safetensors").exists():
        make_deepseek_v3(d)
    t_a, m_a = run_attn(d)
    t_t, m_t, info = run_torch(d, "deepseek_v3")
    rep.say(f"| deepseek_v3 MLA: hidden 2048, 16 heads, q_lora 1536, kv_lora 512, qk 128+64, v 128; 4 layers "
            f"(1 dense 4096, 3 MoE: 16 experts × 512, top-4 of 2 of 4 groups, 1 shared) | {T} | {t_a:.1f} | "
            f"{m_a:.0f} | {t_t:.1f} | {m_t:.0f} | {t_t / t_a:.2f}x | PyTorch: MoE by DeepseekV3MoE.moe's loop over "
            f"experts; load {info['load_s']:.1f} s, forward {info['forward_s']:.1f} s |")
    res["deepseek_v3"] = t_t / t_a
    rep.target(f"qwen3_5 hybrid T={T}: attn no slower than PyTorch eager (PyTorch / attn time)", res["qwen3_5"], 1.0)
    rep.target(f"deepseek_v3 MLA T={T}: attn no slower than PyTorch eager (PyTorch / attn time)",
               res["deepseek_v3"], 1.0)
    return res


if __name__ == "__main__":
    import argparse
    import importlib.machinery
    import importlib.util

    sys.path.insert(0, str(HERE))
    loader = importlib.machinery.SourceFileLoader("bench", str(HERE / "bench"))
    bench = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench", loader))
    loader.exec_module(bench)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    ap.add_argument("--keep", help="write the models to this directory and keep them (reused when present)")
    ap.add_argument("--kill-mb", type=int, default=12000, help="kill a run whose RSS passes this (MB)")
    ap.add_argument("--out", help="also write the report (Markdown) to this file")
    args = ap.parse_args()
    rep = bench.Report()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rep.say(f"# attn whole-model benchmark, 2026 families, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu}")
    with tempfile.TemporaryDirectory(prefix="attn-bench-2026-") as t:
        tmp = Path(args.keep) if args.keep else Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        section_2026(Path(args.build).resolve(), rep, tmp, args.kill_mb)
    rep.say("\n## Targets\n")
    rep.say("| target | measured | goal | met |")
    rep.say("|---|---|---|---|")
    for name, value, goal, unit, ok, higher in rep.targets:
        rep.say(f"| {name} | {value:.2f}{unit} | {'>=' if higher else '<='} {goal}{unit} | {'met' if ok else 'not met'} |")
    if args.out:
        Path(args.out).write_text("\n".join(rep.lines) + "\n")
