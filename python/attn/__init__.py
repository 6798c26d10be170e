"""attn: scaled dot-product attention with every stage dumped, from Python.

The Python door of the attn command-line tool (docs/python.md). It is a thin binding of
the same C++ library: ``attn.compute`` takes NumPy arrays, a file, a checkpoint or a model
directory with the options of ``attn compute`` as keyword arguments (``--mask-fill`` is
``mask_fill=``) and returns the dumped stages as NumPy arrays, the very bytes the CLI
writes into ``-o x.npz``. The keyword list is made from the CLI's one option table
(src/cli/option_table.cpp) and every keyword goes through the CLI's parser, so names,
defaults, validation and messages are the CLI's.

    >>> import numpy as np, attn
    >>> x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    >>> r = attn.compute(x, mask="causal")
    >>> r["weights"].shape
    (4, 4)

Errors are attn.Error subclasses (attn.errors): usage and data errors are ValueErrors,
file errors OSErrors, with the CLI's one-line message. The GIL is released while attn
computes; Ctrl-C (KeyboardInterrupt) returns at once.
"""

import atexit as _atexit
import collections.abc as _abc
import html as _html
import json as _json
import os as _os
import tempfile as _tempfile

import numpy as _np

from . import _attn
from .errors import DataError, Error, FileError, FormatError, LimitError, ShapeError, UsageError

__all__ = [
    "compute", "tokenize", "view", "plot", "Result", "View", "Image", "Encoding", "options", "stage_names",
    "Error", "UsageError", "DataError", "ShapeError", "FormatError", "LimitError", "FileError", "__version__",
]

__version__ = _attn.version

# A KeyboardInterrupt returns at once and leaves its job running on its thread (it cannot
# stop midway); the interpreter waits for such jobs before it ends, as they hold NumPy arrays.
_atexit.register(_attn.wait_abandoned)


# ------------------------------------------------------------------------------------------
# The keyword list, made from the CLI's option table.

class _Option:
    """One keyword of attn.compute: a row of the CLI's option table (as CLI11 binds it)."""

    __slots__ = ("keyword", "flag", "flag_only", "default", "help", "choices", "scope", "file", "array", "takes_list")

    def __init__(self, row, array=None):
        self.flag = row["flag"]
        self.keyword = self.flag[2:].replace("-", "_")
        self.flag_only = row["flag_only"]
        self.default = row["default"]
        self.help = row["help"]
        self.choices = list(row["choices"])
        self.scope = row["scope"]
        self.file = row["file"]
        self.takes_list = row["takes_list"]
        self.array = array  # the input array it names (--wq: "w_q"), or None

    def __repr__(self):
        return f"<attn option {self.keyword}= ({self.flag})>"


# compute's output options that say how the CLI writes a file: a Result holds the arrays
# themselves (Result.save writes them as -o would). --dump and --store stay keywords.
_FILE_ONLY = {"--format": "format", "--output": "the output file", "--precision": "text precision",
              "--compact": "JSON layout", "--full": "table layout", "--json-nonfinite": "JSON text"}
# -j/--jobs is `threads=` here (a single call's thread bound, the CLI's -j N for one input).
_RENAMED = {"--jobs": "threads"}


def _make_options():
    kinds = {flag: name for name, flag, _ in _attn.input_kinds() if flag}
    table = {}
    for row in _attn.compute_options():
        if row["flag"] in _FILE_ONLY or row["flag"] == "--help":
            continue
        opt = _Option(row, kinds.get(row["flag"][2:]))
        if row["flag"] in _RENAMED:
            opt.keyword = _RENAMED[row["flag"]]
        table[opt.keyword] = opt
    # An input array also answers to its array name (w_q= beside wq=, key_padding_mask=).
    aliases = {}
    for opt in table.values():
        if opt.array and opt.array != opt.keyword and opt.array not in table:
            aliases[opt.array] = opt
    return table, aliases


_OPTIONS, _ARRAY_ALIASES = _make_options()


def options():
    """The keyword arguments attn.compute takes, from the CLI's option table.

    Returns:
        dict keyword → dict(flag, default, help, choices, scope, array): ``flag`` is the
        CLI's (``"--mask-fill"``), ``default`` the CLI's default as text (``""`` = none),
        ``array`` the input array an array keyword gives (``"w_q"`` for ``wq=``) or None.
        Array keywords also answer to their array name (``w_q=``).
    """
    out = {}
    for k, o in _OPTIONS.items():
        out[k] = {"flag": o.flag, "default": o.default, "help": o.help, "choices": list(o.choices),
                  "scope": o.scope, "array": o.array, "flag_only": o.flag_only}
    return out


