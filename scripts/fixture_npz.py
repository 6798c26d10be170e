"""The fixture scripts' shared .npz writer (imported from scripts/ by make_*_fixtures.py)."""
import io
import os
import zipfile

import numpy as np


def write_npz(path, arrays):
    """np.savez layout (stored members "<name>.npy", sorted) with a fixed timestamp, so
    that the bytes do not change between runs (np.savez stamps the current time)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue())
