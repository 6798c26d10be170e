"""attn's typed errors as Python exceptions, with the CLI's one-line message.

Each case runs the CLI with the same options and compares the message with its stderr
line without "attn: error: ", and the class with its exit code (2: UsageError; 1: a
DataError or FileError). The process survives every one (the CLI would exit).
"""

import os
import signal
import threading
import time

import numpy as np
import pytest

import attn
from conftest import run_attn


def notebook(src):
    return os.path.join(src, "data", "notebook.npz")


@pytest.mark.parametrize("kwargs, words, cls", [
    ({"scale": "abc"}, ["--scale", "abc"], attn.UsageError),
    ({"mask": "causl"}, ["--mask", "causl"], attn.UsageError),
    ({"maks": "causal"}, ["--maks", "causal"], attn.UsageError),
    ({"mask": "padding"}, ["--mask", "padding"], attn.UsageError),
    ({"heads": 3}, ["--heads", "3"], attn.UsageError),
    ({"lengths": [9]}, ["--lengths", "9"], attn.UsageError),
    ({"lengths": [-1]}, ["--lengths", "-1"], attn.UsageError),
    ({"dump": ["weights", "nope"]}, ["--dump", "weights,nope"], attn.UsageError),
    ({"window": [1, 2, 3]}, ["--window", "1,2,3"], attn.UsageError),
    ({"causal_align": "middle"}, ["--causal-align", "middle"], attn.UsageError),
])
def test_messages_and_classes_are_the_clis(src, kwargs, words, cls):
    cli = run_attn("compute", notebook(src), *words)
    assert cli.code == cls.exit_code, cli.err
    with pytest.raises(cls) as e:
        attn.compute(notebook(src), **kwargs)
    assert str(e.value) == cli.error_line
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, attn.Error)
    assert e.value.exit_code == cli.code


def test_shape_error_of_arrays(tmp_path):
    g = np.random.default_rng(1)
    q, k, v = g.standard_normal((4, 8)), g.standard_normal((5, 6)), g.standard_normal((5, 6))
    np.savez(tmp_path / "bad.npz", q=q, k=k, v=v)
    cli = run_attn("compute", str(tmp_path / "bad.npz"))
    assert cli.code == 1
    with pytest.raises(attn.ShapeError) as e:
        attn.compute(q=q, k=k, v=v)
    # The CLI names the file first ("bad.npz: k: …"); the arrays given here have no file.
    assert cli.error_line.endswith(str(e.value)), (cli.error_line, str(e.value))
    with pytest.raises(attn.ShapeError) as e:
        attn.compute(tmp_path / "bad.npz")
    assert str(e.value) == cli.error_line


def test_file_errors_are_oserrors(tmp_path):
    missing = str(tmp_path / "missing.npy")
    cli = run_attn("compute", missing)
    with pytest.raises(OSError) as e:
        attn.compute(missing)
    assert isinstance(e.value, attn.FileError)
    assert str(e.value) == cli.error_line
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY\x01\x00junk")
    cli = run_attn("compute", str(tmp_path / "junk.npy"))
    with pytest.raises(attn.FormatError) as e:
        attn.compute(tmp_path / "junk.npy")
    assert str(e.value) == cli.error_line


def test_unsupported_dtype_and_file_only_options():
    with pytest.raises(attn.DataError):
        attn.compute(q=np.zeros((2, 2), np.complex64), k=np.zeros((2, 2)), v=np.zeros((2, 2)))
    with pytest.raises(attn.UsageError) as e:
        attn.compute(np.zeros((2, 2)), format="json")
    assert "Result.save" in str(e.value)


def test_no_input():
    with pytest.raises(attn.UsageError) as e:
        attn.compute()
    assert "no input" in str(e.value)


def test_tokenize_errors(tmp_path):
    with pytest.raises(attn.FileError):
        attn.tokenize("hi", tmp_path / "none.json")


def long_inputs():
    g = np.random.default_rng(0)
    x = g.standard_normal((1, 4, 1024, 64))  # about 2 s of the reference kernel
    return x


def test_the_gil_is_released_while_attn_computes():
    x = long_inputs()
    done = threading.Event()
    ticks = []

    def work():
        attn.compute(q=x, k=x, v=x, kernel="reference", dump=["output"], threads=1)
        done.set()

    t = threading.Thread(target=work)
    start = time.monotonic()
    t.start()
    while not done.is_set():
        ticks.append(time.monotonic())
        time.sleep(0.005)
    t.join()
    elapsed = time.monotonic() - start
    assert elapsed > 0.5, "the run is too short to show anything"
    # The main thread ran all along: ticks every few ms, not one gap as long as the run.
    gaps = np.diff(ticks)
    assert len(ticks) > 50 and gaps.max() < min(0.5, elapsed / 3), (len(ticks), gaps.max(), elapsed)


def test_ctrl_c_interrupts_a_long_run():
    x = long_inputs()
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        attn.compute(q=x, k=x, v=x, kernel="reference", dump=["output"], threads=1)
    took = time.monotonic() - start
    # Returned within ~0.1 s of the signal, not at the end of the run.
    full = time.monotonic()
    attn.compute(q=x, k=x, v=x, kernel="reference", dump=["output"], threads=1)
    full = time.monotonic() - full
    assert took < 0.3 + 0.25 and took < full, (took, full)
    attn._attn.wait_abandoned()
    assert attn._attn.running_abandoned() == 0
