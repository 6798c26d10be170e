"""attn's errors as Python exceptions.

The C++ library throws typed errors (include/attn/error.hpp); the binding raises the
class of the same kind here, carrying the line the CLI prints after ``attn: error: ``.
Usage and data errors are ``ValueError`` s, file errors ``OSError`` s, so that code
catching the builtin kinds catches attn's too.

============================  =====================  ====================  =========
attn (C++)                    Python                 also a                CLI exit
============================  =====================  ====================  =========
usage_error                   UsageError             ValueError            2
value_error                   DataError              ValueError            1
shape_error                   ShapeError             DataError             1
format_error                  FormatError            DataError             1
limit_error (--max-bytes)     LimitError             DataError             1
io_error                      FileError              OSError               1
============================  =====================  ====================  =========
"""

__all__ = ["Error", "UsageError", "DataError", "ShapeError", "FormatError", "LimitError", "FileError"]


class Error(Exception):
    """Base of every attn error.

    ``str(e)`` is the CLI's one-line message without ``attn: error:``, e.g.
    ``"--scale: not a number (expected a number, got 'abc')"``.

    Attributes:
        source: what the problem is in (a file, an option, a tensor), or ``""``.
        detail: the message without its source, in the library's own terms.
        exit_code: the exit code the CLI gives this error (1 or 2).
    """

    exit_code = 1

    def __init__(self, message, source="", detail=""):
        super().__init__(message)
        self.source = source
        self.detail = detail or message


class UsageError(Error, ValueError):
    """An option is wrong or contradicts another (the CLI's exit code 2)."""

    exit_code = 2


class DataError(Error, ValueError):
    """The inputs' values do not fit (lengths past Tk, an unknown name, …): exit code 1."""


class ShapeError(DataError):
    """Arrays whose shapes do not fit together (rank, Dk mismatch, heads not dividing)."""


class FormatError(DataError):
    """A file's content is malformed (bad .npy header, broken zip, invalid JSON)."""


class LimitError(DataError):
    """An input, or what a run would hold, is larger than ``max_bytes`` (--max-bytes)."""


class FileError(Error, OSError):
    """A file cannot be opened, read or written (missing, permission, disk full)."""

    def __init__(self, message, source="", detail=""):
        Error.__init__(self, message, source, detail)
        self.filename = source or None

    def __str__(self):
        return self.args[0]
