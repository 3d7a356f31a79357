"""The hold-out of the H100's own read capacity (``sweeps/h100-readcap-holdout1.toml``: 14 forward shapes, each by
SDPA cuDNN and the bundled forward, 10 with K+V of one KV head at 11-32 MiB around or past the H100's read capacity,
4 within it; committed at f0d1d54 with the change, before any measurement), measured on an H100
(``receipts/ncu-h100-readcap-holdout1-2026-12-06.json``, the tree of f0d1d54 by its source digest), predicted for the
record's hardware (H100-SXM) with reads judged at ``MEASURED_L2_READ_FRACTION["H100-SXM"]`` = 0.5329 (the H100's
shared-read microbenchmark). VALIDATION: nothing in the L2 model was fitted on an H100 attention receipt. Every count
below is what the committed receipt reconciles to, and any change of the model that moves one has to say so here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iomodel.cache.physical import RECEIPTS, measured_capacities

RECEIPT = "ncu-h100-readcap-holdout1-2026-12-06.json"
ROOT = Path(__file__).resolve().parents[1]

from receipt_cache import within_counts as _counts  # noqa: E402  (tests/ is on the path: conftest)


def test_holdout_ran_the_committed_tree_on_an_h100():
    data = json.loads((ROOT / "receipts" / RECEIPT).read_text())
    assert data["environment"]["device"] == "NVIDIA H100 80GB HBM3" and data["environment"]["l2_bytes"] == 50 * 2**20
    assert data["settings"]["sweep_name"] == "h100-readcap-holdout1" and len(data["shapes"]) == 28
    assert data["environment"]["source_sha256"].startswith("b814e435")  # the tree of f0d1d54
    assert {s["impl"] for s in data["shapes"]} == {"tiled", "sdpa-cudnn"}


@pytest.mark.parametrize("impl, read, write", [
    # as measured (the validation of the H100's read fraction): reads 9/14, 8/14 with the H200's fraction borrowed
    # (computed after); 14/14 under the forward's own constants (2026-12-06), which saw this receipt (calibration since)
    ("tiled", (14, 14), (14, 14)),
    ("sdpa-cudnn", (11, 14), (14, 14)),  # 8/14 as measured, 7/14 with the H200's fraction
])
def test_holdout_counts(reconciled_receipt, impl, read, write):
    rec = reconciled_receipt(RECEIPT)
    assert _counts(rec, "HBM", "read", impl) == read
    assert _counts(rec, "HBM", "write", impl) == write


def test_read_misses_are_cudnn_over_predictions_at_the_capacity_edge(reconciled_receipt):
    """As measured, every read miss (11 of 28 kernel runs) read less than predicted (0.69-0.906x) at K+V of one KV head
    of 13.5-32 MiB, issue 12 item 3's class. Under the forward's own constants (iomodel.cache.params.FORWARD_L2,
    2026-12-06) three remain, all cuDNN's and over-predicted (0.76-0.89x) at 17.5-32 MiB a KV head; every bundled-kernel
    run and every run within the read capacity (up to 9.5 MiB a KV head) holds."""
    rec = reconciled_receipt(RECEIPT)
    miss = {r.id: r.level("HBM").measured_read / r.level("HBM").predicted_read
            for r in rec.rows if not rec.within(r, "HBM", "read")}
    assert len(miss) == 3 and all(0.76 <= x < 0.89 for x in miss.values())
    kv_mib = {r.id: 2 * r.spec.seqlen_k * r.spec.head_dim * r.spec.width / 2**20 for r in rec.rows}
    assert all(i.endswith("-sdpa-cudnn") and 17.5 <= kv_mib[i] <= 32 for i in miss)
    assert all(rec.within(r, "HBM", "read") for r in rec.rows if kv_mib[r.id] <= 9.5)


def test_the_h100_microbenchmark_repeats():
    """A second run of the microbenchmark on the next lease (receipts/l2-micro-h100-2026-12-06-b.json) gives the same
    shared-read half-miss point within 0.01 MiB: the constant does not rest on one noisy run."""
    first = measured_capacities(RECEIPTS["H100-SXM"])["shared-read"].half_miss_bytes
    again = measured_capacities(ROOT / "receipts" / "l2-micro-h100-2026-12-06-b.json")["shared-read"].half_miss_bytes
    assert abs(first - again) < 0.01 * 2**20 and 26.6 * 2**20 < again < 26.7 * 2**20
