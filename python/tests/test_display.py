"""The notebook side: _repr_html_ (attn view's page in an iframe srcdoc), attn.view,
result.plot's PNG, and attn.tokenize against attn tokenize."""

import html
import json
import os

import numpy as np
import pytest

import attn
from conftest import run_attn


def test_repr_html_is_the_view_page_in_a_sandboxed_iframe(tmp_path, src):
    path = os.path.join(src, "data", "notebook.npz")
    r = attn.compute(path, mask="causal", tokens="my name is Aj")
    out = r._repr_html_()
    assert out.startswith('<iframe srcdoc="') and out.endswith("</iframe>")
    assert 'sandbox="allow-scripts"' in out
    srcdoc = out[len('<iframe srcdoc="'):out.index('" sandbox=')]
    assert '"' not in srcdoc and "<" not in srcdoc  # escaped: the page stays inside the attribute
    page = html.unescape(srcdoc)
    # The page attn view writes of the same run's .npz.
    r.save(tmp_path / "r.npz")
    cli = run_attn("view", str(tmp_path / "r.npz"), "-o", str(tmp_path / "cli.html"))
    assert cli.code == 0, cli.err
    assert page == (tmp_path / "cli.html").read_text(encoding="utf-8").replace(str(tmp_path / "r.npz"), page_source(page))
    assert "my" in page and "Aj" in page


def page_source(page):
    # The page names its input; a Result is staged under a temporary name.
    import re
    m = re.search(r"/[^\"<>\s]*attn-[^\"<>/\s]*/result\.npz", page)
    return m.group(0) if m else ""


def test_view_of_a_path_with_options(src):
    v = attn.view(os.path.join(src, "data", "notebook.npz"), mask="causal")
    assert isinstance(v, attn.View)
    assert v.html.lstrip().lower().startswith("<!doctype html>")
    assert v._repr_html_().startswith('<iframe srcdoc="')
    with pytest.raises(attn.UsageError) as e:
        attn.view(os.path.join(src, "data", "notebook.npz"), mask="causl")
    cli = run_attn("view", os.path.join(src, "data", "notebook.npz"), "--mask", "causl")
    assert str(e.value) == cli.error_line


def test_plot_is_a_png_as_attn_plot_draws_it(tmp_path, src):
    path = os.path.join(src, "data", "notebook.npz")
    r = attn.compute(path, mask="causal", tokens="my name is Aj")
    img = r.plot(stage="weights")
    assert img._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    r.save(tmp_path / "r.npz")
    cli = run_attn("plot", str(tmp_path / "r.npz"), "--stage", "weights", "-o", str(tmp_path / "cli.png"))
    assert cli.code == 0, cli.err
    assert img.data == (tmp_path / "cli.png").read_bytes()
    with pytest.raises(attn.UsageError):
        r.plot(stage="nope")


def test_tokenize_as_attn_tokenize(src):
    model = os.path.join(src, "data", "llama-tiny")
    cli = run_attn("tokenize", "--tokenizer", model, "Hello world", "The capital of France is", "--format", "json")
    assert cli.code == 0, cli.err
    expected = json.loads(cli.out)
    got = attn.tokenize(["Hello world", "The capital of France is"], model)
    for e, g in zip(expected, got):
        assert g.ids == e["ids"]
        assert g.tokens == e["tokens"]
        assert g.labels == e["labels"]
        assert [list(o) for o in g.offsets] == e["offsets"]
        assert [list(o) for o in g.byte_offsets] == e["byte_offsets"]
        assert g.word_ids == e["word_ids"]
    one = attn.tokenize("Hello world", os.path.join(model, "tokenizer.json"), special_tokens=False)
    cli = run_attn("tokenize", "--tokenizer", model, "Hello world", "--no-special-tokens", "--format", "json")
    assert one.ids == json.loads(cli.out)[0]["ids"]
    assert len(one.ids) < len(got[0].ids)  # the BOS of special_tokens=True