def stage_names():
    """Every stage name ``dump=`` accepts, in pipeline order (attn::stage_names)."""
    return list(_attn.stage_names())


def _is_path(v):
    return isinstance(v, (str, bytes, _os.PathLike))


def _text(v):
    """One keyword value as the CLI's option text (as a manifest line's values become words)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, _np.integer)):
        return str(int(v))
    if isinstance(v, (float, _np.floating)):
        return repr(float(v))
    if _is_path(v):
        return _os.fsdecode(v)
    if isinstance(v, (list, tuple)):
        if not v:
            raise UsageError(f"empty list (expected at least one value, got [])")
        return ",".join(_text(i) for i in v)
    raise UsageError(f"wrong type (expected a string, a number or a list of them, got {type(v).__name__})")


def _push(words, flag, value):
    # An empty value is two words, as `--key ''` is typed (split_empty_values, the manifest).
    if value == "":
        words += [flag, ""]
    else:
        words.append(f"{flag}={value}")


def _as_input_array(v, name):
    """A NumPy array attn can view in place: C-contiguous, native byte order (a copy only
    when `v` is not already so, e.g. a transposed view or a big-endian array)."""
    a = _np.asarray(v)
    if a.dtype.kind not in "biuf" or a.dtype.itemsize not in (1, 2, 4, 8) or (a.dtype.kind == "b" and a.dtype.itemsize != 1):
        raise DataError(f"{name}: unsupported dtype (expected bool, int8-64, uint8-64, float16, float32 or float64, got {a.dtype})",
                        source=name)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = _np.ascontiguousarray(a)
    return a


def _words(kwargs):
    """kwargs → (arrays by attn name, the command-line words of the rest)."""
    words, arrays = [], []
    for key, value in kwargs.items():
        if value is None:
            continue
        opt = _OPTIONS.get(key) or _ARRAY_ALIASES.get(key)
        if opt is None:
            flag = "--" + key.replace("_", "-")
            if flag in _FILE_ONLY or key in ("o", "output"):
                raise UsageError(f"{key}: applies to the file the CLI writes (expected Result.save(path, format=...), "
                                 f"got {key}= in attn.compute)", source=key)
            # Unknown: the CLI's parser says so, with the nearest option ("did you mean …").
            _push(words, flag, _text(value) if not isinstance(value, bool) else "")
            continue
        if opt.array and not _is_path(value):
            arrays.append((opt.array, _as_input_array(value, opt.array)))
            continue
        if opt.flag_only:
            if isinstance(value, bool):
                if value:
                    words.append(opt.flag)
                else:
                    words.append(opt.flag + "=false")
                continue
        if opt.keyword == "text" and isinstance(value, (list, tuple)):
            # Texts may hold commas: one --text per item (a batch), as in a manifest.
            if not value:
                raise UsageError("text: empty list (expected at least one text, got [])", source="text")
            for t in value:
                _push(words, "--text", str(t))
            continue
        if opt.keyword in ("tokens", "tokens_kv") and isinstance(value, (list, tuple)):
            _push(words, opt.flag, " ".join(str(t) for t in value))
            continue
        if opt.keyword == "ids" and isinstance(value, _np.ndarray):
            value = value.tolist()
        _push(words, opt.flag, _text(value))
    return arrays, words


# ------------------------------------------------------------------------------------------
# compute


class Result(_abc.Mapping):
    """The stages of one attn.compute call: a Mapping stage name → numpy.ndarray.

    The arrays are the document the CLI writes: ``np.array_equal(r[s], np.load("x.npz")[s])``
    for the same run's ``-o x.npz``, dtype float32 or float64 (the compute dtype; float16
    or uint16 bfloat16 bits under ``store=``), shapes as docs/design.md §2 "Tensor shapes"
    gives them (e.g. weights (Tq, Tk) for a rank-2 input, (B, H, Tq, Tk) otherwise, with a
    leading layer axis L for a run of several layers). They are read-only views of the
    result's memory (``.copy()`` one to change it).

    Attributes:
        meta: dict, the run's settings and shapes (the JSON output's ``"meta"``).
        tokens: list of str, labels of the query rows (and keys when Tk = Tq), or [].
        tokens_kv: list of str, labels of the keys for cross-attention, or [].
        words: list of str, labels of word_weights (``words=True``), or [].
    """

    def __init__(self, doc):
        self._doc = doc
        names = doc.names()
        self._arrays = {n: doc.array(i) for i, n in enumerate(names)}
        self._axes = {n: tuple(doc.axes(i)) for i, n in enumerate(names)}
        self.meta = _json.loads(doc.meta_json())
        self.tokens = list(doc.tokens)
        self.tokens_kv = list(doc.tokens_kv)
        self.words = list(doc.words)

    def __getitem__(self, stage):
        return self._arrays[stage]

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self):
        return len(self._arrays)

    def axes(self, stage):
        """The axis names of `stage`, one per dimension (("B", "H", "Tq", "Tk"), ("L", …))."""
        return self._axes[stage]

    def __repr__(self):
        shapes = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self._arrays.items())
        return f"<attn.Result {shapes}>"

    def save(self, path, format=None):
        """Writes the result as ``attn compute -o PATH [--format F]`` does (npz, npy, json,
        jsonl, csv, table, html; by PATH's extension unless `format`), atomically.

        Raises:
            UsageError: an unknown format or extension; FileError: PATH cannot be written.
        """
        self._doc.write(_os.fsdecode(path), format or "")

    def view(self, **options):
        """The standalone HTML view of this result (attn view), as a View; keyword
        arguments are attn view's options in snake_case (``layer=``, ``stage=``…)."""
        return view(self, **options)

    def plot(self, **options):
        """A PNG heatmap of this result (attn plot), as an Image with ``_repr_png_``;
        keyword arguments are attn plot's options in snake_case (``stage="scores"``,
        ``head=1``, ``grid=True``, ``annotate=True``, ``size="800x600"``…)."""
        return plot(self, **options)

    def _repr_html_(self):
        return view(self)._repr_html_()


def compute(input=None, *, q=None, k=None, v=None, x=None, dump=None, threads=None, **options):
    """Computes attention and returns every dumped stage: ``attn compute`` in process.

    Args:
        input: what ``attn compute INPUT`` reads: a path (.npy, .npz, .json, .safetensors,
            a checkpoint's .safetensors.index.json, or a model directory with config.json),
            or a dict of NumPy arrays named as in an .npz (q, k, v, x, x_kv, w_q, …,
            attn_mask, key_padding_mask, token_ids, past_key, past_value; case-insensitive,
            nn.MultiheadAttention state_dict names accepted, a lone array of another name
            is x; a ``"tokens"`` entry, a list of str, labels the rows), or one array (X).
        q, k, v, x: arrays (B, H, T, D), (B, T, E) or (T, E) — any dtype the CLI reads
            (float16/32/64; bool/int only for masks, lengths, ids), or a path
            ("file.npz:name"). Every input array of the CLI has its keyword (``x_kv=``,
            ``wq=``/``w_q=``, ``attn_mask=``, ``key_padding_mask=``, ``past_key=``…;
            ``attn.options()`` lists them). C-contiguous native-order arrays are read in
            place, without a copy; others are copied once.
        dump: stages to return (list or comma-separated str), default
            ``["scores", "weights", "output"]``; ``attn.stage_names()`` lists them.
        threads: the most threads this call computes with (the CLI's -j N); default all.
        **options: every other option of ``attn compute`` by its long name in snake_case,
            with the CLI's defaults and checks: ``mask="causal"`` (or a list),
            ``causal=True``, ``causal_align=``, ``lengths=[3, 5]``, ``pad_id=``,
            ``scale=``, ``softcap=``, ``heads=``, ``kv_heads=``, ``weight_layout=``,
            ``mask_fill=``, ``masked_rows=``, ``dtype="float64"``, ``average_heads=``,
            ``tokens=`` (str or list), ``window=``, ``rope=``, ``kernel="reference"``,
            ``store="float16"``, ``max_bytes="2G"``; a model: ``layer=`` ("all", an int or
            a list), ``text=`` (a str, or a list: a batch), ``tokenizer=``, ``words=True``,
            ``no_special_tokens=True``, ``ids=[…]``. A list is the CLI's comma-separated
            value; True is the flag given; None is the option not given.

    Returns:
        Result: a Mapping stage → numpy.ndarray (float32 or float64, the compute dtype:
        the inputs' float type, float16 computed in float32) with ``.meta``, ``.tokens``.

    Raises:
        UsageError (ValueError): an unknown keyword, a bad value, options that contradict
            the inputs — the CLI's message, e.g. ``"--scale: not a number (expected a
            number, got 'abc')"`` (exit code 2 on the command line).
        ShapeError, DataError, FormatError, LimitError (ValueError): inputs that do not
            fit, bad values, malformed files, over ``max_bytes`` (exit code 1).
        FileError (OSError): a file cannot be read.
        KeyboardInterrupt: Ctrl-C; the call returns at once.

    Source: ``attn compute`` (docs/design.md §1-§2: Q·Kᵀ, scale 1/√Dk, masks, softmax,
    weights·V — Vaswani et al. 2017 §3.2.1; checkpoints: Hugging Face transformers' eager
    attention per model_type).
    """
    kwargs = {"q": q, "k": k, "v": v, "x": x, "dump": dump, "threads": threads}
    kwargs.update(options)
    arrays, words = _words(kwargs)
    path, bundle, bundle_tokens = "", [], []
    if input is None:
        pass
    elif _is_path(input):
        path = _os.fsdecode(input)
    elif isinstance(input, _abc.Mapping):
        for name, value in input.items():
            if str(name).lower() == "tokens":
                bundle_tokens = [str(t) for t in value] if not isinstance(value, str) else value.split()
                continue
            bundle.append((str(name), _as_input_array(value, str(name))))
    else:
        bundle.append(("x", _as_input_array(input, "x")))
    return Result(_attn.compute(path, bundle, bundle_tokens, arrays, words))


# ------------------------------------------------------------------------------------------
# tokenize


class Encoding:
    """One text through a tokenizer.json, as HF ``tokenizers`` encodes it.

    Attributes:
        text: str.
        ids: list of int, the token ids.
        tokens: list of str, the tokens as the model's vocabulary spells them.
        labels: list of str, each token decoded alone (the labels attn's outputs use).
        offsets: list of (start, end), in code points of `text` (as ``tokenizers``
            reports them); tokens a post-processor adds have (0, 0).
        byte_offsets: list of (start, end) in UTF-8 bytes.
        word_ids: list of int or None (HF ``word_ids()``; None for added special tokens).
        special_tokens_mask: list of 0/1.
    """

    __slots__ = ("text", "ids", "tokens", "labels", "offsets", "byte_offsets", "word_ids", "special_tokens_mask")

    def __init__(self, d):
        self.text = d["text"]
        self.ids = list(d["ids"])
        self.tokens = list(d["tokens"])
        self.labels = list(d["labels"])
        self.offsets = [tuple(o) for o in d["offsets"]]
        self.byte_offsets = [tuple(o) for o in d["byte_offsets"]]
        self.word_ids = list(d["word_ids"])
        self.special_tokens_mask = list(d["special_tokens_mask"])

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return f"<attn.Encoding {len(self.ids)} tokens: {self.tokens!r}>"


def tokenize(text, model_or_tokenizer, special_tokens=True):
    """Tokenizes `text` as ``attn tokenize`` does (HF ``tokenizer(text)`` on the model's
    own tokenizer.json: normalizer, pre-tokenizer, model, post-processor).

    Args:
        text: a str, or a list of str.
        model_or_tokenizer: a tokenizer.json, or a model directory holding one.
        special_tokens: ``add_special_tokens`` (BOS, [CLS]/[SEP]); False is the CLI's
            ``--no-special-tokens``.

    Returns:
        Encoding for a str (ids, tokens, offsets, word_ids, …); a list of them for a list.

    Raises:
        FileError (OSError): no tokenizer.json there; FormatError, DataError (ValueError):
        a malformed tokenizer.json or text that is not UTF-8.
    """
    texts = [text] if isinstance(text, str) else [str(t) for t in text]
    out = [Encoding(d) for d in _attn.tokenize(texts, _os.fsdecode(model_or_tokenizer), bool(special_tokens))]
    return out[0] if isinstance(text, str) else out


# ------------------------------------------------------------------------------------------
# The notebook: attn view and attn plot in process.


def _cli_words(kwargs):
    words = []
    for key, value in kwargs.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else flag + "=false")
        else:
            _push(words, flag, _text(value))
    return words


