"""docs/python.md runs as written: its Python examples are a doctest, from the repository
root (the page's commands read data/)."""

import doctest
import os


def test_docs_python_md(src, monkeypatch):
    monkeypatch.chdir(src)
    page = os.path.join(src, "docs", "python.md")
    failures, tried = doctest.testfile(page, module_relative=False, optionflags=doctest.ELLIPSIS)
    assert tried > 10 and failures == 0
