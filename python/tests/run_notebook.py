"""Executes python/tests/view.ipynb with `jupyter nbconvert --execute` (a fresh Jupyter
kernel, Debian's python3 kernel) and checks what it shows: the result's view inline (an
iframe whose srcdoc holds attn view's page), the heatmap (a PNG) and the weights.

ctest's test python_notebook (tests/CMakeLists.txt); exits 77 (skipped) when
jupyter-nbconvert or python3-ipykernel is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
try:
    import ipykernel  # noqa: F401
    import nbconvert  # noqa: F401
except ImportError as e:
    print(f"skipped: {e.name} is not installed (Debian jupyter-nbconvert, python3-ipykernel)", file=sys.stderr)
    sys.exit(77)

with tempfile.TemporaryDirectory(prefix="attn-notebook-") as d:
    nb = os.path.join(d, "view.ipynb")
    shutil.copy(os.path.join(here, "view.ipynb"), nb)
    env = dict(os.environ)
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    cmd = [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute", "--inplace",
           "--ExecutePreprocessor.timeout=300", "--ExecutePreprocessor.kernel_name=python3", nb]
    p = subprocess.run(cmd, cwd=os.environ.get("ATTN_SOURCE_DIR", os.path.join(here, "..", "..")), env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr, file=sys.stderr)
        sys.exit(1)
    with open(nb, encoding="utf-8") as f:
        cells = json.load(f)["cells"]

outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
errors = [o for o in outputs if o.get("output_type") == "error"]
assert not errors, errors
html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
html = ["".join(h) if isinstance(h, list) else h for h in html]
assert html, "no HTML output: the result did not display as a view"
assert html[0].startswith('<iframe srcdoc="') and 'sandbox="allow-scripts"' in html[0], html[0][:200]
assert "&lt;!DOCTYPE html&gt;" in html[0] or "&lt;!doctype html&gt;" in html[0].lower(), html[0][:400]
pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
assert pngs, "no PNG output: result.plot() did not display"
texts = ["".join(o.get("text", "")) for o in outputs if o.get("output_type") == "stream"]
texts += ["".join(o["data"].get("text/plain", "")) for o in outputs if "data" in o]
assert any("(4, 4)" in t for t in texts), texts
print(f"notebook ran: {len(html)} view(s), {len(pngs)} PNG(s)")
