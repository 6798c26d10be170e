#!/usr/bin/python3
"""Generates the committed I/O test fixtures under tests/fixtures/io/.

Run with Debian's Python (NumPy lives there, not in the python3 first on PATH):

    /usr/bin/python3 scripts/make_io_fixtures.py

Writes
  npy/*.npy        the .npy reader matrix: every dtype attn reads, both byte orders,
                   C and Fortran order, ranks 0-4 and an empty dimension, written by
                   np.save (plus format versions 2.0 and 3.0 by write_array)
  npz/*.npz        np.savez, np.savez_compressed, positional arr_0, and two broken ones
  unicode/*.npy    NumPy unicode arrays ('<U', '>U'; 0-d, 1-d, 2-d, characters beyond the
                   BMP), as attn writes an .npz's tokens and meta (docs/design.md §6.2);
                   unicode/expected.json holds each one's shape and strings
  expected.json    for every fixture: dtype, shape and the values in C order as NumPy
                   sees them (non-finite floats as "NaN", "Infinity", "-Infinity"), so
                   the C++ tests compare against NumPy without running Python

The output is deterministic: rerunning it must leave `git status` clean.
"""

import io
import json
import math
import os
import struct
import zipfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "io")

DTYPES = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]
C_SHAPES = [(), (7,), (3, 4), (2, 3, 4), (2, 1, 3, 2), (0, 3)]
F_SHAPES = [(3, 4), (2, 3, 4), (2, 1, 3, 2)]


