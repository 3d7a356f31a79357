"""Issue 4 acceptance on the committed GPU receipts (receipts/ncu-*.json), without a GPU.

For every recorded Nsight Compute sweep: the bundled kernel's L2-aware DRAM read and write
bytes are each within ±10 % on at least 90 % of the shapes and the L2 requests within ±15 %;
the eager chain's HBM bytes are within ±10 % for seqlen <= 8k; every shape outside has an
explanation. Skips while no receipt is committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.measure.records import Measurement
from iomodel.reconcile import reconcile

RECEIPTS = sorted((Path(__file__).resolve().parent.parent / "receipts").glob("ncu-*.json"))

pytestmark = pytest.mark.skipif(not RECEIPTS, reason="no receipts/ncu-*.json committed yet")


@pytest.fixture(scope="module", params=RECEIPTS, ids=lambda p: p.name)
def rec(request):
    return reconcile(Measurement.load(request.param))


def _fractions(rec):
    return {(s["impl"], s["level"], s["which"]): s for s in rec.summary()}


def test_receipt_is_complete(rec):
    m = rec.measurement
    assert m.kind == "ncu" and m.command and m.created
    for key in ("device", "driver", "torch", "triton", "ncu"):
        assert m.environment.get(key), key
    tiled = [r for r in rec.rows if r.impl == "tiled" and r.error is None]
    assert len(tiled) >= 30


def test_bundled_kernel_within_tolerance(rec):
    f = _fractions(rec)
    for level in ("HBM", "L2"):
        for which in ("read", "write"):
            s = f[("tiled", level, which)]
            assert s["fraction"] >= 0.9, (level, which, s)


def test_eager_chain_within_tolerance_up_to_8k(rec):
    rows = [r for r in rec.rows if r.impl == "baseline" and r.spec.seqlen_k <= 8192 and r.error is None]
    if not rows:
        pytest.skip("this receipt has no eager-chain shapes")
    bad = [r.id for r in rows for w in ("read", "write") if rec.within(r, "HBM", w) is False]
    assert not bad, bad


def test_every_shape_outside_is_explained(rec):
    for row, _ in rec.outside():
        assert row.explanation() and not row.explanation().startswith("no model")
