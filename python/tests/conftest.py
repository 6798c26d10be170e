"""Shared fixtures of the Python door's tests (run by ctest: tests/CMakeLists.txt).

ctest sets PYTHONPATH to build/python (the built package), ATTN to the attn executable
built beside it and ATTN_SOURCE_DIR to the repository, whose data/ and tests/fixtures/
the tests read.
"""

import os
import shlex
import subprocess

import pytest

SOURCE_DIR = os.environ.get("ATTN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
ATTN = os.environ.get("ATTN", os.path.join(SOURCE_DIR, "build", "attn"))


class Run:
    def __init__(self, p):
        self.code = p.returncode
        self.out = p.stdout
        self.err = p.stderr.decode("utf-8", "replace")

    @property
    def error_line(self):
        """The one error line without "attn: error: "."""
        lines = [l for l in self.err.splitlines() if l.startswith("attn: error: ")]
        assert len(lines) == 1, self.err
        return lines[0][len("attn: error: "):]


def run_attn(*args, cwd=None):
    """Runs the attn executable with `args` (a list of words, or one shell-like string)."""
    words = shlex.split(args[0]) if len(args) == 1 and isinstance(args[0], str) else list(args)
    return Run(subprocess.run([ATTN] + words, capture_output=True, cwd=cwd or SOURCE_DIR))


@pytest.fixture
def attn_cli():
    return run_attn


@pytest.fixture
def src():
    return SOURCE_DIR
