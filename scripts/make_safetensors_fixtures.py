#!/usr/bin/python3
"""Generates the committed safetensors test fixtures under tests/fixtures/safetensors/.

Run with Debian's Python (NumPy and PyTorch live there, not in the python3 first on PATH):

    /usr/bin/python3 scripts/make_safetensors_fixtures.py

The files are written with plain struct/json code from the format's description
(https://github.com/huggingface/safetensors: 8-byte little-endian header length N, N
bytes of JSON header, raw little-endian data; the reference writer pads the header with
spaces to a multiple of 8 bytes). The `safetensors` Python package is not installed on
this machine, so there is no cross-check against it; the values are checked against
PyTorch and NumPy instead:

  dtypes.safetensors    one tensor per dtype attn reads (F64 F32 F16 BF16 F8_E4M3 F8_E5M2,
                        I8..I64, U8..U64, BOOL), plus an empty (0, 3) tensor
  unaligned.safetensors an F32 and an I64 tensor whose data is not aligned to 4 / 8 bytes
  expected.json         per tensor of those two: dtype, shape, and the values as attn must
                        load them: float32 bit patterns for the float types (BF16 decoded
                        by torch.bfloat16 → float32, F8_E5M2 by NumPy float16 of the byte
                        << 8, F8_E4M3 (PyTorch float8_e4m3fn) from the OCP FP8 spec, twice
                        by two routes; this torch 1.13 has no float8 dtypes), float64 bits,
                        float16 bits, integers as numbers, booleans as 0/1
  single.safetensors    a small checkpoint with HF-style dotted names (BF16 and F32)
  sharded/              the same tensors as model.safetensors.index.json + 2 shards
  qkv.safetensors       q, k, v (F32) under dotted names and as a bundle (q, k, v) ...
  qkv.npz               ... and the same arrays as NumPy's .npz, for compute comparisons
  unused.safetensors    q, k, v of 48 bytes each and an unused 16 KiB "lm_head.weight"
  bad/*.safetensors     one broken header per check of the reader (see BAD below)
  bad/*.index.json      a shard missing, a name mapped to a shard that lacks it

The output is deterministic: rerunning it must leave `git status` clean.
"""

import io
import json
import math
import os
import shutil
import struct
import zipfile

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "safetensors")


def header_bytes(header_text, pad=True):
    raw = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    if pad:
        raw += b" " * (-len(raw) % 8)
    return raw