def values_for(code, n, rng):
    """n values of dtype `code`: edge cases first, then random ones."""
    dt = np.dtype(code)
    if code == "b1":
        return np.array([(i * 5) % 3 == 0 for i in range(n)], dtype=bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        pattern = 0x0102030405060708 & ((1 << (8 * dt.itemsize - 1)) - 1)  # distinct bytes
        special = [info.min, info.max, pattern, 1, 0] if dt.kind == "i" else [info.max, pattern, 1, 0]
        if dt.kind == "i":
            special.insert(2, -1)
        rest = [int(x) for x in rng.integers(info.min, info.max, size=max(n, 1), dtype=dt, endpoint=True)]
        return np.array((special + rest)[:n], dtype=dt)
    special = [0.1, -2.5, math.nan, math.inf, -math.inf, -0.0, 1.0 / 3.0, 0.0, float(np.finfo(dt).max),
               float(np.finfo(dt).smallest_subnormal)]
    rest = list(rng.standard_normal(max(n, 1)) * 10)
    return np.array((special + rest)[:n], dtype=dt)


def json_value(x):
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
    return x


def describe(a):
    """What the C++ test expects: NumPy's own view of the array, C order."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if a.dtype.kind == "b":
        vals = [bool(x) for x in flat]
    elif a.dtype.kind in "iu":
        vals = [int(x) for x in flat]
    else:
        vals = [json_value(float(x)) for x in flat]
    return {"dtype": a.dtype.name, "shape": list(a.shape), "values": vals}


def shape_tag(shape):
    return "0d" if shape == () else "x".join(str(d) for d in shape)


def save(path, a, version=None):
    full = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if version is None:
        np.save(full, a)
    else:
        with open(full, "wb") as f:
            np.lib.format.write_array(f, a, version=version)
    # Guard the fixture's own premise: NumPy reads it back as the same array.
    b = np.load(full)
    assert b.dtype == a.dtype and b.shape == a.shape
    assert np.array_equal(b, a, equal_nan=a.dtype.kind == "f")


def header_of(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        major = f.read(8)[6]
        f.seek(0)
        f.read(8)
        return (np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0)(f)


def npy_fixtures(expected):
    rng = np.random.default_rng(20240501)
    for code in DTYPES:
        size = np.dtype(code).itemsize
        orders = ["<"] if size == 1 else ["<", ">"]
        for bo in orders:
            bo_tag = "le" if bo == "<" else "be"
            if size == 1:
                bo_tag = "na"
            for mem, shapes in (("C", C_SHAPES), ("F", F_SHAPES)):
                for shape in shapes:
                    n = int(np.prod(shape)) if shape else 1
                    a = values_for(code, n, rng).reshape(shape)
                    if size > 1:
                        a = a.astype(a.dtype.newbyteorder(bo))
                    if mem == "F":
                        a = np.asfortranarray(a)
                    path = f"npy/{code}_{bo_tag}_{mem}_{shape_tag(shape)}.npy"
                    save(path, a)
                    _, fortran, _ = header_of(path)
                    assert fortran == (mem == "F"), path
                    entry = describe(a)
                    entry["file"] = path
                    expected["npy"].append(entry)

    a = (np.arange(6, dtype="<f4").reshape(2, 3) - 2.5) / 3
    save("npy/v2_f4_le_C_2x3.npy", a, version=(2, 0))
    expected["npy"].append(dict(describe(a), file="npy/v2_f4_le_C_2x3.npy"))
    a = np.asfortranarray(values_for("i2", 12, rng).reshape(3, 4).astype(">i2"))
    save("npy/v3_i2_be_F_3x4.npy", a, version=(3, 0))
    expected["npy"].append(dict(describe(a), file="npy/v3_i2_be_F_3x4.npy"))


def write_zip(path, members, compression):
    """A zip with fixed timestamps, so that reruns give identical bytes."""
    full = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with zipfile.ZipFile(full, "w", compression) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            z.writestr(info, data)


def npz_fixtures(expected):
    rng = np.random.default_rng(7)
    q = (rng.standard_normal((2, 3, 4)) * 4).astype(np.float32)
    q.flat[5] = np.nan
    k = np.asfortranarray(rng.standard_normal((3, 4)))
    k.flat[2] = -np.inf
    mask = np.tri(3, dtype=bool)
    lengths = np.array([3, 1], dtype=">i8")

    # np.savez stamps the current time into the archive; rewrite the same members with
    # a fixed time so the committed bytes are reproducible, after checking that NumPy's
    # own archives load (those are what the tests must read: ZIP64, stored or deflated).
    for fn, tag, compression in ((np.savez, "savez", zipfile.ZIP_STORED),
                                 (np.savez_compressed, "savez_compressed", zipfile.ZIP_DEFLATED)):
        buf = io.BytesIO()
        fn(buf, q=q, K=k, attn_mask=mask, lengths=lengths)
        buf.seek(0)
        with zipfile.ZipFile(buf) as z:
            members = [(info.filename, z.read(info)) for info in z.infolist()]
        path = f"npz/{tag}.npz"
        full = os.path.join(ROOT, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        # Re-zip through NumPy's own writer settings: force_zip64 as np.savez does.
        with zipfile.ZipFile(full, "w", compression, allowZip64=True) as z:
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = compression
                with z.open(info, "w", force_zip64=True) as f:
                    f.write(data)
        with np.load(full) as d:
            assert list(d.keys()) == ["q", "K", "attn_mask", "lengths"]
            assert np.array_equal(d["q"], q, equal_nan=True)
        expected["npz"].append({"file": path, "arrays": [dict(describe(a), name=n) for n, a in
                                                         (("q", q), ("K", k), ("attn_mask", mask),
                                                          ("lengths", lengths))]})

    single = np.arange(12, dtype=np.int32).reshape(3, 4)
    buf = io.BytesIO()
    np.save(buf, single)
    write_zip("npz/positional.npz", [("arr_0.npy", buf.getvalue())], zipfile.ZIP_STORED)
    expected["npz"].append({"file": "npz/positional.npz", "arrays": [dict(describe(single), name="arr_0")]})

    # A member that is not a valid .npy (cut inside its preamble), next to a good one.
    buf = io.BytesIO()
    np.save(buf, single)
    write_zip("npz/bad_member.npz", [("good.npy", buf.getvalue()), ("bad.npy", buf.getvalue()[:8]),
                                     ("notes.txt", b"not an array")], zipfile.ZIP_STORED)

    # A deflated member whose declared uncompressed size (local header and central
    # directory) is absurd for its compressed size.
    zeros = io.BytesIO()
    np.save(zeros, np.zeros(1000))
    path = os.path.join(ROOT, "npz/huge_declared.npz")
    write_zip("npz/huge_declared.npz", [("x.npy", zeros.getvalue())], zipfile.ZIP_DEFLATED)
    data = bytearray(open(path, "rb").read())
    local = data.find(b"PK\x03\x04")
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, 0xF0000000)
    struct.pack_into("<I", data, central + 24, 0xF0000000)
    with open(path, "wb") as f:
        f.write(bytes(data))


def unicode_fixtures():
    folder = os.path.join(ROOT, "unicode")
    os.makedirs(folder, exist_ok=True)
    cases = {
        "tokens": np.array(["my", "name", "is", "Aj"]),
        "labels": np.array(["<|begin_of_text|>", "é", "Ω\U0001D11E", "", "a b"]),
        "meta": np.array('{"heads": 2, "text": "naïve"}'),
        "batch": np.array([["a", "bc", ""], ["ĉ", "d", "e"]]),
        "big_endian": np.array(["x", "yz"], dtype=">U2"),
    }
    listed = {}
    for name, a in cases.items():
        np.save(os.path.join(folder, name + ".npy"), a)
        listed[name] = {"shape": list(a.shape), "values": [str(v) for v in a.reshape(-1)]}
    with open(os.path.join(folder, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(listed, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def main():
    expected = {"npy": [], "npz": []}
    npy_fixtures(expected)
    npz_fixtures(expected)
    unicode_fixtures()
    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
