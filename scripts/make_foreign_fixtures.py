#!/usr/bin/python3
"""Files attn must recognise as not its own, with a message that says what to do:
tests/fixtures/foreign/tensor.pt (torch.save's zip archive, PyTorch >= 1.6) and
legacy.pt (its older pickle format). Run with /usr/bin/python3 (python3-torch)."""
import os

import torch

out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "foreign")
os.makedirs(out, exist_ok=True)
torch.save({"q": torch.zeros(2, 2)}, os.path.join(out, "tensor.pt"))
torch.save(torch.zeros(2), os.path.join(out, "legacy.pt"), _use_new_zipfile_serialization=False)
