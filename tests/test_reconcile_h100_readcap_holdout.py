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
    ("tiled", (9, 14), (14, 14)),  # 8/14 reads with the H200's fraction borrowed (computed after the measurement)
    ("sdpa-cudnn", (8, 14), (14, 14)),  # 7/14 likewise
])
def test_holdout_counts(reconciled_receipt, impl, read, write):
    rec = reconciled_receipt(RECEIPT)
    assert _counts(rec, "HBM", "read", impl) == read
    assert _counts(rec, "HBM", "write", impl) == write


def test_read_misses_are_over_predictions_at_the_capacity_edge(reconciled_receipt):
    """Every read miss (11 of 28 kernel runs) reads less than predicted (0.69-0.906x), issue 12 item 3's class as on
    the H200's read-capacity hold-out: the bundled kernel's five at K+V of one KV head of 13.5-23 MiB (a resident wave's
    K/V working set 1.2-2.5x the 26.6 MiB a read finds), cuDNN's six at 13.5-32 MiB (its causal MQA-like shape at
    65k tokens, 0.799x, among them). The bundled kernel's shapes past it (28 and 32 MiB a KV head) hold, as do all
    four within it (up to 9.5 MiB) for both kernels."""
    rec = reconciled_receipt(RECEIPT)
    miss = {r.id: r.level("HBM").measured_read / r.level("HBM").predicted_read
            for r in rec.rows if not rec.within(r, "HBM", "read")}
    assert len(miss) == 11 and all(0.69 <= x < 0.907 for x in miss.values())
    kv_mib = {r.id: 2 * r.spec.seqlen_k * r.spec.head_dim * r.spec.width / 2**20 for r in rec.rows}
    assert all(13.5 <= kv_mib[i] <= (23 if i.endswith("-tiled") else 32) for i in miss)
    assert sum(i.endswith("-tiled") for i in miss) == 5
    assert all(rec.within(r, "HBM", "read") for r in rec.rows if kv_mib[r.id] >= 28 and r.impl == "tiled")
    assert all(rec.within(r, "HBM", "read") for r in rec.rows if kv_mib[r.id] <= 9.5)


def test_the_h100_microbenchmark_repeats():
    """A second run of the microbenchmark on the next lease (receipts/l2-micro-h100-2026-12-06-b.json) gives the same
    shared-read half-miss point within 0.01 MiB: the constant does not rest on one noisy run."""
    first = measured_capacities(RECEIPTS["H100-SXM"])["shared-read"].half_miss_bytes
    again = measured_capacities(ROOT / "receipts" / "l2-micro-h100-2026-12-06-b.json")["shared-read"].half_miss_bytes
    assert abs(first - again) < 0.01 * 2**20 and 26.6 * 2**20 < again < 26.7 * 2**20