def _run_cli(words):
    status = _attn.run_cli(words)
    if status != 0:
        raise (UsageError if status == 2 else DataError)(f"attn {words[0]} failed (exit code {status})")


class _Staged:
    """`what` as an input path for attn view/plot: a path as is, a Result written to a
    temporary .npz (which carries its tokens and meta, docs/design.md §6.2)."""

    def __init__(self, what):
        self.dir = None
        if isinstance(what, Result):
            self.dir = _tempfile.TemporaryDirectory(prefix="attn-")
            self.path = _os.path.join(self.dir.name, "result.npz")
            what.save(self.path)
        elif _is_path(what):
            self.path = _os.fsdecode(what)
        else:
            raise UsageError(f"wrong input (expected an attn.Result or a path, got {type(what).__name__})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.dir:
            self.dir.cleanup()


class View:
    """attn view's standalone HTML page. In Jupyter it displays inline, in an iframe whose
    ``srcdoc`` holds the page (sandboxed: its scripts and styles stay inside).

    Attributes:
        html: str, the page (no network: script, styles and data inline).
    """

    def __init__(self, html, height=None):
        self.html = html
        self.height = height

    def _repr_html_(self):
        height = self.height or 640
        return (f'<iframe srcdoc="{_html.escape(self.html, quote=True)}" sandbox="allow-scripts" '
                f'style="width: 100%; height: {int(height)}px; border: 0" title="attn view"></iframe>')

    def save(self, path):
        """Writes the page to `path`."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html)

    def __repr__(self):
        return f"<attn.View {len(self.html)} bytes of HTML>"


def view(result_or_path, *more, height=None, **options):
    """The standalone HTML view (``attn view``) of a Result or of files attn reads.

    Args:
        result_or_path: an attn.Result, or a path (attn's .npz/.json output, or any input
            attn view takes); `more`: further inputs (one page, a selector per input).
        height: the iframe's height in pixels in a notebook (default 640).
        **options: attn view's options in snake_case, with its defaults and checks
            (``layer=``, ``stage=``, and for a compute input attn compute's, e.g.
            ``mask="causal"``).

    Returns:
        View, displayed inline by Jupyter (``_repr_html_``).

    Raises:
        UsageError, DataError, FileError as attn.compute.
    """
    staged = [_Staged(w) for w in (result_or_path,) + more]
    try:
        with _tempfile.TemporaryDirectory(prefix="attn-") as d:
            out = _os.path.join(d, "view.html")
            _run_cli(["view"] + [s.path for s in staged] + ["-o", out] + _cli_words(options))
            with open(out, encoding="utf-8") as f:
                return View(f.read(), height)
    finally:
        for s in staged:
            s.__exit__()


class Image:
    """A PNG image (attn plot), displayed inline by Jupyter (``_repr_png_``).

    Attributes:
        data: bytes, the PNG file.
    """

    def __init__(self, data):
        self.data = data

    def _repr_png_(self):
        return self.data

    def save(self, path):
        """Writes the PNG to `path`."""
        with open(path, "wb") as f:
            f.write(self.data)

    def __repr__(self):
        return f"<attn.Image PNG, {len(self.data)} bytes>"


def plot(result_or_path, **options):
    """A heatmap of a Result or a file (``attn plot``), as a PNG.

    Args:
        result_or_path: an attn.Result, or a path attn plot reads.
        **options: attn plot's options in snake_case, with its defaults and checks:
            ``stage="weights"`` (colour range 0..1) or ``"scores"``, ``batch=``,
            ``head=``, ``grid=True``, ``vmin=``, ``vmax=``, ``log=True``,
            ``annotate=True``, ``size="800x600"``, ``dpi=``, ``title=``.

    Returns:
        Image with the PNG's bytes (``.data``), displayed inline by Jupyter.

    Raises:
        UsageError, DataError, FileError as attn.compute.
    """
    with _Staged(result_or_path) as s, _tempfile.TemporaryDirectory(prefix="attn-") as d:
        out = _os.path.join(d, "plot.png")
        _run_cli(["plot", s.path, "-o", out] + _cli_words(options))
        with open(out, "rb") as f:
            return Image(f.read())