def build(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes), stored in that order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = header_bytes(json.dumps(header, separators=(",", ":")), pad)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def raw_file(header_text, data=b"", pad=True, length=None):
    text = header_bytes(header_text, pad)
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def npz(arrays):
    """np.savez's layout (stored .npy members) with a fixed time stamp, for reproducibility."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays:
            member = io.BytesIO()
            np.save(member, a)
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue())
    return out.getvalue()


def write(path, data):
    full = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(data)


def f32_bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).ravel().tolist()


# --- FP8 decoding, from the OCP 8-bit floating point specification -------------------

def e4m3fn_value(b):
    """float8_e4m3fn: bias 7, no infinities, S.1111.111 NaN."""
    s, e, m = b >> 7, (b >> 3) & 0xF, b & 0x7
    if e == 0xF and m == 0x7:
        return math.copysign(math.nan, -1.0 if s else 1.0)
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def e4m3fn_via_float16(b):
    """The same value by another route: re-biasing the fields into IEEE binary16."""
    s, e, m = b >> 7, (b >> 3) & 0xF, b & 0x7
    if e == 0xF and m == 0x7:
        bits = (s << 15) | 0x7E00
    elif e == 0:
        # m · 2^-9 is a normal binary16 number (or zero)
        return float(np.float16(-(m * 2.0 ** -9) if s else m * 2.0 ** -9))
    else:
        bits = (s << 15) | ((e - 7 + 15) << 10) | (m << 7)
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def e4m3_table():
    out = []
    for b in range(256):
        a, c = e4m3fn_value(b), e4m3fn_via_float16(b)
        assert (math.isnan(a) and math.isnan(c)) or (a == c and math.copysign(1, a) == math.copysign(1, c)), b
        out.append(a)
    # anchors from the spec's table: max normal 448, min normal 2^-6, min subnormal 2^-9
    assert out[0x7E] == 448 and out[0x08] == 2 ** -6 and out[0x01] == 2 ** -9 and math.isnan(out[0x7F])
    assert math.isnan(out[0xFF]) and out[0xFE] == -448 and sum(math.isnan(v) for v in out) == 2
    return np.array(out, dtype=np.float32)


def e5m2_table():
    t = (np.arange(256, dtype=np.uint16) << 8).view(np.float16).astype(np.float32)
    assert t[0x7B] == 57344 and t[0x7C] == np.inf and np.isnan(t[0x7D]) and t[0x01] == 2.0 ** -16
    return t


# --- fixtures ----------------------------------------------------------------------------

def dtype_fixtures():
    rng = np.random.default_rng(15)
    tensors, expected = [], {}

    def add(name, dt, shape, raw, exp):
        tensors.append((name, dt, shape, raw))
        expected[name] = dict(dtype=dt, shape=list(shape), **exp)

    f64 = np.array([0.0, -0.0, 1.0 / 3, -2.5e-310, 1e300, np.inf, -np.inf, np.nan], dtype="<f8").reshape(2, 4)
    add("f64", "F64", f64.shape, f64.tobytes(), {"f64_bits": f64.view(np.uint64).ravel().tolist()})
    f32 = np.concatenate([[0.0, -0.0, 1e-45, -3.4028235e38, np.inf, np.nan], rng.standard_normal(6)]).astype("<f4").reshape(3, 4)
    add("layers.0.f32", "F32", f32.shape, f32.tobytes(), {"f32_bits": f32_bits(f32)})
    f16 = np.array([0, -0.0, 6e-8, 65504, -1.5, np.inf, np.nan, 0.1], dtype="<f2").reshape(2, 2, 2)
    add("f16", "F16", f16.shape, f16.tobytes(),
        {"f16_bits": f16.view(np.uint16).ravel().tolist(), "f32_bits": f32_bits(f16.astype(np.float32))})

    # BF16: torch rounds the float32 values (round to nearest even) and decodes them.
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 3.14159265, 1e-40, -1e-38, 3.3895e38, float("inf"), float("-inf"),
                         float("nan"), 0.1, 65504.0, 1.00390625, 1.01171875, -7.0e-3] +
                        rng.standard_normal(16).tolist(), dtype=torch.float32)
    bf = vals.to(torch.bfloat16).reshape(4, 8)
    add("model.embed.weight_bf16", "BF16", tuple(bf.shape), bf.view(torch.int16).numpy().astype("<i2").tobytes(),
        {"f32_bits": f32_bits(bf.to(torch.float32).numpy())})

    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    add("f8_e4m3", "F8_E4M3", codes.shape, codes.tobytes(), {"f32_bits": f32_bits(e4m3_table().reshape(16, 16))})
    add("f8_e5m2", "F8_E5M2", codes.shape, codes.tobytes(), {"f32_bits": f32_bits(e5m2_table().reshape(16, 16))})

    for dt, np_dt in [("I8", "<i1"), ("I16", "<i2"), ("I32", "<i4"), ("I64", "<i8"),
                      ("U8", "<u1"), ("U16", "<u2"), ("U32", "<u4"), ("U64", "<u8")]:
        info = np.iinfo(np_dt)
        a = np.array([info.min, info.max, 0, 1, 7, info.max // 3], dtype=np_dt).reshape(2, 3)
        add(dt.lower(), dt, a.shape, a.tobytes(), {"ints": [int(v) for v in a.ravel()]})
    b = np.array([True, False, False, True, True, False], dtype=bool).reshape(3, 2)
    add("mask.bool", "BOOL", b.shape, b.tobytes(), {"ints": [int(v) for v in b.ravel()]})
    add("empty", "F32", (0, 3), b"", {"f32_bits": []})

    write("dtypes.safetensors", build(tensors, {"format": "pt", "note": "attn fixture"}))

    # Unaligned: a header of odd length puts the data at an odd offset.
    u32 = np.array([1.5, -2.25, 3.0], dtype="<f4")
    u64 = np.array([-(2 ** 40), 5, 2 ** 62], dtype="<i8")
    unaligned = [("odd.f32", "F32", u32.shape, u32.tobytes()), ("odd.i64", "I64", u64.shape, u64.tobytes())]
    data = build(unaligned, pad=False)
    n = struct.unpack("<Q", data[:8])[0]
    if (8 + n) % 2 == 0:  # make the data start odd
        header = data[8:8 + n] + b" "
        data = struct.pack("<Q", n + 1) + header + data[8 + n:]
    write("unaligned.safetensors", data)
    expected_unaligned = {"odd.f32": {"dtype": "F32", "shape": [3], "f32_bits": f32_bits(u32)},
                          "odd.i64": {"dtype": "I64", "shape": [3], "ints": [int(v) for v in u64]}}

    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump({"dtypes.safetensors": expected, "unaligned.safetensors": expected_unaligned}, f, indent=1)
        f.write("\n")


def checkpoint_tensors():
    rng = np.random.default_rng(7)
    out = []
    for layer in range(2):
        for proj in ("q_proj", "k_proj", "v_proj"):
            w = torch.tensor(rng.standard_normal((4, 4)), dtype=torch.float32).to(torch.bfloat16)
            out.append((f"model.layers.{layer}.self_attn.{proj}.weight", "BF16", (4, 4),
                        w.view(torch.int16).numpy().astype("<i2").tobytes()))
        norm = rng.standard_normal(4).astype("<f4")
        out.append((f"model.layers.{layer}.input_layernorm.weight", "F32", (4,), norm.tobytes()))
    emb = rng.standard_normal((10, 4)).astype("<f4")
    out.append(("model.embed_tokens.weight", "F32", (10, 4), emb.tobytes()))
    return out


def sharded_fixtures():
    tensors = checkpoint_tensors()
    write("single.safetensors", build(tensors, {"format": "pt"}))
    first = [t for t in tensors if ".layers.0." in t[0] or "embed" in t[0]]
    second = [t for t in tensors if t not in first]
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    write("sharded/" + names[0], build(first, {"format": "pt"}))
    write("sharded/" + names[1], build(second, {"format": "pt"}))
    weight_map = {t[0]: names[0] for t in first}
    weight_map.update({t[0]: names[1] for t in second})
    index = {"metadata": {"total_size": sum(len(t[3]) for t in tensors)},
             "weight_map": dict(sorted(weight_map.items()))}
    write("sharded/model.safetensors.index.json", (json.dumps(index, indent=2) + "\n").encode())


def qkv_fixtures():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 4)).astype("<f4") for _ in range(3))
    arrays = [("q", q), ("k", k), ("v", v)]
    write("qkv.safetensors", build([(n, "F32", a.shape, a.tobytes()) for n, a in arrays] +
                                   [(f"layers.0.attn.{n}", "F32", a.shape, a.tobytes()) for n, a in arrays]))
    write("qkv.npz", npz(arrays))
    small = [(n, "F32", (3, 4), a[0].tobytes()) for n, a in arrays]
    big = np.zeros((64, 64), dtype="<f4")
    write("unused.safetensors", build(small + [("lm_head.weight", "F32", big.shape, big.tobytes())]))


T = '{"dtype":"F32","shape":[2],"data_offsets":[%d,%d]}'

# name → file bytes; the CLI tests check each one's exact message.
BAD = {
    "too_short": b"\x10\x00\x00",
    "length_beyond_file": raw_file('{"a":' + T % (0, 8) + '}', b"\0" * 8, length=1000),
    "length_over_limit": raw_file('{"a":' + T % (0, 8) + '}', b"\0" * 8, length=200_000_000),
    "not_utf8": raw_file(b'{"a\xff":' + (T % (0, 8)).encode() + b'}', b"\0" * 8),
    "invalid_json": raw_file('{"a":{"dtype":"F32",}}'),
    "not_object": raw_file('[1,2]'),
    "entry_not_object": raw_file('{"a":[0,8]}', b"\0" * 8),
    "missing_field": raw_file('{"a":{"dtype":"F32","shape":[2]}}', b"\0" * 8),
    "offsets_out_of_bounds": raw_file('{"a":' + T % (0, 8) + ',"b":' + T % (8, 16) + '}', b"\0" * 12),
    "offsets_reversed": raw_file('{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}', b"\0" * 8),
    "gap": raw_file('{"a":' + T % (0, 8) + ',"b":' + T % (12, 20) + '}', b"\0" * 20),
    "not_from_zero": raw_file('{"a":' + T % (4, 12) + '}', b"\0" * 12),
    "overlap": raw_file('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":' + T % (8, 16) + '}',
                        b"\0" * 16),
    "byte_count": raw_file('{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}}', b"\0" * 16),
    "duplicate_name": raw_file('{"a":' + T % (0, 8) + ',"a":' + T % (8, 16) + '}', b"\0" * 16),
    "unknown_dtype": raw_file('{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}', b"\0" * 8),
    "negative_shape": raw_file('{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', b"\0" * 8),
    "data_not_at_end": raw_file('{"a":' + T % (0, 8) + '}', b"\0" * 12),
    "metadata_not_strings": raw_file('{"__metadata__":{"format":1},"a":' + T % (0, 8) + '}', b"\0" * 8),
}


def bad_fixtures():
    for name, data in BAD.items():
        write(f"bad/{name}.safetensors", data)
    shard = build([("a", "F32", (2,), b"\0" * 8)])
    write("bad/present-00001-of-00002.safetensors", shard)
    index = lambda m: (json.dumps({"metadata": {}, "weight_map": m}, indent=2) + "\n").encode()
    write("bad/missing_shard.safetensors.index.json",
          index({"a": "present-00001-of-00002.safetensors", "b": "absent-00002-of-00002.safetensors"}))
    write("bad/shard_lacks_tensor.safetensors.index.json",
          index({"a": "present-00001-of-00002.safetensors", "b": "present-00001-of-00002.safetensors"}))


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    dtype_fixtures()
    sharded_fixtures()
    qkv_fixtures()
    bad_fixtures()


if __name__ == "__main__":
    main()
