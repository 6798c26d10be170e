"""attn.compute against the attn executable: the same run gives the same bytes.

Each test runs the CLI with -o out.npz and attn.compute with the same options, and
compares every stage with np.array_equal (and the dtype and shape). A wrong convention in
the binding (a keyword not reaching the parser, an array copied to another dtype, a
different default) changes the bytes and fails: test_a_wrong_option_is_seen shows one.
"""

import json
import os

import numpy as np
import pytest

import attn
from conftest import run_attn

STAGES = ["q", "k", "v", "qk", "scaled", "scores", "weights", "output", "lse"]


def cli_npz(tmp_path, args, name="cli.npz"):
    out = tmp_path / name
    r = run_attn(*args, "-o", str(out))
    assert r.code == 0, r.err
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def assert_same(result, expected, stages):
    assert list(result) == stages
    for s in stages:
        assert result[s].dtype == expected[s].dtype, s
        assert result[s].shape == expected[s].shape, s
        assert np.array_equal(result[s], expected[s], equal_nan=True), s


def rng_arrays(shape_q, shape_k, dtype, seed=0):
    g = np.random.default_rng(seed)
    q = g.standard_normal(shape_q).astype(dtype)
    k = g.standard_normal(shape_k).astype(dtype)
    v = g.standard_normal(shape_k).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("opts", [
    {"mask": "causal"},
    {},
    {"mask": "causal", "scale": 0.3, "softcap": 5.0},
    {"window": [2], "mask": "causal", "masked_rows": "nan"},
    {"kernel": "reference", "mask": "causal"},
    {"mask_fill": -1e9, "lengths": [3, 5]},
])
def test_arrays_bitwise_equal_to_the_cli(tmp_path, dtype, opts):
    q, k, v = rng_arrays((2, 2, 5, 8), (2, 2, 5, 8), dtype)
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v)
    words = []
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        words += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    expected = cli_npz(tmp_path, ["compute", str(tmp_path / "in.npz"), "--dump", ",".join(STAGES)] + words)
    # The arrays as keywords, as a dict, and the file itself.
    assert_same(attn.compute(q=q, k=k, v=v, dump=STAGES, **opts), expected, STAGES)
    assert_same(attn.compute({"Q": q, "K": k, "V": v}, dump=",".join(STAGES), **opts), expected, STAGES)
    assert_same(attn.compute(tmp_path / "in.npz", dump=STAGES, **opts), expected, STAGES)


def test_a_lone_array_is_x_with_heads_and_projections(tmp_path):
    g = np.random.default_rng(3)
    x = g.standard_normal((2, 6, 8)).astype(np.float32)
    w = g.standard_normal((24, 8)).astype(np.float32)
    b = g.standard_normal(24).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "mha.npz", x=x, in_proj_weight=w, in_proj_bias=b)
    expected = cli_npz(tmp_path, ["compute", str(tmp_path / "x.npy"), "--mask", "causal", "--heads", "2"])
    assert_same(attn.compute(x, mask="causal", heads=2), expected, ["scores", "weights", "output"])
    expected = cli_npz(tmp_path, ["compute", str(tmp_path / "mha.npz"), "--heads", "2", "--batch-first", "--dump",
                                  "q,weights,output"])
    r = attn.compute(x=x, in_proj_weight=w, in_proj_bias=b, heads=2, batch_first=True, dump=["q", "weights", "output"])
    assert_same(r, expected, ["q", "weights", "output"])
    r = attn.compute({"x": x, "in_proj_weight": w, "in_proj_bias": b}, heads=2, batch_first=True, dump=["q", "weights", "output"])
    assert_same(r, expected, ["q", "weights", "output"])
    # A state dict without batch_first is refused as the CLI refuses the file.
    cli = run_attn("compute", str(tmp_path / "mha.npz"), "--heads", "2")
    with pytest.raises(attn.UsageError) as e:
        attn.compute({"x": x, "in_proj_weight": w, "in_proj_bias": b}, heads=2)
    assert str(e.value) == cli.error_line


def test_seed_data_with_tokens_and_meta(tmp_path, src):
    path = os.path.join(src, "data", "notebook.npz")
    expected = cli_npz(tmp_path, ["compute", "--mask", "causal", path, "--tokens", "my name is Aj"])
    r = attn.compute(path, mask="causal", tokens="my name is Aj")
    assert_same(r, expected, ["scores", "weights", "output"])
    assert r.tokens == ["my", "name", "is", "Aj"]
    assert list(expected["tokens"]) == r.tokens
    meta = json.loads(str(expected["meta"]))
    assert r.meta == meta
    assert attn.compute(path, mask="causal", tokens=["my", "name", "is", "Aj"]).tokens == r.tokens


def test_store_float16_as_the_npz(tmp_path, src):
    path = os.path.join(src, "data", "notebook.npz")
    expected = cli_npz(tmp_path, ["compute", path, "--store", "float16", "--dump", "weights,output"])
    r = attn.compute(path, store="float16", dump=["weights", "output"])
    assert_same(r, expected, ["weights", "output"])
    assert r["weights"].dtype == np.float16


def test_a_wrong_option_is_seen(tmp_path):
    # The check can fail: the CLI with the causal mask against attn.compute without it.
    q, k, v = rng_arrays((4, 8), (4, 8), np.float32)
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v)
    expected = cli_npz(tmp_path, ["compute", str(tmp_path / "in.npz"), "--mask", "causal"])
    assert not np.array_equal(attn.compute(q=q, k=k, v=v)["weights"], expected["weights"])
    assert np.array_equal(attn.compute(q=q, k=k, v=v, causal=True)["weights"], expected["weights"])


