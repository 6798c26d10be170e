"""Writes attn/__init__.pyi, the type stub of the package attn, from the built module:
attn.compute's keyword arguments come from the CLI's option table (attn.options()), so
that editors complete every option and the stub cannot drift from the table.

usage: PYTHONPATH=build/python python3 python/make_stub.py OUT.pyi   (run by the build)
"""
import os
import sys

# Not the source tree's attn/ beside this script (it has no _attn): the built one on PYTHONPATH.
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
import attn  # noqa: E402

NUMBER = {"FLOAT": "float", "N": "int", "INT": "int", "K": "int", "UINT": "int"}


def annotation(name, o):
    if o["array"]:
        return "ArrayLike | str | PathLike[str] | None"
    if o["flag_only"]:
        return "bool | None"
    if o["choices"]:
        lit = "Literal[" + ", ".join(repr(c) for c in o["choices"]) + "]"
        return f"{lit} | Sequence[{lit}] | None" if name in ("mask", "dump") else f"{lit} | None"
    if name in ("text", "tokens", "tokens_kv"):
        return "str | Sequence[str] | None"
    if name in ("layer",):
        return "int | str | Sequence[int] | None"
    if name in ("lengths", "window", "prefix_len", "cu_seqlens", "ids"):
        return "int | Sequence[int] | str | None"
    if name in ("tokenizer", "config", "vocab", "text_file"):
        return "str | PathLike[str] | None"
    return "float | int | str | None"


def main(out):
    opts = attn.options()
    aliases = {o["array"]: o for k, o in opts.items() if o["array"] and o["array"] not in opts}
    lines = []
    for name, o in list(opts.items()) + [(a, o) for a, o in aliases.items()]:
        if name in ("q", "k", "v", "x", "dump", "threads"):
            continue
        default = f"  # default: {o['default']}" if o["default"] else ""
        lines.append(f"    {name}: {annotation(name, o)} = ...,{default}")
    keywords = "\n".join(lines)
    text = STUB.replace("@KEYWORDS@", keywords)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


STUB = '''# Type stub of the package attn, written by python/make_stub.py from the CLI's option table.
from os import PathLike
from typing import Any, Iterator, Literal, Mapping, Sequence, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import DataError as DataError, Error as Error, FileError as FileError, FormatError as FormatError
from .errors import LimitError as LimitError, ShapeError as ShapeError, UsageError as UsageError

__version__: str

Input = str | PathLike[str] | Mapping[str, ArrayLike] | ArrayLike | None

class Result(Mapping[str, NDArray[Any]]):
    """The stages of one attn.compute call: stage name -> read-only numpy.ndarray."""
    meta: dict[str, Any]
    tokens: list[str]
    tokens_kv: list[str]
    words: list[str]
    def __getitem__(self, stage: str) -> NDArray[Any]: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def axes(self, stage: str) -> tuple[str, ...]: ...
    def save(self, path: str | PathLike[str], format: str | None = ...) -> None: ...
    def view(self, **options: Any) -> View: ...
    def plot(self, **options: Any) -> Image: ...
    def _repr_html_(self) -> str: ...

class View:
    html: str
    height: int | None
    def _repr_html_(self) -> str: ...
    def save(self, path: str | PathLike[str]) -> None: ...

class Image:
    data: bytes
    def _repr_png_(self) -> bytes: ...
    def save(self, path: str | PathLike[str]) -> None: ...

class Encoding:
    text: str
    ids: list[int]
    tokens: list[str]
    labels: list[str]
    offsets: list[tuple[int, int]]
    byte_offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    special_tokens_mask: list[int]
    def __len__(self) -> int: ...

def compute(
    input: Input = ...,
    *,
    q: ArrayLike | str | PathLike[str] | None = ...,
    k: ArrayLike | str | PathLike[str] | None = ...,
    v: ArrayLike | str | PathLike[str] | None = ...,
    x: ArrayLike | str | PathLike[str] | None = ...,
    dump: str | Sequence[str] | None = ...,  # default: scores,weights,output
    threads: int | None = ...,  # default: all cores
@KEYWORDS@
) -> Result:
    """Computes attention and returns every dumped stage (attn compute in process)."""

@overload
def tokenize(text: str, model_or_tokenizer: str | PathLike[str], special_tokens: bool = ...) -> Encoding: ...
@overload
def tokenize(text: Sequence[str], model_or_tokenizer: str | PathLike[str], special_tokens: bool = ...) -> list[Encoding]: ...
def view(result_or_path: Result | str | PathLike[str], *more: Result | str | PathLike[str], height: int | None = ...,
         **options: Any) -> View: ...
def plot(result_or_path: Result | str | PathLike[str], **options: Any) -> Image: ...
def options() -> dict[str, dict[str, Any]]: ...
def stage_names() -> list[str]: ...
'''

if __name__ == "__main__":
    main(sys.argv[1])
