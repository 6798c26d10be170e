"""ctest's entry to the Python door's tests (tests/CMakeLists.txt, test python_door).

Exits 77, which ctest reports as skipped, when pytest (Debian python3-pytest) is missing;
the module itself must import (its absence is a failure: ctest registers this test only
when the module is built).
"""
import os
import sys

try:
    import pytest
except ImportError:
    print("skipped: pytest is not installed (Debian python3-pytest)", file=sys.stderr)
    sys.exit(77)

import attn  # noqa: F401  (fails the test when the built module does not import)

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-k", os.environ.get("ATTN_PYTEST_K", ""), here] + sys.argv[1:]))
