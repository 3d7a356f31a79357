"""The hold-out of the four-warpgroup HEAD_DIM 64 Gluon prefill (``sweeps/h200-gluon64-holdout1.toml``: 17 non-causal
shapes, 13 forwards and 4 training steps, committed at 0d56084 before any measurement and after b92d25c, the last
change of the model's inputs), measured on an H100 (the H200 did not start that session):
``receipts/ncu-h100-gluon64-holdout1-2026-12-05.json``, predicted for the record's hardware (H100-SXM, L2 50 MiB).
VALIDATION on the H100: every count below is what the committed receipt reconciles to, and any change of the model
that moves one has to say so here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECEIPT = "ncu-h100-gluon64-holdout1-2026-12-05.json"


from receipt_cache import within_counts as _counts  # noqa: E402  (tests/ is on the path: conftest)




def test_gluon64_holdout_ran_the_four_warpgroup_kernel_one_program_per_sm(reconciled_receipt):
    """Every shape's forward ran ``prefill-gluon`` in 256 x 64 tiles with 4 stages, and Nsight Compute's register
    occupancy limit is one program per SM (``TileChoice.programs_per_sm``); the reads of the six shapes around or
    beyond the H100's read capacity (25.9 MiB; K+V of one KV head 10-37 MiB) are within 10 %."""
    data = json.loads((Path(__file__).resolve().parents[1] / "receipts" / RECEIPT).read_text())
    assert "H100" in data["environment"]["device"] and len(data["shapes"]) == 17
    for s in data["shapes"]:
        c = s["config"]
        assert (c["path"], c["block_m"], c["block_n"], c["num_stages"]) == ("prefill-gluon", 256, 64, 4)
        (fwd,) = [k for k in s["kernels"] if k["name"] == "_attn_fwd_gluon"]
        assert fwd["metrics"]["launch__occupancy_limit_registers"] == 1
    rec = reconciled_receipt(RECEIPT)
    big = [r for r in rec.rows if r.spec.seqlen_k * r.spec.head_dim * 4 >= 10 * 2**20]
    assert len(big) == 6
    for r in big:
        lv = r.level("HBM")
        assert abs(lv.measured_read / lv.predicted_read - 1) <= 0.10


# The same hold-out measured on the H200 (2026-12-05, the current tree): receipts/ncu-h200-gluon64-holdout1-2026-12-05.json,
# predicted for the H200 (L2 60 MiB). VALIDATION on the device the issues name.
RECEIPT_H200 = "ncu-h200-gluon64-holdout1-2026-12-05.json"


_KERNEL_LEVELS = [(level, (4, 4), (4, 4)) for level in ("HBM _attn_fwd", "HBM _bwd_dkdv", "HBM _bwd_dq",
                                                          "HBM _bwd_preprocess")]  # preprocess writes by the floor


@pytest.mark.parametrize("receipt, level, read, write", [
    (RECEIPT, "HBM", (17, 17), (17, 17)),  # H100: 14/17 writes on +-10 % alone, three small forwards by the floor
    (RECEIPT_H200, "HBM", (16, 17), (17, 17)),  # H200: the read miss, 65,536 tokens on 8 KV heads, 0.88x the model
    *[(r, *row) for r in (RECEIPT, RECEIPT_H200) for row in _KERNEL_LEVELS],
    (RECEIPT, "L2", (17, 17), (17, 17)),
    (RECEIPT_H200, "L2", (17, 17), (17, 17)),
])
def test_gluon64_holdout_counts(reconciled_receipt, receipt, level, read, write):
    rec = reconciled_receipt(receipt)
    assert _counts(rec, level, "read") == read
    assert _counts(rec, level, "write") == write


def test_gluon64_holdout_h200_read_miss_is_the_long_gqa_forward(reconciled_receipt):
    """The one read miss is the forward of 65,536 tokens, 32 query heads on 8 KV heads (K+V 16 MiB a KV head, 128 MiB
    in all): it read 0.88x the model. Every forward ran the four-warpgroup kernel at one program per SM on the H200
    too (Nsight Compute's register occupancy limit)."""
    data = json.loads((Path(__file__).resolve().parents[1] / "receipts" / RECEIPT_H200).read_text())
    assert data["environment"]["device"] == "NVIDIA H200" and len(data["shapes"]) == 17
    for s in data["shapes"]:
        (fwd,) = [k for k in s["kernels"] if k["name"] == "_attn_fwd_gluon"]
        assert fwd["metrics"]["launch__occupancy_limit_registers"] == 1
        assert fwd["metrics"]["launch__block_size"] == 640  # 20 warps: four consumer warpgroups and a producer
        assert (s["config"]["block_m"], s["config"]["num_warps"]) == (256, 20)
    rec = reconciled_receipt(RECEIPT_H200)
    miss = [r for r in rec.rows if not rec.within(r, "HBM", "read")]
    assert [r.id for r in miss] == ["b1-h32-kv8-d64-bf16-q65536-k65536-nc-tiled"]
    lv = miss[0].level("HBM")
    assert lv.measured_read / lv.predicted_read == pytest.approx(0.882, abs=0.002)
