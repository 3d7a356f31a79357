"""Shared pytest setup: run Triton kernels in the CPU interpreter when no CUDA GPU is visible.

``TRITON_INTERPRET=1`` must be set before ``triton.jit`` decorates a kernel, i.e. before any
kernel module is imported; conftest.py is imported before the test modules, so it is set
here. The one fixture registered here, ``reconciled_receipt``, shares the reconciliations of
the committed receipts between test files and xdist workers (see receipt_cache.py).
"""

from __future__ import annotations

import os

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def reconciled_receipt(request, tmp_path_factory):
    """``reconciled_receipt(name)``: ``reconcile(Measurement.load(receipts/<name>))``, computed once per
    session. Under xdist a worker's base temporary directory is a folder of the run's own (fresh for
    every run), where the workers leave their pickles for one another."""
    from receipt_cache import ReceiptReconciliations

    shared = None
    if hasattr(request.config, "workerinput"):  # an xdist worker: basetemp is <this run's basetemp>/gwN
        shared = tmp_path_factory.getbasetemp().parent / "receipt-reconciliations"
    return ReceiptReconciliations(shared)