def test_model_directory_with_text(tmp_path, src):
    model = os.path.join(src, "data", "llama-tiny")
    stages = ["x", "q", "k", "v", "scores", "weights", "output"]
    expected = cli_npz(tmp_path, ["compute", model, "--text", "Hello world", "--text", "Hi", "--dump", ",".join(stages)])
    r = attn.compute(model, text=["Hello world", "Hi"], dump=stages)
    assert_same(r, expected, stages)
    assert r.meta == json.loads(str(expected["meta"]))
    assert r.axes("weights")[0] == "L"
    # One layer, words, and a checkpoint fixture with its tokenizer given.
    expected = cli_npz(tmp_path, ["compute", model, "--layer", "1", "--text", "The capital of France is", "--words"], "w.npz")
    r = attn.compute(model, layer=1, text="The capital of France is", words=True)
    assert "word_weights" in r
    assert_same(r, expected, list(r))
    assert r.words == list(expected["words"])
    gpt2 = os.path.join(src, "data", "gpt2-tiny")
    tok = os.path.join(src, "data", "gpt2-tiny", "tokenizer.json")
    expected = cli_npz(tmp_path, ["compute", gpt2, "--layer", "0,1", "--tokenizer", tok, "--text", "Hello world"], "g.npz")
    r = attn.compute(gpt2, layer=[0, 1], tokenizer=tok, text="Hello world")
    assert_same(r, expected, ["scores", "weights", "output"])


def test_manifest_style_loop(tmp_path):
    # Jobs of a manifest (one line each: an input and its own options) run by the CLI in
    # one batch into -o DIR/, and the same jobs through attn.compute in a loop.
    g = np.random.default_rng(7)
    jobs = []
    for i in range(6):
        x = g.standard_normal((3 + i, 4)).astype(np.float32 if i % 2 else np.float64)
        np.save(tmp_path / f"in{i}.npy", x)
        opts = [{"mask": "causal"}, {"scale": 0.5}, {"lengths": [2]}, {"softcap": 2.0, "mask": "causal"},
                {"window": [1, 1]}, {"kernel": "reference"}][i]
        jobs.append((f"in{i}.npy", x, opts))
    with open(tmp_path / "jobs.jsonl", "w") as f:
        for name, _, opts in jobs:
            f.write(json.dumps({"input": name, **opts, "dump": ["weights", "output"]}) + "\n")
    r = run_attn("compute", "--manifest", str(tmp_path / "jobs.jsonl"), "-o", str(tmp_path / "out") + "/", "--format", "npz")
    assert r.code == 0, r.err
    for name, x, opts in jobs:
        with np.load(tmp_path / "out" / (name[:-4] + ".npz")) as z:
            got = attn.compute(x, dump=["weights", "output"], **opts)
            for s in ("weights", "output"):
                assert np.array_equal(got[s], z[s]), (name, s)


def test_save_writes_what_the_cli_writes(tmp_path, src):
    path = os.path.join(src, "data", "notebook.npz")
    for fmt in ("json", "csv"):
        r = run_attn("compute", path, "--mask", "causal", "--format", fmt)
        assert r.code == 0
        attn.compute(path, mask="causal").save(tmp_path / f"out.{fmt}")
        assert (tmp_path / f"out.{fmt}").read_bytes() == r.out


def test_result_is_a_mapping_of_read_only_arrays(src):
    r = attn.compute(os.path.join(src, "data", "notebook.npz"))
    from collections.abc import Mapping
    assert isinstance(r, Mapping)
    assert set(r.keys()) == {"scores", "weights", "output"}
    assert not r["weights"].flags.writeable
    w = r["weights"].copy()
    w[0, 0] = 5
    assert r["weights"][0, 0] != 5


def test_options_come_from_the_table():
    o = attn.options()
    for key in ("mask", "causal_align", "mask_fill", "kv_heads", "x_kv", "in_proj_weight", "key_padding_mask",
                "layer", "text", "tokenizer", "words", "dump", "store", "threads", "max_bytes"):
        assert key in o, key
    assert o["mask_fill"]["flag"] == "--mask-fill"
    assert o["causal_align"]["default"] == "top-left"
    assert o["wq"]["array"] == "w_q"
    assert "format" not in o and "output" not in o
    assert "causal" in o["mask"]["choices"]


def test_threads_bound_and_checked(tmp_path, src):
    path = os.path.join(src, "data", "notebook.npz")
    a = attn.compute(path, threads=1)
    b = attn.compute(path, threads=2)
    assert np.array_equal(a["weights"], b["weights"])
    cli = run_attn("compute", path, "-j", "0")
    with pytest.raises(attn.UsageError) as e:
        attn.compute(path, threads=0)
    assert str(e.value) == cli.error_line


def test_zero_copy_views(tmp_path):
    # A result's q stage computed from a float32 q without projection and the input's bytes:
    # the input is read in place (a view), checked by writing into it after the call fails
    # nothing — the call is over — so the check is the address NumPy reports for a
    # C-contiguous input versus a transposed one (copied once by _as_input_array).
    from attn import _as_input_array
    q = np.zeros((4, 8), np.float32)
    assert _as_input_array(q, "q") is q
    t = np.zeros((8, 4), np.float32).T
    assert _as_input_array(t, "q") is not t
    big = np.zeros((4, 8), ">f4")
    assert _as_input_array(big, "q").dtype == np.dtype("<f4")
