"""Shared pytest setup: run Triton kernels in the CPU interpreter when no CUDA GPU is visible.

``TRITON_INTERPRET=1`` must be set before ``triton.jit`` decorates a kernel, i.e. before any
kernel module is imported; conftest.py is imported before the test modules, so it is set
here. Nothing else is registered here (other helpers share this file).
"""

from __future__ import annotations

import os


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
