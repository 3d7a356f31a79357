"""The first training-step receipt (issue 11): the backward kernels' L2 level per kernel.

``receipts/ncu-h200-train1-2026-12-01.json`` (sweeps/h200-train1.toml, chosen before it was
measured, the backward model committed before the measurement). The L2 level compares the
bytes the SMs received from / sent to L2 (``l1tex__m_xbar2l1tex_read_bytes``,
``l1tex__m_l1tex2xbar_write_bytes``) with the model's SRAM_fill rows, per kernel. The DRAM
bytes of these steps are calibration data: no L2-aware estimate of the backward exists yet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.measure.records import Measurement
from iomodel.reconcile import reconcile

RECEIPT = Path(__file__).resolve().parents[1] / "receipts" / "ncu-h200-train1-2026-12-01.json"


@pytest.fixture(scope="module")
def rec():
    return reconcile(Measurement.load(RECEIPT))


def _counts(rec, level, which):
    rows = [r for r in rec.rows if r.impl == "tiled" and r.level(level) is not None]
    return sum(bool(rec.within(r, level, which)) for r in rows), len(rows)


@pytest.mark.parametrize("level, read, write", [
    ("L2", (31, 31), (26, 31)),
    ("L2 _attn_fwd", (31, 31), (31, 31)),
    ("L2 _bwd_preprocess", (31, 31), (31, 31)),
    ("L2 _bwd_dq", (31, 31), (31, 31)),
    # dK/dV writes: HEAD_DIM 64 tiles spill registers (ptxas: 24 B non-causal, 80 B causal), and
    # GQA groups write 1.2-2.1x dK+dV more than the stores request (not explained yet)
    ("L2 _bwd_dkdv", (30, 31), (17, 31)),
])
def test_backward_l2_level_per_kernel(rec, level, read, write):
    assert _counts(rec, level, "read") == read
    assert _counts(rec, level, "write") == write


def test_mha_d128_dkdv_writes_are_exact(rec):
    """Where no register spills and no GQA group: the dK/dV kernel writes exactly dK and dV."""
    rows = [r for r in rec.rows if r.impl == "tiled" and r.spec.head_dim == 128 and r.spec.group == 1]
    assert len(rows) == 9
    for r in rows:
        lv = r.level("L2 _bwd_dkdv")
        assert lv.measured_write == lv.predicted_write == 2 * r.spec.batch * r.spec.kv_heads * r.spec.seqlen_k * 128 * 2


def test_dram_is_reported_not_predicted(rec):
    for r in rec.rows:
        if r.impl == "tiled":
            hbm = r.level("HBM")
            assert hbm.predicted_read is None and hbm.measured_read > 0
            assert any("calibration data" in n for n in r.notes)
